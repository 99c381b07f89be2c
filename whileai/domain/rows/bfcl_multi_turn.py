"""BFCL's multi-turn categories as episodes: each entry's user turns, starting state and ground truth.

A multi-turn entry is played against BFCL's stateful Python backends (a file system, a trading bot, ...),
several user turns in a row, so it is not a one-reply row (``from_bfcl`` refuses it by name). This module
reads a category's question and possible-answer files into :class:`MultiTurnEntry` objects, which the BFCL
environment (``whileai.domain.episodes.bfcl``) plays and the episode judge
(``whileai.domain.judges.bfcl_multi_turn``) scores. Nothing here imports bfcl-eval; the files come from its data
folder (``bfcl_data_folder()``) or any folder laid out the same way.

Held out: the four categories ask variants of the same 200 scenarios (``multi_turn_base_7``,
``multi_turn_miss_func_7``, ``multi_turn_long_context_7`` and ``multi_turn_miss_param_7`` share their
starting state and most turns), so the split is by scenario number and fixed by a hash of it
(BFCL_MULTI_TURN_HOLDOUT): a held-out scenario is held out in every category and in every subset of the
data, and :func:`episode_rows` refuses to hand it to training.

    entries = read_multi_turn(bfcl_data_folder(), ["multi_turn_base"], split="train")
    rows = episode_rows(entries)    # TRL dataset rows: prompt, environment, task_id, category, bfcl_entry
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from whileai.core.errors import RowFormatError
from whileai.domain import defaults

__all__ = ["BFCL_MULTI_TURN_CATEGORIES", "BFCL_BACKEND_CLASSES", "MultiTurnEntry", "read_multi_turn",
           "read_func_docs", "is_held_out", "episode_rows", "environment_name", "parse_environment_name",
           "multi_turn_shape", "categories_problem"]

#: BFCL's executable multi-turn categories (bfcl-eval 2026.3.23, data/BFCL_v4_<category>.json)
BFCL_MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                              "multi_turn_long_context")
#: The backends those categories involve, with the file of each one's function docs (bfcl-eval's
#: constants/executable_backend_config.py, MULTI_TURN_FUNC_DOC_FILE_MAPPING)
BFCL_BACKEND_CLASSES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json"}
_ID = re.compile(r"^(?P<category>multi_turn_[a-z_]+)_(?P<scenario>\d+)$")
Split = Literal["train", "holdout", "all"]


@dataclass(frozen=True)
class MultiTurnEntry:
    """One BFCL multi-turn question with its ground truth.

    ``turns[i]`` is the user's messages opening turn ``i`` (empty where a miss_func turn only adds
    functions); ``ground_truth[i]`` the calls BFCL's answer makes in that turn, as Python call text
    (``"cd(folder='docs')"``; empty where the model should ask instead of act); ``missed_functions`` maps
    a turn to the functions withheld until it.
    """

    id: str
    turns: list[list[dict[str, str]]]
    initial_config: dict[str, Any]
    involved_classes: tuple[str, ...]
    ground_truth: list[list[str]]
    missed_functions: dict[int, tuple[str, ...]] = field(default_factory=dict)

    @property
    def category(self) -> str:
        """BFCL's reading of the id: everything before the last ``_`` (``multi_turn_base``)."""
        return self.id.rsplit("_", 1)[0]

    @property
    def scenario(self) -> int:
        """The scenario number the four categories share (``7`` for ``multi_turn_miss_func_7``)."""
        return int(self.id.rsplit("_", 1)[1])

    @property
    def long_context(self) -> bool:
        """Whether BFCL loads this entry's backends with their long-context padding (its id's rule)."""
        return "long_context" in self.category or "composite" in self.category

    @property
    def held_out(self) -> bool:
        return is_held_out(self.scenario)

    def withheld(self, turn: int) -> set[str]:
        """The functions not yet offered at ``turn``: those a later turn adds."""
        return {name for at, names in self.missed_functions.items() if at > turn for name in names}

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "question": self.turns, "initial_config": self.initial_config,
                           "involved_classes": list(self.involved_classes), "ground_truth": self.ground_truth,
                           "missed_function": {str(k): list(v) for k, v in self.missed_functions.items()}},
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> MultiTurnEntry:
        """An entry from :meth:`to_json`'s text, or from BFCL's question line merged with its answer's."""
        data = json.loads(text) if isinstance(text, str) else text
        problem = _entry_problem(data)
        if problem:
            raise RowFormatError(f"a BFCL multi-turn entry {problem}", [{"row": data.get("id"), "detail": problem}])
        return cls(id=str(data["id"]), turns=[list(t) for t in data["question"]],
                   initial_config=dict(data.get("initial_config") or {}),
                   involved_classes=tuple(data["involved_classes"]),
                   ground_truth=[list(t) for t in data["ground_truth"]],
                   missed_functions={int(k): tuple(v) for k, v in (data.get("missed_function") or {}).items()})


def _entry_problem(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return f"is a JSON object, not {type(data).__name__}"
    missing = [k for k in ("id", "question", "involved_classes", "ground_truth") if k not in data]
    if missing:
        return f"{data.get('id', '(no id)')!r} lacks {', '.join(missing)}"
    if not _ID.match(str(data["id"])):
        return f"id {data['id']!r} is not <multi_turn category>_<number> (e.g. multi_turn_base_0)"
    unknown = [c for c in data["involved_classes"] if c not in BFCL_BACKEND_CLASSES]
    if unknown:
        return f"{data['id']!r} involves {unknown}; the multi-turn backends are {', '.join(BFCL_BACKEND_CLASSES)}"
    if len(data["question"]) != len(data["ground_truth"]):
        return (f"{data['id']!r} has {len(data['question'])} user turns but {len(data['ground_truth'])} ground-truth "
                "turns; BFCL pairs them one to one")
    return None


def multi_turn_shape(question: Mapping[str, Any], answer: Mapping[str, Any] | None = None) -> bool:
    """Whether a BFCL question (and answer) line is a multi-turn one: it names backends to load, or its
    ground truth is turns of call texts rather than calls. ``from_bfcl`` uses it to refuse such a file by name."""
    if "involved_classes" in question or "initial_config" in question:
        return True
    truth = (answer or {}).get("ground_truth")
    return isinstance(truth, list) and bool(truth) and all(isinstance(t, list) for t in truth)


def is_held_out(scenario: int) -> bool:
    """Whether BFCL scenario ``scenario`` is in the held-out split (the same answer in every category).

    A hash of the number, compared with BFCL_MULTI_TURN_HOLDOUT: fixed, independent of which entries are read.
    """
    digest = hashlib.sha256(f"bfcl-multi-turn:{scenario}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < defaults.BFCL_MULTI_TURN_HOLDOUT


def _lines(path: Path, what: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"BFCL {what} file {str(path)!r} does not exist; pass bfcl-eval's data folder "
                                "(`pip install --no-deps bfcl-eval`, then bfcl_data_folder()) or a folder laid out "
                                "like it: BFCL_v4_<category>.json, possible_answer/, multi_turn_func_doc/")
    out = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as err:
            raise RowFormatError(f"{path}:{line_no}: not JSON ({err}); each line of a BFCL {what} file is one object",
                                 [{"row": None, "line": line_no, "path": str(path), "detail": str(err)}]) from None
    return out


def categories_problem(categories: Sequence[str]) -> str | None:
    """Why ``categories`` cannot be read as multi-turn episodes (none named, or one that is not a multi-turn category,
    with the nearest name), or None."""
    import difflib

    if not categories:
        return f"name at least one multi-turn category: {', '.join(BFCL_MULTI_TURN_CATEGORIES)}"
    wrong = []
    for category in categories:
        if category not in BFCL_MULTI_TURN_CATEGORIES:
            near = difflib.get_close_matches(category, BFCL_MULTI_TURN_CATEGORIES, n=1, cutoff=0.6)
            wrong.append(f"{category!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    if not wrong:
        return None
    return (f"{', '.join(wrong)} is not a BFCL multi-turn category; the ones read as episodes: "
            f"{', '.join(BFCL_MULTI_TURN_CATEGORIES)} (single-turn categories: from_bfcl / from_bfcl_folder)")


def read_multi_turn(folder: str | os.PathLike[str], categories: Sequence[str] = BFCL_MULTI_TURN_CATEGORIES,
                    split: Split = "all") -> list[MultiTurnEntry]:
    """The entries of ``categories`` in ``folder`` (bfcl-eval's ``data`` folder or one laid out like it).

    ``split``: "train" leaves out the held-out scenarios (:func:`is_held_out`), "holdout" keeps only them,
    "all" keeps every entry. Each question is paired with its possible answer by id; a question without
    one is an error naming it.

        entries = read_multi_turn(bfcl_data_folder(), ["multi_turn_base", "multi_turn_miss_func"], "holdout")
    """
    problem = categories_problem(categories)
    if problem:
        raise ValueError(f"read_multi_turn: {problem}")
    if split not in ("train", "holdout", "all"):
        raise ValueError(f"read_multi_turn: split={split!r}; pass 'train' (never the held-out scenarios), "
                         "'holdout' or 'all'")
    base = Path(folder).expanduser()
    entries: list[MultiTurnEntry] = []
    for category in categories:
        questions = _lines(base / f"BFCL_v4_{category}.json", "questions")
        answers = {a.get("id"): a for a in _lines(base / "possible_answer" / f"BFCL_v4_{category}.json", "answers")}
        unanswered = [q.get("id") for q in questions if q.get("id") not in answers]
        if unanswered:
            raise RowFormatError(f"BFCL {category}: question(s) {unanswered[:5]} have no possible answer in "
                                 f"{base / 'possible_answer'}; pass the answer file of the same release",
                                 [{"row": i, "detail": "no possible answer"} for i in unanswered])
        entries += [MultiTurnEntry.from_json({**q, "ground_truth": answers[q["id"]]["ground_truth"]})
                    for q in questions]
    if split == "all":
        return entries
    return [e for e in entries if e.held_out == (split == "holdout")]


def read_func_docs(folder: str | os.PathLike[str], classes: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """BFCL's function docs of each backend class in ``classes`` (``folder/multi_turn_func_doc/<file>.json``):
    what BFCL shows a model for each method, in BFCL's order."""
    base = Path(folder).expanduser() / "multi_turn_func_doc"
    out: dict[str, list[dict[str, Any]]] = {}
    for name in dict.fromkeys(classes):
        if name not in BFCL_BACKEND_CLASSES:
            raise ValueError(f"{name!r} is not a BFCL multi-turn backend; they are {', '.join(BFCL_BACKEND_CLASSES)}")
        out[name] = _lines(base / BFCL_BACKEND_CLASSES[name], "function-doc")
    return out


def environment_name(entry: MultiTurnEntry) -> str:
    """The environment an entry plays in (TRL's ``environment`` column when the factory is a dict): its backends
    and the functions withheld at its first turn, e.g. ``bfcl:GorillaFileSystem+TwitterAPI-sort``."""
    withheld = sorted(entry.withheld(0))
    return "bfcl:" + "+".join(entry.involved_classes) + "".join(f"-{name}" for name in withheld)


def parse_environment_name(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(backend classes, functions withheld at the first turn)`` of an :func:`environment_name`: its inverse, so an
    environment class can be built from a row's ``environment`` column alone. Raises ValueError naming what is wrong.

        parse_environment_name("bfcl:GorillaFileSystem+TwitterAPI-sort")   # (("GorillaFileSystem", "TwitterAPI"), ("sort",))
    """
    head, _, rest = name.partition(":")
    parts = rest.split("-")
    classes = tuple(parts[0].split("+")) if parts[0] else ()
    unknown = [c for c in classes if c not in BFCL_BACKEND_CLASSES]
    if head != "bfcl" or not classes or unknown or not all(parts[1:]):
        raise ValueError(f"{name!r} is not a BFCL environment name: bfcl:<backend>+<backend>...-<withheld function>... "
                         f"(environment_name), the backends among {', '.join(BFCL_BACKEND_CLASSES)}")
    return classes, tuple(parts[1:])


def episode_rows(entries: Sequence[MultiTurnEntry], training: bool = True) -> list[dict[str, Any]]:
    """TRL dataset rows of ``entries``: ``prompt`` (the first turn's messages), ``environment``
    (:func:`environment_name`), ``task_id``, ``category`` and ``bfcl_entry`` (the entry as JSON, which
    ``reset(**row)`` loads). With ``training`` (the default) a held-out entry is refused by id."""
    if training:
        held = [e.id for e in entries if e.held_out]
        if held:
            raise ValueError(f"{len(held)} held-out BFCL entries ({', '.join(held[:5])}{' ...' if len(held) > 5 else ''}) "
                             "were given for training; read the training side with read_multi_turn(..., split='train'), "
                             "or pass training=False to build rows for measuring")
    return [{"prompt": [dict(m) for m in e.turns[0]], "environment": environment_name(e), "task_id": e.id,
             "category": e.category, "bfcl_entry": e.to_json()} for e in entries]
