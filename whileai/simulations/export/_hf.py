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
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import datasets
import pyarrow as pa
from datasets.features import features as _hf_features

from .. import jsonl

__all__ = ["to_hf_dataset", "ExactJson"]

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
        table[column] = values
        if not native:
            exact[column] = ExactJson()
    if not exact:
        return datasets.Dataset.from_dict(table)
    inferred = datasets.Dataset.from_dict({c: v for c, v in table.items() if c not in exact}).features
    features = datasets.Features({c: exact[c] if c in exact else inferred[c] for c in columns})
    return datasets.Dataset.from_dict(table, features=features)
