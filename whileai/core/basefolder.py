"""Whether a ``base_model`` that names a path on this machine holds a model a job can load.

``base_model=`` is a hub id, the kit's base, a packaged GGUF name, or a path: a
folder ``save_pretrained`` wrote (``python -m whileai export RUN --merged DIR``
writes one) or a ``.gguf`` file. :func:`names_a_path` tells the path apart;
:func:`base_folder_problem` says what such a path lacks before any run exists,
so a typo or an empty folder is refused at ``validate`` instead of failing a
job after the data was pushed.

A job loads its base from its own folder, not from where the user typed the
command, so a path must be absolute (``~`` is expanded).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["names_a_path", "base_folder_problem", "WEIGHT_SUFFIXES", "TOKENIZER_FILES"]

#: the files a transformers folder keeps its weights in (``model.safetensors``, sharded ``model-0000x-of-...``,
#: ``pytorch_model.bin``), by suffix
WEIGHT_SUFFIXES = (".safetensors", ".bin")
#: any one of these makes a tokenizer ``AutoTokenizer`` loads (fast, sentencepiece, byte-level BPE)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
#: files that end in a weight suffix but hold no base weights: an adapter's, a trainer's arguments
_NOT_WEIGHTS = ("adapter_model", "training_args", "optimizer", "scheduler", "rng_state")

_WHAT = ("the absolute path of a model folder (save_pretrained's, or `python -m whileai export RUN --merged DIR`'s), "
         "a .gguf file, or a hub id")


def names_a_path(base: str) -> bool:
    """Whether ``base`` names a path rather than a hub id: absolute, ``~``/``./``/``../``, a ``.gguf`` file, or
    a name that exists here (a loader takes a name that exists on disk before it looks at the hub)."""
    text = base.strip()
    if text.lower().endswith(".gguf") or text.startswith(("~", "./", "../")) or text in (".", ".."):
        return True
    return os.path.isabs(text) or os.path.exists(text)


def _weights(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir()
            if p.suffix in WEIGHT_SUFFIXES and p.is_file() and not p.name.startswith(_NOT_WEIGHTS)]


def base_folder_problem(base: str) -> str | None:
    """What the path ``base`` lacks as a base; None when it is a model (or names no path at all).

        base_folder_problem("/models/merged")   # None when config.json, weights and a tokenizer are there
    """
    if not names_a_path(base):
        return None
    path = Path(base.strip()).expanduser()
    if not path.is_absolute():
        return (f"base_model={base!r} is a relative path; a job loads its base from its own folder, not from here: "
                f"pass it absolute, base_model={path.resolve()}")
    if not path.exists():
        return f"base_model={base!r} does not exist on this machine; pass {_WHAT}"
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return None
        return f"base_model={base!r} is a file but not a .gguf file; pass {_WHAT}"
    if not path.is_dir():
        return f"base_model={base!r} is neither a folder nor a file; pass {_WHAT}"
    names = {p.name for p in path.iterdir()}
    if "adapter_config.json" in names and "config.json" not in names:
        return (f"base_model={base!r} is a LoRA adapter folder, not a base (it holds adapter_config.json and no "
                "config.json): continue from its run with init_from=RUN, or make a base of it with "
                "`python -m whileai export RUN --merged DIR` and pass DIR")
    lacks = []
    if "config.json" not in names:
        lacks.append("config.json (the model's architecture)")
    if not _weights(path):
        lacks.append(f"weights (a {' or '.join(WEIGHT_SUFFIXES)} file such as model.safetensors)")
    if not names & set(TOKENIZER_FILES):
        lacks.append(f"a tokenizer (one of {', '.join(TOKENIZER_FILES)})")
    if lacks:
        return (f"base_model={base!r} is a folder without a model in it: it lacks {'; '.join(lacks)}; pass a folder "
                f"save_pretrained wrote for both the model and its tokenizer (`python -m whileai export RUN --merged "
                f"DIR` writes one), a .gguf file, or a hub id")
    return None
