"""The demo base, its weights' digest, and base-model resolution.

The demo base ships with the package (``kit/data/base``: the tokenizer and the
tiny model, pre-trained once by ``scripts/build_kit_base.py`` under torch's
portable CPU kernel path). ``demo_base()`` copies it into ``<data_root>/models/``
and checks its weights against ``defaults.BASE_WEIGHTS_SHA256``, so every
machine starts every kit recipe from the same bytes. Pre-training in code
(``kit._pretrain``, recipe ``defaults.KIT_BASE_*``) is what builds that file and
what a base of another seed still uses; its float sums follow the CPU's kernel
path (``ATEN_CPU_CAPABILITY``), which is why the default base is not rebuilt on
each machine. A file lock keeps two processes from setting a base up at once,
and it lands through a rename, so a crash never leaves a half-written base.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whileai.kit import defaults
from whileai.kit._cache import DONE as _DONE
from whileai.kit._cache import build_once as _build_once
from whileai.kit._cache import file_sha256
from whileai.kit._cache import models_dir

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["KIT_BASE_NAME", "PACKAGED_BASE", "demo_base", "demo_base_built", "demo_base_trains", "load_base",
           "models_dir", "pretrained_base", "tiny_model_dir", "weights_digest"]

#: The name recipes and ``train(base_model=...)`` use for the demo base.
KIT_BASE_NAME = defaults.KIT_BASE_NAME

#: Bumped when the kit's code changes what a cached directory holds (3: the default base is the packaged one).
_KIT_FORMAT = 3

#: The packaged demo base (``scripts/build_kit_base.py`` writes it; its ``whileai_kit.json`` names the recipe).
PACKAGED_BASE = Path(__file__).resolve().parent / "data" / "base"

#: The weights file a saved base holds (``save_pretrained``'s safetensors).
WEIGHTS_FILE = "model.safetensors"


def _recipe() -> dict[str, Any]:
    """Everything that decides the base's weights; its hash names the cache directory."""
    names = sorted(n for n in dir(defaults)
                   if n.startswith("KIT_") and not n.startswith(("KIT_SFT_", "KIT_SAMPLE_", "KIT_PROXY_")))
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
    """Whether this data root already holds the demo base of ``seed`` (``demo_base_trains`` says whether setting
    it up pre-trains one)."""
    from whileai.core.paths import data_root

    return (data_root() / "models" / _demo_base_name(seed) / _DONE).exists()


def _packaged_recipe() -> dict[str, Any] | None:
    """The recipe the packaged base was pre-trained by, None when the package holds none."""
    try:
        return dict(json.loads((PACKAGED_BASE / _DONE).read_text())["recipe"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _serves_packaged(seed: int, recipe: dict[str, Any]) -> bool:
    """Whether the packaged base is this seed's base under this code's recipe (else it is pre-trained here)."""
    return seed == defaults.KIT_BASE_SEED and _packaged_recipe() == json.loads(json.dumps(recipe, default=str))


def demo_base_trains(seed: int | None = None) -> bool:
    """Whether the next ``demo_base(seed)`` pre-trains a base (about DEMO_BASE_BUILD_S on a CPU): not for the
    packaged base, which is copied, nor once this data root holds the base."""
    seed = defaults.KIT_BASE_SEED if seed is None else seed
    return not demo_base_built(seed) and not _serves_packaged(seed, {**_recipe(), "seed": seed, "what": "base"})


def weights_digest(folder: str | os.PathLike[str]) -> str:
    """SHA-256 of a saved model's weights: its ``model.safetensors``, or, for weights in other or sharded files,
    of each weights file's name and digest in name order. What a run records as its base's bytes."""
    folder = Path(folder)
    if (folder / WEIGHTS_FILE).is_file():
        return file_sha256(folder / WEIGHTS_FILE)
    names = sorted(p.name for p in folder.iterdir() if p.suffix in defaults.WEIGHTS_SUFFIXES and p.is_file())
    if not names:
        raise FileNotFoundError(f"{folder} holds no weights file ({', '.join(defaults.WEIGHTS_SUFFIXES)})")
    listing = "\n".join(f"{name} {file_sha256(folder / name)}" for name in names)
    return hashlib.sha256(listing.encode()).hexdigest()


def _copy_packaged(tmp: Path) -> dict[str, Any]:
    """The packaged base's files into ``tmp``, its weights checked against BASE_WEIGHTS_SHA256."""
    for item in PACKAGED_BASE.iterdir():
        if item.is_file() and item.name != _DONE:
            shutil.copyfile(item, tmp / item.name)
    found = weights_digest(tmp)
    if found != defaults.BASE_WEIGHTS_SHA256:
        raise RuntimeError(
            f"the packaged kit base's weights ({PACKAGED_BASE / WEIGHTS_FILE}) have SHA-256 {found}, not the "
            f"{defaults.BASE_WEIGHTS_SHA256} this version of whileai ships; the install is damaged: reinstall "
            "whileai (pip install --force-reinstall --no-deps whileai, or from a clean checkout)")
    info = json.loads((PACKAGED_BASE / _DONE).read_text())
    return {**info, "packaged": True}


def pretrained_base(tmp: Path, seed: int) -> dict[str, Any]:
    """Pre-train the demo base of ``seed`` in code and save it (tokenizer and model) into ``tmp``; returns its
    record. Its float sums follow this process's CPU kernel path: the packaged base is built by this under
    ``ATEN_CPU_CAPABILITY=default`` (``scripts/build_kit_base.py``)."""
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
    return {"name": KIT_BASE_NAME, "recipe": {**_recipe(), "seed": seed, "what": "base"}, "pretraining": figures,
            "built_with": {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}}


def demo_base(seed: int | None = None) -> Path:
    """The directory of the demo base (model + tokenizer) in this data root, set up on first use.

    The default base (seed ``KIT_BASE_SEED``) is the packaged one, copied and
    checked against ``BASE_WEIGHTS_SHA256``: the same bytes on every machine. A
    base of another seed is pre-trained here (recipe ``defaults.KIT_BASE_*``,
    about a minute on 2 CPU cores), and its bytes follow this CPU's kernel path.
    Either way later calls, in any process, return at once. Its
    ``whileai_kit.json`` records the recipe and the pre-training figures.

    >>> from transformers import AutoModelForCausalLM
    >>> model = AutoModelForCausalLM.from_pretrained(demo_base())
    """
    seed = defaults.KIT_BASE_SEED if seed is None else seed
    recipe = {**_recipe(), "seed": seed, "what": "base"}

    def build(tmp: Path) -> dict[str, Any]:
        if _serves_packaged(seed, recipe):
            return _copy_packaged(tmp)
        return pretrained_base(tmp, seed)

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
