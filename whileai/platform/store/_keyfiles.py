"""The local account's key file: ``<data_root>/local_key`` (mode 0600), the only place a key is kept in clear.

``ensure_local_account`` makes the local account once per store and keeps a key of it
here, so the embedded platform and a server on the same data root use the same account
and key. Each data root has its own key (named after its machine and folder,
:func:`local_key_name`): several data roots on one shared store (a PostgreSQL
``--store-url``) each keep theirs, and nothing but ``python -m whileai accounts rotate``
revokes one.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from whileai.platform.store.tables import Account, Setting, _new_id
from whileai.core.paths import data_root

from whileai.platform.store._accounts import _LOCAL_ACCOUNT_SETTING

#: file under the data root holding the local account's key in clear (mode 0600)
LOCAL_KEY_FILENAME = "local_key"


def local_key_path() -> Path:
    """Where the local account's key is kept in clear: ``<data_root>/local_key`` (mode 0600)."""
    return data_root() / LOCAL_KEY_FILENAME


def local_key_name() -> str:
    """The name this data root's key carries in the store: ``local: <host>:<data root>`` (for people, not lookups)."""
    return f"local: {socket.gethostname()}:{data_root()}"[:200]


def _write_key_file(path: Path, key: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (key + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def tighten(path: Path) -> None:
    """Make ``path`` readable by its owner only (0600) when it is looser; a file not ours is left as it is."""
    import stat

    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            path.chmod(0o600)
    except OSError:
        pass


def _read_key_file(path: Path) -> str | None:
    tighten(path)  # a key loosened by hand (or a copy tool) is tightened back on every read, like the store
    try:
        key = path.read_text().strip()
    except OSError:
        return None
    return key or None


def ensure_local_account(store: Any) -> tuple[str, str | None]:
    """The local account shared by the embedded SDK and a server on the same data root.

    Created on the first call, with a key written to :func:`local_key_path` (mode
    0600) and nowhere else in clear. Returns ``(account_id, api_key)``; the key is
    read back from that file on later calls. When the account exists but this data
    root has no live key of it (another data root made the account on a shared
    store, the file is gone, or ``accounts rotate`` revoked it), a new key named
    :func:`local_key_name` is made for this data root and said on stderr; no other
    key is revoked, so other data roots' runs keep going. ``api_key`` is None only
    when the file cannot be written.
    """
    path = local_key_path()

    def create(s: Session) -> tuple[str, str]:
        existing = s.scalar(select(Setting.value).where(Setting.key == _LOCAL_ACCOUNT_SETTING))
        if existing is not None:
            return existing, ""
        account_id = _new_id("acct")
        s.add(Account(id=account_id, name="local", created_at=time.time()))
        s.add(Setting(key=_LOCAL_ACCOUNT_SETTING, value=account_id))
        s.flush()  # a concurrent first start fails here and reads the winner's row instead
        key = store._issue_key(s, account_id, local_key_name())
        s.flush()
        _write_key_file(path, key)
        return account_id, key

    try:
        account_id, key = store._tx(create)
    except IntegrityError:
        account_id, key = store._tx(create)
    if key:
        return account_id, key
    key = _read_key_file(path)
    if key is not None and store.account_for_key(key) == account_id:
        return account_id, key
    try:
        with _key_file_lock(path):  # two processes that both find no live key make one, not two
            key = _read_key_file(path)
            if key is not None and store.account_for_key(key) == account_id:
                return account_id, key
            new_key = store.issue_api_key(account_id, local_key_name())
            _write_key_file(path, new_key)
    except OSError:
        return account_id, None
    print(f"whileai: made a key of the store's local account for this data root ({local_key_name()}), kept in "
          f"{path} (readable by you only); the account's other keys keep working. `python -m whileai accounts "
          "keys local` lists them", file=sys.stderr, flush=True)
    return account_id, new_key


@contextmanager
def _key_file_lock(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def rotate_local_key_file(store: Any, account_id: str, key: str) -> bool:
    """After the local account's key was rotated, write the new one where the embedded SDK reads it.

    True when ``account_id`` is this data root's local account and its file was rewritten.
    """
    if store.local_account_id() != account_id:
        return False
    with _key_file_lock(local_key_path()):
        _write_key_file(local_key_path(), key)
    return True
