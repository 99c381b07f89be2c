"""A base model's tokenizer and context limit, read without its weights (``context.base_tokenizer``).

The tokenizer carries the run's tool convention (``whileai.kit.use_tool_format``),
so what is counted or written with it (the selection report's lengths, an
export's chat template) is what the job renders. Kept apart from ``context`` so
the exporters can read it without importing the context check, which uses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults

__all__ = ["base_tokenizer", "context_limit"]


def context_limit(config: Any, cap: int | None = None) -> int:
    """``cap`` (None: TRAIN_MAX_LENGTH; an episode's: EPISODE_MAX_LENGTH), or the model's own context length
    (``max_position_embeddings``) when that is shorter."""
    cap = core_defaults.TRAIN_MAX_LENGTH if cap is None else cap
    limit = int(getattr(config, "max_position_embeddings", 0) or 0)
    return min(cap, limit) if limit else cap


def base_tokenizer(base_model: str, tool_format: str | None = None, cap: int | None = None) -> tuple[Any, int]:
    """The tokenizer and context limit of ``base_model``, read without its weights and without a download.

    The kit's demo base reads its cached folder when it is built, else builds
    the same tokenizer in code (seconds; the base is not pre-trained for it).
    A GGUF base reads the folder it was imported into (importing it on first
    use, as the job would). A folder or a hub name loads with
    ``local_files_only``. The tokenizer carries the run's tool convention
    (``tool_format``; ``whileai.kit.use_tool_format``), so lengths are counted on
    what the job renders. The limit is :func:`context_limit`'s under ``cap``. Raises LookupError saying why when the
    base's files are not on this machine (a hub base that a Modal container fetches for itself).
    """
    from whileai.kit import import_gguf, is_gguf_base, use_tool_format

    if base_model == kit_defaults.KIT_BASE_NAME:
        from whileai.kit import build_tokenizer, demo_base, demo_base_built

        if not demo_base_built():
            from types import SimpleNamespace


            shape = SimpleNamespace(max_position_embeddings=kit_defaults.KIT_MAX_POSITIONS)
            tokenizer = build_tokenizer(kit_defaults.KIT_BASE_SEED)
            use_tool_format(tokenizer, tool_format)
            return _counting(tokenizer), context_limit(shape, cap)
        path = str(demo_base())
    elif is_gguf_base(base_model):  # imported into the data root on first use, as the job would
        path = str(import_gguf(base_model))
    else:
        folder = Path(base_model).expanduser()
        path = str(folder) if folder.is_dir() else base_model
    try:
        limit = _folder_limit(path, cap)
        tokenizer = _folder_tokenizer(path)
    except Exception as exc:  # whatever stops the read here, the job loads the base itself and checks there
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        where = (f"the folder {path} holds no loadable tokenizer and config ({first})" if Path(path).is_dir() else
                 f"{base_model!r} is neither a local folder nor in the local Hugging Face cache, and nothing is "
                 f"downloaded before the run ({first})")
        raise LookupError(f"{where}; the job counts what is too long once it has loaded the base") from exc
    use_tool_format(tokenizer, tool_format)  # ToolFormatError (a selection refusal) for native on a template that drops tools
    return _counting(tokenizer), limit


#: tokenizer_config.json's class names that are transformers' plain tokenizers-library tokenizer: a folder naming one
#: loads through that class directly, with the same result as AutoTokenizer and without its model registry
_PLAIN_TOKENIZER_CLASSES = ("PreTrainedTokenizerFast", "TokenizersBackend")


def _folder_limit(path: str, cap: int | None = None) -> int:
    """The context limit of the base at ``path``: config.json's ``max_position_embeddings`` read as JSON where the
    folder has one that names it, else through AutoConfig (which maps other names, GPT-2's ``n_positions``, onto it).

    AutoConfig imports the model registry and torch (benchmarks/MEASURED.md#autoconfig-import); the runner reads a
    folder's limit without either."""
    found = _json_file(Path(path) / "config.json")
    if isinstance(found.get("max_position_embeddings"), int):
        from types import SimpleNamespace

        return context_limit(SimpleNamespace(max_position_embeddings=found["max_position_embeddings"]), cap)
    from transformers import AutoConfig

    return context_limit(AutoConfig.from_pretrained(path, local_files_only=True), cap)


def _folder_tokenizer(path: str) -> Any:
    """The tokenizer of the base at ``path``: a folder whose tokenizer_config.json names the plain tokenizers-library
    class loads through it (what AutoTokenizer resolves it to, without importing torch); any other through
    AutoTokenizer."""
    folder = Path(path)
    named = _json_file(folder / "tokenizer_config.json").get("tokenizer_class")
    if named in _PLAIN_TOKENIZER_CLASSES and (folder / "tokenizer.json").is_file():
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def _json_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; empty when there is none or it does not read as one."""
    import json

    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _counting(tokenizer: Any) -> Any:
    """``tokenizer`` for counting only: the check compares lengths itself, so transformers' own over-length
    message (on this private copy, never the job's) would only repeat it on stderr."""
    tokenizer.model_max_length = int(1e30)
    return tokenizer
