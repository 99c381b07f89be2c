"""Page sessions and one-time sign-in links: random tokens stored hashed, expiring, revocable.

A browser signs in by posting an API key once (or by opening a one-time link
the platform printed); the cookie then carries a session token, never the key.
The store keeps only each token's SHA-256, the account it opens, and when it
expires (SESSION_TTL_S, SIGNIN_LINK_TTL_S in ``whileai/platform/defaults.py``). A link is
spent by the first request that redeems it.

    token = create_session(store, account_id)
    account_for_session(store, token)   # -> account_id until it expires or ends
    end_session(store, token)
"""

from __future__ import annotations

import secrets
import time
from typing import Any, cast

from sqlalchemy import Float, String, delete, exists, or_, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Mapped, Session, mapped_column

from whileai.platform.store.tables import ApiKey, Base, hash_key
from whileai.platform import defaults

__all__ = [
    "PageToken",
    "create_session",
    "account_for_session",
    "end_session",
    "revoke_sessions",
    "create_signin_link",
    "redeem_signin_link",
]

_SESSION, _LINK = "session", "link"


class PageToken(Base):
    """A page session (``kind="session"``) or a one-time sign-in link (``kind="link"``), by token hash."""

    __tablename__ = "page_tokens"
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    account_id: Mapped[str] = mapped_column(String(32), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float, index=True)
    #: the API key a session was signed in with (its hash): revoking the key ends the session
    key_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)


def _hash(token: str) -> str:
    return hash_key(token)  # SHA-256, as the store hashes API keys


def _usable(token: object) -> bool:
    return isinstance(token, str) and 0 < len(token) <= defaults.SIGNIN_MAX_CHARS


def _issue(store, account_id: str, kind: str, ttl: float, key: str | None = None) -> str:
    token = secrets.token_urlsafe(defaults.SESSION_TOKEN_BYTES)
    now = time.time()

    def work(s: Session) -> str:
        s.execute(delete(PageToken).where(PageToken.expires_at < now))  # expired rows go as new ones come
        s.add(PageToken(token_hash=_hash(token), account_id=account_id, kind=kind, created_at=now,
                        expires_at=now + ttl, key_hash=hash_key(key) if key else None))
        return token

    return store._tx(work)


def create_session(store, account_id: str, key: str | None = None) -> str:
    """A new page session for ``account_id``; returns its token (kept only hashed), valid SESSION_TTL_S.

    ``key`` is the API key the reader signed in with: the session ends when that
    key is revoked. A session opened by a one-time link has none.
    """
    return _issue(store, account_id, _SESSION, defaults.SESSION_TTL_S, key)


def account_for_session(store, token: object) -> str | None:
    """The account a live session token opens, or None (unknown, ended, expired, or its key revoked)."""
    if not _usable(token):
        return None
    digest = _hash(token)  # type: ignore[arg-type]

    def work(s: Session) -> str | None:
        key_live = exists(select(ApiKey.pk).where(ApiKey.key_hash == PageToken.key_hash,
                                                  ApiKey.account_id == PageToken.account_id))
        return s.scalar(select(PageToken.account_id).where(
            PageToken.token_hash == digest, PageToken.kind == _SESSION, PageToken.expires_at > time.time(),
            or_(PageToken.key_hash.is_(None), key_live)))

    return store._tx(work, write=False)


def end_session(store, token: object) -> bool:
    """End one session (sign-out); True when it was live."""
    if not _usable(token):
        return False
    digest = _hash(token)  # type: ignore[arg-type]
    return store._tx(lambda s: (s.execute(delete(PageToken).where(
        PageToken.token_hash == digest, PageToken.kind == _SESSION)).rowcount or 0) > 0)


def revoke_sessions(store, account_id: str) -> int:
    """End every session and unspent sign-in link of an account; returns how many ended."""
    return store._tx(lambda s: s.execute(delete(PageToken).where(PageToken.account_id == account_id)).rowcount or 0)


def create_signin_link(store, account_id: str) -> str:
    """A one-time sign-in token for ``account_id``, valid SIGNIN_LINK_TTL_S (not the key)."""
    return _issue(store, account_id, _LINK, defaults.SIGNIN_LINK_TTL_S)


def redeem_signin_link(store, token: object) -> str | None:
    """Spend a sign-in link: the account it opens, or None when unknown, spent or expired.

    The row is deleted in the same transaction that reads it, so two requests
    racing on one link cannot both succeed.
    """
    if not _usable(token):
        return None
    digest = _hash(token)  # type: ignore[arg-type]

    def work(s: Session) -> str | None:
        row = s.execute(select(PageToken.account_id, PageToken.expires_at).where(
            PageToken.token_hash == digest, PageToken.kind == _LINK)).first()
        if row is None:
            return None
        # Session.execute is typed as returning Result; a DELETE's is a CursorResult, which has rowcount
        gone = cast(CursorResult[Any], s.execute(delete(PageToken).where(PageToken.token_hash == digest))).rowcount or 0
        return row.account_id if gone and row.expires_at > time.time() else None

    return store._tx(work)
