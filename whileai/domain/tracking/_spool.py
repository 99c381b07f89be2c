"""The spool: tracking data the platform could not take yet, kept on disk until it can.

Files live under ``<data_root>/spool/`` and are named ``<pid>-<token>-<n>.jsonl``
after the process that owns them. A process appends to its own files only
(append-only JSON lines, flushed and fsync'd before the write returns), and
delivers another process's file only once that process has exited: it first
renames the file to a name of its own, so two deliverers never send the same
file. Each line is one record:

    {"v": 1, "target": {"base_url", "embedded", "key_id"}, "run_id": "run_...",
     "kind": "points", "batch_id": "...", "points": [{"step", "metrics", "ts"}, ...]}
    {"v": 1, "target": ..., "run_id": "run_...", "kind": "patch", "body": {...}}
    {"v": 1, "target": ..., "run_id": "run_...", "kind": "create", "body": {"id": "run_...", ...}}

A ``create`` record comes first for a run the SDK named itself while the platform
could not be reached (``POST /runs`` with that id; a resend answers the same
run). Records written in offline mode carry ``"held": true``: the automatic
delivery after a good send leaves them, and only ``python -m whileai sync``
sends them.

Batches keep the id they were first sent with, so a batch that did land
before its reply was lost is not stored twice when the spool resends it.
``target`` names where the data belongs without the key itself (``key_id`` is a
hash prefix), so delivery only ever uses the key that logged it.
:func:`sync_main` is ``python -m whileai sync``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, TypeGuard

from whileai.domain import defaults
from whileai.core import codec
from whileai.core.paths import data_root
from whileai.core.errors import NotFoundError, PlatformError, TrackingWarning

__all__ = [
    "spool_dir", "write", "write_each", "Delivery", "deliver", "pending_files", "send_create", "sync_main",
    "Point", "SpoolTarget", "RecordHead", "SpoolRecord",
]

_KINDS = ("create", "points", "patch")


class Point(TypedDict):
    """One logged point as a run buffers, sends and spools it: its step, its metrics (finite numbers by name)
    and when it was logged (seconds since the epoch)."""

    step: int
    metrics: dict[str, float]
    ts: float


class SpoolTarget(TypedDict):
    """Where a spooled record belongs: the platform's address, whether it is the in-process one, and a hash
    prefix of the key that logged it (None without a key), never the key itself."""

    base_url: str | None
    embedded: bool
    key_id: str | None


class RecordHead(TypedDict):
    """What every spool record holds besides its kind: the format's version (on every line written), its target
    and run, and ``held`` (True) when offline mode wrote it."""

    v: NotRequired[int]
    target: SpoolTarget
    run_id: str
    held: NotRequired[bool]


class CreateRecord(RecordHead):
    """A spooled ``POST /runs`` for a run named here: its body (the run's id and fields)."""

    kind: Literal["create"]
    body: dict[str, Any]  #: the HTTP body, as sent


class PointsRecord(RecordHead):
    """A spooled batch of points with the id it was first sent with; a delivery that had points refused
    counts them in ``refused`` and keeps the platform's last reason in ``why``."""

    kind: Literal["points"]
    batch_id: str
    points: list[Point]
    refused: NotRequired[int]
    why: NotRequired[str]


class PatchRecord(RecordHead):
    """A spooled ``PATCH /runs/<id>``: its body (the record changes)."""

    kind: Literal["patch"]
    body: dict[str, Any]  #: the HTTP body, as sent


#: One line of a spool file (``v`` is added as it is written): a run's create request, a batch, or a patch.
SpoolRecord = CreateRecord | PointsRecord | PatchRecord

_LOCK = threading.RLock()  # one writer/deliverer per process; other processes are kept apart by file names
_TOKEN = secrets.token_hex(4)
_TOKEN_PID = os.getpid()
_SEQ = 0


def spool_dir() -> Path:
    path = data_root() / "spool"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)  # its points are the account's rows: owner only
    return path


def _token() -> str:
    global _TOKEN, _TOKEN_PID
    if _TOKEN_PID != os.getpid():  # a forked child gets its own files
        _TOKEN, _TOKEN_PID = secrets.token_hex(4), os.getpid()
    return _TOKEN


def _own_prefix() -> str:
    return f"{os.getpid()}-{_token()}-"


def _owner_pid(name: str) -> int | None:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    except OSError:
        return False
    return True


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _spool_bytes(directory: Path) -> int:
    total = 0
    for path in directory.glob("*.jsonl"):
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def _encode(record: SpoolRecord, version: int | None = None) -> bytes:
    """One line of a spool file: ``record`` (led by ``"v": version`` when given) as JSON."""
    line = record if version is None else {"v": version, **record}
    return codec.dumps_bytes(line) + b"\n"  # refuses (TypeError) what has no JSON form


def _size(record: SpoolRecord) -> int:
    """What a record counts as when the spool cannot keep it: its points, or one for a run update (or no points)."""
    return (len(record["points"]) if record["kind"] == "points" else 0) or 1


class _SpoolWriteError(OSError):
    """The disk refused a spool write (full, read-only): the first ``written`` records landed, the rest did not."""

    def __init__(self, written: int, cause: OSError):
        super().__init__(cause.errno, f"{cause.strerror or cause}")
        self.written = written
        self.cause = cause
        self.kept: list[bool] = []  # per record given to write_each: whether it landed
        self.landed: tuple[int, int] = (0, 0)  # (points, run updates) that landed, set by Tracker.spool


def _append(path: Path, lines: list[bytes]) -> None:
    """Append whole lines, durably; a disk error cuts the file back to its last whole line (_SpoolWriteError)."""
    new = not path.exists()
    written = 0
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as handle:
        start = os.lseek(handle.fileno(), 0, os.SEEK_END)
        try:
            for line in lines:
                handle.write(line)
                handle.flush()
                start += len(line)
                written += 1
            os.fsync(handle.fileno())
        except OSError as exc:
            try:  # what did not fit is not left as a cut-short line
                handle.truncate(start)
            except OSError:
                pass
            raise _SpoolWriteError(written, exc) from None
    if new:
        _fsync_dir(path.parent)


def write_each(records: list[SpoolRecord]) -> list[bool]:
    """Append records to this process's spool file, durably: for each record, whether it was kept.

    Records past SPOOL_MAX_BYTES are not written (False, and a warning names
    how many). A disk that refuses the write raises _SpoolWriteError saying how
    many of the records it was given landed; a value with no JSON form raises
    TypeError before anything is written.
    """
    if not records:
        return []
    with _LOCK:
        directory = spool_dir()
        room = defaults.SPOOL_MAX_BYTES - _spool_bytes(directory)
        lines: list[bytes] = []
        kept: list[bool] = []
        refused = 0
        for record in records:
            line = _encode(record, version=1)
            if len(line) > room:
                refused += _size(record)
                kept.append(False)
                continue
            room -= len(line)
            lines.append(line)
            kept.append(True)
        if lines:
            try:
                _append(directory / f"{_own_prefix()}0.jsonl", lines)
            except _SpoolWriteError as exc:  # say which of the records given landed
                seen = 0
                for i, flag in enumerate(kept):
                    if flag:
                        seen += 1
                        kept[i] = seen <= exc.written
                exc.kept = kept
                raise
        if refused:
            warnings.warn(
                f"the spool at {directory} is full (SPOOL_MAX_BYTES={defaults.SPOOL_MAX_BYTES}); {refused} unsent "
                "points or run updates were not kept. Run `python -m whileai sync` with the platform up to empty it.",
                TrackingWarning,
                stacklevel=2,
            )
        return kept


def write(records: list[SpoolRecord]) -> tuple[int, int]:
    """:func:`write_each` as counts: (records written, points or updates refused by SPOOL_MAX_BYTES)."""
    kept = write_each(records)
    refused = sum(_size(r) for r, k in zip(records, kept) if not k)
    return sum(kept), refused


def pending_files(include_live: bool = True) -> list[Path]:
    """Spool files waiting for delivery (those of live processes too, unless ``include_live`` is False)."""
    directory = data_root() / "spool"
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.jsonl")):
        owner = _owner_pid(path.name)
        if include_live or owner is None or not _alive(owner) or path.name.startswith(_own_prefix()):
            found.append(path)
    return found


def _claim(path: Path) -> Path | None:
    """Rename another (exited) process's file to one of ours; None when someone else got it first."""
    global _SEQ
    _SEQ += 1
    claimed = path.with_name(f"{_own_prefix()}c{_SEQ}.jsonl")
    try:
        os.rename(path, claimed)
    except OSError:
        return None
    return claimed


def _is_record(value: Any) -> TypeGuard[SpoolRecord]:
    """Whether a line read back is a record: an object with a run and a known kind."""
    return isinstance(value, dict) and bool(value.get("run_id")) and value.get("kind") in _KINDS


def _read(path: Path) -> tuple[list[SpoolRecord], int]:
    records: list[SpoolRecord] = []
    unreadable = 0
    with open(path, "rb") as handle:
        for raw in handle:
            raw = raw.strip()
            if not raw:
                continue
            try:
                record = codec.loads(raw)
            except ValueError:  # a line cut short by a crash mid-write
                unreadable += 1
                continue
            if _is_record(record):
                records.append(record)
            else:
                unreadable += 1
    return records, unreadable


def target_key(target: Any) -> tuple[Any, Any, Any]:
    """A hashable name for a record's target (where it goes, and with which key's id)."""
    target = target if isinstance(target, dict) else {}
    return (target.get("base_url"), bool(target.get("embedded")), target.get("key_id"))


def send_create(client: Any, body: dict[str, Any], timeout: float) -> Any:
    """``POST /runs`` for a run named by the SDK (``body["id"]``); the platform answers the same run to a resend.

    A create the platform refuses for its fields (400/413/422: a config past its
    limits, say) is sent again with the id and name alone, with a warning, so
    the run and its points still land.
    """
    try:
        return client.request("POST", "/runs", json=body, timeout=timeout)
    except NotFoundError:
        raise
    except PlatformError as exc:
        slim = {key: body[key] for key in ("id", "name") if key in body}
        if exc.status not in (400, 413, 422) or slim == body:
            raise
        try:
            warnings.warn(
                f"{body.get('id')}: the platform refused the run's fields ({exc}); it is created with its id and "
                "name only, so its points and summary still land",
                TrackingWarning,
                stacklevel=3,
            )
        except Exception:
            pass
        return client.request("POST", "/runs", json=slim, timeout=timeout)


def _send(client: Any, record: SpoolRecord) -> int:
    run_id = record["run_id"]
    if record["kind"] == "create":
        send_create(client, record["body"], defaults.TRACKING_TIMEOUT_S)
        return 0
    if record["kind"] == "points":
        return _send_points(client, run_id, record["batch_id"], record["points"], record)
    client.request("PATCH", f"/runs/{run_id}", json=record["body"], timeout=defaults.TRACKING_TIMEOUT_S)
    return 0


def _send_points(client: Any, run_id: str, batch_id: str, points: list[Point], record: PointsRecord) -> int:
    """Send one spooled batch; a batch the platform refuses (400/413/422) is halved until each refused point is
    alone, and those are dropped and counted in ``record["refused"]`` with the reason in ``record["why"]``.

    Halves take ids derived from the batch's own (``<id>.0``, ``<id>.1``), so a
    delivery cut short and run again stores each point once.
    """
    try:
        client.request("POST", f"/runs/{run_id}/points", json={"batch_id": batch_id, "points": points},
                       timeout=defaults.TRACKING_TIMEOUT_S)
        return len(points)
    except NotFoundError:
        raise
    except PlatformError as exc:
        if exc.status not in (400, 413, 422):
            raise
        if len(points) == 1:
            record["refused"] = record.get("refused", 0) + 1
            record["why"] = str(exc)
            return 0
        half = len(points) // 2
        return (_send_points(client, run_id, f"{batch_id}.0", points[:half], record)
                + _send_points(client, run_id, f"{batch_id}.1", points[half:], record))


@dataclass
class Delivery:
    """What one delivery of the spool did, counted as it goes."""

    runs: int = 0  #: runs created (made while the platform could not be reached, or offline)
    points: int = 0
    updates: int = 0  #: run updates (patches) sent
    dropped: int = 0  #: records for what the platform no longer has (deleted), dropped
    left: int = 0  #: records still spooled
    files: int = 0
    unreadable: int = 0  #: lines cut short by a crash while writing, skipped
    refused: int = 0  #: points the platform refused (nothing can store them), dropped
    reasons: list[str] = field(default_factory=list)  #: why records were left or refused, each once
    gone: dict[str, int] = field(default_factory=dict)  #: dropped records by why they can never land


def deliver(
    client_for: Callable[[SpoolTarget], Any],
    *,
    only_target: SpoolTarget | None = None,
    include_held: bool = False,
) -> Delivery:
    """Send spooled records to the platform and remove what landed.

    ``client_for(target)`` returns the client for a record's target, or None
    when this process has no credentials for it (the record stays). With
    ``only_target`` only records for that target are tried. Files of processes
    still running are left alone, except this process's own. Records for a run
    the platform no longer has (deleted) are dropped and counted. Records held
    by offline mode are sent only with ``include_held`` (``python -m whileai sync``).

    Returns the counts as a :class:`Delivery`.
    """
    report = Delivery()
    down: set[tuple[Any, Any, Any]] = set()  # targets that failed to answer in this delivery
    with _LOCK:
        for path in pending_files(include_live=False):
            if not path.name.startswith(_own_prefix()):
                claimed = _claim(path)
                if claimed is None:
                    continue
                path = claimed
            report.files += 1
            try:
                records, unreadable = _read(path)
            except OSError as exc:
                report.reasons.append(f"{path.name}: unreadable ({exc})")
                continue
            report.unreadable += unreadable
            keep = _deliver_records(records, client_for, report, down, only_target=only_target,
                                    include_held=include_held)
            report.left += len(keep)
            _replace(path, keep)
    if report.gone:
        warnings.warn(gone_line(report.gone), TrackingWarning, stacklevel=2)
    return report


def _deliver_records(records: list[SpoolRecord], client_for: Callable[[SpoolTarget], Any],
                     report: Delivery, down: set[tuple[Any, Any, Any]], *,
                     only_target: SpoolTarget | None, include_held: bool) -> list[SpoolRecord]:
    """Send one file's records in order, counting into ``report``; returns the records to keep spooled.

    A record not tried (another target, held, its target down) is kept; so is one that failed, and every later
    record of its run, which waits to keep the run's order.
    """
    keep: list[SpoolRecord] = []
    blocked: set[str] = set()  # runs whose earlier record failed: later ones wait to keep their order
    for record in records:
        target = record.get("target") or {}
        where = target_key(target)
        if (
            record["run_id"] in blocked
            or where in down
            or (only_target is not None and where != target_key(only_target))
            or (record.get("held") and not include_held)
        ):
            keep.append(record)
            continue
        client = client_for(target)
        if client is None:
            keep.append(record)
            blocked.add(record["run_id"])
            _add_reason(report, f"no credentials for {target.get('base_url')} (key {target.get('key_id')})")
            continue
        if not _deliver_one(client, record, where, report, down):
            keep.append(record)
            blocked.add(record["run_id"])
    return keep


def _deliver_one(client: Any, record: SpoolRecord, where: tuple[Any, Any, Any], report: Delivery,
                 down: set[tuple[Any, Any, Any]]) -> bool:
    """Send one record and count it into ``report``; False when it must stay spooled (it failed and may land
    later). A record for what the platform deleted is dropped; a target that is down joins ``down``."""
    try:
        sent = _send(client, record)
    except NotFoundError:
        report.dropped += 1
        return True
    except PlatformError as exc:
        gone = _gone(exc)
        if gone is not None:  # deleted on the platform: no retry can ever land it
            report.dropped += 1
            report.gone[gone] = report.gone.get(gone, 0) + 1
            return True
        if exc.status == 0 or exc.status >= 500:  # the platform is down: do not ask it again now
            down.add(where)
        _add_reason(report, str(exc))
        return False
    if record["kind"] == "points" and record.get("refused"):
        report.refused += record["refused"]
        _add_reason(report, f"refused by the platform: {record.get('why')}")
    if record["kind"] == "points":
        report.points += sent
    elif record["kind"] == "create":
        report.runs += 1
    else:
        report.updates += 1
    return True


def _add_reason(report: Delivery, reason: str) -> None:
    """Add why records were left to the delivery's report, once."""
    if reason not in report.reasons:
        report.reasons.append(reason)


#: the platform's error types for what was deleted there, and how a dropped record's reason reads
_GONE = {(409, "id_retired"): "its run was deleted", (401, "account_deleted"): "its account was deleted"}


def _gone(exc: PlatformError) -> str | None:
    """Why a refused record can never land (its run or its account was deleted on the platform), else None."""
    error = exc.body.get("error") if isinstance(exc.body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return _GONE.get((exc.status, kind)) if isinstance(kind, str) else None


def gone_line(gone: dict[str, int]) -> str:
    """One line for the spooled records dropped because what they were for was deleted on the platform."""
    counts = ", ".join(f"{n} because {why}" for why, n in sorted(gone.items()))
    return f"dropped {sum(gone.values())} spooled records the platform can never store ({counts})"


def _replace(path: Path, keep: list[SpoolRecord]) -> None:
    """Leave only ``keep`` in ``path`` (removing it when empty), atomically."""
    if not keep:
        path.unlink(missing_ok=True)
        _fsync_dir(path.parent)
        return
    tmp = path.with_suffix(".tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:
        for record in keep:
            handle.write(_encode(record))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


# ---------------------------------------------------------------------------
# python -m whileai sync
# ---------------------------------------------------------------------------


def _client_for(api_key: str | None, base_url: str | None):
    from whileai.domain import client as _client
    from whileai.core.paths import data_root

    cache: dict[tuple[Any, Any, Any], Any] = {}

    def client_for(target: SpoolTarget) -> Any:
        key = target_key(target)
        if key in cache:
            return cache[key]
        found = None
        try:
            if target.get("embedded"):
                for candidate in (None, api_key):
                    client = _client.embedded_client(candidate)
                    if client.target["key_id"] == target.get("key_id"):
                        found = client
                        break
            else:
                chain_key, chain_url = _client._resolve(api_key, base_url, data_root())
                want = str(target.get("base_url") or "").rstrip("/")
                if chain_url and chain_key and chain_url.rstrip("/") == want:
                    client = _client.get_client(chain_key, chain_url)
                    if client.target["key_id"] == target.get("key_id"):
                        found = client
        except PlatformError:
            found = None
        cache[key] = found
        return found

    return client_for


def sync_main(argv: list[str] | None = None) -> int:
    """``python -m whileai sync``: deliver what was spooled while the platform was unreachable, and offline runs."""
    parser = argparse.ArgumentParser(
        prog="python -m whileai sync",
        description="Send what is kept in <data root>/spool (runs made offline, their points and updates) to the platform they were logged to.",
    )
    parser.add_argument("--api-key", help="key for a platform server (default: the usual credential chain)")
    parser.add_argument("--base-url", help="platform server address (default: the usual credential chain)")
    args = parser.parse_args(argv)
    directory = spool_dir()
    files = pending_files(include_live=False)
    live = len(pending_files(include_live=True)) - len(files)
    if not files:
        note = f" ({live} files belong to running processes, which send them themselves)" if live else ""
        print(f"nothing to sync: no spooled points in {directory}{note}")
        return 0
    report = deliver(_client_for(args.api_key, args.base_url), include_held=True)
    made = f"created {report.runs} runs made offline, " if report.runs else ""
    print(
        f"{made}delivered {report.points} points and {report.updates} run updates "
        f"from {report.files} spool files in {directory}"
    )
    if report.dropped:
        print(f"dropped {report.dropped} records whose run is not in this account on the platform "
              "(deleted, or its id is another account's)")
    if report.unreadable:
        print(f"skipped {report.unreadable} unreadable lines (cut short by a crash while writing)")
    if report.refused:
        refusals = [r for r in report.reasons if r.startswith("refused by the platform")]
        print(f"{report.refused} points were refused by the platform and dropped (nothing can store them): "
              + "; ".join(refusals))
    if report.left:
        others = [r for r in report.reasons if not r.startswith("refused by the platform")]
        print(f"{report.left} records are still spooled: " + "; ".join(others))
        print("fix that (start the platform, or set WHILEAI_BASE_URL / WHILEAI_API_KEY) and run sync again")
        return 1
    return 1 if report.refused else 0
