"""The experiment spec's schema: one pydantic model over the composed, resolved plain dict.

Validated once, before anything is loaded, whatever the values came from (the
root config, a group option, a recipe file, the command line): Hydra checks
only command-line keys, so a typo inside a YAML file would otherwise pass. Every
problem is collected and reported at once:

- a key the spec does not have names the nearest one (difflib);
- a wrong type names the key and the type it needs;
- a knob the method does not read says which methods read it;
- a knob out of range names the value, the range, the paper's value and its
  citation, read from ``TRAINING_KNOBS`` / ``TRAINING_HOST_KEYS`` (the same
  tables ``wai.train`` checks against: one source of knob ranges).

    spec, problems = checked(plain)   # the one typed model the runner reads, or None and every problem
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator
from pydantic_core import ErrorDetails

from whileai.kit import defaults as kit_defaults
from whileai.domain import defaults as sdk
from whileai.core import defaults as core_defaults
# One knob checker for wai.train and the runner, so both word a refusal alike.
from whileai.core.knobs import check_knob, many_value
from whileai.core.spec import (ALIASES, SPEC_MODELS, canonical, continues_runs, environment_reward_problems, is_whole,
                               knob_of)

from whileai.runner import defaults

__all__ = ["Problem", "RecipeSpec", "RecipeStage", "recipe_spec", "check", "checked", "canonical_spec", "canonical_override", "KNOBS", "HOST_KEYS", "known_paths", "nearest"]

#: the knobs (wai.train's keyword arguments) and host keys (its config=), both flat at the root
#: (the export settings among TRAINING_KNOBS live in the export group instead: TRAIN_EXPORT_KNOBS)
KNOBS: tuple[str, ...] = tuple(k for k in sdk.TRAINING_KNOBS if k not in sdk.TRAIN_EXPORT_KNOBS)
EXPORT_KNOBS: tuple[str, ...] = tuple(sdk.TRAIN_EXPORT_KNOBS)
HOST_KEYS: tuple[str, ...] = tuple(sdk.TRAINING_HOST_KEYS)
_TABLES = {**{k: sdk.TRAINING_KNOBS for k in (*KNOBS, *EXPORT_KNOBS)},
           **{k: sdk.TRAINING_HOST_KEYS for k in HOST_KEYS}}


@dataclass
class Problem:
    """One thing wrong with a spec: the dotted key, what is wrong and how to fix it, and where it was set."""

    key: str
    message: str
    origin: str = ""

    def __str__(self) -> str:
        return f"{self.origin}: {self.message}" if self.origin else self.message


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Dataset(_Strict):
    source: Literal["sample", "jsonl", "pushed", "bfcl", "episodes", "bfcl_episodes"] = "sample"
    path: str | None = None
    questions: str | None = None
    answers: str | None = None
    folder: str | None = None
    categories: list[str] | None = None
    id: str | None = None
    system_prompt: str | None = None
    tools: str | list[dict[str, Any]] | None = None
    grade: Literal["passed", "first_action", "reward_model"] = "passed"
    reward_model: str | None = None
    tasks: int | None = Field(default=None, ge=2)
    sample_tasks: int | None = Field(default=None, ge=2, le=kit_defaults.KIT_SAMPLE_MAX_TASKS)
    episode_tasks: int | None = Field(default=None, ge=2, le=sdk.EPISODE_KIT_MAX_TASKS)
    holdout: float = Field(default=sdk.CUT_HOLDOUT, gt=0.0, lt=1.0)
    cut_seed: int = Field(default=sdk.CUT_SEED, ge=0)
    after: str | None = None


def _export_knob(name: str) -> Any:
    """An export knob's field: its default and its help (with its choices) as its declaration gives them."""
    meta = knob_of(SPEC_MODELS[next(iter(sdk.TRAINING_KNOBS[name]))], name)
    words = [str(c) for c in meta.choices or () if not isinstance(c, bool)]
    return Field(default=meta.default, description=meta.help + (f": {' | '.join(words)}" if words else ""))


class Export(_Strict):
    """What the job trains on, and the artifact written beside the run (wai.export_dataset's arguments).

    ``format`` and ``validate`` are the runner's own; the other four are knobs, whose default and help
    are their declarations' (whileai.core.spec). ``conf/export/*.yaml`` is generated from this model
    (``knobs_doc``), one file per format.
    """

    format: Literal["openai", "trl"] = Field(default="trl", description="trl | openai: the artifact's row shape")
    validate_: bool = Field(default=True, alias="validate", description=(
        "the gates: tool-call arguments round-trip, no privileged recital; a failure stops the run"))
    mask_mode: Literal[tuple(core_defaults.EXPORT_MASK_MODES)] = _export_knob("mask_mode")  # type: ignore[valid-type]
    unroll: bool = _export_knob("unroll")
    strip_think: bool = _export_knob("strip_think")
    max_tool_output_chars: int | None = _export_knob("max_tool_output_chars")  # range: checked per method below
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Monitor(_Strict):
    enabled: bool = False
    every: int | None = Field(default=None, ge=1)
    k: int | None = Field(default=None, ge=2)
    n_prompts: int | None = Field(default=None, ge=1)
    window: int | None = Field(default=None, ge=1)
    delta: float | None = Field(default=None, gt=0.0)
    length_pct: float | None = Field(default=None, gt=0.0)
    kl_budget: float | None = Field(default=None, gt=0.0)
    temperature: float | None = Field(default=None, gt=0.0, le=2.0)  # the looks' sampling (None: the run's own)
    max_new_tokens: int | None = Field(default=None, ge=1)  # tokens per look's sample (None: MONITOR_MAX_NEW_TOKENS)
    endorsed: list[str] = []
    stop_on: list[str] | str = []
    gold_judge: str | None = None


class Serve(_Strict):
    target: Literal["none", "platform", "modal"] = "none"
    name: str | None = None


class Target(_Strict):
    name: Literal["local", "modal"] = "local"
    gpu: Literal[tuple(core_defaults.GPU_USD_PER_HOUR)] | None = None  # type: ignore[valid-type]
    #: processes per node and nodes: the job's world size (batch sizes stay effective, divided across it)
    processes: int = Field(default=1, ge=1, le=core_defaults.MAX_PROCESSES_PER_NODE)
    nodes: int = Field(default=1, ge=1, le=core_defaults.MAX_NODES)


class Environment(_Strict):
    """The tool world whole episodes are played in (whileai.domain.episodes): its name (none, kit, bfcl or
    python:MODULE:CLASS), BFCL's category, and the turn cap (None: EPISODE_MAX_TURNS). The name, the category
    and a python: class are checked by :func:`_environment_checks`, with the words of the domain's refusal."""

    name: str = "none"
    category: str | None = None
    max_turns: int | None = Field(default=None, ge=core_defaults.TRAIN_MAX_TURNS_RANGE[0],
                                  le=core_defaults.TRAIN_MAX_TURNS_RANGE[1])


class Expect(_Strict):
    holdout_after_min: float | None = Field(default=None, ge=0.0, le=1.0)
    holdout_gain_min: float | None = Field(default=None, ge=-1.0, le=1.0)
    holdout_gain_significant: float | None = Field(default=None, gt=0.0, lt=1.0)  # a p-value bound (alpha)
    stage_gain_min: float | None = Field(default=None, ge=-1.0, le=1.0)
    no_alarm: bool | None = None
    reward_over_exact_significant: float | None = Field(default=None, gt=0.0, lt=1.0)  # a p-value bound (alpha)
    alarm: str | list[str] | None = None
    alarm_look_max: int | None = Field(default=None, ge=0)
    delta_verdict_not: list[str] = []
    status: Literal["done"] | None = None


def _knob_type(name: str) -> Any:
    """The YAML type of knob ``name``: its declaration's annotation says whole number or number (core.spec.is_whole)."""
    specs = list(_TABLES[name][name].values())
    if any("choices" in s or s.get("many") for s in specs):
        return Any  # checked against the method's choices (or a list's range) below
    if not any("range" in s for s in specs):
        return str  # a free-text knob: its pattern is checked below
    model = next(SPEC_MODELS[m] for m in _TABLES[name][name])
    return int if is_whole(model, name) else float


class _Settings(_Strict):
    """What a stage and the spec's root both set: the method, its base and gate, and the knobs (fields added
    from their declarations by :func:`recipe_spec`'s model)."""

    method: str
    base_model: str | None = None
    check: str | None = None
    train_tasks: tuple[float, float] | None = Field(default=None, description=(
        "[from, to): the share of the train side's tasks this stage trains on, e.g. [0, 0.5] and [0.5, 1] give two "
        "stages disjoint tasks (and prompts); all of them when unset"))

    init_from: str | None = Field(default=None, description=(
        "stages.NAME: the earlier policy stage (sft, grpo, dpo) this stage starts from. A policy stage continues "
        "the latest earlier policy stage without it; a reward-model stage starts from the base unless it names one "
        "(its backbone then begins as that policy, its score head fresh)"))

    @field_validator("train_tasks")
    @classmethod
    def _span(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not 0.0 <= value[0] < value[1] <= 1.0:
            raise ValueError("not a share of the train side's tasks; pass [from, to] with 0 <= from < to <= 1, "
                             "e.g. [0, 0.5] for the first half")
        return value

    def given(self) -> dict[str, Any]:
        """The keys set here (None ones left out): the method, base, gate and knobs, as ``wai.train`` takes them."""
        return {k: v for k, v in self.model_dump(include={"method", "base_model", "check", *KNOBS, *HOST_KEYS}).items()
                if v is not None}


class RecipeStage(_Settings):
    """An earlier stage as a recipe writes it (``stages.NAME``): its own run, before the root's."""


#: the order a recorded spec lists its keys in, as conf/config.yaml composes them
_ROOT_ORDER = ("name", "base_model", "check", "train_tasks", "init_from", "method", *KNOBS, *HOST_KEYS, "stages", "expect",
               "dataset", "export", "monitor", "serve", "target", "environment")


class RecipeSpec(_Settings):
    """The runner's spec, composed by Hydra and validated once: the last stage's keys at the root, the
    earlier stages, and the dataset, export, monitor, serve, target, environment and expect groups.

    Built by :func:`recipe_spec`; every step of a run reads its typed attributes, and :meth:`plain`
    is its JSON form, as recorded on the run.
    """

    name: str | None = None
    method: str = "sft"
    check: str = "require"
    dataset: Dataset = Dataset()
    export: Export = Export()
    monitor: Monitor = Monitor()
    serve: Serve = Serve()
    target: Target = Target()
    environment: Environment = Environment()
    stages: dict[str, RecipeStage] = {}
    expect: Expect = Expect()

    def plain(self) -> dict[str, Any]:
        """The keys the spec was given, in the composed order (the run's record; ``reproduce`` reads it back)."""
        given = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return {k: given[k] for k in _ROOT_ORDER if k in given}


_KNOB_FIELDS: dict[str, Any] = {name: (_knob_type(name) | None, None) for name in (*KNOBS, *HOST_KEYS)}
# Literals computed from the method and check tables at import: a runtime value, not a type mypy can read,
# so they are held as Any (the fields they make are checked by pydantic).
_METHOD: Any = Literal[tuple(core_defaults.TRAIN_METHODS)]
_CHECK: Any = Literal[tuple(core_defaults.TRAIN_CHECKS)]

_STAGE_MODEL = create_model(
    "RecipeStage", __base__=RecipeStage, method=(_METHOD, ...), check=(_CHECK | None, None), **_KNOB_FIELDS,
)
_RECIPE_MODEL = create_model(
    "RecipeSpec", __base__=RecipeSpec, method=(_METHOD, "sft"), check=(_CHECK, "require"),
    # the stage model is a class create_model builds at runtime: mypy sees a variable, not a type
    stages=(dict[str, _STAGE_MODEL], {}), **_KNOB_FIELDS,  # type: ignore[valid-type]
)


def recipe_spec(plain: dict[str, Any]) -> RecipeSpec:
    """The typed spec of a composed, resolved ``plain`` dict (raises pydantic's ValidationError; :func:`check`
    words every problem first)."""
    return _RECIPE_MODEL.model_validate(plain)


_SECTIONS: dict[str, type[BaseModel]] = {"dataset": Dataset, "export": Export, "monitor": Monitor, "serve": Serve,
                                        "target": Target, "environment": Environment, "expect": Expect}


def _field_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def known_paths() -> dict[str, list[str]]:
    """Dotted parent -> the keys accepted under it ("" is the root; "stages.*" any stage)."""
    paths = {"": _field_names(_RECIPE_MODEL), "stages.*": _field_names(_STAGE_MODEL)}
    for section, model in _SECTIONS.items():
        paths[section] = _field_names(model)
    return paths


def nearest(word: str, choices: list[str]) -> list[str]:
    return difflib.get_close_matches(word, choices, n=defaults.TYPO_SUGGESTIONS, cutoff=defaults.TYPO_CUTOFF)


def unknown_key_message(path: str, accepted: list[str], value: str | None = None) -> str:
    """``path`` is no key here: the group the name lives in (``target.processes=2``), else the nearest names."""
    leaf = path.rsplit(".", 1)[-1]
    homes = [f"{section}.{leaf}" for section, model in _SECTIONS.items()
             if leaf in _field_names(model) and f"{section}.{leaf}" != path]
    if homes:  # a knob of a config group typed at the root (processes=2) or under another group
        spelled = " or ".join(f"{h}={value}" if value is not None else h for h in homes)
        return f"{path}: not a key of the spec; did you mean {spelled}? ({leaf} lives in the {homes[0].split('.')[0]} group)"
    close = nearest(leaf, accepted)
    hint = f"did you mean {' or '.join(close)}?" if close else f"accepted here: {', '.join(sorted(accepted))}"
    return f"{path}: not a key of the spec; {hint}"


# ---------------------------------------------------------------------------
# Knob checks against TRAINING_KNOBS / TRAINING_HOST_KEYS
# ---------------------------------------------------------------------------


def knob_problem(path: str, name: str, value: Any, method: str) -> str | None:
    """What is wrong with ``name=value`` for ``method`` (a message naming the range and the paper), or None."""
    return check_knob(name, value, method, _TABLES[name][name], label=path, unset="null", suggest_method=True)


# ---------------------------------------------------------------------------
# check
# ---------------------------------------------------------------------------

_TYPE_WORDS = {
    "int": "a whole number", "float": "a number", "bool": "true or false", "string": "a string",
    "list": "a list", "dict": "a mapping", "literal": "one of the listed values", "model": "a mapping",
}


def _type_message(path: str, err: ErrorDetails) -> str:
    value = err.get("input")
    kind = err["type"]
    if kind == "missing" or value == "???":
        return f"{path} is required and not set; pass {path}=..."
    if kind == "literal_error":
        return f"{path}={value!r} is not accepted; {err['msg'].replace('Input should be', 'pass')}"
    if kind.endswith("_type") or kind.endswith("_parsing") or kind.endswith("from_float"):
        want = next((w for k, w in _TYPE_WORDS.items() if kind.startswith(k)), kind)
        return f"{path}={value!r} is {type(value).__name__}, but {path} takes {want}"
    return f"{path}={value!r}: {err['msg'].removeprefix('Value error, ')}"


def _loc_path(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p in ("function-after",)))]
    return ".".join(parts)


def _accepted_at(path: str) -> list[str]:
    known = known_paths()
    parent = path.rsplit(".", 1)[0] if "." in path else ""
    if parent.startswith("stages.") and parent.count(".") == 1:
        return known["stages.*"]
    return known.get(parent, [])


def canonical_spec(plain: Any) -> Any:
    """The spec with the camelCase host keys (``loraRank``, ``holdoutRows``, ...) renamed to their snake_case names.

    At the root and in every stage: recipes and command lines written with the reference's
    spellings, and runs recorded before the typed spec, read as the canonical keys
    (:data:`whileai.core.spec.ALIASES`), and the record keeps the canonical form.
    """
    if not isinstance(plain, dict):
        return plain  # not a spec at all: check() says so
    out = _lists(canonical(plain))
    stages = out.get("stages")
    if isinstance(stages, dict):
        out["stages"] = {name: _lists(canonical(stage)) if isinstance(stage, dict) else stage
                         for name, stage in stages.items()}
    return out


#: the knobs that take a list of their choices (``report_to``)
_LIST_KNOBS = tuple(name for name, table in _TABLES.items() if any(row.get("many") for row in table[name].values()))


def _lists(node: dict[str, Any]) -> dict[str, Any]:
    """A list knob given as a comma string (``report_to: wandb,mlflow`` in a recipe) as its list, as it runs."""
    for name in _LIST_KNOBS:
        if node.get(name) is not None:
            numeric = any("range" in row for row in _TABLES[name][name].values())
            node[name] = many_value(node[name], numbers=numeric)
    return node


def canonical_override(arg: str) -> str:
    """A command-line override with an aliased key renamed: ``stages.sft.holdoutRows=4`` -> ``stages.sft.holdout_rows=4``."""
    if arg.startswith("-") or "=" not in arg:
        return arg
    key, value = arg.split("=", 1)
    sign = key[: len(key) - len(key.lstrip("+~"))]
    head, _, leaf = key[len(sign):].rpartition(".")
    if leaf not in ALIASES:
        return arg
    return f"{sign}{head + '.' if head else ''}{ALIASES[leaf]}={value}"


def check(plain: dict[str, Any], origin: Any = None) -> list[Problem]:
    """Every problem in the resolved spec ``plain`` ([] when valid). ``origin(key)`` names where a key was set."""
    return checked(plain, origin)[1]


def checked(plain: dict[str, Any], origin: Any = None) -> tuple[RecipeSpec | None, list[Problem]]:
    """``(the typed spec, [])`` for the resolved spec ``plain``, validated once, or ``(None, every problem)``.
    ``origin(key)`` names where a key was set."""
    where = origin or (lambda key: "")
    problems: list[Problem] = []

    def add(key: str, message: str) -> None:
        problems.append(Problem(key, message, where(key)))

    seen: set[str] = set()
    spec = None
    try:
        spec = recipe_spec(plain)
    except ValidationError as exc:
        for err in exc.errors():
            path = _loc_path(err["loc"])
            if path in seen:
                continue
            seen.add(path)
            if err["type"] == "extra_forbidden":
                add(path, unknown_key_message(path, _accepted_at(path)))
            else:
                add(path, _type_message(path, err))
    for prefix, node in [("", plain), *((f"stages.{k}.", v) for k, v in (plain.get("stages") or {}).items())]:
        if not isinstance(node, dict):
            continue
        method = node.get("method")
        if method not in core_defaults.TRAIN_METHODS:
            continue
        for name in (*KNOBS, *HOST_KEYS):
            value = node.get(name)
            path = f"{prefix}{name}"
            if value is None or path in seen:
                continue
            message = knob_problem(path, name, value, method)
            if message:
                add(path, message)
                seen.add(path)
    problems += _export_checks(plain, where, seen)
    problems += _cross_checks(plain, where)
    problems += _environment_checks(plain, where, seen)
    return (None if problems else spec), problems


def reads_export(name: str, method: str) -> bool:
    """Whether ``method``'s job applies the export setting ``name`` (TRAINING_KNOBS says which do)."""
    return method in sdk.TRAINING_KNOBS[name]


def _group(plain: dict[str, Any], key: str) -> dict[str, Any]:
    """The group ``key`` of the composed spec as given (``dataset``, ``stages``, ...); {} where it is not a mapping,
    which the model's own check words."""
    found = plain.get(key)
    return found if isinstance(found, dict) else {}


def _export_checks(plain: dict[str, Any], where: Any, seen: set[str]) -> list[Problem]:
    """The export settings against TRAINING_KNOBS, for each stage's method that applies them."""
    out: list[Problem] = []
    export = _group(plain, "export")
    stages = [s for s in (plain.get("stages") or {}).values() if isinstance(s, dict)] + [plain]
    methods = [s.get("method") for s in stages if s.get("method") in core_defaults.TRAIN_METHODS]
    for name in EXPORT_KNOBS:
        path = f"export.{name}"
        value = export.get(name)
        if path in seen or value is None:
            continue
        for method in dict.fromkeys(methods):
            if reads_export(name, method):
                message = knob_problem(path, name, value, method)
                if message:
                    out.append(Problem(path, message, where(path)))
                    break
    return out


def _stage_named(value: Any) -> str | None:
    """The NAME a ``stages.NAME`` reference names; None for any other value (a run id, a typo, nothing)."""
    return value[len("stages."):] if isinstance(value, str) and value.startswith("stages.") else None


def _rm_stage_problem(plain: dict[str, Any], key: str, named: Any) -> str | None:
    """Why ``key=stages.NAME`` (``monitor.gold_judge``, ``reward_model``) does not name an rm stage of the spec."""
    wanted = _stage_named(named)
    if wanted is None:
        return None
    stages = _group(plain, "stages")
    node = stages.get(wanted)
    if isinstance(node, dict) and node.get("method") == "rm":
        return None
    rm_stages = [k for k, v in stages.items() if isinstance(v, dict) and v.get("method") == "rm"]
    hint = f"name one of its rm stages: {', '.join('stages.' + k for k in rm_stages)}" if rm_stages else (
        "add a stage with method: rm, or name a finished rm run (run_...)")
    return f"{key}={named} is not an rm stage of this spec; {hint}"


def _cross_checks(plain: dict[str, Any], where: Any) -> list[Problem]:
    """Problems between keys: a source without its file or id, a monitor on a method that has none."""
    out: list[Problem] = []
    data = _group(plain, "dataset")
    needs = {"jsonl": ("path",), "pushed": ("id",), "bfcl": () if data.get("categories") else ("questions", "answers")}
    source = data.get("source")
    for need in needs.get(source, ()) if isinstance(source, str) else ():
        if not data.get(need) or data.get(need) == "???":
            key = f"dataset.{need}"
            also = " (or dataset.categories=[...] of a BFCL data folder)" if source == "bfcl" else ""
            out.append(Problem(key, f"dataset.source={source} needs {key}{also}; pass {key}=...", where(key)))
    if data.get("sample_tasks") is not None and source != "sample":
        out.append(Problem("dataset.sample_tasks", f"dataset.sample_tasks generates the kit's sample task and "
                           f"does not apply to dataset.source={source}; drop it, or keep the first N tasks of "
                           "any source with dataset.tasks=N", where("dataset.sample_tasks")))
    if data.get("episode_tasks") is not None and source != "episodes":
        out.append(Problem("dataset.episode_tasks", f"dataset.episode_tasks draws the environment's tasks and does not "
                           f"apply to dataset.source={source}; drop it, or pick dataset=episodes",
                           where("dataset.episode_tasks")))
    out += _own_split_checks(data, source, where)
    if data.get("grade") == "reward_model" and not data.get("reward_model"):
        out.append(Problem("dataset.reward_model", "dataset.grade=reward_model needs dataset.reward_model=run_... "
                           "(a finished rm run)", where("dataset.reward_model")))
    out += _start_problems(plain, where)
    monitor = _group(plain, "monitor")
    for key, named in (("monitor.gold_judge", monitor.get("gold_judge")), ("reward_model", plain.get("reward_model"))):
        problem = _rm_stage_problem(plain, key, named)
        if problem:
            out.append(Problem(key, problem, where(key)))
    if monitor.get("enabled") and plain.get("method") != "grpo":
        out.append(Problem("monitor.enabled", f"the HackMonitor watches GRPO only, and method={plain.get('method')}; "
                           "pick monitor=off or method=grpo", where("monitor.enabled")))
    return out


def _start_problems(plain: dict[str, Any], where: Any) -> list[Problem]:
    """Why an ``init_from`` (a stage's, or the root's) does not name an earlier policy stage of the spec."""
    stages = _group(plain, "stages")
    written = [(k, v) for k, v in stages.items() if isinstance(v, dict)]  # the stages, in the order they run
    out: list[Problem] = []
    for index, (key, node) in enumerate([(f"stages.{k}.init_from", v) for k, v in written] + [("init_from", plain)]):
        named = node.get("init_from")
        if named is None:
            continue
        earlier = {k: v.get("method") for k, v in written[:index]}
        policies = [k for k, method in earlier.items() if isinstance(method, str) and continues_runs(method)]
        hint = (f"name one of them: {', '.join('stages.' + k for k in policies)}" if policies else
                "add an sft, grpo or dpo stage before it, or drop init_from (a policy stage continues the latest "
                "earlier policy stage on its own)")
        wanted = _stage_named(named)
        if wanted in policies:
            continue
        if wanted is None:
            what = "is not stages.NAME"
        elif wanted not in earlier:
            what = "names no stage written before this one"
        else:
            what = f"names an {earlier[wanted]} stage, which writes no rows to start from"
        out.append(Problem(key, f"{key}={named!r} {what}: a stage starts from an earlier policy stage (sft, grpo, "
                           f"dpo) of this spec; {hint}", where(key)))
    return out


def _own_split_checks(data: dict[str, Any], source: Any, where: Any) -> list[Problem]:
    """A source cut by its own split (``bfcl_episodes``: BFCL's scenarios) reads no share or seed of a drawn cut."""
    if source != "bfcl_episodes":
        return []
    return [Problem(f"dataset.{key}", f"dataset.{key} is not read by dataset=bfcl_episodes: its cut is BFCL's own split "
                    "by scenario (BFCL_MULTI_TURN_HOLDOUT), so a held-out entry never trains in any category; drop it",
                    where(f"dataset.{key}")) for key in ("holdout", "cut_seed") if key in data]


def _environment_checks(plain: dict[str, Any], where: Any, seen: set[str]) -> list[Problem]:
    """The environment group: a name the domain resolves (a python: class imported from the working directory and
    checked against the protocol), BFCL's category, a GRPO stage to play it, a turn cap only with an environment,
    and each GRPO stage's reward knobs against it (:func:`_reward_checks`)."""
    env = _group(plain, "environment")
    name, category, max_turns = env.get("name", "none"), env.get("category"), env.get("max_turns")
    if not isinstance(name, str) or "environment.name" in seen or "environment.category" in seen:
        return []
    from whileai.domain.episodes import environment_problems

    out = []
    for message in environment_problems(name, category, search_path=os.getcwd()):  # where a python: class imports
        key = "environment.category" if message.startswith("environment.category=") else "environment.name"
        out.append(Problem(key, message, where(key)))
    nodes = [("", plain), *((f"stages.{k}.", s) for k, s in (plain.get("stages") or {}).items() if isinstance(s, dict))]
    out += _reward_checks(None if name == "none" else name, nodes, where, seen)
    if name == "none":
        if max_turns is not None:
            out.append(Problem("environment.max_turns", f"environment.max_turns={max_turns} is read only with an "
                               "environment; pick environment=kit or bfcl (or environment.name=python:MODULE:CLASS), "
                               "or drop it", where("environment.max_turns")))
        return out
    if not any(node.get("method") == "grpo" for _, node in nodes):
        out.append(Problem("environment.name", f"environment={name} is played by GRPO, and no stage of this spec is "
                           f"grpo (method={plain.get('method')}); pick method=grpo (or a recipe with a grpo stage), "
                           "or environment=none", where("environment.name")))
    return out + _episode_data_checks(plain, name, nodes, where)


def _reward_checks(name: str | None, nodes: list[tuple[str, dict[str, Any]]], where: Any,
                   seen: set[str]) -> list[Problem]:
    """Each GRPO stage's reward knobs against the environment (the spec's own rule,
    ``environment_reward_problems``): in one the reward is the episode judge and turn_reward adds per-turn scores;
    without one turn_reward is not read. A knob whose value was already refused is not named again."""
    out = []
    for prefix, node in nodes:
        if node.get("method") != "grpo":
            continue
        values = {key: node.get(key) for key in ("reward", "reward_weights", "turn_reward")}
        for message in environment_reward_problems({**values, "environment": name}):
            key = f"{prefix}{message.partition('=')[0]}"
            if key not in seen:
                out.append(Problem(key, f"{prefix}{message}", where(key)))
    return out


#: The dataset sources whose rows are never episode rows (the rows a user writes or pushed may be: the job says so)
_SINGLE_TURN_SOURCES = ("sample", "bfcl")


def _episode_data_checks(plain: dict[str, Any], name: str, nodes: list[tuple[str, dict[str, Any]]],
                         where: Any) -> list[Problem]:
    """An environment's data: rows that carry episodes (dataset=episodes draws the kit's; a JSONL or pushed set of
    episode rows serves any environment), and GRPO sampling the policy's own episodes of every task
    (prompt_source=gold: the gold episodes all pass, so no task mixes outcomes)."""
    data = _group(plain, "dataset")
    source, out = data.get("source"), []
    if source in _SINGLE_TURN_SOURCES:
        own = ("dataset=bfcl_episodes (BFCL's entries as gold episodes)" if name == "bfcl"
               else "dataset=episodes (the kit's gold episodes)")
        out.append(Problem("dataset.source", f"environment={name} plays episodes reset from each row's episode, and "
                           f"the rows of dataset.source={source} carry none; pick {own}, or rows of your own with "
                           "an 'episode' field (docs/rows.md)", where("dataset.source")))
    elif source == "episodes" and name != "kit":
        also = ", or dataset=bfcl_episodes for BFCL's entries" if name == "bfcl" else ""
        out.append(Problem("dataset.source", f"dataset=episodes draws the kit environment's tasks, and environment="
                           f"{name} is another; pick environment=kit{also}, or load rows of your own with an "
                           "'episode' field (dataset=jsonl)", where("dataset.source")))
    elif source == "bfcl_episodes" and name != "bfcl":
        out.append(Problem("dataset.source", f"dataset=bfcl_episodes reads BFCL's multi-turn entries, played in "
                           f"environment=bfcl, and environment={name} is another; pick environment=bfcl (with "
                           "environment.category), or dataset=episodes for the kit's tasks", where("dataset.source")))
    for prefix, node in nodes:
        if node.get("method") == "grpo" and node.get("prompt_source") != "gold":
            key = f"{prefix}prompt_source"
            out.append(Problem(key, f"{key}={node.get('prompt_source')}: in environment={name} GRPO samples the "
                               "policy's own episodes of every task with a gold (the gold episodes all pass, so no "
                               f"task mixes outcomes); pass {key}=gold", where(key)))
    return out
