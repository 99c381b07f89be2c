"""The cached demo base and base-model resolution.

``demo_base()`` builds the kit's tokenizer and tiny model, pre-trains it
(``kit._pretrain``, recipe ``defaults.KIT_BASE_*``) and saves both under
``<data_root>/models/``; later calls, in any process, reuse the directory. A
file lock keeps two processes from building it at once, and the build lands
through a rename, so a crash never leaves a half-written base.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whileai.kit import defaults
from whileai.kit._cache import DONE as _DONE
from whileai.kit._cache import build_once as _build_once
from whileai.kit._cache import models_dir

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["KIT_BASE_NAME", "demo_base", "demo_base_built", "load_base", "models_dir", "tiny_model_dir"]

#: The name recipes and ``train(base_model=...)`` use for the demo base.
KIT_BASE_NAME = defaults.KIT_BASE_NAME

#: Bumped when the kit's code changes what a cached directory holds.
_KIT_FORMAT = 2


def _recipe() -> dict[str, Any]:
    """Everything that decides the base's weights; its hash names the cache directory."""
    names = sorted(n for n in dir(defaults) if n.startswith("KIT_") and not n.startswith(("KIT_SFT_", "KIT_SAMPLE_")))
    return {"format": _KIT_FORMAT, **{n: getattr(defaults, n) for n in names}}


def _fingerprint(recipe: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:12]


def tiny_model_dir(seed: int = 0) -> Path:
    """A saved (tokenizer, randomly initialised tiny model) pair for ``seed``, cached; takes seconds.

    For tests that need a model directory but no learning (export, serving plumbing).
    """
    recipe = {**_recipe(), "seed": seed, "what": "random"}

    def build(tmp: Path) -> dict[str, Any]:
        from whileai.kit._model import tiny_model
        from whileai.kit._tokenizer import build_tokenizer

        tok = build_tokenizer(seed)
        tok.save_pretrained(tmp)
        tiny_model(tok, seed=seed).save_pretrained(tmp)
        return {"recipe": recipe}

    return _build_once(f"tiny-random-s{seed}-{_fingerprint(recipe)}", build)


def _demo_base_name(seed: int | None) -> str:
    seed = defaults.KIT_BASE_SEED if seed is None else seed
    return f"tiny-tooluse-base-s{seed}-{_fingerprint({**_recipe(), 'seed': seed, 'what': 'base'})}"


def demo_base_built(seed: int | None = None) -> bool:
    """Whether this data root already holds the demo base (else the next ``demo_base()`` pre-trains it,
    about DEMO_BASE_BUILD_S on a CPU)."""
    from whileai.core.paths import data_root

    return (data_root() / "models" / _demo_base_name(seed) / _DONE).exists()


def demo_base(seed: int | None = None) -> Path:
    """The directory of the cached pre-trained demo base (model + tokenizer), built on first use.

    The first call in a fresh data root pre-trains the tiny model (recipe
    ``defaults.KIT_BASE_*``, about a minute on 2 CPU cores) and caches it under
    ``<data_root>/models/``; every later call, in any process, returns at once.
    Its ``whileai_kit.json`` records the recipe and the pre-training figures.

    >>> from transformers import AutoModelForCausalLM
    >>> model = AutoModelForCausalLM.from_pretrained(demo_base())
    """
    seed = defaults.KIT_BASE_SEED if seed is None else seed
    recipe = {**_recipe(), "seed": seed, "what": "base"}

    def build(tmp: Path) -> dict[str, Any]:
        import torch

        from whileai.kit._model import tiny_model
        from whileai.kit._pretrain import pretrain
        from whileai.kit._tokenizer import build_tokenizer

        tok = build_tokenizer(seed)
        model = tiny_model(tok, seed=seed)
        threads = torch.get_num_threads()
        torch.set_num_threads(defaults.KIT_BASE_THREADS)  # the same weights whoever builds it (KIT_BASE_THREADS)
        try:
            with torch.random.fork_rng(devices=[]):
                figures = pretrain(model, tok, seed=seed)
        finally:
            torch.set_num_threads(threads)
        tok.save_pretrained(tmp)
        model.save_pretrained(tmp)
        return {"name": KIT_BASE_NAME, "recipe": recipe, "pretraining": figures}

    return _build_once(_demo_base_name(seed), build)


def _looks_like_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").exists()


def load_base(name_or_path: str | os.PathLike[str] | None = None,
              tool_format: str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` for a base: the kit name, a local directory, a GGUF file, or a cached hub name.

    ``None`` and ``KIT_BASE_NAME`` give the demo base (built on first use). A
    ``.gguf`` path or a packaged GGUF's short name (``kit._gguf.GGUF_PACKAGES``)
    loads the folder it was imported into (imported on first use). A hub
    name loads only when it is already in the local Hugging Face cache: nothing
    is ever downloaded. The tokenizer carries the run's tool convention
    (``tool_format``, None meaning ``auto``; ``kit._toolformat.use_tool_format``).

    >>> model, tokenizer = load_base(KIT_BASE_NAME)
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from whileai.kit._gguf import resolve_base
    from whileai.kit._toolformat import use_tool_format

    name_or_path = resolve_base(name_or_path)
    if name_or_path is None or str(name_or_path) == KIT_BASE_NAME:
        path: str | Path = demo_base()
    else:
        path = Path(name_or_path).expanduser()
        if not _looks_like_model_dir(path):
            if path.exists() or str(name_or_path).startswith((".", "/", "~")) or str(name_or_path).count("/") > 1:
                raise FileNotFoundError(
                    f"base model {str(name_or_path)!r} is not a model directory (no config.json there); "
                    f"pass a directory written by save_pretrained, a hub name already in the local cache, "
                    f"or {KIT_BASE_NAME!r} for the kit's demo base"
                )
            path = str(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    except OSError as exc:
        raise FileNotFoundError(
            f"base model {str(name_or_path)!r} is not in the local Hugging Face cache and nothing can be "
            f"downloaded here; pass a local directory written by save_pretrained (model and tokenizer), "
            f"pre-fetch it where a network is available (huggingface-cli download {name_or_path}), "
            f"or use {KIT_BASE_NAME!r} for the kit's demo base"
        ) from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    use_tool_format(tokenizer, tool_format)
    return model, tokenizer
