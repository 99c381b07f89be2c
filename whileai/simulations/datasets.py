"""Datasets on the platform: push, delete, cut into train/holdout, profile, and selection reports.

    import whileai.simulations as wai

    ds = wai.push("rollouts.jsonl", name="weather")      # ds.id == "ds_..."
    train, holdout = wai.datasets.cut(ds, holdout=0.2)   # by task, never by row
    prof = wai.profile(train)                            # counts, groups, pass rate
    wai.selection_report(prof, "grpo")["rows"]           # rows GRPO can use

A dataset is stored exactly as pushed, scoped to the account; pushing the same
rows again answers the same id. Every function here that takes "a dataset"
accepts a handle, a ``ds_...`` id, a row list, a ``SimulationData``, a
``ScoredData`` or a JSONL path.
"""

from __future__ import annotations

import json
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from whileai.core.errors import TrainingWarning
from whileai.core.ids import names_id

from whileai.domain import defaults
from whileai.domain.rows.bfcl import (BFCL_AST_CATEGORIES, BFCL_REFUSED_CATEGORIES, bfcl_categories_problem, bfcl_category,
                    bfcl_category_problem, bfcl_data_folder, from_bfcl, from_bfcl_folder)
from whileai.domain.rows.taskkey import prompt_messages
from whileai.domain.rows.rowsource import ACCEPTED_SOURCES, describe_source, group_by_task, rows_of
from whileai.domain.rows.selection import (METHODS, DatasetProfile, SelectionReport, profile_rows, samples_the_policy,
                                           with_near_misses)
from whileai.domain.rows.selection import selection_report as _selection_report

__all__ = [
    "DatasetHandle",
    "push",
    "delete_dataset",
    "get_dataset",
    "list_datasets",
    "load_rows",
    "cut",
    "cut_rows",
    "cut_sides",
    "Cut",
    "split",
    "fixed_split",
    "Split",
    "split_tasks",
    "task_share",
    "moved_text",
    "profile",
    "selection_report",
    "METHODS",
    "from_bfcl",
    "from_bfcl_folder",
    "bfcl_data_folder",
    "BFCL_AST_CATEGORIES",
    "BFCL_REFUSED_CATEGORIES",
    "bfcl_categories_problem",
    "bfcl_category",
    "bfcl_category_problem",
]


class DatasetHandle:
    """A pushed dataset as the platform records it. ``rows`` is the row count; ``load_rows(handle)`` fetches them."""

    def __init__(self, record: Mapping[str, Any]):
        self.record = dict(record)
        self.id: str = record["id"]
        self.name: str | None = record.get("name")
        self.rows: int = int(record.get("rows") or 0)
        self.content_hash: str | None = record.get("content_hash")
        self.split: str | None = record.get("split")
        self.sibling: str | None = record.get("sibling")
        self.created_at = record.get("created_at")

    def __str__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        split = f", {self.split} split of {self.sibling}" if self.split else ""
        return f"{self.id}{label} ({self.rows} rows{split})"

    def __repr__(self) -> str:
        return f"DatasetHandle({self.id!r}, name={self.name!r}, rows={self.rows}, split={self.split!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)


def _client():
    from whileai.domain.client import get_client

    return get_client()


def _dataset_id(dataset: Any) -> str:
    if isinstance(dataset, DatasetHandle):
        return dataset.id
    if isinstance(dataset, Mapping) and isinstance(dataset.get("id"), str):
        return dataset["id"]
    if isinstance(dataset, str) and dataset.startswith("ds_"):
        return dataset
    raise ValueError(f"dataset={dataset!r} is not a pushed dataset; pass the handle push() returned or its 'ds_...' id")


def load_rows(dataset: Any) -> list[dict[str, Any]]:
    """The rows of any accepted dataset form, as a list (fetched from the platform for a pushed one)."""
    return [r if isinstance(r, dict) else dict(r) for r in rows_of(dataset)]


def get_dataset(dataset: Any) -> DatasetHandle:
    """The platform's current record of a pushed dataset (name, row count, split and sibling)."""
    return DatasetHandle(_client().request("GET", f"/datasets/{_dataset_id(dataset)}"))


def list_datasets() -> list[DatasetHandle]:
    """The account's pushed datasets."""
    return [DatasetHandle(r) for r in _client().request("GET", "/datasets")["datasets"]]


def _default_name(source: Any) -> str | None:
    if isinstance(source, (str, Path)):
        return Path(source).stem
    name = getattr(source, "name", None)
    return name if isinstance(name, str) and name else None


def push(source: Any, name: str | None = None) -> DatasetHandle:
    """Store rollout rows on the platform and return the dataset handle (``.id`` is ``ds_...``).

    ``source`` is a row list, ``SimulationData`` (its scrubbed ``rows()``),
    ``ScoredData`` or JSONL path; rows are sent as given, key order included, and
    read back exactly so. Pushing identical rows again answers the existing id.
    Rows that break the row contract raise ``RowFormatError`` and nothing is stored.
    ``name`` defaults to the file's stem or the data's own name.

        ds = wai.push(scored.passes(), name="weather-passes")
    """
    if isinstance(source, DatasetHandle) or names_id(source, "ds"):
        raise ValueError(f"{source} is already pushed; pass rows, a SimulationData, a ScoredData or a JSONL path to push")
    rows = load_rows(source)
    if not rows:
        raise ValueError(f"nothing to push: {describe_source(source) or 'the source'} has no rows; pass {ACCEPTED_SOURCES}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name={name!r} must be a string or None")
    from whileai.domain.rows.rollouts import check_rows

    check_rows(rows)  # a row that breaks the contract is refused here, before anything is stored
    body: dict[str, Any] = {"rows": rows}
    chosen = name if name is not None else _default_name(source)
    if chosen is not None:
        body["name"] = chosen
    return DatasetHandle(_client().request("POST", "/datasets", json=body))


def delete_dataset(dataset: Any) -> dict[str, Any]:
    """Remove a pushed dataset from the account; the inverse of ``push``. Returns ``{"id", "deleted": True}``."""
    return _client().request("DELETE", f"/datasets/{_dataset_id(dataset)}")


def _holdout_share(holdout: float | None) -> float:
    value = defaults.CUT_HOLDOUT if holdout is None else holdout
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1 or not math.isfinite(value):
        raise ValueError(f"holdout={holdout!r} must be a share of tasks strictly between 0 and 1 (e.g. 0.2); "
                         "pass one, or None for CUT_HOLDOUT")
    return float(value)


class Cut(NamedTuple):
    """What ``cut_rows`` made: the two pushed sides, the train side's rows, and the held-out tasks it moved.

    ``moved`` is ``{"tasks", "rows", "task_ids"}``: held-out tasks whose prompt (text and tools) is also a
    training task's, moved to the train side so that no prompt is on both (``split``).
    """

    train: DatasetHandle
    holdout: DatasetHandle
    train_rows: list[dict[str, Any]]
    moved: dict[str, Any]


class Split(NamedTuple):
    """Row indices of each side of a cut, and the held-out tasks moved to training (``moved`` of :class:`Cut`)."""

    train: list[int]
    holdout: list[int]
    moved: dict[str, Any]


def _prompt_text(row: Mapping[str, Any]) -> str:
    """What a prompt asks, as one key: the messages before the first assistant turn (role and text, whitespace
    runs as one space) and the tools. Two tasks with equal keys are the same question under two ids."""
    def text(value: Any) -> Any:
        return " ".join(value.split()) if isinstance(value, str) else value

    messages = [{k: text(v) for k, v in m.items() if k in ("role", "content", "name", "tool_calls")}
                for m in prompt_messages(row)]
    return json.dumps([messages, row.get("tools") or []], sort_keys=True, default=str)


def _move_shared(rows: Sequence[Mapping[str, Any]], groups: dict[str, list[int]], held: set[str]) -> list[str]:
    """Move from ``held`` (in place) every task whose prompt a training task also has, until none is left;
    returns the moved task keys. A moved task's other prompts join training too, hence the loop."""
    prompts = {key: {_prompt_text(rows[i]) for i in idx} for key, idx in groups.items()}
    train_prompts = set().union(*(p for key, p in prompts.items() if key not in held))
    moved: list[str] = []
    while True:
        shared = sorted(key for key in held if prompts[key] & train_prompts)
        if not shared:
            return moved
        for key in shared:
            held.discard(key)
            train_prompts |= prompts[key]
        moved += shared


def split(rows: Sequence[Mapping[str, Any]], holdout: float | None = None, seed: int | None = None) -> Split:
    """:func:`split_tasks`, with the held-out tasks moved to training because their prompt is also there."""
    share = _holdout_share(holdout)
    groups = group_by_task(rows)
    if len(groups) < 2:
        raise ValueError(f"cannot cut {len(groups)} task(s) into train and holdout without a task on both sides; "
                         "a cut needs at least 2 tasks (rows sharing a task_id stay together)")
    keys = sorted(groups)
    rng = np.random.default_rng(defaults.CUT_SEED if seed is None else seed)
    order = rng.permutation(len(keys))
    n_hold = min(max(int(round(share * len(keys))), 1), len(keys) - 1)
    held = {keys[i] for i in order[:n_hold]}
    chosen = len(held)
    moved = _move_shared(rows, groups, held)
    if not held:
        raise ValueError(f"every one of the {chosen} held-out task(s) asks a prompt (same text and tools) that a "
                         "training task also asks under another task_id, so no held-out prompt is unseen; give "
                         "repeated prompts one task_id, or pass more distinct tasks")
    train_idx = [i for k, idx in groups.items() if k not in held for i in idx]
    hold_idx = [i for k, idx in groups.items() if k in held for i in idx]
    report = {"tasks": len(moved), "rows": sum(len(groups[k]) for k in moved), "task_ids": moved}
    return Split(sorted(train_idx), sorted(hold_idx), report)


def task_share(rows: Sequence[Mapping[str, Any]], span: tuple[float, float], seed: int | None = None) -> list[int]:
    """Row indices of the tasks in ``span`` (``[from, to)`` of ``rows``' tasks, in an order drawn with ``seed``).

    Tasks that ask a prompt (text and tools) in common are taken or left together, so two spans that do not
    overlap, [0, 0.5] and [0.5, 1], share no task and no prompt: a stage given one never saw the other's. A group
    of such tasks falls in the span its middle falls in. Raises ValueError when the span holds no task.
    """
    groups = group_by_task(rows)
    units = _prompt_units(rows, groups)
    order = np.random.default_rng(defaults.CUT_SEED if seed is None else seed).permutation(len(units))
    low, high = span[0] * len(groups), span[1] * len(groups)
    chosen: list[str] = []
    seen = 0
    for index in order:
        unit = units[index]
        if low <= seen + len(unit) / 2 < high:
            chosen += unit
        seen += len(unit)
    if not chosen:
        raise ValueError(f"train_tasks [{span[0]}, {span[1]}] holds none of the {len(groups)} training task(s) "
                         f"({len(units)} groups sharing a prompt); widen it")
    return sorted(i for key in chosen for i in groups[key])


def _prompt_units(rows: Sequence[Mapping[str, Any]], groups: Mapping[str, list[int]]) -> list[list[str]]:
    """The task keys in groups that share a prompt, directly or through another task, each group sorted."""
    parent = {key: key for key in groups}

    def root(key: str) -> str:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    first: dict[str, str] = {}
    for key in sorted(groups):
        for i in groups[key]:
            other = first.setdefault(_prompt_text(rows[i]), key)
            parent[root(key)] = root(other)
    units: dict[str, list[str]] = {}
    for key in sorted(groups):
        units.setdefault(root(key), []).append(key)
    return [units[r] for r in sorted(units)]


def fixed_split(rows: Sequence[Mapping[str, Any]], held_out: Sequence[bool]) -> Split:
    """The cut a benchmark fixes itself (BFCL's multi-turn scenarios): each row's side given by ``held_out``, whole
    tasks on each side, nothing drawn and nothing moved. Raises ValueError when a task has rows on both sides or a
    side is empty."""
    if len(held_out) != len(rows):
        raise ValueError(f"fixed_split: {len(held_out)} sides for {len(rows)} rows; give one per row")
    groups = group_by_task(rows)
    straddling = sorted(k for k, idx in groups.items() if len({bool(held_out[i]) for i in idx}) > 1)
    if straddling:
        raise ValueError(f"fixed_split: task(s) {straddling[:5]} have rows on both sides; a task is held out whole")
    held = {k for k, idx in groups.items() if held_out[idx[0]]}
    if not held or len(held) == len(groups):
        side = "held-out" if not held else "training"
        raise ValueError(f"the dataset's own split leaves the {side} side empty: all {len(groups)} task(s) are on one "
                         "side; read more of it (a larger dataset.tasks, or more categories)")
    train_idx = [i for k, idx in groups.items() if k not in held for i in idx]
    hold_idx = [i for k, idx in groups.items() if k in held for i in idx]
    return Split(sorted(train_idx), sorted(hold_idx), {"tasks": 0, "rows": 0, "task_ids": []})


def split_tasks(rows: Sequence[Mapping[str, Any]], holdout: float | None = None, seed: int | None = None) -> tuple[list[int], list[int]]:
    """Row indices of (train, holdout): whole tasks on each side, deterministic for ``seed``.

    Tasks are sorted by key before the seeded shuffle, so the same rows in another
    order split the same way. The holdout gets ``round(holdout * tasks)`` tasks,
    at least one and never all of them; then a held-out task whose prompt (its text
    and tools) a training task also has moves to training, so no prompt is on both
    sides (:func:`split` says which moved).
    """
    cut_ = split(rows, holdout, seed)
    return cut_.train, cut_.holdout


def moved_text(moved: Mapping[str, Any]) -> str:
    """``3 held-out tasks (7 rows) moved to training: ...``, or "" when none moved."""
    if not moved.get("tasks"):
        return ""
    shown = ", ".join(str(t) for t in moved["task_ids"][: defaults.CUT_MOVED_SHOWN])
    more = " ..." if moved["tasks"] > defaults.CUT_MOVED_SHOWN else ""
    return (f"{moved['tasks']} held-out task(s) ({moved['rows']} rows) moved to training: their prompt (text and "
            f"tools) is also a training task's, under another task_id ({shown}{more})")


def cut(dataset: Any, holdout: float | None = None, seed: int | None = None,
        name: str | None = None) -> tuple[DatasetHandle, DatasetHandle]:
    """Split a dataset by task into train and holdout, push both, and link them as split siblings.

    No task is on both sides, and no prompt: a held-out task whose prompt (text and tools) a training
    task also has, under another task_id, moves to training (a ``TrainingWarning`` says how many). The sides are pushed as ``<name>:train`` and
    ``<name>:holdout`` (``name`` defaults to the dataset's name) and each records
    the other as its ``sibling``, so ``train`` finds its holdout on its own.
    ``holdout`` is the share of tasks held out (``CUT_HOLDOUT`` when None);
    ``seed`` picks them (``CUT_SEED`` when None).

        train, held = wai.datasets.cut("ds_...", holdout=0.2, seed=0)
    """
    _holdout_share(holdout)
    rows = load_rows(dataset)
    if name is None:
        if isinstance(dataset, (DatasetHandle, Mapping)) or names_id(dataset, "ds"):
            name = get_dataset(dataset).name or _dataset_id(dataset)
        else:
            name = _default_name(dataset) or "dataset"
    sides = cut_rows(rows, holdout, seed, name)
    if sides.moved["tasks"]:
        warnings.warn(moved_text(sides.moved), TrainingWarning, stacklevel=2)
    return sides.train, sides.holdout


def cut_sides(rows: Sequence[Mapping[str, Any]], holdout: float | None, seed: int | None,
              held_out: Sequence[bool] | None = None) -> Split:
    """The sides :func:`cut_rows` pushes, pushing nothing: the dataset's own split (``held_out``, one flag per row)
    taken as it is (:func:`fixed_split`), else ``holdout`` of the tasks drawn with ``seed`` (:func:`split`)."""
    return split(rows, holdout, seed) if held_out is None else fixed_split(rows, held_out)


def cut_rows(rows: Sequence[dict[str, Any]], holdout: float | None, seed: int | None, name: str,
             held_out: Sequence[bool] | None = None, sides: Split | None = None) -> Cut:
    """``cut`` of rows already in hand, pushed as ``<name>:train`` and ``<name>:holdout``: a :class:`Cut` (train,
    holdout, the train side's rows, the held-out tasks moved to training), so a caller holding the rows reads
    neither them nor the train side back. ``held_out`` (one flag per row) is a dataset's own split, taken as it is
    (:func:`fixed_split`) instead of drawing ``holdout`` of the tasks with ``seed``. ``sides``: what
    :func:`cut_sides` gave for these same arguments, drawn already by the caller (not drawn again)."""
    if sides is None:
        sides = cut_sides(rows, holdout, seed, held_out)
    train_rows = [rows[i] for i in sides.train]
    train = push(train_rows, name=f"{name}:train")
    held = push([rows[i] for i in sides.holdout], name=f"{name}:holdout")
    client = _client()
    train = DatasetHandle(client.request("PATCH", f"/datasets/{train.id}", json={"split": "train", "sibling": held.id}))
    held = DatasetHandle(client.request("PATCH", f"/datasets/{held.id}", json={"split": "holdout", "sibling": train.id}))
    return Cut(train, held, train_rows, sides.moved)


def profile(dataset: Any) -> DatasetProfile:
    """What a dataset holds, counted exactly; ``selection_report`` reads it.

    Keys: ``rows``; ``tasks``; ``repeats`` (rows per task: ``common``, the most
    frequent size, the larger on a tie; ``min``, ``max`` and ``sizes`` =
    {size: tasks}); ``passed`` / ``failed`` /
    ``unlabelled`` row counts; ``pass_rate`` over labelled rows (None with none);
    tasks by outcome: ``all_pass_tasks``, ``all_fail_tasks``, ``mixed_tasks``
    (both a pass and a fail, the number to size a grouped set by) and
    ``unlabelled_tasks``; ``single_row_tasks``; ``temperatures`` (distinct
    ``sampling.temperature`` values), ``temperature_rows`` and
    ``no_temperature_rows``; ``markers`` ({name: rows carrying it}); ``per_task``
    (each task's rows, passed, failed, unlabelled and outcome); ``dataset``.

        wai.profile("ds_...")["mixed_tasks"]
    """
    return _profile_of(dataset)


def _profile_of(dataset: Any) -> DatasetProfile:
    return profile_rows(rows_of(dataset), source=describe_source(dataset))


def selection_report(profile: Any, method: str, per_task: int | None = None, base_model: str | None = None,
                     config: Mapping[str, Any] | None = None) -> SelectionReport:
    """Which rows and tasks ``method`` ("sft", "grpo", "dpo", "rm") can use, and why the rest is dropped.

    ``profile`` is what ``profile()`` returned, or a dataset (profiled first).
    The answer has ``rows`` and ``tasks`` used, ``rows_given`` / ``tasks_given``,
    ``mixed_tasks``, ``pairs`` (dpo, rm) or ``groups`` (grpo), ``dropped``
    (``[{"class", "rows", "tasks", "reason"}]``, each task under one class only,
    so used plus dropped adds up to given) and a one-line ``summary``.
    SFT drops failing and unlabelled rows; GRPO drops single-row tasks and
    unanimous groups; DPO and RM drop tasks without both a pass and a fail, and
    rows beyond ``per_task`` pairs per task (``PREFERENCE_PAIRS_PER_TASK``).
    GRPO with ``config={"prompt_source": "gold"}`` and DPO with a ``pair_source``
    of ``"policy"`` or ``"policy_gold"`` judge the policy's own samples, so they
    keep every task with a gold first action and drop only those without one.

    ``base_model`` (with a dataset, not a profile: the rows are rendered) also
    counts what is longer than that base's context, with its tokenizer alone
    (``context.check_context``; ``config`` holds the run's knobs that change the
    rendering: the export settings, GRPO's ``max_completion_length``). Those
    move to the ``too_long`` class, and ``context`` says the limit, the count
    and the first rows, or why the check could not run here. ``wai.train``
    reads the same report.

        wai.selection_report(wai.profile(ds), "sft")["dropped"]
        wai.selection_report(ds, "sft", base_model="whileai/tiny-tooluse-base")["context"]
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not a training method; pass one of {', '.join(METHODS)}")
    is_profile = isinstance(profile, Mapping) and "per_task" in profile and "messages" not in profile
    if is_profile:
        if base_model is not None:
            raise ValueError("base_model= renders every row against the base's context, which a profile does not "
                             "hold; pass the dataset itself (its handle, id or rows), or leave base_model None")
        return _selection_report(profile, method, per_task=per_task, policy_samples=samples_the_policy(method, config))
    rows = rows_of(profile)
    if per_task is None:
        from whileai.domain.rows.selection import pairs_per_task

        per_task = pairs_per_task(method, config, len(rows))
    context = None
    if base_model is not None:
        from whileai.domain.rows.context import check_context

        context = check_context(rows, method, base_model, config, per_task)
    report = _selection_report(profile_rows(rows, source=describe_source(profile)), method, per_task=per_task,
                               context=context, policy_samples=samples_the_policy(method, config))
    return with_near_misses(report, rows, method, config)
