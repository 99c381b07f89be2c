"""The run spec: one typed, versioned description of a hosted training run, read by every layer.

``wai.train`` resolves its arguments into a spec and stores it as the run's ``config``;
the runner validates recipes into the same fields; the platform's launch route checks what
it is asked to start against it; the job bodies read it to build their trainers; the run
pages show it. Keys are snake_case throughout. The camelCase host keys of earlier records
and of the reference (``loraRank``, ``epsilonHigh``, ``scaleRewards``, ...) are accepted
as aliases and recorded in canonical form.

Versions: a record without ``spec_version`` is version 1 (camelCase host keys); this code
writes :data:`SPEC_VERSION`. :func:`read_spec` reads either.

The ranges, paper values and citations of the knobs live in the knob table
(``whileai.simulations.defaults.TRAINING_KNOBS`` and ``TRAINING_HOST_KEYS``) and are
checked by :func:`whileai.core.knobs.check_knob`; the models here fix the names and types,
and ``tests/test_spec.py`` checks that each method's model has exactly the knobs the table
gives that method.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = [
    "SPEC_VERSION",
    "ALIASES",
    "RunSpec",
    "SFTSpec",
    "GRPOSpec",
    "DPOSpec",
    "RMSpec",
    "SPEC_MODELS",
    "canonical",
    "read_spec",
    "spec_problems",
    "same_run",
]

#: 2: snake_case keys and ``spec_version`` on the record; 1: camelCase host keys, no version field.
SPEC_VERSION = 2

#: Older spellings (the reference's host keys, version-1 records) -> the canonical name.
ALIASES: dict[str, str] = {
    "loraRank": "lora_rank",
    "loraAlpha": "lora_alpha",
    "batchSize": "batch_size",
    "holdoutRows": "holdout_rows",
    "epsilonHigh": "epsilon_high",
    "scaleRewards": "scale_rewards",
    "goldJudge": "gold_judge",
}

Method = Literal["sft", "grpo", "dpo", "rm"]


class RunSpec(BaseModel):
    """What every method's run carries: where it runs, what it starts from, and the shared knobs.

    ``None`` means "the default": ``wai.train`` fills every knob the method reads before the
    run is recorded, so a stored spec names the values that ran.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    spec_version: int = SPEC_VERSION
    method: Method
    base_model: str | None = None
    target: str | None = None
    holdout: str | None = None
    init_from: str | None = None
    gpu: str | None = None
    steps: int | None = None
    learning_rate: float | None = None
    seed: int | None = None
    min_mixed_tasks: int | None = None
    lora_rank: int | None = None
    lora_alpha: int | None = None
    holdout_rows: int | None = None
    lr_scheduler_type: Literal["constant_with_warmup", "linear", "cosine"] | None = None
    tool_format: Literal["auto", "native", "hermes"] | None = None  # issue 27: how tools reach the model
    #: config keys the trainer does not read, kept on the run as given (the runner's record, a user's notes)
    extra: dict[str, Any] | None = None
    #: set by the job launcher for the job's own copy of the spec
    run_id: str | None = None
    dataset: str | None = None
    init_adapter: str | None = None

    def knobs(self) -> dict[str, Any]:
        """The fields this method's trainer reads, as a plain dict (None where left to the default)."""
        return self.model_dump(exclude={"spec_version", "extra", "run_id", "dataset", "init_adapter"})


class SFTSpec(RunSpec):
    """Supervised fine-tuning (TRL ``SFTTrainer``) on the passing rows."""

    method: Literal["sft"] = "sft"
    epochs: float | None = None
    batch_size: int | None = None
    metric: Literal["pass_rate", "loss"] | None = None
    mask_mode: str | None = None
    unroll: bool | None = None
    strip_think: bool | None = None
    max_tool_output_chars: int | None = None


class GRPOSpec(RunSpec):
    """Group-relative policy optimisation (TRL ``GRPOTrainer``) on tasks with mixed outcomes."""

    method: Literal["grpo"] = "grpo"
    generations: int | None = None
    beta: float | None = None
    max_completion_length: int | None = None
    loss_type: str | None = None
    temperature: float | None = None
    truncated: Literal["mask", "zero"] | None = None
    epsilon_high: float | None = None
    scale_rewards: str | None = None
    balance: bool | None = None
    gold_judge: str | None = None
    monitor: dict[str, Any] | bool | None = None  # the HackMonitor's settings; False turns it off
    #: derived: TRL's own defaults this spec overrides, and truncated == "mask"
    trl_defaults_overridden: dict[str, Any] | None = None
    mask_truncated_completions: bool | None = None


class DPOSpec(RunSpec):
    """Direct preference optimisation (TRL ``DPOTrainer``) on pass/fail pairs of the same task."""

    method: Literal["dpo"] = "dpo"
    beta: float | None = None
    max_completion_length: int | None = None
    loss_type: str | None = None
    batch_size: int | None = None
    balance: bool | None = None
    pair_source: Literal["rows", "policy", "policy_gold"] | None = None
    policy_samples: int | None = None
    nll_weight: float | None = None
    strip_think: bool | None = None
    max_tool_output_chars: int | None = None


class RMSpec(RunSpec):
    """A reward model (TRL ``RewardTrainer``) on pass/fail pairs: a LoRA with a fresh score head."""

    method: Literal["rm"] = "rm"
    batch_size: int | None = None
    balance: bool | None = None
    reward_span: Literal["conversation", "first_action"] | None = None
    near_misses: int | None = None


SPEC_MODELS: dict[str, type[RunSpec]] = {"sft": SFTSpec, "grpo": GRPOSpec, "dpo": DPOSpec, "rm": RMSpec}


def canonical(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with every alias renamed to its canonical key.

    A key given both ways keeps the canonical spelling's value unless that value is None
    (a root config's unset default beside a recipe's old spelling): then the alias's value counts.
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = ALIASES.get(key, key)
        if name != key and config.get(name) is not None:
            continue  # both spellings, the canonical one set: it wins
        if name == key and key in out:
            continue  # the alias came first and set it; a None canonical value does not undo that
        out[name] = value
    return out


def _model(config: Mapping[str, Any]) -> type[RunSpec]:
    method = config.get("method")
    if method not in SPEC_MODELS:
        raise ValueError(f"method={method!r} is not a training method; pass one of {', '.join(SPEC_MODELS)}")
    return SPEC_MODELS[str(method)]


def spec_problems(config: Mapping[str, Any]) -> list[str]:
    """Every problem with ``config`` as a run spec (unknown keys, wrong types), each naming the key and the fix."""
    fields = canonical(config)
    try:
        model = _model(fields)
    except ValueError as exc:
        return [str(exc)]
    try:
        model.model_validate(fields)
    except ValidationError as exc:
        out = []
        for error in exc.errors():
            key = ".".join(str(p) for p in error["loc"])
            if error["type"] == "extra_forbidden":
                known = ", ".join(sorted(f for f in model.model_fields if f not in ("spec_version", "run_id", "dataset", "init_adapter")))
                out.append(f"{key} is not a {fields['method']} setting; use one of: {known}")
            else:
                out.append(f"{key}={error.get('input')!r}: {error['msg']}")
        return out
    return []


def read_spec(config: Mapping[str, Any]) -> RunSpec:
    """The typed spec of a run's ``config``: any version, aliases accepted, the method's model picked.

    Raises ``ValueError`` naming every problem when the config is not a spec of its method.
    """
    problems = spec_problems(config)
    if problems:
        raise ValueError("not a run spec: " + "; ".join(problems))
    fields = canonical(config)
    fields.setdefault("spec_version", SPEC_VERSION)
    return _model(fields).model_validate(fields)


def same_run(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether a submit of ``wanted`` is answered by the run recorded with ``existing`` (the one rule).

    The two specs are compared in canonical form; a ``target`` left None on the submit means
    "the platform's default", which the launcher writes into the recorded spec, so it matches
    whatever target the recorded run got.
    """
    a, b = canonical(existing), canonical(wanted)
    a.pop("spec_version", None)
    b.pop("spec_version", None)
    if b.get("target") is None:
        a.pop("target", None)
        b.pop("target", None)
    return a == b
