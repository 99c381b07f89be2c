"""The kit's tiny causal LM: a randomly initialised Llama-style model sized by defaults.KIT_*.

A ``llama`` config (not ``qwen2``) because ``AutoTokenizer`` keeps the
``tokenizer.json`` saved beside a llama config as is, while for a qwen2 config
it rebuilds the tokenizer from vocab and merges and the ids change on reload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

__all__ = ["tiny_config", "tiny_model"]


def tiny_config(tokenizer: PreTrainedTokenizerBase, **overrides: Any):
    """The ``LlamaConfig`` of the tiny model for ``tokenizer``; ``overrides`` replace any field."""
    from transformers import LlamaConfig

    from whileai.kit import defaults

    fields: dict[str, Any] = dict(
        vocab_size=len(tokenizer),
        hidden_size=defaults.KIT_HIDDEN_SIZE,
        intermediate_size=defaults.KIT_INTERMEDIATE_SIZE,
        num_hidden_layers=defaults.KIT_LAYERS,
        num_attention_heads=defaults.KIT_HEADS,
        num_key_value_heads=defaults.KIT_KV_HEADS,
        max_position_embeddings=defaults.KIT_MAX_POSITIONS,
        tie_word_embeddings=defaults.KIT_TIE_EMBEDDINGS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    unknown = sorted(set(overrides) - set(LlamaConfig().to_dict()) - set(fields))
    if unknown:
        raise TypeError(
            f"tiny_model got unknown config fields {unknown}; pass LlamaConfig fields "
            f"such as hidden_size, num_hidden_layers, intermediate_size"
        )
    fields.update(overrides)
    return LlamaConfig(**fields)


def tiny_model(tokenizer: PreTrainedTokenizerBase, seed: int = 0, **overrides: Any) -> LlamaForCausalLM:
    """A randomly initialised tiny ``LlamaForCausalLM`` for ``tokenizer``, deterministic for ``seed``.

    Sizes come from ``defaults.KIT_HIDDEN_SIZE``, ``KIT_LAYERS``, ``KIT_HEADS``,
    ``KIT_KV_HEADS`` and ``KIT_INTERMEDIATE_SIZE``; ``overrides`` replace any
    ``LlamaConfig`` field. Generation stops at the end-of-turn token.

    >>> from whileai.kit import build_tokenizer
    >>> model = tiny_model(build_tokenizer(), num_hidden_layers=1)
    """
    import torch
    from transformers import LlamaForCausalLM

    config = tiny_config(tokenizer, **overrides)
    # Seed a forked RNG so building a model leaves the caller's random state alone.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model
