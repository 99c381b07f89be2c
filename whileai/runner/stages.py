"""The stage rules, once: which stages a spec runs, what each takes from the spec, and which run each continues.

``validate`` (``_effective``), the pipeline and ``reproduce`` all read a spec's stages through
:func:`plan_stages` and resolve each once from :func:`stage_inputs` into its frozen spec, which the
pipeline hands to ``wai.train`` (with :func:`stage_refs` beside it), so what ``validate`` prints is
what the pipeline submits:

- the stages run in the order written, the spec's root last;
- a stage takes the spec's ``check``, ``base_model`` and ``seed`` unless it sets its own;
- a stage continues (``init_from``) the latest earlier stage that is a policy
  (:func:`whileai.core.spec.continues_runs`: a reward model continues nothing and is continued by nothing),
  or the earlier policy stage it names (``init_from: stages.NAME``: how a reward model starts from a policy);
- a stage that continues another keeps that one's base and LoRA shape (``resolve_spec``'s ``start``);
- a stage trains on its own ``train_tasks`` share of the train side's tasks when it sets one (never taken from the
  spec: the root's names the last stage only), else on the whole train side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from whileai.core.spec import RunSpec, continues_runs

from whileai.runner.schema import EXPORT_KNOBS, HOST_KEYS, KNOBS, RecipeSpec, reads_export

__all__ = ["Stage", "plan_stages", "stage_inputs", "stage_refs", "stage_check", "gold_judge_id", "STAGE_REF",
           "SPEC_WIDE", "EPISODE_METHODS"]

#: How ``monitor.gold_judge`` (and ``reward_model``) names a reward-model stage of the same spec instead of a finished run id.
STAGE_REF = "stages."
#: What a stage takes from the spec unless it sets its own
SPEC_WIDE = ("check", "base_model", "seed")


@dataclass(frozen=True)
class Stage:
    """One run of a spec: its name, where its keys sit in the spec, its settings, and the stage it continues."""

    name: str
    prefix: str
    method: str
    settings: dict[str, Any]
    #: key -> the spec-wide key it was taken from (``seed`` -> ``seed``)
    from_spec: dict[str, str] = field(default_factory=dict)
    #: the name of the stage this one continues (init_from), or None
    start: str | None = None
    last: bool = False
    #: ``[from, to)`` of the train side's tasks the stage trains on (``train_tasks``), or None for all of them
    tasks: tuple[float, float] | None = None


def plan_stages(spec: RecipeSpec) -> list[Stage]:
    """The spec's stages in order, each with its settings and the stage it continues (the rules above)."""
    named = [(name, f"stages.{name}.", node.given(), node.train_tasks, node.init_from)
             for name, node in spec.stages.items()]
    spec_wide = spec.given()
    items = [*named, (spec.method if named else "train", "", spec_wide, spec.train_tasks, spec.init_from)]
    out: list[Stage] = []
    policy: str | None = None
    for index, (name, prefix, settings, tasks, init_from) in enumerate(items):
        last = index == len(items) - 1
        taken: dict[str, str] = {}
        if prefix:
            for key in SPEC_WIDE:
                if settings.get(key) is None and spec_wide.get(key) is not None:
                    settings[key] = spec_wide[key]
                    taken[key] = key
        method = str(settings["method"])
        if init_from:  # the earlier policy stage it names (the schema checked that it is one)
            start: str | None = init_from[len(STAGE_REF):]
        else:
            start = policy if continues_runs(method) else None
        out.append(Stage(name, prefix, method, settings, taken, start, last, tasks))
        if continues_runs(method) and not last:
            policy = name
    return out


def gold_judge_id(value: str | None, stage_runs: Mapping[str, str]) -> str | None:
    """The run id ``monitor.gold_judge`` names: a run id as given, or ``stages.<name>``'s run in this spec."""
    if value and value.startswith(STAGE_REF):
        return stage_runs.get(value[len(STAGE_REF):], value)
    return value


class StageRefs(TypedDict, total=False):
    """The run ids a stage's ``reward_model`` and ``gold_judge`` resolve to, where they name a stage of the recipe."""

    reward_model: str
    gold_judge: str


def stage_refs(spec: RunSpec, stage_runs: Mapping[str, str]) -> StageRefs:
    """The settings of a stage's resolved ``spec`` that name another stage of the recipe (``reward_model``,
    ``gold_judge``: ``stages.NAME``), as the runs those stages made: what ``wai.train`` is given beside the spec."""
    out: StageRefs = {}
    if (reward_model := _stage_ref(spec, "reward_model", stage_runs)) is not None:
        out["reward_model"] = reward_model
    if (gold_judge := _stage_ref(spec, "gold_judge", stage_runs)) is not None:
        out["gold_judge"] = gold_judge
    return out


def _stage_ref(spec: RunSpec, name: str, stage_runs: Mapping[str, str]) -> str | None:
    """The run the ``name`` setting of ``spec`` names where it is ``stages.NAME``, else None."""
    value = getattr(spec, name, None)
    if isinstance(value, str) and value.startswith(STAGE_REF):
        return str(gold_judge_id(value, stage_runs))
    return None


def stage_inputs(stage: Stage, spec: RecipeSpec, stage_runs: Mapping[str, str] | None = None,
                 origin: Callable[[str], str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(knobs, config keys)`` of ``stage``: what its one resolution starts from (``train_spec``'s arguments and
    ``config``, as ``wai.train`` takes them); ``config["provenance"]`` names each value's origin.

    ``origin(dotted key)`` says where a key of the spec was set (a recipe file and line, the command
    line); a value the stage takes from the spec names the spec's key.
    """
    node = stage.settings
    kwargs = {k: node[k] for k in KNOBS if node.get(k) is not None}
    if isinstance(kwargs.get("reward_model"), str):  # reward=rm's model named as stages.NAME: that stage's run
        kwargs["reward_model"] = gold_judge_id(kwargs["reward_model"], stage_runs or {})
    # the export group shapes what the job trains on, for the methods whose job applies each setting
    kwargs.update({k: getattr(spec.export, k) for k in EXPORT_KNOBS if reads_export(k, stage.method)})
    config: dict[str, Any] = {k: node[k] for k in HOST_KEYS if node.get(k) is not None}
    if stage.method == "grpo":
        config.update(_monitor_config(spec, stage, stage_runs or {}))
    config.update(_environment_config(spec, stage))
    target = spec.target
    if target.gpu and target.name == "modal":
        config["gpu"] = target.gpu
    for key, count in (("processes", target.processes), ("nodes", target.nodes)):
        if count != 1:  # one process on one node is the default: not written, as before
            config[key] = count
    if origin is not None:
        where: dict[str, str] = {}
        for key in (*kwargs, *config, "base_model"):
            if key in stage.from_spec:
                where[key] = f"{origin(stage.from_spec[key]) or 'the spec'} (the spec's {key})"
            elif key in EXPORT_KNOBS:
                where[key] = origin(f"export.{key}") or f"export.{key}"
            else:
                where[key] = origin(f"{stage.prefix}{key}") or f"{stage.prefix}{key}"
        config["provenance"] = where
    return kwargs, config


#: The methods whose jobs play the spec's environment: SFT measures its held-out episodes, GRPO also trains in it.
EPISODE_METHODS = ("sft", "grpo")


class EnvironmentKeys(TypedDict, total=False):
    """A policy stage's environment config keys: the environment's one string, and its turn cap where set."""

    environment: str
    max_turns: int


def _environment_config(spec: RecipeSpec, stage: Stage) -> EnvironmentKeys:
    """A policy stage's ``environment`` (the domain's one string for the environment group) and ``max_turns`` config
    keys, when the spec names an environment: every SFT and GRPO stage plays the same episodes, so an SFT stage's
    held-out "after" is the next stage's "before"."""
    from whileai.domain.episodes import environment_ref

    env = spec.environment
    ref = environment_ref(env.name, env.category)
    if ref is None or stage.method not in EPISODE_METHODS:
        return {}
    return {"environment": ref, **({"max_turns": env.max_turns} if env.max_turns is not None else {})}


class MonitorKeys(TypedDict):
    """A GRPO stage's monitor config keys: the monitor group's settings (those set), or False where the stage runs
    no monitor; and the run the gold judge names, where it names one."""

    monitor: dict[str, Any] | bool
    gold_judge: NotRequired[str | None]


def _monitor_config(spec: RecipeSpec, stage: Stage, stage_runs: Mapping[str, str]) -> MonitorKeys:
    """A GRPO stage's ``monitor`` (and ``gold_judge``) config keys: the monitor group's settings on the last
    stage when it is enabled, else ``monitor: False``."""
    monitor = spec.monitor
    if not (monitor.enabled and stage.last):
        return {"monitor": False}
    settings = {k: v for k, v in monitor.model_dump(exclude={"enabled", "gold_judge"}).items() if v not in (None, [])}
    out: MonitorKeys = {"monitor": settings}
    if monitor.gold_judge:
        out["gold_judge"] = gold_judge_id(monitor.gold_judge, stage_runs)
    return out


def stage_check(stage: Stage, spec: RecipeSpec) -> str:
    """The selection gate ``stage`` runs under: its own ``check``, else the spec's (a SPEC_WIDE knob)."""
    return stage.settings.get("check") or spec.check
