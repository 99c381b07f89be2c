"""The stage rules, once: which stages a spec runs, what each takes from the spec, and which run each continues.

``validate`` (``_effective``), the pipeline and ``reproduce`` all read a spec's stages through
:func:`plan_stages` and hand a stage to ``wai.train`` through :func:`stage_inputs`, so what
``validate`` prints is what the pipeline submits:

- the stages run in the order written, the spec's root last;
- a stage takes the spec's ``check``, ``base_model`` and ``seed`` unless it sets its own;
- a stage continues (``init_from``) the latest earlier stage that is a policy: a reward model (``rm``)
  trains from the base with a fresh head, continues nothing and is continued by nothing;
- a stage that continues another keeps that one's base and LoRA shape (``resolve_spec``'s ``start``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .schema import EXPORT_KNOBS, HOST_KEYS, KNOBS, reads_export

__all__ = ["Stage", "plan_stages", "stage_inputs", "gold_judge_id", "STAGE_REF", "SPEC_WIDE"]

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


def plan_stages(spec: Mapping[str, Any]) -> list[Stage]:
    """The spec's stages in order, each with its settings and the stage it continues (the rules above)."""
    named = [(name, f"stages.{name}.", node) for name, node in (spec.get("stages") or {}).items()
             if isinstance(node, Mapping)]
    root_name = str(spec["method"]) if named else "train"
    out: list[Stage] = []
    policy: str | None = None
    items = [*named, (root_name, "", spec)]
    for index, (name, prefix, node) in enumerate(items):
        last = index == len(items) - 1
        settings = {k: v for k, v in node.items() if k != "stages" and (v is not None or k == "method")}
        taken: dict[str, str] = {}
        if prefix:
            for key in SPEC_WIDE:
                if settings.get(key) is None and spec.get(key) is not None:
                    settings[key] = spec[key]
                    taken[key] = key
        method = str(settings["method"])
        start = None if method == "rm" else policy
        out.append(Stage(name, prefix, method, settings, taken, start, last))
        if method != "rm" and not last:
            policy = name
    return out


def gold_judge_id(value: str | None, stage_runs: Mapping[str, str]) -> str | None:
    """The run id ``monitor.gold_judge`` names: a run id as given, or ``stages.<name>``'s run in this spec."""
    if value and value.startswith(STAGE_REF):
        return stage_runs.get(value[len(STAGE_REF):], value)
    return value


def stage_inputs(stage: Stage, spec: Mapping[str, Any], stage_runs: Mapping[str, str] | None = None,
                 origin: Callable[[str], str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(keyword arguments of wai.train, its config=)`` for ``stage``; ``config["provenance"]`` names each value's origin.

    ``origin(dotted key)`` says where a key of the spec was set (a recipe file and line, the command
    line); a value the stage takes from the spec names the spec's key.
    """
    node = stage.settings
    kwargs = {k: node[k] for k in KNOBS if node.get(k) is not None}
    if isinstance(kwargs.get("reward_model"), str):  # reward=rm's model named as stages.NAME: that stage's run
        kwargs["reward_model"] = gold_judge_id(kwargs["reward_model"], stage_runs or {})
    export = spec.get("export") or {}
    # the export group shapes what the job trains on, for the methods whose job applies each setting
    kwargs.update({k: export[k] for k in EXPORT_KNOBS if k in export and reads_export(k, stage.method)})
    config: dict[str, Any] = {k: node[k] for k in HOST_KEYS if node.get(k) is not None}
    if stage.method == "grpo":
        monitor = spec.get("monitor") or {}
        settings = {k: v for k, v in monitor.items() if k not in ("enabled", "gold_judge") and v not in (None, [])}
        config["monitor"] = settings if (monitor.get("enabled") and stage.last) else False
        if monitor.get("enabled") and stage.last and monitor.get("gold_judge"):
            config["gold_judge"] = gold_judge_id(monitor["gold_judge"], stage_runs or {})
    target = spec.get("target") or {}
    if target.get("gpu") and target.get("name") == "modal":
        config["gpu"] = target["gpu"]
    for key in ("processes", "nodes"):  # one process on one node is the default: not written, as before
        if target.get(key) not in (None, 1):
            config[key] = target[key]
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
