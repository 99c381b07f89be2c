"""The rules a job's spec passes before the platform starts it: one function for a launch and for a resume.

:func:`launch_problems` reads a spec sent as JSON (a launch's body, or the spec of the job a resume continues)
into its method's model and names every problem at once: the model's own (unknown keys, ranges, the step's
size), what its coercion would let through (a string or a bool where a number goes), a GPU no price table
names or more of them than a node holds, ids of other accounts, a base the platform does not train on or that
names a folder of its own data, and reward code its operator does not run. A resume runs the rules of now, not
the ones its run started under.
"""

from __future__ import annotations

import fnmatch
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from whileai.core import defaults as core_defaults
from whileai.core.ids import id_shape, is_id
from whileai.core.launch import split_gpu
from whileai.core.paths import data_root
from whileai.core.spec import JOB_ROW_KEYS, SPEC_MODELS, RunSpec, knob_of, knob_fields, missing_keys, parse_spec
from whileai.platform import defaults
from whileai.platform._loadable import launch_base_problem
from whileai.platform._rewards import reward_code_problems

__all__ = ["launch_problems", "bounded", "JOB_FOLDER_NAMES"]

#: What a job writes in its own folder (its working directory: ``job_dir``), as file-name patterns: a relative
#: base named like one of them would load from there, not from the hub (whileai/jobs: worker.py, _trainer_data.py,
#: _trainer_setup.py, dpo.py, modal_app.py).
JOB_FOLDER_NAMES = ("worker.log", "ranks", "rank-*", "trainer", "*.jsonl", "payload.json", "adapter")

#: The longest name one path part may have (NAME_MAX on Linux file systems): a longer part is no folder and no
#: hub id, and asking the file system about it fails.
_NAME_MAX = 255
#: Longer than any id the platform makes (a prefix, "_" and ID_HEX_BYTES as hex): not looked up
_ID_MAX_CHARS = 64


def launch_problems(store: Any, account_id: str, run_id: str, kind: str, spec: Mapping[str, Any], embedded: bool,
                    *, resolved: bool = True) -> tuple[RunSpec | None, list[str]]:
    """``spec`` (JSON, as a client or a job row holds it) read for a job of ``kind`` on ``run_id``: ``(spec, [])``,
    or ``(spec or None, every problem)``. ``resolved`` asks for every knob named (a launch: the platform fills
    none); a resume reads an older job's spec with the declared defaults, as it ran.

    The JSON is read once, into its method's model; what only the JSON shows (keys of the platform's, a method
    other than ``kind``, values the model's coercion would let through, knobs not named) is checked on it, and
    every other rule on the model (:func:`_spec_problems`)."""
    owned = sorted(set(spec) & set(JOB_ROW_KEYS))
    if owned:
        return None, [f"spec fields {owned} are the platform's to write (where a job runs, logs and reports); "
                      "leave them out of the spec"]
    full = {"method": kind, **spec}
    typed, problems = parse_spec(full)
    if spec.get("method") != kind:
        problems.insert(0, f"spec method={_shown(spec.get('method'))} does not name this launch's kind={kind!r}; "
                           f"send the run's spec with \"method\": {kind!r} (wai.train does)")
    problems += _loose_values(spec)
    if typed is not None:
        problems += _spec_problems(store, account_id, run_id, typed, embedded)
    missing = missing_keys(full) if resolved else []
    if missing:  # the platform trains what it is given and fills nothing: a spec arrives resolved (wai.train's)
        problems.insert(0, f"the spec is not resolved: it does not name {', '.join(missing)}; send the spec "
                           "wai.train resolves (every knob of its method with its value), or start the run with "
                           "wai.train")
    return typed, problems


def _spec_problems(store: Any, account_id: str, run_id: str, spec: RunSpec, embedded: bool) -> list[str]:
    """What the platform refuses of a spec its model accepts: a base it does not train on, a dataset, GPU or run id
    that is not this launch's to name, ids of other accounts, reward code its operator does not run."""
    problems = [problem for problem in [launch_base_problem(spec.base_model, embedded)] if problem] \
        if spec.base_model is not None else []
    problems += _strict_problems(run_id, spec)
    problems += _foreign_ids(store, account_id, spec)
    problems += reward_code_problems(spec, embedded)
    return problems


def bounded(message: str) -> str:
    """A refusal cut to LAUNCH_REFUSAL_MAX_CHARS, saying how much was left out."""
    cap = defaults.LAUNCH_REFUSAL_MAX_CHARS
    if len(message) <= cap:
        return message
    return message[:cap] + f" ... ({len(message) - cap:,} more characters; fix these and send it again)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


# --------------------------------------------------------------------------- types: what coercion lets through


def _kinds(annotation: Any) -> tuple[type, ...]:
    """The JSON types a field of ``annotation`` takes as they are (a float field takes an int too)."""
    origin = get_origin(annotation)
    if annotation is Any:
        return (object,)
    if origin in (Union, types.UnionType):
        return tuple(k for arg in get_args(annotation) for k in _kinds(arg))
    if origin is Literal:
        return tuple({type(arg) for arg in get_args(annotation)})
    if origin in (list, tuple) or annotation in (list, tuple):
        return (list,)
    if origin is dict or annotation is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return (dict,)
    if annotation is float:
        return (float, int)
    return (annotation,) if isinstance(annotation, type) else (object,)


def _fits(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # a bool is an int to isinstance, never to a spec
        return bool in kinds or object in kinds
    return isinstance(value, kinds)


_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string", list: "a JSON array",
          dict: "a JSON object", type(None): "null"}


def _loose_values(spec: Mapping[str, Any]) -> list[str]:
    """The values the model's coercion would turn into its type (``"10"`` into 10, ``true`` into 1), each named:
    a spec arrives typed (the client's ``spec_json``), so a string where a number goes is a mistake to refuse.
    A list knob also takes its comma string (``"wandb,mlflow"``); each item of a list is checked too."""
    method = spec.get("method")
    model = SPEC_MODELS.get(method) if isinstance(method, str) else None
    if model is None:
        return []
    many = {name for name in knob_fields(model) if knob_of(model, name).many}
    problems = []
    for key, value in spec.items():
        field = model.model_fields.get(key) if key != "method" else None
        if field is None:
            continue  # an unknown key is the model's to name, and so is the method
        kinds = _kinds(field.annotation) + ((str,) if key in many else ())
        items = _item_kinds(field.annotation)
        if not _fits(value, kinds):
            problems.append(_loose(key, value, kinds))
        elif isinstance(value, list) and items is not None:
            problems.extend(_loose(f"{key}[{i}]", item, items) for i, item in enumerate(value) if not _fits(item, items))
    return problems


def _item_kinds(annotation: Any) -> tuple[type, ...] | None:
    """The kinds of a list field's items (None where the field is no list)."""
    for arg in (annotation, *get_args(annotation)):
        if get_origin(arg) is list and get_args(arg):
            return _kinds(get_args(arg)[0])
    return None


def _loose(key: str, value: Any, kinds: tuple[type, ...]) -> str:
    if isinstance(value, bool) and (int in kinds or float in kinds):
        return f"spec {key}={value!r} is a bool where a number goes (a bool is not an int); send a number"
    wanted = " or ".join(dict.fromkeys(_WORDS.get(k, k.__name__) for k in kinds if not (k is int and float in kinds)))
    given = _WORDS.get(type(value), type(value).__name__)
    return f"spec {key}={_shown(value)} is {given} where {wanted} goes; send {wanted}"


# --------------------------------------------------------------------------- names: GPUs, ids, folders


def _strict_problems(run_id: str, spec: RunSpec) -> list[str]:
    """No dataset, a GPU no price table names or more than a node holds, a run id that is not this run's, a base
    named like a hub id that is a folder of the platform's own data or of a job's."""
    problems = []
    if spec.dataset is None:
        problems.append(f"spec dataset={_shown(spec.dataset)} is not a dataset id; send the id of a dataset "
                        "of this account (wai.push returns it)")
    if spec.gpu is not None:
        problems += filter(None, [_gpu_problem(spec.gpu)])
    if spec.run_id is not None and spec.run_id != run_id:
        problems.append(f"spec run_id={_shown(spec.run_id)} is not this launch's run_id={run_id!r}; leave it "
                        f"out, or send the launch's own ({id_shape('run')})")
    if spec.base_model is not None:
        problems += filter(None, [_base_name_problem(spec.base_model)])
    return problems


def _gpu_problem(gpu: Any) -> str | None:
    from whileai.core.defaults import GPU_USD_PER_HOUR

    name, count = split_gpu(gpu) if isinstance(gpu, str) else (None, None)
    if isinstance(gpu, str) and name in GPU_USD_PER_HOUR and ":" not in gpu:
        return None
    if name in GPU_USD_PER_HOUR and count is not None and count <= core_defaults.GPU_MAX_COUNT:
        return None
    if name in GPU_USD_PER_HOUR and count is not None:
        return (f"spec gpu={gpu!r} asks for {count} GPUs on one node; a node holds 1 to {core_defaults.GPU_MAX_COUNT} "
                f"(GPU_MAX_COUNT); send {name}:{core_defaults.GPU_MAX_COUNT} or fewer, and more nodes for more")
    return (f"spec gpu={_shown(gpu)} is not a GPU jobs run on; send one of {', '.join(GPU_USD_PER_HOUR)}, optionally "
            f"with a count from 1 to {core_defaults.GPU_MAX_COUNT} (\"H100:8\"), or null for the platform's default")


def _base_name_problem(base: str) -> str | None:
    """Why a relative ``base`` is not a name the job may look up: a part longer than a file name can be, or a
    path into the platform's data (a run or job id in it, a first part the data root holds) or into the job's
    own folder (JOB_FOLDER_NAMES): a loader resolves a name that exists on disk before it looks at the hub."""
    if os.path.isabs(os.path.expanduser(base)):
        return None  # an absolute path is launch_base_problem's (under the model folders, never adapters)
    parts = [part for part in base.replace("\\", "/").split("/") if part]
    if any(len(part.encode("utf-8", "surrogatepass")) > _NAME_MAX for part in parts):
        return (f"spec base_model={_shown(base)} has a part longer than {_NAME_MAX} bytes, which names no folder "
                "and no hub id; send a hub id (org/name), the kit's base, or a directory under the platform's "
                "model folders")
    ours = any(is_id(part, "run") or is_id(part, "job") for part in parts) or (
        bool(parts) and (_exists(data_root() / parts[0]) or any(fnmatch.fnmatch(parts[0], p) for p in JOB_FOLDER_NAMES)))
    if not ours:
        return None
    return (f"spec base_model={base[:200]!r} names a folder of the platform's own data (a run's adapter, a job's "
            "files), not a hub id; send a hub id, the kit's base, or a directory under the platform's model folders")


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name the file system cannot hold names nothing on it
        return False


def _foreign_ids(store: Any, account_id: str, spec: RunSpec) -> list[str]:
    """The datasets and runs a spec names that are not this account's (a worker would only fail on them later)."""
    problems = []
    for field in ("dataset", "holdout"):
        ident = getattr(spec, field)
        if ident is None:
            continue
        try:
            store.get_dataset(account_id, _as_id(ident))
        except LookupError:
            problems.append(f"spec {field}={_shown(ident)} is not a dataset of this account; send the id of one "
                            "of yours (wai.push returns it)")
    for field in ("init_from", "gold_judge", "reward_model"):
        ident = getattr(spec, field, None)  # gold_judge and reward_model are GRPO's
        if ident is None:
            continue
        try:
            store.get_run(account_id, _as_id(ident), series=False)
        except LookupError:
            problems.append(f"spec {field}={_shown(ident)} is not a run of this account; send the id of one of "
                            "its finished runs")
    return problems


def _as_id(ident: Any) -> str:
    """``ident`` as an id to look up; LookupError for what no id can be (not a string, too long, a NUL, which a
    PostgreSQL text column cannot even hold)."""
    if not isinstance(ident, str) or len(ident) > _ID_MAX_CHARS or "\x00" in ident:
        raise LookupError(ident)
    return ident
