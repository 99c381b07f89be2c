"""BFCL's single-turn categories for tests/test_bfcl.py's agreement test, benchmarks/judge_throughput.py and scripts/bfcl_score.py: its data, its own checker, and candidate replies.

The data and the checker come from the ``bfcl-eval`` wheel when it is
installed (``pip install --no-deps bfcl-eval``: the checker needs none of its
declared dependencies), else from tests/data/bfcl/ (a sample of its four
single-turn categories, and the checker's modules copied unmodified from
bfcl-eval 2026.3.23, Apache-2.0, LICENSE beside them). Either way
``ast_checker`` is BFCL's own code; only its model-config module, whose import
pulls every model handler and their SDKs, is a stand-in naming one model whose
function names had '.' turned into '_' (as BFCL's OpenAI handler does). The
irrelevance categories are not scored by ``ast_checker`` but by the no-call rule
of BFCL's ``eval_runner`` (``_evaluate_single_relevance_entry``): the reply fails
when it decodes to a call and ``utils.is_empty_output`` says it is not empty;
those two functions of ``utils.py`` run from the file's own text.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # also when loaded by path
from _bfcl_checker import installed as _installed  # noqa: E402  (the wheel's folder, or None: one rule for both loaders)

SAMPLE = ROOT / "tests" / "data" / "bfcl"
CATEGORIES = ("simple_python", "multiple", "live_simple", "parallel", "parallel_multiple", "irrelevance")
MODEL = "whileai-wire"


@dataclass
class _StandInConfig:
    underscore_to_dot: bool = True


def data_source() -> str:
    return "bfcl-eval wheel" if _installed() else "tests/data/bfcl sample"


def files(category: str) -> tuple[Path, Path]:
    """(questions, answers) of a category: the wheel's full files, else the committed sample."""
    base = _installed()
    if base is not None:
        data = base / "data"
        return data / f"BFCL_v4_{category}.json", data / "possible_answer" / f"BFCL_v4_{category}.json"
    return SAMPLE / f"BFCL_v4_{category}.json", SAMPLE / "possible_answer" / f"BFCL_v4_{category}.json"


def load_checker() -> Any:
    """BFCL's ``ast_checker`` module (unmodified), with the model-config stand-in in place."""
    config = types.ModuleType("bfcl_eval.constants.model_config")
    config.MODEL_CONFIG_MAPPING = {MODEL: _StandInConfig()}
    if _installed() is not None:
        sys.modules["bfcl_eval.constants.model_config"] = config
        return importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    vendored = SAMPLE / "checker"
    for name in ("bfcl_eval", "bfcl_eval.constants", "bfcl_eval.eval_checker", "bfcl_eval.eval_checker.ast_eval",
                 "bfcl_eval.eval_checker.ast_eval.type_convertor"):
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules.setdefault(name, package)
    sys.modules["bfcl_eval.constants.model_config"] = config
    for name, file in (("bfcl_eval.constants.enums", "enums.py"),
                       ("bfcl_eval.constants.type_mappings", "type_mappings.py"),
                       ("bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter", "java_type_converter.py"),
                       ("bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter", "js_type_converter.py"),
                       ("bfcl_eval.eval_checker.ast_eval.ast_checker", "ast_checker.py")):
        if name not in sys.modules or not hasattr(sys.modules[name], "__file__"):
            spec = importlib.util.spec_from_file_location(name, vendored / file)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    return sys.modules["bfcl_eval.eval_checker.ast_eval.ast_checker"]


def load_no_call_rule() -> Any:
    """BFCL's ``is_empty_output`` (with the check it calls), executed from ``utils.py``'s own source.

    The module's imports need the rest of the package (file locks, prompts, configs), so only the two
    function definitions are taken from its text, unmodified.
    """
    base = _installed()
    source = (base / "utils.py" if base is not None else SAMPLE / "checker" / "utils.py").read_text(encoding="utf-8")
    wanted = {"is_function_calling_format_output", "is_empty_output"}
    tree = ast.parse(source)
    body = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in wanted]
    assert {node.name for node in body} == wanted, "BFCL's utils.py no longer defines the no-call rule"
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=body, type_ignores=[]), "bfcl_eval/utils.py", "exec"), namespace)
    return namespace["is_empty_output"]


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---------------------------------------------------------------------------
# Candidate replies of every kind
# ---------------------------------------------------------------------------


def _calls(gold: dict[str, Any]) -> list[dict[str, Any]]:
    return list(gold["parallel"]) if "parallel" in gold else [gold]


def _props(row: dict[str, Any], name: str) -> dict[str, Any]:
    for tool in row["tools"]:
        if tool["function"]["name"] == name:
            return tool["function"]["parameters"].get("properties") or {}
    return {}


def _swap(calls: list[dict[str, Any]], index: int, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    out = [{"name": c["name"], "arguments": dict(c["arguments"])} for c in calls]
    out[index]["arguments"] = arguments
    return out


def _string_variants(text: str) -> list[str]:
    return [v for v in (text.upper(), text.lower(), text.title(), text.replace(" ", ""), text + ".",
                        text.replace(" ", "-"), " " + text) if v != text]


NO_CALL_KINDS = ("no call", "empty reply", "malformed call", "offered function called", "called without arguments",
                 "unoffered function called", "two calls", "text and a call")


def no_call_replies(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, reply text) candidates for an irrelevance row: replies without a call, and calls of every shape."""
    fn = row["tools"][0]["function"]
    props = fn["parameters"].get("properties") or {}
    sample = {"integer": 3, "number": 2.5, "boolean": True, "array": [1, 2], "object": {"a": 1}}
    args = {k: sample.get(v.get("type"), "x") for k, v in props.items() if k in (fn["parameters"].get("required") or [])}
    call = reply_text([{"name": fn["name"], "arguments": args}])
    return [("no call", "I cannot help with that using these functions."),
            ("empty reply", ""),
            ("malformed call", '<tool_call>{"name": "' + fn["name"] + '", "arguments": {broken</tool_call>'),
            ("offered function called", call),
            ("called without arguments", reply_text([{"name": fn["name"], "arguments": {}}])),
            ("unoffered function called", reply_text([{"name": "zz_unknown", "arguments": {"q": 1}}])),
            ("two calls", call + "\n" + call),
            ("text and a call", "Let me try. " + call)]


def replies(row: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(kind, calls) candidates for a converted BFCL row: every kind of the agreement test."""
    gold = row["gold"]
    ref = [{"name": c["name"], "arguments": dict(c["arguments"])} for c in _calls(gold)]
    out: list[tuple[str, list[dict[str, Any]]]] = [("reference", ref)]
    for i, call in enumerate(_calls(gold)):
        args = ref[i]["arguments"]
        props = _props(row, call["name"])
        optional = set(call.get("optional") or [])
        for key, acceptable in (call.get("values") or {}).items():
            for value in acceptable:
                if key in args and value != args[key] or type(value) is not type(args.get(key)):
                    if key in args or key in optional:
                        out.append(("other acceptable value", _swap(ref, i, {**args, key: value})))
        for key in optional:
            if key in args:
                out.append(("optional omitted", _swap(ref, i, {k: v for k, v in args.items() if k != key})))
            elif (call.get("values") or {}).get(key):
                out.append(("optional given", _swap(ref, i, {**args, key: call["values"][key][0]})))
        for key, value in args.items():
            kind = (props.get(key) or {}).get("type")
            if type(value) is int:
                out.append(("numeric spelling", _swap(ref, i, {**args, key: float(value)})))
            elif type(value) is float and value.is_integer():
                out.append(("numeric spelling", _swap(ref, i, {**args, key: int(value)})))
            if kind == "integer" and type(value) is int:
                out.append(("numeric spelling", _swap(ref, i, {**args, key: str(value)})))
            if isinstance(value, str) and value:
                for variant in _string_variants(value)[:3]:
                    out.append(("string variant", _swap(ref, i, {**args, key: variant})))
            out.append(("wrong value", _swap(ref, i, {**args, key: _wrong(value)})))
            if key not in optional:
                out.append(("missing argument", _swap(ref, i, {k: v for k, v in args.items() if k != key})))
        out.append(("extra argument", _swap(ref, i, {**args, "zz_extra": 1})))
        names = [t["function"]["name"] for t in row["tools"] if t["function"]["name"] != call["name"]]
        wrong = copy.deepcopy(ref)
        wrong[i]["name"] = names[0] if names else call["name"] + "_v2"
        out.append(("wrong function", wrong))
    if len(ref) > 1:
        out.append(("parallel reordered", list(reversed(ref))))
        out.append(("parallel reordered", ref[1:] + ref[:1]))
        out.append(("parallel partial", ref[:1]))
        out.append(("parallel partial", ref[:-1]))
    return out


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 17
    if isinstance(value, str):
        return value + " zzq"
    if isinstance(value, list):
        return value + ["zzq"]
    if isinstance(value, dict):
        return {**value, "zzq": "zzq"}
    return "zzq"


def reply_text(calls: list[dict[str, Any]]) -> str:
    """The reply as the kit's chat template writes calls (what the model generates)."""
    return "\n".join("<tool_call>" + json.dumps({"name": c["name"], "arguments": c["arguments"]}, ensure_ascii=False)
                     + "</tool_call>" for c in calls)


def bfcl_verdict(checker: Any, entry: dict[str, Any], answer: dict[str, Any] | None, category: str, text: str,
                 no_call_rule: Any = None) -> bool:
    """BFCL's verdict on the reply text, parsed by the kit's parser (both judges read the same calls).

    An irrelevance category takes BFCL's no-call rule (``no_call_rule``: ``load_no_call_rule()``) on the
    calls as BFCL's function-calling handler decodes them (``{name: json.loads(arguments)}``; a decode
    error means no call); the others ``ast_checker`` against the possible answer.
    """
    from whileai.core.toolcalls import parse_tool_calls

    _, calls = parse_tool_calls(text)
    if "irrelevance" in category:
        try:
            decoded = [{c["function"]["name"]: json.loads(c["function"]["arguments"])} for c in calls]
        except ValueError:
            return True  # eval_runner: a reply that does not decode holds no call
        return bool((no_call_rule or load_no_call_rule())(decoded))
    output = [{c["function"]["name"]: json.loads(c["function"]["arguments"])} for c in calls]
    assert answer is not None, f"{category} needs its possible answer"
    result = checker.ast_checker(entry["function"], output, answer["ground_truth"], checker.Language.PYTHON,
                                 category, MODEL)
    return bool(result["valid"])


def cases(category: str) -> list[dict[str, Any]]:
    """Every candidate reply of a category: {kind, row, entry, answer, text}."""
    from whileai.simulations.datasets import from_bfcl

    questions, answers = files(category)
    rows = from_bfcl(questions, answers)
    entries = {e["id"]: e for e in read(questions)}
    out = []
    if "irrelevance" in category:  # no possible-answer file: the reply must make no call
        for row in rows:
            for kind, text in no_call_replies(row):
                out.append({"kind": kind, "row": row, "entry": entries[row["task_id"]], "answer": None, "text": text})
        return out
    truth = {a["id"]: a for a in read(answers)}
    for row in rows:
        for kind, calls in replies(row):
            out.append({"kind": kind, "row": row, "entry": entries[row["task_id"]], "answer": truth[row["task_id"]],
                        "text": reply_text(calls)})
    return out
