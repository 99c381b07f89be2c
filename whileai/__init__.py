"""whileai: turn simulated agent rollouts into better tool-using LLM agents.

The product surface is ``import whileai.simulations as wai``; the platform that
stores runs, datasets and models lives in :mod:`whileai.platform`. The layers and
where every module lives are drawn in docs/architecture.md.

This package root sits above both the SDK and the platform, so it is where the
SDK's in-process transport is wired to the platform (:mod:`whileai.core.embedded`):
the platform is imported only when the embedded platform is first used.
"""

from whileai.core import copies as _copies
from whileai.core import embedded as _embedded

__version__ = "0.1.0"


def _embedded_platform(root):
    """The embedded platform's app and local key for ``root`` (the provider the SDK's client calls)."""
    from whileai.platform.embedded import app_and_key

    return app_and_key(root)


if _embedded.provider() is None:
    _embedded.provide(_embedded_platform)


def _forget_mirrors(account_id, run_ids):
    """Delete an account's mirrored copies (the SDK's mirror package), after the platform deleted its rows."""
    from whileai.domain.tracking.mirror import forget_mirrors

    forget_mirrors(account_id, run_ids, then=None)


_copies.provide(_forget_mirrors)
