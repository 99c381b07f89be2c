"""A base model's tokenizer and context limit, read without its weights (``context.base_tokenizer``).

The tokenizer carries the run's tool convention (``whileai.kit.use_tool_format``),
so what is counted or written with it (the selection report's lengths, an
export's chat template) is what the job renders. Kept apart from ``context`` so
the exporters can read it without importing the context check, which uses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import defaults

__all__ = ["base_tokenizer", "context_limit"]


def context_limit(config: Any) -> int:
    """TRAIN_MAX_LENGTH, or the model's own context length (``max_position_embeddings``) when that is shorter."""
    limit = int(getattr(config, "max_position_embeddings", 0) or 0)
    return min(defaults.TRAIN_MAX_LENGTH, limit) if limit else defaults.TRAIN_MAX_LENGTH


def base_tokenizer(base_model: str, tool_format: str | None = None) -> tuple[Any, int]:
    """The tokenizer and context limit of ``base_model``, read without its weights and without a download.

    The kit's demo base reads its cached folder when it is built, else builds
    the same tokenizer in code (seconds; the base is not pre-trained for it).
    A GGUF base reads the folder it was imported into (importing it on first
    use, as the job would). A folder or a hub name loads with
    ``local_files_only``. The tokenizer carries the run's tool convention
    (``tool_format``; ``whileai.kit.use_tool_format``), so lengths are counted on
    what the job renders. Raises LookupError saying why when the base's files are
    not on this machine (a hub base that a Modal container fetches for itself).
    """
    from transformers import AutoConfig, AutoTokenizer

    from whileai.kit import import_gguf, is_gguf_base, use_tool_format

    if base_model == defaults.KIT_BASE_NAME:
        from whileai.kit import build_tokenizer, demo_base, demo_base_built

        if not demo_base_built():
            from types import SimpleNamespace

            from whileai.kit import defaults as kit_defaults

            shape = SimpleNamespace(max_position_embeddings=kit_defaults.KIT_MAX_POSITIONS)
            tokenizer = build_tokenizer(kit_defaults.KIT_BASE_SEED)
            use_tool_format(tokenizer, tool_format)
            return _counting(tokenizer), context_limit(shape)
        path = str(demo_base())
    elif is_gguf_base(base_model):  # imported into the data root on first use, as the job would
        path = str(import_gguf(base_model))
    else:
        folder = Path(base_model).expanduser()
        path = str(folder) if folder.is_dir() else base_model
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # whatever stops the read here, the job loads the base itself and checks there
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        where = (f"the folder {path} holds no loadable tokenizer and config ({first})" if Path(path).is_dir() else
                 f"{base_model!r} is neither a local folder nor in the local Hugging Face cache, and nothing is "
                 f"downloaded before the run ({first})")
        raise LookupError(f"{where}; the job counts what is too long once it has loaded the base") from exc
    use_tool_format(tokenizer, tool_format)  # ToolFormatError (a selection refusal) for native on a template that drops tools
    return _counting(tokenizer), context_limit(config)


def _counting(tokenizer: Any) -> Any:
    """``tokenizer`` for counting only: the check compares lengths itself, so transformers' own over-length
    message (on this private copy, never the job's) would only repeat it on stderr."""
    tokenizer.model_max_length = int(1e30)
    return tokenizer
