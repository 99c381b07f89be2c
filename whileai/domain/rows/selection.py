"""Profile a set of rollout rows and say which rows each training method can use.

``profile`` counts what is there; ``selection_report`` reads only the profile,
so a pushed dataset can be judged before any model is loaded. Both answer plain
JSON-able dicts (they travel to the platform with a run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from whileai.domain import defaults
from whileai.domain.rows.rowsource import group_by_task

if TYPE_CHECKING:
    from whileai.domain.rows.context import ContextCheck, ContextSummary
    from whileai.domain.rows.datagate import GateReport

__all__ = ["TaskProfile", "RepeatCounts", "DatasetProfile", "Dropped", "SelectionReport", "profile_rows", "selection_report", "dropped_phrase", "pairs_per_task", "samples_the_policy", "METHODS"]

METHODS = ("sft", "grpo", "dpo", "rm")


class TaskProfile(TypedDict):
    """One task of a profile's ``per_task``: its rows, passes, fails, unlabelled rows, outcome, and rows with a gold."""

    task: str
    rows: int
    passed: int
    failed: int
    unlabelled: int
    outcome: str  #: ``mixed``, ``all_pass``, ``all_fail`` or ``unlabelled``
    gold: NotRequired[int]  #: absent from a profile stored before the gold count was kept


class RepeatCounts(TypedDict):
    """A profile's ``repeats``: rows per task, the most frequent size (the larger on a tie), the smallest and the
    largest (each None without rows), and ``sizes`` = {size (its str): tasks}."""

    common: int | None
    min: int | None
    max: int | None
    sizes: dict[str, int]


class DatasetProfile(TypedDict):
    """``profile_rows``' answer (``datasets.profile`` names the keys): what a set of rows holds, counted exactly."""

    dataset: str | None
    rows: int
    tasks: int
    repeats: RepeatCounts
    passed: int
    failed: int
    unlabelled: int
    pass_rate: float | None  #: over labelled rows; None with none
    all_pass_tasks: int
    all_fail_tasks: int
    mixed_tasks: int
    unlabelled_tasks: int
    single_row_tasks: int
    temperatures: list[float]  #: the distinct ``sampling.temperature`` values
    temperature_rows: dict[str, int]  #: temperature (its repr) -> rows
    no_temperature_rows: int
    markers: dict[str, int]  #: marker name -> rows carrying it
    data_gates: GateReport
    per_task: list[TaskProfile]


#: One class of what a method leaves out: its name (``class``), its rows and tasks, and why.
Dropped = TypedDict("Dropped", {"class": str, "rows": int, "tasks": int, "reason": str})



class _Extra(TypedDict, total=False):
    """What a method's selection adds to the report beside the rows and tasks: GRPO's groups and prompts, the gold's
    prompts and source, the preference methods' pairs and pairs per task."""

    groups: int
    prompts: int
    source: str
    pairs: int
    pairs_per_task: int


class _Selected(_Extra):
    """The counts of a selection: the rows and tasks the method uses of those given, the mixed tasks, what the
    method's selection adds (``_Extra``) and every class dropped."""

    method: str
    dataset: str | None
    rows: int
    tasks: int
    rows_given: int
    tasks_given: int
    mixed_tasks: int
    dropped: list[Dropped]


class SelectionReport(_Selected):
    """``selection_report``'s answer: the counts (``_Selected``), what the context check found (``context``, with
    ``base_model``), the one-line ``summary``, and the near-miss pairs a reward model's job adds."""

    context: NotRequired[ContextSummary]
    summary: str
    near_miss_pairs: NotRequired[int]

# Dropped classes, in the order they are attributed: a task falls in the first class that fits.
_REASONS = {
    "failing": "failing rows: SFT clones every row it is given, so the model would learn the failure; "
               "push scored.passes() instead",
    "unlabelled": "rows without a passed label: their outcome is unknown, so whether they teach the task "
                  "cannot be told; grade them first (wai.evaluate)",
    "single_row": "tasks with one row: a group of one has no other rollout to take an advantage against",
    "unanimous_pass": "tasks where every row passed: a unanimous group carries no advantage "
                      "(every reward equals the group mean), so the update is zero",
    "unanimous_fail": "tasks where every row failed: a unanimous group carries no advantage "
                      "(every reward equals the group mean), so the update is zero",
    "unlabelled_tasks": "tasks with no passed label on any row: no pass and no fail to compare; grade them first",
    "no_gold": "tasks without a gold first action: the policy's own samples have nothing to be judged against; "
               "grade the rows with a gold (docs/rows.md)",
    "no_pass": "tasks without a passing row: there is no chosen side for a pair",
    "no_fail": "tasks without a failing row: there is no rejected side for a pair",
    "unpaired": "rows beyond the length-matched pairs of their task (PREFERENCE_PAIRS_PER_TASK pairs per "
                "task, each row used once)",
    "too_long": "longer than the base model's context: the job leaves such an example out rather than cut it "
                "(a truncated row teaches a conversation that was never had); shorten those rows (strip_think, "
                "max_tool_output_chars, fewer turns) or train a base with a longer context",
}

#: GRPO's prompt must leave room for the reply, so its fix names the reply cap too
_GRPO_TOO_LONG = ("prompts whose tokens plus max_completion_length exceed the base model's context: the job "
                  "leaves such a prompt out rather than cut it; shorten those prompts, lower max_completion_length, "
                  "or train a base with a longer context")


def _label(row: Mapping[str, Any]) -> bool | None:
    value = row.get("passed")
    return value if isinstance(value, bool) else None


def _number_key(value: float) -> str:
    return repr(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def profile_rows(rows: list[Mapping[str, Any]], source: str | None = None) -> DatasetProfile:
    """The profile of ``rows`` (see ``datasets.profile`` for the keys)."""
    per_task, task_classes = _task_profiles(rows)
    sizes = Counter(t["rows"] for t in per_task)
    n_pass = sum(t["passed"] for t in per_task)
    n_fail = sum(t["failed"] for t in per_task)
    temperatures, no_temperature, markers = _sampling_counts(rows)
    common = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0] if sizes else None
    return {
        "dataset": source,
        "rows": len(rows),
        "tasks": len(per_task),
        "repeats": {
            "common": common,
            "min": min(sizes) if sizes else None,
            "max": max(sizes) if sizes else None,
            "sizes": {str(k): v for k, v in sorted(sizes.items())},
        },
        "passed": n_pass,
        "failed": n_fail,
        "unlabelled": len(rows) - n_pass - n_fail,
        "pass_rate": n_pass / (n_pass + n_fail) if n_pass + n_fail else None,
        "all_pass_tasks": task_classes["all_pass"],
        "all_fail_tasks": task_classes["all_fail"],
        "mixed_tasks": task_classes["mixed"],
        "unlabelled_tasks": task_classes["unlabelled"],
        "single_row_tasks": sizes.get(1, 0),
        "temperatures": sorted(float(k) for k in temperatures if _is_float(k)),
        "temperature_rows": dict(sorted(temperatures.items())),
        "no_temperature_rows": no_temperature,
        "markers": dict(sorted(markers.items())),
        "data_gates": _gates(rows),
        "per_task": per_task,
    }


def _outcome(passed: int, failed: int) -> str:
    """A task's class from its rows' labels: ``mixed``, ``all_pass``, ``all_fail``, or ``unlabelled`` (neither)."""
    if passed and failed:
        return "mixed"
    if passed:
        return "all_pass"
    if failed:
        return "all_fail"
    return "unlabelled"


def _task_profiles(rows: list[Mapping[str, Any]]) -> tuple[list[TaskProfile], Counter[str]]:
    """Per task (in first-seen order), its rows, passes, fails, unlabelled rows, outcome and rows with a gold; and
    how many tasks fall in each outcome."""
    per_task: list[TaskProfile] = []
    task_classes: Counter[str] = Counter()
    for key, indices in group_by_task(rows).items():
        labels = [_label(rows[i]) for i in indices]
        passed, failed = labels.count(True), labels.count(False)
        unlabelled = len(labels) - passed - failed
        outcome = _outcome(passed, failed)
        task_classes[outcome] += 1
        per_task.append({"task": key, "rows": len(indices), "passed": passed, "failed": failed,
                         "unlabelled": unlabelled, "outcome": outcome,
                         "gold": sum(1 for i in indices if rows[i].get("gold") is not None)})
    return per_task, task_classes


def _sampling_counts(rows: list[Mapping[str, Any]]) -> tuple[Counter[str], int, Counter[str]]:
    """``(temperatures, no_temperature, markers)``: rows per sampling temperature (keyed by its repr), the rows that
    name none, and rows per marker name (the keys of a row's ``markers``)."""
    temperatures: Counter[str] = Counter()
    no_temperature = 0
    markers: Counter[str] = Counter()
    for row in rows:
        sampling = row.get("sampling")
        temp = sampling.get("temperature") if isinstance(sampling, Mapping) else None
        if temp is None:
            no_temperature += 1
        else:
            temperatures[_number_key(temp)] += 1
        row_markers = row.get("markers")
        if isinstance(row_markers, Mapping):
            markers.update(str(k) for k in row_markers)
    return temperatures, no_temperature, markers


def _gates(rows: list[Mapping[str, Any]]) -> GateReport:
    """The data gates' report (tool names and schema types mapped, rows refused with why); see datagate."""
    from whileai.domain.rows.datagate import gate_rows

    _, report = gate_rows([r for r in rows if isinstance(r, Mapping)])
    shown = defaults.EXPORT_PROBLEMS_IN_MESSAGE
    report["refused"] = report["refused"][:shown]
    return report


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _drop(name: str, rows: int, tasks: int, reason: str | None = None) -> Dropped:
    return {"class": name, "rows": rows, "tasks": tasks, "reason": reason or _REASONS[name]}


def _sft(per_task: list[TaskProfile], too_long: Mapping[str, int]) -> tuple[int, int, list[Dropped], _Extra]:
    long = {t["task"]: min(int(too_long.get(t["task"], 0)), t["passed"]) for t in per_task}
    used_rows = sum(t["passed"] - long[t["task"]] for t in per_task)
    used_tasks = sum(1 for t in per_task if t["passed"] > long[t["task"]])
    # a task with no passing row is lost: to "failing" when it has a fail, else to "unlabelled"
    lost_to_fail = sum(1 for t in per_task if not t["passed"] and t["failed"])
    lost_to_unknown = sum(1 for t in per_task if not t["passed"] and not t["failed"])
    # a task whose every passing row is too long for the context is lost to "too_long"
    lost_to_length = sum(1 for t in per_task if t["passed"] and t["passed"] == long[t["task"]])
    dropped = [
        _drop("failing", sum(t["failed"] for t in per_task), lost_to_fail),
        _drop("unlabelled", sum(t["unlabelled"] for t in per_task), lost_to_unknown),
        _drop("too_long", sum(long.values()), lost_to_length),
    ]
    return used_rows, used_tasks, dropped, {}


def _grouped(per_task: list[TaskProfile], too_long: Mapping[str, int]) -> tuple[int, int, list[Dropped], _Extra]:
    classes: dict[str, list[TaskProfile]] = {"single_row": [], "unanimous_pass": [], "unanimous_fail": [],
                                                "unlabelled_tasks": [], "too_long": []}
    used = []
    for t in per_task:
        if t["rows"] == 1:
            classes["single_row"].append(t)
        elif t["outcome"] == "mixed" and too_long.get(t["task"]):
            classes["too_long"].append(t)  # its one prompt does not fit, so the whole group is out
        elif t["outcome"] == "mixed":
            used.append(t)
        elif t["outcome"] == "all_pass":
            classes["unanimous_pass"].append(t)
        elif t["outcome"] == "all_fail":
            classes["unanimous_fail"].append(t)
        else:
            classes["unlabelled_tasks"].append(t)
    dropped = [_drop(name, sum(t["rows"] for t in ts), len(ts), _GRPO_TOO_LONG if name == "too_long" else None)
               for name, ts in classes.items()]
    # the GRPO job prompts once per used task (config balance, on by default) and samples each prompt
    return sum(t["rows"] for t in used), len(used), dropped, {"groups": len(used), "prompts": len(used)}


def _gold(per_task: list[TaskProfile], too_long: Mapping[str, int]) -> tuple[int, int, list[Dropped], _Extra]:
    """Every task with a gold first action: the policy's own samples, judged against it, make the group or the
    pair (GRPO's ``prompt_source="gold"``, DPO's ``pair_source="policy"``/``"policy_gold"``)."""
    classes: dict[str, list[TaskProfile]] = {"no_gold": [], "too_long": []}
    used = []
    for t in per_task:
        # a profile stored before the gold count was kept: its passing rows are the ones a judge has a gold for
        if not t.get("gold", t["passed"]):
            classes["no_gold"].append(t)
        elif too_long.get(t["task"]):
            classes["too_long"].append(t)
        else:
            used.append(t)
    dropped = [_drop(name, sum(t["rows"] for t in ts), len(ts), _GRPO_TOO_LONG if name == "too_long" else None)
               for name, ts in classes.items()]
    return sum(t["rows"] for t in used), len(used), dropped, {"prompts": len(used), "source": "gold"}


def samples_the_policy(method: str, knobs: Mapping[str, Any] | None) -> bool:
    """Whether ``method`` under ``knobs`` draws its groups or pairs from the policy's own samples against each
    task's gold (so any task with a gold serves), rather than from the rows' own passes and fails."""
    knobs = knobs or {}
    return ((method == "grpo" and knobs.get("prompt_source") == "gold")
            or (method == "dpo" and knobs.get("pair_source") in ("policy", "policy_gold")))


def _paired(per_task: list[TaskProfile], per_task_pairs: int,
            too_long: Mapping[str, int]) -> tuple[int, int, list[Dropped], _Extra]:
    classes: dict[str, list[TaskProfile]] = {"no_pass": [], "no_fail": [], "unlabelled_tasks": []}
    pairs = used_tasks = unpaired_rows = long_pairs = long_tasks = 0
    for t in per_task:
        if t["outcome"] == "mixed":
            k = min(t["passed"], t["failed"], per_task_pairs)
            long = min(int(too_long.get(t["task"], 0)), k)
            pairs += k - long
            long_pairs += long
            if long < k:
                used_tasks += 1
            else:
                long_tasks += 1  # every pair of the task is too long for the context
            unpaired_rows += t["rows"] - 2 * k
        elif t["outcome"] == "all_fail":
            classes["no_pass"].append(t)
        elif t["outcome"] == "all_pass":
            classes["no_fail"].append(t)
        else:
            classes["unlabelled_tasks"].append(t)
    dropped = [_drop(name, sum(t["rows"] for t in ts), len(ts)) for name, ts in classes.items()]
    dropped.append(_drop("unpaired", unpaired_rows, 0))
    dropped.append(_drop("too_long", 2 * long_pairs, long_tasks))
    return 2 * pairs, used_tasks, dropped, {"pairs": pairs, "pairs_per_task": per_task_pairs}


def pairs_per_task(method: str, config: Mapping[str, Any] | None, rows: int) -> int | None:
    """The pairs per task a DPO/RM job uses under ``config``: None (PREFERENCE_PAIRS_PER_TASK) when ``balance``
    is on or unset, else every length-matched pair of a task (the job's ``per_task=len(rows)``)."""
    if method in ("dpo", "rm") and config is not None and config.get("balance") is False:
        return max(rows, 1)
    return None


def selection_report(profile: Mapping[str, Any], method: str, per_task: int | None = None,
                     context: ContextCheck | None = None, policy_samples: bool = False) -> SelectionReport:
    """Which rows and tasks ``method`` can use, and every class it drops, with counts and reasons.

    Exact by construction: ``rows + sum(d["rows"] for d in dropped) == rows_given``
    and likewise for tasks (each dropped task is counted under one class only).
    ``context`` is what ``context.check_context`` found for these rows: its
    units too long for the base's context move to the ``too_long`` class, and
    the report keeps it as ``context`` (less the per-task counts). ``policy_samples``
    (:func:`samples_the_policy`): GRPO or DPO draws from the policy's own samples, so
    every task with a gold first action serves, mixed or not.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not a training method; pass one of {', '.join(METHODS)}")
    missing = [k for k in ("rows", "tasks", "per_task", "mixed_tasks") if k not in profile]
    if missing:
        raise ValueError(f"profile lacks {missing}; pass the dict wai.profile(dataset) returns, or the dataset itself")
    tasks = profile["per_task"]
    too_long: Mapping[str, int] = (context.get("by_task") if context else None) or {}
    if method == "sft":
        rows, used_tasks, dropped, extra = _sft(tasks, too_long)
    elif policy_samples and method in ("grpo", "dpo"):
        rows, used_tasks, dropped, extra = _gold(tasks, too_long)
    elif method == "grpo":
        rows, used_tasks, dropped, extra = _grouped(tasks, too_long)
    else:
        k = defaults.PREFERENCE_PAIRS_PER_TASK if per_task is None else per_task
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"per_task={per_task!r} must be a whole number >= 1; pass one, or None for PREFERENCE_PAIRS_PER_TASK")
        rows, used_tasks, dropped, extra = _paired(tasks, k, too_long)
    dropped = [d for d in dropped if d["rows"] or d["tasks"]]
    selected: _Selected = {
        "method": method,
        "dataset": profile.get("dataset"),
        "rows": rows,
        "tasks": used_tasks,
        "rows_given": profile["rows"],
        "tasks_given": profile["tasks"],
        "mixed_tasks": profile["mixed_tasks"],
        **extra,
        "dropped": dropped,
    }
    report: SelectionReport
    if context is None:
        report = {**selected, "summary": ""}
    else:
        kept = cast("ContextSummary", {k: v for k, v in context.items() if k != "by_task"})
        report = {**selected, "context": kept, "summary": ""}
    report["summary"] = _summary(report)
    return report


#: how each dropped class reads in the summary: what the rows are, and of how many tasks
_PHRASES = {
    "failing": "{rows} failing rows",
    "unlabelled": "{rows} unlabelled rows",
    "single_row": "{rows} rows of {tasks} single-row tasks",
    "unanimous_pass": "{rows} rows of {tasks} tasks where every row passed",
    "unanimous_fail": "{rows} rows of {tasks} tasks where every row failed",
    "unlabelled_tasks": "{rows} rows of {tasks} tasks with no label",
    "no_gold": "{rows} rows of {tasks} tasks without a gold",
    "no_pass": "{rows} rows of {tasks} tasks without a pass",
    "no_fail": "{rows} rows of {tasks} tasks without a fail",
    "unpaired": "{rows} rows of the used tasks beyond their {per_task} pair(s) each",
}

#: the too_long class in words, by method: what the job leaves out is rows (sft), prompts (grpo) or pairs
_TOO_LONG_PHRASES = {
    "sft": "{rows} rows longer than the context of {limit} tokens",
    "grpo": "{rows} rows of {tasks} tasks whose prompt plus max_completion_length={cap} exceeds the context of "
            "{limit} tokens",
    "dpo": "{rows} rows of {pairs} pair(s) longer than the context of {limit} tokens",
    "rm": "{rows} rows of {pairs} pair(s) longer than the context of {limit} tokens",
}


def dropped_phrase(d: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    """One dropped class in words: ``148 rows of 37 tasks where every row passed``."""
    if d["class"] == "too_long":
        return _too_long_phrase(d, report)
    text = _PHRASES[d["class"]].format(rows=d["rows"], tasks=d["tasks"], per_task=report.get("pairs_per_task"))
    if d["class"] in ("failing", "unlabelled") and d["tasks"]:
        text += f" ({d['tasks']} tasks lose every row)"
    return text


def _too_long_phrase(d: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    """``3 rows longer than the context of 512 tokens (row 4: 812 tokens, ...)``, the first ones named."""
    method, context = report["method"], report.get("context") or {}
    text = _TOO_LONG_PHRASES[method].format(rows=d["rows"], tasks=d["tasks"], pairs=d["rows"] // 2,
                                            limit=context.get("limit"), cap=context.get("max_completion_length"))
    notes = []
    if d["tasks"] and method != "grpo":
        notes.append(f"{d['tasks']} tasks lose every {'row' if method == 'sft' else 'pair'}")
    shown = context.get("left_out") or []
    if shown:
        named = [("row " if len(u["rows"]) == 1 else "rows ") + "+".join(map(str, u["rows"])) + f": {u['tokens']} tokens"
                 for u in shown]
        notes.append(", ".join(named) + (", ..." if int(context.get("too_long") or 0) > len(shown) else ""))
    return text + (f" ({'; '.join(notes)})" if notes else "")


#: the dropped class whose rows all feed a reward model's near misses: tasks without a failing row (each passing
#: row is a chosen side); "unpaired" stays said, as it also counts failing rows, which make no near miss
_FEEDS_NEAR_MISSES = ("no_fail",)


def _summary(report: Mapping[str, Any], near_misses: tuple[int, int] | None = None) -> str:
    """One line whose every count is what the method's trainer gets (rows, prompts or pairs) and what it leaves out.

    ``near_misses``: ``(pairs made, per passing row)`` a reward model's job adds; those pairs lead the line, and
    the passing rows they are made from are not said to be left out."""
    if near_misses:
        made, per_row = near_misses
        head = (f"{report['method']}: trains on {report.get('pairs', 0) + made} pairs: {made} near-miss pairs "
                f"(near_misses={per_row} per passing row) and {report.get('pairs', 0)} pass-vs-fail pairs "
                f"of {report['rows']} of {report['rows_given']} rows ({report['tasks']} of {report['tasks_given']} "
                "tasks)")
        report = {**report, "dropped": [d for d in report["dropped"] if d["class"] not in _FEEDS_NEAR_MISSES]}
    else:
        head = (f"{report['method']}: uses {report['rows']} of {report['rows_given']} rows "
                f"({report['tasks']} of {report['tasks_given']} tasks)")
        if "prompts" in report:
            knob = "policy_samples" if report["method"] == "dpo" else "generations"
            judged = " and judged against its gold" if report.get("source") == "gold" else ""
            head += f" as {report['prompts']} prompts, one per task, each sampled `{knob}` times{judged}"
        elif "pairs" in report:
            head += f" as {report['pairs']} pass-vs-fail pairs ({report['pairs_per_task']} per task at most)"
    context = report.get("context")
    tail = f"; context not checked: {context['why']}" if context and not context.get("checked") else ""
    tools = (context or {}).get("tool_format") or {}
    if tools.get("used") == "hermes":  # the convention that renders the tools, said where it is not the base's own
        tail += ("; tools rendered in the hermes convention"
                 + ("" if tools.get("renders_tools") else " (the base's chat template drops them)"))
    if not report["dropped"]:
        return head + tail
    return head + "; left out " + ", ".join(dropped_phrase(d, report) for d in report["dropped"]) + tail


def near_miss_count(rows: list[Any], method: str, config: Mapping[str, Any] | None) -> int:
    """The near-miss pairs a reward model's job adds to the rows' pairs (config ``near_misses``; 0 for other methods).

    Counted on ``rows`` as the job draws them (``judges.near_miss_pairs`` with the run's seed).
    """
    near = int((config or {}).get("near_misses") or 0) if method == "rm" else 0
    if not near:
        return 0
    from whileai.domain.judges.judging import near_miss_pairs

    return int(near_miss_pairs(rows, near, int((config or {}).get("seed") or 0))[1]["pairs"])


def with_near_misses(report: SelectionReport, rows: list[Any], method: str,
                     config: Mapping[str, Any] | None, counted: int | None = None) -> SelectionReport:
    """``report`` with the near-miss pairs a reward model's job adds to the rows' pairs (config ``near_misses``).

    As ``near_miss_pairs`` and in the summary (``counted``: ``near_miss_count``'s answer, when already taken);
    any other method or ``near_misses`` 0 leaves it as it is.
    """
    near = int((config or {}).get("near_misses") or 0) if method == "rm" else 0
    if not near:
        return report
    made = near_miss_count(rows, method, config) if counted is None else counted
    report["near_miss_pairs"] = made
    report["summary"] = _summary(report, (made, near))
    return report
