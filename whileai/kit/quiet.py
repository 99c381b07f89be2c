"""The model libraries' own chatter, off for a block: their deprecation warnings, logger notes and progress bars.

Used where whileai loads, builds or writes a model on the user's terminal (building the kit's bases, importing a
GGUF file, ``export``): each of those says what it did in its own line, and a transformers ``Writing model
shards`` bar or a FutureWarning between those lines is noise the user did not ask for. Errors still raise.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

__all__ = ["quiet_libraries"]


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """transformers' logger at ERROR, its and huggingface_hub's progress bars off, the libraries' warnings ignored;
    all restored on exit."""
    import huggingface_hub.utils
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hub_bars = not huggingface_hub.utils.are_progress_bars_disabled()
    hf_logging.set_verbosity(hf_logging.ERROR)
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    huggingface_hub.utils.disable_progress_bars()
    try:
        with warnings.catch_warnings():
            for category in (DeprecationWarning, UserWarning):
                warnings.filterwarnings("ignore", category=category, module=r"(transformers|peft|huggingface_hub)\b")
            warnings.filterwarnings("ignore", category=FutureWarning)  # a library's deprecations, never ours
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        if hub_bars:
            huggingface_hub.utils.enable_progress_bars()
