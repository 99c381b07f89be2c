"""The models behind the serving endpoint: loaded on first use, a few kept, unloaded when idle.

A :class:`ModelPool` maps (base model, adapter) to a loaded model and its
tokenizer. Each entry has its own lock, so one model generates one request at a
time while other models generate beside it. The pool keeps at most
``SERVING_MAX_LOADED_MODELS`` entries (least recently used goes first) and a
background thread drops any entry unused for ``SERVING_IDLE_UNLOAD_S``; when the
pool is empty that thread ends, so an idle server holds no weights and no
thread (idle to zero).
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whileai.platform import defaults

__all__ = ["Loaded", "ModelPool", "load_model"]

#: ``loader(base_model, adapter_or_None) -> (model, tokenizer)``
Loader = Callable[[str, "str | None"], "tuple[Any, Any]"]


@dataclass
class Loaded:
    """One pool entry. ``lock`` is held by whoever is generating with ``model``."""

    base_model: str
    adapter: str | None
    model: Any = None
    tokenizer: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0
    last_used: float = field(default_factory=time.monotonic)
    loads: int = 0


def load_model(base_model: str, adapter: str | None) -> tuple[Any, Any]:
    """Load ``base_model`` through the model kit and put ``adapter`` (a PEFT directory) on it.

    The LoRA stays a separate low-rank path beside the base weights rather than
    merged in: a merge writes through weights the base ties together (the kit's
    lm_head is its embedding matrix), and a rank-r path costs little at
    generation. The tokenizer saved beside the adapter wins over the base's when
    there is one (it is the one training used).
    """
    import torch
    from whileai.kit import load_base

    path = Path(adapter).expanduser() if adapter else None
    if path is not None and not (path / "adapter_config.json").is_file():  # before the base costs a load
        raise FileNotFoundError(
            f"adapter {str(path)!r} has no adapter_config.json: it is not a PEFT adapter directory "
            "on this machine; serve a finished run whose adapter the platform can read"
        )
    model, tokenizer = load_base(base_model)  # from this machine only (the kit's rule)
    if path is not None:
        from peft import PeftModel

        from whileai.core.paths import hub_allowed

        local_only = not hub_allowed()  # the adapter is a local folder; nothing about it is fetched either
        model = PeftModel.from_pretrained(model, str(path), local_files_only=local_only)
        if (path / "tokenizer_config.json").is_file():
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=local_only)
    if torch.cuda.is_available():
        model = model.to("cuda")
    model.eval()
    return model, tokenizer


def _setting(given: Any, env: str, default: float, what: str) -> float:
    """``given`` when not None, else the environment variable ``env``, else ``default``."""
    if given is not None:
        return float(given)
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return float(default)
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{env}={raw!r} is not a number; set it to a number for {what}, or unset it") from None


class ModelPool:
    """Loaded models keyed by (base model, adapter), least recently used first out.

    ``max_loaded`` and ``idle_s`` default to the environment
    (``SERVING_MAX_LOADED_ENV``, ``SERVING_IDLE_UNLOAD_ENV``), then to
    ``SERVING_MAX_LOADED_MODELS`` and ``SERVING_IDLE_UNLOAD_S``; ``loader`` to
    :func:`load_model`.
    """

    def __init__(self, max_loaded: int | None = None, idle_s: float | None = None, loader: Loader | None = None):
        self.max_loaded = int(_setting(max_loaded, defaults.SERVING_MAX_LOADED_ENV, defaults.SERVING_MAX_LOADED_MODELS,
                                       "max_loaded"))
        self.idle_s = _setting(idle_s, defaults.SERVING_IDLE_UNLOAD_ENV, defaults.SERVING_IDLE_UNLOAD_S, "idle_s")
        if self.max_loaded < 1 or self.max_loaded != self.max_loaded // 1:
            raise ValueError(f"max_loaded={self.max_loaded!r} must be a whole number of at least 1 (argument or "
                             f"{defaults.SERVING_MAX_LOADED_ENV}); leave it unset for SERVING_MAX_LOADED_MODELS")
        if not self.idle_s > 0:
            raise ValueError(f"idle_s={self.idle_s!r} must be positive seconds (argument or "
                             f"{defaults.SERVING_IDLE_UNLOAD_ENV}); leave it unset for SERVING_IDLE_UNLOAD_S")
        self._loader = loader or load_model
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], Loaded] = OrderedDict()
        self._reaper: threading.Thread | None = None
        self._wake = threading.Event()
        self._closed = False

    # -- use -----------------------------------------------------------------

    @contextmanager
    def use(self, base_model: str, adapter: str | None) -> Iterator[Loaded]:
        """Hold the model for (base, adapter), loading it first if needed; its lock is held inside."""
        key = (base_model, adapter or "")
        with self._lock:
            if self._closed:
                raise RuntimeError("the serving pool is closed (the server is shutting down)")
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = Loaded(base_model, adapter)
            self._entries.move_to_end(key)
            entry.users += 1
            self._evict_over_capacity()  # make room before loading, not after
        try:
            with entry.lock:
                if entry.model is None:
                    entry.model, entry.tokenizer = self._loader(base_model, adapter)
                    entry.loads += 1
                yield entry
        finally:
            with self._lock:
                entry.users -= 1
                entry.last_used = time.monotonic()
                if entry.model is None and entry.users == 0 and self._entries.get(key) is entry:
                    del self._entries[key]  # the load failed: nothing to keep
                self._evict_over_capacity()
                self._start_reaper()

    def loaded(self) -> list[tuple[str, str | None]]:
        """(base, adapter) of every model in memory, least recently used first."""
        with self._lock:
            return [(e.base_model, e.adapter) for e in self._entries.values() if e.model is not None]

    def is_loaded(self, base_model: str, adapter: str | None) -> bool:
        """Whether (base, adapter) is in memory now."""
        with self._lock:
            entry = self._entries.get((base_model, adapter or ""))
            return entry is not None and entry.model is not None

    def unload(self, base_model: str, adapter: str | None) -> bool:
        """Drop one model now if nobody is using it. Returns whether it was dropped."""
        with self._lock:
            entry = self._entries.get((base_model, adapter or ""))
            if entry is None or entry.users:
                return False
            self._drop(entry)
        gc.collect()
        return True

    def close(self) -> None:
        """Drop every model and stop the idle thread (the server is shutting down)."""
        with self._lock:
            self._closed = True
            for entry in list(self._entries.values()):
                if not entry.users:
                    self._drop(entry)
            reaper = self._reaper
        self._wake.set()
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=5)

    # -- internals (called with self._lock held) ------------------------------

    def _drop(self, entry: Loaded) -> None:
        self._entries.pop((entry.base_model, entry.adapter or ""), None)
        entry.model = entry.tokenizer = None

    def _evict_over_capacity(self) -> None:
        idle = [e for e in self._entries.values() if e.users == 0]
        excess = len(self._entries) - self.max_loaded
        for entry in idle[: max(excess, 0)]:
            self._drop(entry)

    def _start_reaper(self) -> None:
        if self._entries and self._reaper is None and not self._closed:
            self._wake.clear()
            self._reaper = threading.Thread(target=self._reap, name="whileai-serving-idle", daemon=True)
            self._reaper.start()

    def _reap(self) -> None:
        check_every = max(min(self.idle_s / 4, defaults.SERVING_IDLE_CHECK_S), 0.01)
        while True:
            self._wake.wait(check_every)
            dropped = False
            with self._lock:
                now = time.monotonic()
                for entry in list(self._entries.values()):
                    if entry.users == 0 and (self._closed or now - entry.last_used >= self.idle_s):
                        self._drop(entry)
                        dropped = True
                if not self._entries or self._closed:
                    self._reaper = None
                    break
            if dropped:
                gc.collect()
        gc.collect()
