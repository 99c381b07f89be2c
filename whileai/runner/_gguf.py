"""A merged transformers folder as one GGUF file (llama.cpp, Ollama), written with the ``gguf`` package.

Covers the Llama architecture (the kit's base, Llama 3.x) with a byte-level BPE tokenizer, the
way llama.cpp's own ``convert_hf_to_gguf.py`` writes it: the hyperparameters as GGUF keys, every
tensor under llama.cpp's name (``gguf.get_tensor_name_map``), the query and key projections
permuted from Hugging Face's rotate-half layout to llama.cpp's interleaved one, weights in
float32 (F32; quantize afterwards with llama.cpp's ``llama-quantize``), and the tokenizer's
tokens, merges, special ids and chat template. Another architecture is refused with the command
that converts it (llama.cpp's script on the merged folder).
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["gguf_missing", "write_gguf", "permute_qk", "pre_tokenizer_name", "GGUFWritten"]

_CONVERT = ("python convert_hf_to_gguf.py MERGED_DIR --outfile FILE (llama.cpp's converter; "
            "https://github.com/ggml-org/llama.cpp)")


def gguf_missing() -> str | None:
    """None when the ``gguf`` package is installed, else the sentence that names it and how to get it."""
    if importlib.util.find_spec("gguf") is not None:
        return None
    return ("--gguf needs the gguf package, which is not installed: pip install 'whileai[gguf]' (or pip install "
            "gguf), then export again; --merged DIR alone needs nothing more")


def permute_qk(weights: Any, n_head: int) -> Any:
    """Hugging Face's rotate-half q/k rows as llama.cpp's interleaved pairs (convert_hf_to_gguf's ``permute``)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def _refuse(what: str) -> ValueError:
    return ValueError(f"{what}; the GGUF file would tokenize text differently from the run, so none is written: use "
                      f"the merged folder, or convert it with {_CONVERT} where llama.cpp supports this tokenizer")


def _known_splits() -> dict[str, str]:
    """Split regex -> the ``tokenizer.ggml.pre`` name transformers' GGUF reader turns back into that split."""
    try:
        from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS
    except ImportError:  # a transformers without the table: only the splits named below
        GGUF_PRE_TOKENIZER_SPLITS = {}
    from whileai.kit import KIT_PRE_TOKENIZER, KIT_SPLIT_PATTERN

    found = {KIT_SPLIT_PATTERN: KIT_PRE_TOKENIZER}
    for name, regex in GGUF_PRE_TOKENIZER_SPLITS.items():
        found.setdefault(regex, name)  # the table's first name for a split is the one llama.cpp also knows
    return found


def pre_tokenizer_name(data: dict[str, Any]) -> str:
    """The ``tokenizer.ggml.pre`` that reads back as ``tokenizer.json``'s pre-tokenizer; ValueError naming it if none.

    GPT-2's own split (ByteLevel with its regex) is ``gpt2``; a Split by a regex before a regex-free
    ByteLevel is named from transformers' table (Llama 3's is ``llama3``) or is the kit's own.
    """
    pre = data.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]
    steps = [s for s in steps or [] if isinstance(s, dict)]
    last = steps[-1] if steps else {}
    if last.get("type") == "ByteLevel" and not last.get("add_prefix_space"):
        if len(steps) == 1 and last.get("use_regex", True):
            return "gpt2"
        split = steps[0] if len(steps) == 2 else {}
        regex = (split.get("pattern") or {}).get("Regex")
        if (split.get("type") == "Split" and not last.get("use_regex", True) and split.get("behavior") == "Isolated"
                and not split.get("invert") and regex in _known_splits()):
            return _known_splits()[regex]
    raise _refuse(f"its pre-tokenizer {json.dumps(pre)} has no tokenizer.ggml.pre name a GGUF reader turns back into "
                  "the same split (GGUF readers know byte-level splits by name only)")


def _tokens(data: dict[str, Any], vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """(tokens by id, their GGUF token types, BPE merges) from the folder's tokenizer.json; ValueError if not keepable.

    An added token the tokenizer treats as special is CONTROL, any other added token (``<tool_call>``)
    USER_DEFINED: readers match both whole in text, as the run's tokenizer does, instead of cutting them.
    """
    import gguf

    model = data.get("model") or {}
    if model.get("type") != "BPE" or (data.get("decoder") or {}).get("type") != "ByteLevel":
        raise _refuse(f"the tokenizer is {model.get('type')!r} with a {(data.get('decoder') or {}).get('type')!r} "
                      "decoder, not byte-level BPE (the only tokenizer this writer keeps)")
    if data.get("normalizer"):
        raise _refuse(f"its normalizer {json.dumps(data['normalizer'])} has no GGUF key")
    by_id = {int(i): t for t, i in (model.get("vocab") or {}).items()}
    added = {int(a["id"]): a for a in data.get("added_tokens") or []}
    for i, a in sorted(added.items()):
        flags = [f for f in ("lstrip", "rstrip", "single_word", "normalized") if a.get(f)]
        if flags:
            raise _refuse(f"added token {a['content']!r} is {'/'.join(flags)}, which a GGUF token type cannot say")
        if i >= vocab_size:
            raise _refuse(f"added token {a['content']!r} has id {i}, past the model's {vocab_size} embedding rows")
        by_id[i] = a["content"]
    tokens, types = [], []
    for i in range(vocab_size):
        if i in added:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if added[i].get("special") else gguf.TokenType.USER_DEFINED)
        elif i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
        else:  # an id the model has a row for but the tokenizer never emits (llama.cpp's [PAD<i>])
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    return tokens, [int(t) for t in types], merges


def _add_tokenizer(writer: Any, folder: Path, vocab_size: int) -> str:
    """The tokenizer's GGUF keys (model, pre-tokenizer, tokens and types, merges, special ids, BOS/EOS adding,
    chat template); returns the pre-tokenizer name. ValueError, before anything is written, for what GGUF cannot keep."""
    import gguf
    from transformers import AutoTokenizer

    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    pre = pre_tokenizer_name(data)
    tokens, types, merges = _tokens(data, vocab_size)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    plain, marked = tokenizer("a", add_special_tokens=False)["input_ids"], tokenizer("a")["input_ids"]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    special = gguf.SpecialVocab(folder, load_merges=False)  # bos/eos/pad ids and chat_template.jinja
    special.add_special_token["bos"] = marked[:1] != plain[:1]  # what the run's tokenizer adds, not a default
    special.add_special_token["eos"] = marked[-1:] != plain[-1:]
    special.add_to_gguf(writer, quiet=True)
    return pre


def _add_hyperparameters(writer: Any, config: dict[str, Any]) -> None:
    import gguf

    n_head = int(config["num_attention_heads"])
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_block_count(int(config["num_hidden_layers"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(n_head)
    writer.add_head_count_kv(int(config.get("num_key_value_heads") or n_head))
    writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps") or 1e-6))
    writer.add_rope_freq_base(float(rope.get("rope_theta") or config.get("rope_theta") or 10000.0))
    writer.add_rope_dimension_count(int(config.get("head_dim") or config["hidden_size"] // n_head))
    writer.add_vocab_size(int(config["vocab_size"]))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)


def _add_tensors(writer: Any, folder: Path, config: dict[str, Any]) -> int:
    """Every safetensors tensor under its llama.cpp name, float32, q/k permuted; returns how many."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    n_head = int(config["num_attention_heads"])
    n_kv = int(config.get("num_key_value_heads") or n_head)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, int(config["num_hidden_layers"]))
    written = 0
    for shard in sorted(folder.glob("*.safetensors")):
        for hf_name, value in load_file(str(shard)).items():
            name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if name is None:
                raise ValueError(f"tensor {hf_name!r} has no llama.cpp name; convert {folder} with {_CONVERT}")
            data = value.astype(np.float32)
            if hf_name.endswith("q_proj.weight"):
                data = permute_qk(data, n_head)
            elif hf_name.endswith("k_proj.weight"):
                data = permute_qk(data, n_kv)
            writer.add_tensor(name, data)
            written += 1
    return written


@dataclass(frozen=True)
class GGUFWritten:
    """The GGUF file ``write_gguf`` wrote: its path, how many tensors it holds, its architecture and pre-tokenizer."""

    file: str
    tensors: int
    architecture: str
    pre_tokenizer: str


def write_gguf(folder: Path, target: Path) -> GGUFWritten:
    """Write the merged model in ``folder`` to ``target`` (a new file); ValueError for what cannot be converted.

    Written under a hidden sibling name and renamed into place, so a refusal or a crash leaves no file
    at ``target``. Returns what it wrote (:class:`GGUFWritten`).
    """
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "llama":
        raise ValueError(f"the merged model is {config.get('model_type')!r}; this export writes GGUF for the llama "
                         f"architecture only: convert {folder} with {_CONVERT}")
    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA]
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        writer = gguf.GGUFWriter(str(partial), arch)
        writer.add_name(folder.name)
        _add_hyperparameters(writer, config)
        pre = _add_tokenizer(writer, folder, int(config["vocab_size"]))
        written = _add_tensors(writer, folder, config)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        if target.exists():
            raise FileExistsError(f"{target} exists; export never overwrites a file")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return GGUFWritten(file=str(target), tensors=written, architecture=arch, pre_tokenizer=pre)
