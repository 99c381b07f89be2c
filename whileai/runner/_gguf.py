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
from pathlib import Path
from typing import Any

__all__ = ["gguf_missing", "write_gguf", "permute_qk"]

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


def _tokens(folder: Path, vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """(tokens by id, their GGUF token types, BPE merges) from the folder's tokenizer.json."""
    import gguf

    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    model = data.get("model") or {}
    if model.get("type") != "BPE":
        raise ValueError(f"the tokenizer is {model.get('type')!r}, not byte-level BPE; convert the merged folder with "
                         f"{_CONVERT}")
    by_id = {int(i): t for t, i in (model.get("vocab") or {}).items()}
    special = {int(a["id"]): a["content"] for a in data.get("added_tokens") or [] if a.get("special")}
    by_id.update({int(a["id"]): a["content"] for a in data.get("added_tokens") or []})
    size = max(vocab_size, max(by_id) + 1 if by_id else 0)
    tokens, types = [], []
    for i in range(size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:  # an id the model has a row for but the tokenizer never emits (llama.cpp's [PAD<i>])
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    return tokens, [int(t) for t in types], merges


def write_gguf(folder: Path, target: Path) -> dict[str, Any]:
    """Write the merged model in ``folder`` to ``target`` (a new file); ValueError for what cannot be converted."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "llama":
        raise ValueError(f"the merged model is {config.get('model_type')!r}; this export writes GGUF for the llama "
                         f"architecture only: convert {folder} with {_CONVERT}")
    arch = gguf.MODEL_ARCH.LLAMA
    n_head, n_kv = int(config["num_attention_heads"]), int(config.get("num_key_value_heads") or config["num_attention_heads"])
    blocks = int(config["num_hidden_layers"])
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    theta = float(rope.get("rope_theta") or config.get("rope_theta") or 10000.0)
    head_dim = int(config.get("head_dim") or config["hidden_size"] // n_head)
    tensors: dict[str, Any] = {}
    for shard in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(shard)))
    names = gguf.get_tensor_name_map(arch, blocks)
    writer = gguf.GGUFWriter(str(target), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name(folder.name)
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_block_count(blocks)
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv)
    writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps") or 1e-6))
    writer.add_rope_freq_base(theta)
    writer.add_rope_dimension_count(head_dim)
    writer.add_vocab_size(int(config["vocab_size"]))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens, types, merges = _tokens(folder, int(config["vocab_size"]))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    gguf.SpecialVocab(folder, load_merges=False).add_to_gguf(writer)  # bos/eos/pad ids and chat_template.jinja
    written = 0
    for hf_name, value in tensors.items():
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
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {"file": str(target), "tensors": written, "architecture": gguf.MODEL_ARCH_NAMES[arch]}
