"""The export gate: tool-call arguments that must round-trip, and replies that must not recite the privileged block."""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any, NotRequired, TypedDict

from whileai.domain.rows.jsonl import dumps, loads, parse_object_fast
from whileai.domain.defaults import LEAK_ID_MIN_CHARS, LEAK_ID_MIN_DIGITS

__all__ = [
    "InvalidCall",
    "RoundtripReport",
    "GateProblem",
    "ENCODINGS",
    "roundtrip_report",
    "argument_problem",
    "privileged_values",
    "find_leaks",
    "Recital",
    "Leak",
    "roundtrip_problem",
    "leak_problem",
    "refusal",
]

class InvalidCall(TypedDict):
    """One tool call whose arguments do not round-trip: where it is (row, conversation key, message, call), the
    call's id and name as the row gives them, a preview of its arguments, and what is wrong with them."""

    row: int
    field: str
    message: int
    call: int
    id: Any
    name: Any
    arguments: str
    problem: str
    output_row: NotRequired[int]  #: the row in the written file, where the export's rows are counted apart


class RoundtripReport(TypedDict):
    """``roundtrip_report``'s answer (``export.tool_call_roundtrip``, the export report's ``roundtrip``): the
    format and its encoding, the rows and calls checked, and the calls that do not round-trip."""

    format: str
    encoding: str
    rows: int
    calls: int
    valid: int
    invalid: list[InvalidCall]
    ok: bool


class Recital(TypedDict):
    """One assistant turn that recites a privileged value (``find_leaks``): the message's index, the privileged
    block's key it came from (None for a bare value), and the longest text recited."""

    message: int
    key: str | None
    recited: str


class Leak(Recital):
    """A recital found in an export's rows (``LeakReport.leaks``): the source row first, and for a preference pair
    the ``side`` it was found on."""

    row: int
    side: NotRequired[str]


class GateProblem(TypedDict):
    """One row the export gate refuses: its index, the kind of problem, what is wrong, and its line in the file
    where the rows came from one."""

    row: int
    kind: str
    detail: str
    line: NotRequired[int | None]


#: format -> the argument encoding its rows must carry
ENCODINGS = {"openai": "json_string", "trl": "dict"}

#: keys of a row that may hold a list of messages (SFT, prompt/completion and preference shapes)
_CONVERSATION_KEYS = ("messages", "prompt", "completion", "chosen", "rejected")

_WORD = re.compile(r"\w+")
_PREVIEW_CHARS = 80


def check_format(format: Any) -> str:
    if format not in ENCODINGS:
        raise ValueError(
            f"format={format!r} is not an export format; accepted: 'openai' (the chat-completions wire row, "
            "arguments as JSON strings) or 'trl' (what TRL's trainers load, arguments as dicts)"
        )
    return format


def argument_problem(arguments: Any, encoding: str) -> str | None:
    """Why these tool-call arguments do not round-trip under the encoding; None when they do."""
    if encoding == "json_string":
        if type(arguments) is str:
            return _string_problem(arguments)
        if isinstance(arguments, dict):
            return "a dict where the OpenAI wire format needs a JSON string"
        return f"a {type(arguments).__name__} where a JSON string belongs"
    if isinstance(arguments, dict):
        return None
    if isinstance(arguments, str):
        problem = _string_problem(arguments)
        if problem is None:
            return "a JSON string where a dict belongs (a chat template would render it quoted twice)"
        return problem
    return f"a {type(arguments).__name__} where a dict belongs"


def _string_problem(text: str) -> str | None:
    try:
        value = loads(text)
    except ValueError:
        return "a string that is not JSON"
    if type(value) is dict:
        return None
    if isinstance(value, str):
        try:
            inner = loads(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            return "double-encoded: a JSON string holding the JSON object"
        return "a JSON string literal, not an object"
    if isinstance(value, list):
        return "a JSON array, not an object"
    if isinstance(value, dict):
        return None
    kind = "null" if value is None else "boolean" if isinstance(value, bool) else "number"
    return f"a JSON {kind}, not an object"


def _preview(arguments: Any) -> str:
    text = arguments if isinstance(arguments, str) else repr(arguments)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 3] + "..."


def roundtrip_report(rows: list[dict], format: str) -> RoundtripReport:
    """Check every tool call of every conversation in the rows; see ``export.tool_call_roundtrip``."""
    encoding = ENCODINGS[check_format(format)]
    wants_string = encoding == "json_string"
    calls = 0
    invalid: list[InvalidCall] = []
    for r, row in enumerate(rows):
        if not isinstance(row, dict):
            continue
        for key in _CONVERSATION_KEYS:
            messages = row.get(key)
            if type(messages) is not list:
                continue
            for m, message in enumerate(messages):
                if type(message) is not dict:
                    continue
                tool_calls = message.get("tool_calls")
                if not tool_calls:
                    continue
                for c, call in enumerate(tool_calls):
                    calls += 1
                    if _plainly_valid(call, wants_string):
                        continue
                    function = call.get("function") if isinstance(call, dict) else None
                    problem: str | None
                    if not isinstance(function, dict) or "arguments" not in function:
                        problem, name, arguments = "no function.arguments", None, None
                    else:
                        name, arguments = function.get("name"), function["arguments"]
                        problem = argument_problem(arguments, encoding)
                    if problem is None:
                        continue
                    invalid.append(
                        {
                            "row": r,
                            "field": key,
                            "message": m,
                            "call": c,
                            "id": call.get("id") if isinstance(call, dict) else None,
                            "name": name,
                            "arguments": _preview(arguments),
                            "problem": problem,
                        }
                    )
    return {
        "format": format,
        "encoding": encoding,
        "rows": len(rows),
        "calls": calls,
        "valid": calls - len(invalid),
        "invalid": invalid,
        "ok": not invalid,
    }


def _plainly_valid(call: Any, wants_string: bool) -> bool:
    """The common case, decided without ``argument_problem``: a JSON-object string (wire) or a dict (TRL).

    False only means "look closer": ``argument_problem`` gives the verdict and
    its wording. A text orjson reads as an object is one for the standard
    library too (orjson accepts less, never more), so the exact re-parse of
    huge integers that ``loads`` does cannot change the verdict.
    """
    if type(call) is not dict:
        return False
    function = call.get("function")
    if type(function) is not dict:
        return False
    arguments = function.get("arguments")
    if not wants_string:
        return type(arguments) is dict
    if type(arguments) is not str:
        return False
    try:
        return type(parse_object_fast(arguments)) is dict
    except ValueError:
        return False


# ---------------------------------------------------------------------------
# Privileged leaks
# ---------------------------------------------------------------------------


def privileged_values(privileged: Any) -> list[tuple[str | None, str]]:
    """(key, value) for each privileged string: the block itself, or each value of a mapping."""
    if isinstance(privileged, str):
        return [(None, privileged)] if privileged.strip() else []
    if isinstance(privileged, dict):
        return [(str(k), v) for k, v in privileged.items() if isinstance(v, str) and v.strip()]
    return []


def _words(text: str) -> list[str]:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return _WORD.findall(text.casefold())


def find_leaks(privileged: Any, messages: list[dict], gold: Any = None) -> list[Recital]:
    """Assistant turns (text or tool-call argument values) that recite a privileged value.

    Two kinds of recital count; case, spacing and punctuation never hide either.
    A run of the value's words, in order, at least ``defaults.LEAK_MIN_WORDS``
    long (the whole value when it is shorter) and at least
    ``defaults.LEAK_MIN_CHARS`` characters. Or any identifier-shaped value in
    the block (letters and digits mixed, at least ``defaults.LEAK_ID_MIN_CHARS``
    of them, or a digit run of at least ``defaults.LEAK_ID_MIN_DIGITS``: a
    booking code, an account number), recited whole at any spacing. A recital
    the policy could have taken from what it was shown before that turn
    (system, user and tool messages) or that is the answer it was asked for (the
    row's ``gold``) is not a leak: repeating a tool result or giving the right
    answer is the task.
    """
    from whileai.domain.defaults import LEAK_MIN_CHARS, LEAK_MIN_WORDS

    secrets = []
    for key, value in privileged_values(privileged):
        words = _words(value)
        identifiers = _identifiers(value)
        if words and len(" ".join(words)) >= LEAK_MIN_CHARS:  # shorter: cannot tell a recital from a shared word
            n = min(LEAK_MIN_WORDS, len(words))
            starts: dict[tuple[str, ...], list[int]] = {}
            for i in range(len(words) - n + 1):
                starts.setdefault(tuple(words[i : i + n]), []).append(i)
            secrets.append((key, words, n, starts, set(words), identifiers))
        elif identifiers:
            secrets.append((key, words, 0, {}, set(), identifiers))
    found: list[Recital] = []
    if not secrets:
        return found
    for m, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        parts = [_words(part) for part in _assistant_parts(message)]
        compacts = joined = None
        shown = shown_compacts = None
        for key, words, n, starts, vocabulary, identifiers in secrets:
            spans = []
            if n:
                for reply in parts:
                    if len(reply) >= n and sum(1 for w in reply if w in vocabulary) >= n:
                        spans.extend(_recitals(words, starts, n, reply, LEAK_MIN_CHARS))
            recited = []
            if identifiers:
                if joined is None:  # one run-together text of the turn: a miss is one substring test per code
                    joined = "\x00".join("".join(reply) for reply in parts).replace("_", "")
                hits = [ident for ident in identifiers if ident[0] in joined]
                if hits:
                    if compacts is None:
                        compacts = [_compact(reply) for reply in parts]
                    recited = [ident for ident in hits if any(_recites(c, ident) for c in compacts)]
            if not spans and not recited:
                continue
            if shown is None:
                shown = [_words(text) for text in _shown_before(messages, m, gold)]
            spans = [span for span in spans if not any(_contains(seen, span) for seen in shown)]
            if recited:
                if shown_compacts is None:
                    shown_compacts = [_compact(seen) for seen in shown]
                # shown in any spelling, even inside a longer word, is shown: the benefit of the doubt
                recited = [ident for ident in recited if not any(ident[0] in c[0] for c in shown_compacts)]
            if spans or recited:
                texts = [" ".join(span) for span in spans] + [ident for ident, _pieces in recited]
                found.append({"message": m, "key": key, "recited": max(texts, key=len)})
    return found


# A value is identifier-shaped when its letters and digits, with the separators a code is written with
# removed, mix letters and digits (QX7-4KP2, SAVE20, 7Q4Z) or make a long digit run (an account or
# phone number). defaults.LEAK_ID_MIN_CHARS and LEAK_ID_MIN_DIGITS say why those lengths.
_ALNUM = re.compile(r"[^\W_]+")
_CODE = re.compile(r"[^\W_]+(?:[-_./][^\W_]+)*")  # one code written with joiners: QX7-4KP2, ab_12.cd, 555-0100
_OTHER_PUNCT = re.compile(r"[^\w\-./]+")  # anything else inside a token separates codes (10:45, a@b)
_EDGE = "\"'()[]{}<>,;:!?.*«»“”‘’"  # punctuation around a token, not part of it
_QUANTITY = re.compile(r"\d{1,4}[^\W\d_]{1,2}")  # 10am, 5km, 2nd, 18c: a number with its unit, not a code
_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")
_HAS_DIGIT = re.compile(r"\d")


def _fold(text: str) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


def _identifier_shaped(compact: str) -> bool:
    if compact.isdigit():
        return len(compact) >= LEAK_ID_MIN_DIGITS
    # letters and digits only, neither all letters nor all digits: both are in it
    return len(compact) >= LEAK_ID_MIN_CHARS and not compact.isalpha() and _QUANTITY.fullmatch(compact) is None


@functools.lru_cache(maxsize=4096)  # the rollouts of one task share their privileged block
def _identifiers(value: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """The identifier-shaped values in a privileged text: each as its casefolded letters and digits run
    together, with the pieces the value itself wrote apart (QX7-4KP2: qx7 and 4kp2).

    Read token by token (whitespace split, in C): prose words are skipped with
    one ``isalpha``, so a note costs little more than its split. Digit groups in
    a row (4417 1234 5678 9113) join into one run; a comma or semicolon ends it.
    """
    if _HAS_DIGIT.search(value) is None:
        return ()
    found: dict[str, frozenset[str]] = {}
    run: list[str] = []

    def end_run() -> None:
        if len(run) > 1:
            digits = "".join(run)
            if _identifier_shaped(digits):
                found.setdefault(digits, frozenset())
        run.clear()

    for token in _fold(value).split():
        core = token.strip(_EDGE)
        if not core or core.isalpha():
            end_run()
            continue
        for code in (core,) if _CODE.fullmatch(core) else _OTHER_PUNCT.split(core):
            if not code or _DATE.fullmatch(code):
                end_run()
                continue
            pieces = _ALNUM.findall(code)
            if not pieces:
                continue
            if all(piece.isdigit() for piece in pieces):
                run.extend(pieces)
            else:
                end_run()
            whole = "".join(pieces)
            if _identifier_shaped(whole):
                found.setdefault(whole, frozenset(pieces))
            if len(pieces) > 1:
                for piece in pieces:
                    if _identifier_shaped(piece):
                        found.setdefault(piece, frozenset((piece,)))
        if token[-1:] in ",;":
            end_run()
    end_run()
    return tuple(found.items())


def _compact(words: list[str]) -> tuple[str, list[str]]:
    """A text's words (from ``_words``) run together, kept with the words so a match can be told to start
    and end on word boundaries."""
    if any("_" in w for w in words):
        words = [piece for w in words for piece in w.split("_") if piece]
    return "".join(words), words


def _recites(compact: tuple[str, list[str]], identifier: tuple[str, frozenset[str]]) -> bool:
    """Whether the run-together text holds the identifier whole, on word boundaries, at any spacing.

    Spacing may split the identifier anywhere except to set a word of three or
    more letters apart that the value did not write apart itself: "q x 7 4 k p
    2" and "ba 2490" recite QX74KP2 and BA2490, "You save 20 percent" does not
    recite SAVE20.
    """
    ident, pieces = identifier
    text, words = compact
    pos = text.find(ident)
    if pos < 0:
        return False
    starts: dict[int, int] = {}
    offset = 0
    for i, w in enumerate(words):
        starts[offset] = i
        offset += len(w)
    starts[offset] = len(words)
    while pos >= 0:
        first, last = starts.get(pos), starts.get(pos + len(ident))
        if first is not None and last is not None:
            covered = words[first:last]
            if len(covered) == 1 or not any(
                len(w) >= 3 and w.isalpha() and w not in pieces for w in covered
            ):
                return True
        pos = text.find(ident, pos + 1)
    return False


def _assistant_parts(message: dict) -> list[str]:
    """The turn's text and the values of its tool-call arguments (keys are structure, not content)."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.extend(_argument_values(function.get("arguments")))
    return parts


def _argument_values(arguments: Any) -> list[str]:
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments)
        except ValueError:
            return [arguments]
    if isinstance(arguments, dict):
        return [text for value in arguments.values() for text in _argument_values(value)]
    if isinstance(arguments, list):
        return [text for value in arguments for text in _argument_values(value)]
    if isinstance(arguments, str):
        return [arguments]
    return [] if arguments is None else [dumps(arguments)]


def _shown_before(messages: list[dict], m: int, gold: Any) -> list[str]:
    """Texts the policy was shown before turn m, and the answer it was asked for."""
    texts = [msg.get("content") or "" for msg in messages[:m] if msg.get("role") != "assistant"]
    if isinstance(gold, dict):
        if isinstance(gold.get("answer"), str):
            texts.append(gold["answer"])
        texts.extend(_argument_values(gold.get("arguments")))
    return texts


def _recitals(secret: list[str], starts: dict[tuple[str, ...], list[int]], n: int, reply: list[str], min_chars: int):
    """Maximal runs of the secret's words that appear in the reply and are long enough to count."""
    spans = []
    for j in range(len(reply) - n + 1):
        for i in starts.get(tuple(reply[j : j + n]), ()):
            length = n
            while i + length < len(secret) and j + length < len(reply) and secret[i + length] == reply[j + length]:
                length += 1
            span = secret[i : i + length]
            if len(" ".join(span)) >= min_chars:
                spans.append(span)
    return spans


def _contains(words: list[str], span: list[str]) -> bool:
    size = len(span)
    first = span[0]
    return any(words[k] == first and words[k : k + size] == span for k in range(len(words) - size + 1))


# ---------------------------------------------------------------------------
# Problems and the refusal
# ---------------------------------------------------------------------------


def roundtrip_problem(bad: InvalidCall) -> GateProblem:
    """A report problem for one invalid call of ``roundtrip_report`` (its ``row`` already the source row)."""
    where = f"{bad['field']}[{bad['message']}].tool_calls[{bad['call']}]"
    return {"row": bad["row"], "kind": "roundtrip",
            "detail": f"{where} {bad['name']!r}: {bad['problem']}: {bad['arguments']}"}


def leak_problem(leak: Leak) -> GateProblem:
    """A report problem for one recital found by ``find_leaks`` (with its ``row``, and ``side`` for pairs)."""
    side = f"{leak['side']} " if "side" in leak else ""
    key = f" (privileged[{leak['key']!r}])" if leak["key"] is not None else ""
    return {"row": leak["row"], "kind": "privileged_leak",
            "detail": f"{side}messages[{leak['message']}] recites the privileged block{key}: {leak['recited']!r}"}


def refusal(problems: list[GateProblem], fmt: str) -> str:
    from whileai.domain.defaults import EXPORT_PROBLEMS_IN_MESSAGE

    kinds: dict[str, int] = {}
    for problem in problems:
        kinds[problem["kind"]] = kinds.get(problem["kind"], 0) + 1
    counts = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    shown = []
    for p in problems[:EXPORT_PROBLEMS_IN_MESSAGE]:
        where = f"row {p['row']}" + (f" (line {p['line']})" if p.get("line") else "")
        shown.append(f"  {where}: {p['kind']}: {p['detail']}")
    if len(problems) > len(shown):
        shown.append(f"  ... and {len(problems) - len(shown)} more (see .problems)")
    rows = len({p["row"] for p in problems})
    encoding = ENCODINGS[fmt]
    return (
        f"export refused, nothing written: {rows} row(s) failed the gate ({counts}; format={fmt!r}, "
        f"arguments checked as {encoding}):\n" + "\n".join(shown) + "\nFix those rows, or pass validate=False "
        "to write anyway and read report['problems']."
    )
