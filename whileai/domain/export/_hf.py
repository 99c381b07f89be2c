"""Rows as a ``datasets.Dataset`` that TRL's trainers read back exactly (``export.to_hf_dataset``).

What ``datasets`` does to tool-call rows on its own (measured with datasets 5.2):

- ``Dataset.from_list`` takes its columns from the first row and unifies every
  struct, so each argument dict gains the keys of all the others as None:
  ``{"value": 99}`` beside ``{"city": "Paris"}`` reads back as ``{"city": None,
  "value": 99}``, and a chat template renders the invented keys.
- Its ``Json`` type (``on_mixed_types="use_json"``, and what
  ``load_dataset("json")`` picks for mixed structures) keeps the keys but
  encodes floats with 10 decimal places (``1e-11`` reads back as ``0.0``,
  ``3.141592653589793`` as ``3.1415926536``), parses some 16-17 digit floats one
  unit off, and double-encodes integers past 64 bits.

So each column holding lists or dicts is stored as exact JSON text under the
``ExactJson`` feature, whose decoding (standard JSON, exact) runs wherever
``datasets`` decodes features: indexing, iteration and the first ``map``, which
is where TRL's trainers render the chat template. Scalar columns stay native.

Every ``map`` then writes the decoded values back with Arrow's own inference,
which refuses a key whose JSON type differs between rows (``{"x": 1}`` in one
call, ``{"x": "v0"}`` in another; a schema's ``"default": false`` beside
``"default": "false"``): ``ArrowInvalid: cannot mix ...``. A column Arrow cannot
hold that way gets a representation it can: in conversations, each tool call's
``arguments`` becomes its JSON text (OpenAI's wire form, spelled exactly as a
chat template's ``tojson`` writes it); a ``tools`` column becomes one JSON text
per row (TRL's trainers decode it before rendering). ``decoding_chat_template``
turns arguments text back into the object for templates that only ``tojson``.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import datasets
import pyarrow as pa
from datasets.features import features as _hf_features

from whileai.domain.rows import jsonl

__all__ = ["to_hf_dataset", "ExactJson", "arrow_holds", "arguments_as_text", "decoding_chat_template"]

_FEATURE_NAME = "WhileaiExactJson"


@dataclass
class ExactJson:
    """A ``datasets`` feature: any JSON value, stored as exact JSON text and decoded exactly.

    After a ``map`` that writes the column back (every ``map`` keeps its input
    columns), ``datasets`` stores it with its own inference again, so read the
    rows in the first ``map``, as TRL's trainers do.
    """

    decode: bool = True
    id: str | None = field(default=None, repr=False)
    pa_type: ClassVar[Any] = pa.string()
    _type: str = field(default=_FEATURE_NAME, init=False, repr=False)

    def __call__(self):
        return self.pa_type

    def encode_example(self, value: Any) -> str | None:
        return None if value is None else jsonl.dumps(value)

    def decode_example(self, value: Any, token_per_repo_id: Any = None) -> Any:
        if value is None or not self.decode:
            return value
        return jsonl.loads(value)


# Registered on import, like defining the class: datasets rebuilds features from a saved
# schema by type name, and a worker process that unpickles this feature imports this module.
if _hf_features._FEATURE_TYPES.get(_FEATURE_NAME) is not ExactJson:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # register_feature is marked experimental
        _hf_features.register_feature(ExactJson, _FEATURE_NAME)


def to_hf_dataset(rows: Iterable[Mapping[str, Any]]):
    """A ``datasets.Dataset`` of the rows whose conversations and tool-call arguments read back exactly.

    Hand it to TRL's trainers (``SFTTrainer(train_dataset=...)``,
    ``DPOTrainer``); see this module's docstring for what plain
    ``Dataset.from_list`` and ``load_dataset("json")`` would change. Columns are
    the union of all rows' keys (a missing key reads back as None).

        ds = to_hf_dataset(to_trl(rows))
    """
    rows = [row if isinstance(row, Mapping) else dict(row) for row in rows]
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    table: dict[str, list] = {}
    exact: dict[str, ExactJson] = {}
    for column in columns:
        values = [row.get(column) for row in rows]
        kinds = {type(v) for v in values if v is not None}
        native = len(kinds) <= 1 and kinds <= {str, bool, int, float}
        if native and kinds == {int}:
            native = all(v is None or -(2**63) <= v < 2**63 for v in values)
        if not native and not arrow_holds(values):
            if column == "tools":  # TRL's trainers json.loads a text tools column themselves
                values = [None if v is None else json.dumps(v, ensure_ascii=False) for v in values]
                native = True
            else:
                values = [arguments_as_text(v) for v in values]
        table[column] = values
        if not native:
            exact[column] = ExactJson()
    if not exact:
        return datasets.Dataset.from_dict(table)
    inferred = datasets.Dataset.from_dict({c: v for c, v in table.items() if c not in exact}).features
    features = datasets.Features({c: exact[c] if c in exact else inferred[c] for c in columns})
    return datasets.Dataset.from_dict(table, features=features)


def arrow_holds(values: list[Any]) -> bool:
    """Whether Arrow's own type inference can hold ``values`` as one column (what a ``map`` writes back)."""
    try:
        pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
        return False
    return True


def _text(arguments: Any) -> Any:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def arguments_as_text(value: Any) -> Any:
    """A conversation (a list of messages) with every tool call's arguments as JSON text; other values as given.

    The text is ``json.dumps(arguments, ensure_ascii=False)``, what a chat
    template's ``tojson`` renders, so a template that prints text arguments as
    they are (the kit's, Qwen's) renders the same tokens as from the object.
    """
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        return value
    out = []
    for message in value:
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            message = copy.copy(dict(message))
            message["tool_calls"] = [_call_text(c) for c in calls]
        out.append(message)
    return out


def _call_text(call: Any) -> Any:
    if not isinstance(call, Mapping):
        return call
    fn = call.get("function")
    if isinstance(fn, Mapping) and "arguments" in fn:
        return {**call, "function": {**fn, "arguments": _text(fn["arguments"])}}
    if "arguments" in call:
        return {**call, "arguments": _text(call["arguments"])}
    return call


def _decoded_arguments(messages: Any) -> Any:
    if not isinstance(messages, list):
        return messages
    out = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        if isinstance(calls, list) and calls:
            fixed = []
            for call in calls:
                fn = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
                    try:
                        call = {**call, "function": {**fn, "arguments": json.loads(fn["arguments"])}}
                    except ValueError:
                        pass  # not JSON: rendered as the text it is
                fixed.append(call)
            message = {**message, "tool_calls": fixed}
        out.append(message)
    return out


class decoding_chat_template:
    """Within the block, ``tokenizer.apply_chat_template`` decodes JSON-text arguments and tools first.

    So every chat template renders the row's own objects, including templates
    that write ``arguments | tojson`` without a text branch. The tokenizer is
    restored on exit (nothing is saved with the wrapper).

        with decoding_chat_template(tokenizer):
            trainer = SFTTrainer(..., train_dataset=to_hf_dataset(rows), processing_class=tokenizer)
            trainer.train()
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._had = "apply_chat_template" in vars(tokenizer)

    def __enter__(self) -> Any:
        original = self.tokenizer.apply_chat_template

        def apply_chat_template(conversation: Any, *args: Any, tools: Any = None, **kwargs: Any) -> Any:
            if isinstance(tools, str):
                tools = json.loads(tools)
            if isinstance(conversation, list) and conversation and isinstance(conversation[0], list):
                conversation = [_decoded_arguments(c) for c in conversation]
            else:
                conversation = _decoded_arguments(conversation)
            return original(conversation, *args, tools=tools, **kwargs)

        self._original = original
        self.tokenizer.apply_chat_template = apply_chat_template
        return self.tokenizer

    def __exit__(self, *exc: Any) -> None:
        if self._had:
            self.tokenizer.apply_chat_template = self._original
        else:
            del self.tokenizer.apply_chat_template
