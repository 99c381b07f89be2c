"""The kit's tokenizer: a byte-level BPE trained in code on text generated in code.

Pre-tokenization splits letter runs, digit runs and everything else before the
byte-level step (which runs without its own regex), so a word is the same
token wherever it stands: ``Paris`` in "Weather in Paris?" and in
``{"city": "Paris"}`` share one id. GPT-2-style pre-tokenization would make
``" Paris"`` and ``"Paris"`` different tokens, and a tiny model then never
learns to copy an argument from the ask into the call.
"""

from __future__ import annotations

import functools
import random
from importlib import resources
from typing import TYPE_CHECKING

from whileai.kit import _vocab

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = [
    "ADDED_TOKENS",
    "BOS_TOKEN",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "build_tokenizer",
    "chat_template",
    "corpus",
]

BOS_TOKEN = "<|endoftext|>"
#: Generation stops at the end of a turn, so the end-of-turn token is the eos.
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|pad|>"
#: Control tokens: dropped by ``decode(skip_special_tokens=True)``.
SPECIAL_TOKENS: tuple[str, ...] = (BOS_TOKEN, PAD_TOKEN, "<|im_start|>", EOS_TOKEN)
#: Markup the parser reads back from generated text, so decoding keeps them.
ADDED_TOKENS: tuple[str, ...] = (
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)

#: Letter runs (underscore counts as a letter, so tool names stay whole), digit runs, the rest.
KIT_SPLIT_PATTERN = r"[\p{L}_]+|\p{N}+|[^\p{L}\p{N}_]+"


def chat_template() -> str:
    """The kit's Jinja chat template (``whileai/kit/chat_template.jinja``)."""
    return resources.files("whileai.kit").joinpath("chat_template.jinja").read_text(encoding="utf-8")


def corpus(seed: int = 0, n_sentences: int | None = None) -> list[str]:
    """Training text for the tokenizer, generated in code and deterministic for ``seed``.

    Generic sentences from ``_vocab.GENERIC_WORDS``, every number up to
    ``defaults.KIT_TOKENIZER_MAX_NUMBER``, and the sample task's cities, units and
    tool names in asks, JSON calls and tool responses, each repeated
    ``defaults.KIT_TOKENIZER_TASK_REPEATS`` times so BPE merges them whole.
    """
    from whileai.kit import defaults

    rng = random.Random(seed)
    n = defaults.KIT_TOKENIZER_SENTENCES if n_sentences is None else n_sentences
    words = list(_vocab.GENERIC_WORDS)
    lines: list[str] = []
    for _ in range(n):
        sent = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
        lines.append(sent[0].upper() + sent[1:] + rng.choice([".", "?", "!", ","]))
    task_words = (
        list(_vocab.CITIES)
        + list(_vocab.TEMPERATURE_UNITS)
        + [u for a, b, _ in _vocab.CONVERSIONS for u in (a, b)]
        + list(_vocab.TOOL_WORDS)
        + list(_vocab.TEMPLATE_WORDS)
    )
    for _ in range(defaults.KIT_TOKENIZER_TASK_REPEATS):
        for word in task_words:
            lines.append(f'{{"{rng.choice(_vocab.TOOL_WORDS)}": "{word}"}} {word} in {word}?')
        for num in range(defaults.KIT_TOKENIZER_MAX_NUMBER + 1):
            lines.append(f'{{"amount": {num}}} {num} {rng.choice(words)} {num}.')
    rng.shuffle(lines)
    return lines


def build_tokenizer(seed: int = 0) -> PreTrainedTokenizerFast:
    """Train the kit's tokenizer in code and wrap it with the chat template.

    Deterministic for ``seed``; vocabulary size is ``defaults.KIT_VOCAB_SIZE``.
    Takes about a second.

    >>> tok = build_tokenizer()
    >>> tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
    ...                         add_generation_prompt=True)
    '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
    """
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from whileai.kit import defaults

    tok = Tokenizer.from_str(_trained_json(seed, defaults.KIT_VOCAB_SIZE, defaults.KIT_TOKENIZER_SENTENCES,
                                           defaults.KIT_TOKENIZER_TASK_REPEATS, defaults.KIT_TOKENIZER_MAX_NUMBER))
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        model_max_length=defaults.KIT_MAX_POSITIONS,
        padding_side="left",
        extra_special_tokens={},
    )
    wrapped.chat_template = chat_template()
    return wrapped


@functools.lru_cache(maxsize=4)
def _trained_json(seed: int, vocab_size: int, *recipe: int) -> str:
    """The trained tokenizer as JSON; cached per process (``recipe`` keys the cache on the corpus knobs)."""
    return _train(seed, vocab_size).to_str()


def _train(seed: int, vocab_size: int):
    """Train the byte-level BPE on ``corpus(seed)`` (about a second)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(KIT_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS) + list(ADDED_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    # The markup tokens were reserved as trainer specials (fixed low ids); register them as
    # plain added tokens so decoding with skip_special_tokens keeps them.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tok
