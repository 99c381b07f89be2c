"""Surface features of a completion that a proxy reward might pay for.

A completion's features are its word n-grams (1 to MONITOR_NGRAM_MAX words,
lower-cased), its format markers (``format:markdown_header``,
``format:bullet_list``, ``format:all_caps``, ``format:emoji``, ``format:think``,
``format:json``, ...) and its trailing phrase (``trailing:<last words>``). The
feature scan asks which of them predict proxy reward beyond gold; an endorsed
feature (a format the trainer means to teach) is named either as a marker
(``"think"`` or ``"format:think"``) or as any literal text (``"<answer>"``),
matched case-insensitively.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from itertools import islice
from collections.abc import Callable, Sequence

import numpy as np

from whileai.domain import defaults

__all__ = [
    "MARKERS",
    "features_of",
    "marker_presence",
    "endorsed_detectors",
    "excluded_by_endorsed",
    "FeatureIndex",
    "identical_columns",
    "completion_text",
]

_WORD = re.compile(r"\w+(?:'\w+)?")
_FENCE_JSON = re.compile(r"```\s*json", re.IGNORECASE)
_JSON_OBJECT = re.compile(r"\{[^{}]*\"[^\"]+\"\s*:[^{}]*\}")


def _looks_json(text: str) -> bool:
    if "{" not in text and "[" not in text and "```" not in text:
        return False
    if _FENCE_JSON.search(text):
        return True
    stripped = text.strip()
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        try:
            json.loads(stripped)
            return True
        except ValueError:
            pass
    return bool(_JSON_OBJECT.search(text))


def _marker(pattern: str, needles: str | None = None, gate: Callable[[str], bool] | None = None) -> Callable[[str], bool]:
    """A test for ``pattern``, run only when one of ``needles`` (characters/strings) or ``gate`` says it can match."""
    compiled = re.compile(pattern)
    keys = tuple(needles.split()) if needles else ()

    def test(text: str) -> bool:
        if keys and not any(key in text for key in keys):
            return False
        if gate is not None and not gate(text):
            return False
        return compiled.search(text) is not None

    return test


def _has_upper(text: str) -> bool:
    return text != text.lower()


#: Format markers: name -> test on the raw completion text. Each regex runs only
#: after a cheap substring check says it could match (most text has no markers).
MARKERS: dict[str, Callable[[str], bool]] = {
    "format:markdown_header": _marker(r"(?m)^[ \t]{0,3}#{1,6}[ \t]+\S", "#"),
    "format:bullet_list": _marker(r"(?m)^[ \t]*(?:[-*+\u2022]|\d{1,2}[.)])[ \t]+\S", "- * + \u2022 . )"),
    "format:bold": _marker(r"\*\*[^*\n]+\*\*|__[^_\n]+__", "** __"),
    "format:all_caps": _marker(r"\b[A-Z]{3,}(?:\s+[A-Z]{3,})+\b|\b[A-Z]{6,}\b", gate=_has_upper),
    "format:emoji": _marker("[\U0001F300-\U0001FAFF\U0001F000-\U0001F2FF\u2600-\u27BF]",
                            gate=lambda text: not text.isascii()),
    "format:think": _marker(r"(?i)</?think>", "think THINK Think"),
    "format:json": _looks_json,
    "format:code_block": _marker(r"```", "```"),
    "format:tool_call": _marker(r"<tool_call>", "<tool_call>"),
    "format:exclamation": _marker(r"!\s*$|!!", "!"),
    "format:question": _marker(r"\?\s*$", "?"),
    "format:url": _marker(r"https?://", "http"),
}


#: Every marker needs one of these; text without any (most plain prose of short
#: answers) skips the marker tests altogether.
_TRIGGER = re.compile(r"[#*+\u2022.)_!?{\[`<]|-|http|[A-Z]{3}|[^\x00-\x7f]")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())[: defaults.MONITOR_SCAN_MAX_WORDS]


def features_of(text: str) -> frozenset[str]:
    """The set of features present in one completion."""
    words = _words(text)
    found = set(words)
    n_max = defaults.MONITOR_NGRAM_MAX
    for n in range(2, n_max + 1):
        found.update(map(" ".join, zip(*(words[i:] for i in range(n)))))
    if _TRIGGER.search(text):
        found.update(name for name, test in MARKERS.items() if test(text))
    if words:
        found.add("trailing:" + " ".join(words[-n_max:]))
    return frozenset(found)


def marker_presence(texts: Sequence[str]) -> np.ndarray:
    """(texts, len(MARKERS)) presence of each format marker, in MARKERS' order."""
    tests = list(MARKERS.values())
    out = np.zeros((len(texts), len(tests)), dtype=bool)
    for i, text in enumerate(texts):
        if _TRIGGER.search(text):
            out[i] = [test(text) for test in tests]
    return out


def endorsed_detectors(endorsed: Sequence[str]) -> list[Callable[[str], bool]]:
    """One presence test per endorsed name: a marker by name, otherwise the literal text."""
    tests: list[Callable[[str], bool]] = []
    for name in endorsed:
        key = name if name.startswith("format:") else f"format:{name}"
        if key in MARKERS:
            tests.append(MARKERS[key])
        else:
            tests.append(_contains(name.lower()))
    return tests


def _contains(needle: str) -> Callable[[str], bool]:
    """A test for the literal (lower-cased) ``needle`` in a text, case-insensitively."""
    return lambda text: needle in text.lower()


def excluded_by_endorsed(endorsed: Sequence[str]) -> Callable[[str], bool]:
    """A test for scan features that are an endorsed feature or part of its text.

    A marker is excluded by its name; an n-gram by being a run of the endorsed
    literal's words (``"<think>"`` excludes the word ``think``); a trailing
    phrase by being one.
    """
    names: set[str] = set()
    phrases: list[str] = []
    for name in endorsed:
        key = name if name.startswith("format:") else f"format:{name}"
        if key in MARKERS:
            names.add(key)
        words = _words(name.removeprefix("format:"))
        if words:
            phrases.append(" " + " ".join(words) + " ")

    def excluded(feature: str) -> bool:
        if feature in names:
            return True
        text = feature.removeprefix("trailing:")
        if text.startswith("format:"):
            return False
        return any(f" {text} " in phrase for phrase in phrases)

    return excluded


class FeatureIndex:
    """Feature names to integer ids, so each completion is read once and every scan is array work.

    ``encode`` gives a completion's feature ids; ``presence`` builds the scan's
    0/1 matrix from id arrays. Ids only grow, so ``compact`` renumbers the
    features still in use once the index holds far more than them (a long run
    meets new n-grams at every look).
    """

    def __init__(self) -> None:
        self._ids: defaultdict[str, int] = defaultdict()
        self._ids.default_factory = self._ids.__len__
        self._names: list[str] = []

    def __len__(self) -> int:
        return len(self._ids)

    def encode(self, text: str, extra: Sequence[str] = ()) -> np.ndarray:
        """The ids of ``text``'s features, and of ``extra`` (named features read elsewhere: an episode's markers)."""
        found = sorted(features_of(text).union(extra))  # sorted: ids depend on the features alone, never on hashing
        return np.fromiter(map(self._ids.__getitem__, found), dtype=np.int64, count=len(found))

    def name(self, i: int) -> str:
        if len(self._names) < len(self._ids):
            self._names.extend(islice(self._ids, len(self._names), None))
        return self._names[i]

    def presence(self, arrays: Sequence[np.ndarray], *, min_count: int, max_features: int,
                 skip: Callable[[str], bool] | None = None) -> tuple[np.ndarray, list[str], tuple[np.ndarray, np.ndarray]]:
        """(completions, features) 0/1 matrix over features seen in at least ``min_count`` completions.

        At most ``max_features`` columns, the most frequent first (ties by first
        sight, which the data's order alone decides); features ``skip`` refuses are left out. Also
        returns the (row, column) of every 1, which the scan would otherwise search for.
        """
        n = len(arrays)
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            return np.zeros((0, 0), dtype=np.float32), [], (empty, empty)
        flat = np.concatenate(arrays)
        rows = np.repeat(np.arange(n), [len(a) for a in arrays])
        counts = np.bincount(flat, minlength=len(self._ids))
        cand = np.flatnonzero(counts >= min_count)
        names: list[str] = []
        kept: list[int] = []
        for i in cand[np.lexsort((cand, -counts[cand]))].tolist():
            name = self.name(i)
            if skip is None or not skip(name):
                names.append(name)
                kept.append(i)
                if len(kept) == max_features:
                    break
        column = np.full(len(counts), -1, dtype=np.int64)
        column[kept] = np.arange(len(kept))
        c = column[flat]
        ok = c >= 0
        x = np.zeros((n, len(kept)), dtype=np.float32)
        nonzero = (rows[ok], c[ok])
        x[nonzero] = 1.0
        return x, names, nonzero

    def compact(self, arrays: list[np.ndarray], *, slack: int = 4) -> list[np.ndarray] | None:
        """Renumber once the index is ``slack`` times larger than the feature occurrences in ``arrays``.

        Returns the renumbered arrays, or None when nothing changed.
        """
        occurrences = sum(len(a) for a in arrays)
        if len(self._ids) <= slack * occurrences + 10_000:
            return None
        live = np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.int64)
        names = [self.name(int(i)) for i in live]
        remap = np.full(len(self._ids), -1, dtype=np.int64)
        remap[live] = np.arange(len(live))
        self._ids = defaultdict(None, ((name, j) for j, name in enumerate(names)))
        self._ids.default_factory = self._ids.__len__
        self._names = names
        return [remap[a] for a in arrays]


def identical_columns(x: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Columns of ``x`` equal to any column of ``reference`` (features that are an endorsed one in disguise)."""
    if reference.size == 0 or x.size == 0:
        return np.zeros(x.shape[1], dtype=bool)
    same = np.zeros(x.shape[1], dtype=bool)
    for j in range(reference.shape[1]):
        same |= (x == reference[:, [j]]).all(axis=0)
    return same


def completion_text(completion: object) -> str:
    """A completion as text: a string as is; messages as their content, tool calls as JSON blocks."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, (list, tuple)):
        parts: list[str] = []
        for m in completion:
            if not isinstance(m, dict):
                parts.append(str(m))
                continue
            content = m.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
            for call in m.get("tool_calls") or []:
                fn = call.get("function", call) if isinstance(call, dict) else {}
                args = fn.get("arguments")
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False, default=str)
                parts.append(f'<tool_call>{{"name": {json.dumps(fn.get("name"))}, "arguments": {args}}}</tool_call>')
        return "\n".join(parts)
    return "" if completion is None else str(completion)
