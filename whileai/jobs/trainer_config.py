"""The TRL and PEFT settings a spec asks for: pure functions of the spec (no model, no data, no device).

The job bodies build their ``SFTConfig`` / ``GRPOConfig`` / ``DPOConfig`` / ``RewardConfig`` and
``LoraConfig`` from these, adding only what depends on the data or the machine (GRPO's per-device
batch from its group size, DPO's ``max_length`` from the longest prompt, the device flags). A test
checks that what ``validate`` prints for every knob is what these hand to TRL and PEFT
(``tests/test_resolved_spec.py``).

:data:`TRL_NAMES` maps each knob to the TRL argument it becomes, so the two can be read side by side.
"""

from __future__ import annotations

from typing import Any, TypedDict

from whileai.core.spec import DPOSpec, GRPOSpec, RMSpec, RunSpec, SFTSpec, micro_batches
from whileai.jobs import defaults as job_defaults
from whileai.core import defaults as core_defaults

__all__ = ["trl_settings", "grpo_reward_weights", "lora_settings", "vllm_server_host", "strategy_settings", "ZeroConfig", "TRL_NAMES", "LORA_NAMES", "trl_defaults",
           "LoraSettings", "FsdpConfig", "StrategySettings"]

#: knob -> the TRL config argument it sets (where the names differ, e.g. ``steps`` -> ``max_steps``); trl_settings
#: copies each knob of the spec's method under this name, then shapes the few TRL reads otherwise
TRL_NAMES: dict[str, str] = {
    "learning_rate": "learning_rate", "lr_scheduler_type": "lr_scheduler_type", "seed": "seed", "steps": "max_steps",
    "epochs": "num_train_epochs", "batch_size": "per_device_train_batch_size", "generations": "num_generations",
    "max_completion_length": "max_completion_length", "temperature": "temperature", "beta": "beta",
    "loss_type": "loss_type", "epsilon_high": "epsilon_high", "scale_rewards": "scale_rewards",
}
#: knob -> the PEFT LoraConfig argument it sets
LORA_NAMES: dict[str, str] = {"lora_rank": "r", "lora_alpha": "lora_alpha"}


def trl_settings(spec: RunSpec) -> dict[str, Any]:
    """The TRL config arguments ``spec`` decides: TRL's name -> value."""
    fields = type(spec).model_fields
    out: dict[str, Any] = {trl: getattr(spec, knob) for knob, trl in TRL_NAMES.items() if knob in fields}
    out["warmup_steps"] = core_defaults.TRAIN_WARMUP_RATIO  # a float under 1 is a share of the steps
    if spec.steps is None:  # epochs decide
        del out["max_steps"]
    # the effective batch is split per process (_micro); GRPO's per-device batch follows its group size (the job)
    out.pop("per_device_train_batch_size", None)
    if isinstance(spec, SFTSpec):
        # a step count decides the length when set (TRL's max_steps wins); epochs are then not read
        out["num_train_epochs"] = spec.epochs if spec.epochs is not None else job_defaults.SFT_EPOCHS_UNREAD
        out.update(_micro(spec))
    elif isinstance(spec, GRPOSpec):
        out.update(mask_truncated_completions=spec.truncated == "mask", reward_weights=grpo_reward_weights(spec))
        if spec.generation_backend == "vllm":  # colocated in the trainer's processes, or node 0's own server
            out.update(use_vllm=True, vllm_mode=spec.vllm_mode)
            if spec.vllm_server:
                out.update(vllm_server_host=vllm_server_host(spec), vllm_server_port=job_defaults.VLLM_SERVER_PORT)
    elif isinstance(spec, DPOSpec):
        del out["max_completion_length"]  # the job adds it to the longest prompt of the data: max_length
        losses = [spec.loss_type] + (["sft"] if spec.nll_weight > 0 and spec.loss_type != "sft" else [])
        out.update(loss_type=losses, **_micro(spec))
        if len(losses) > 1:
            out["loss_weights"] = [1.0, spec.nll_weight]
        if spec.loss_type == "exo_pair":
            out["label_smoothing"] = job_defaults.DPO_EXO_EPSILON
    elif isinstance(spec, RMSpec):
        out.update(_micro(spec))
    out.update(strategy_settings(spec))
    return out


def grpo_reward_weights(spec: GRPOSpec) -> list[float] | None:
    """The weights TRL sums GRPO's rewards with: in an environment with a per-turn reward, the episode judge's 1.0
    and ``turn_reward_weight``; else ``reward_weights`` (None: TRL's 1.0 each)."""
    if spec.environment is not None and spec.turn_reward:
        return [1.0, spec.turn_reward_weight]
    return list(spec.reward_weights) if spec.reward_weights is not None else None


def vllm_server_host(spec: RunSpec) -> str:
    """Where the ranks reach node 0's vLLM server: loopback on one node, node 0's address (torchrun's
    ``MASTER_ADDR``) past one."""
    import os

    return "127.0.0.1" if spec.nodes <= 1 else os.environ.get("MASTER_ADDR", "127.0.0.1")


def _micro(spec: SFTSpec | DPOSpec | RMSpec) -> dict[str, int]:
    """The per-device batch and accumulation steps of one process's share of the effective ``batch_size``."""
    per_device, accumulate = micro_batches(spec.batch_size // spec.world_size, spec.batch_per_device)
    out = {"per_device_train_batch_size": per_device}
    if accumulate > 1:
        out["gradient_accumulation_steps"] = accumulate
    return out


class _ZeroOptimization(TypedDict):
    """DeepSpeed's ``zero_optimization`` block: the ZeRO stage, and communication overlapped with the backward pass."""

    stage: int
    overlap_comm: bool


class _Enabled(TypedDict):
    """A DeepSpeed switch: on, off, or ``"auto"`` (the trainer's own arguments decide)."""

    enabled: bool | str


class ZeroConfig(TypedDict):
    """DeepSpeed's config for ZeRO stage 2 or 3 (``_zero``), under DeepSpeed's names; every ``"auto"`` is filled
    by the HF integration from the trainer's own arguments."""

    zero_optimization: _ZeroOptimization
    train_micro_batch_size_per_gpu: int | str
    gradient_accumulation_steps: int | str
    train_batch_size: int | str
    bf16: _Enabled
    gradient_clipping: float | str


#: DeepSpeed's config for ZeRO stage 2 or 3; "auto" lets the HF integration fill sizes and precision from the
#: trainer's own arguments, so there is one copy of each (transformers' HfTrainerDeepSpeedConfig)
def _zero(stage: int) -> ZeroConfig:
    return {"zero_optimization": {"stage": stage, "overlap_comm": True},
            "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
            "train_batch_size": "auto", "bf16": {"enabled": "auto"}, "gradient_clipping": "auto"}


class FsdpConfig(TypedDict):
    """The trainer's ``fsdp_config`` for a LoRA: the original parameters kept (frozen and trainable weights apart
    inside a flat shard), each transformer layer wrapped as one unit."""

    use_orig_params: bool
    auto_wrap_policy: str


class StrategySettings(TypedDict, total=False):
    """The TRL/accelerate arguments of a strategy past one process, under the trainer's names; one strategy's keys
    at a time (none for one process)."""

    ddp_find_unused_parameters: bool  # ddp
    fsdp: str  # fsdp, with its fsdp_config
    fsdp_config: FsdpConfig
    deepspeed: ZeroConfig  # zero2, zero3


def strategy_settings(spec: RunSpec) -> StrategySettings:
    """The TRL/accelerate arguments ``spec.strategy`` becomes; nothing for one process (``strategy`` is not read).

    batch sizes stay global: every method's per-device batch is the effective one over ``world_size``
    (``trl_settings``), so the strategy only says how the replicas share state.
    """
    if spec.world_size <= 1:
        return {}
    if spec.strategy == "ddp":
        # a LoRA uses every trainable weight each step: no search for unused ones (which costs a pass per step)
        return {"ddp_find_unused_parameters": False}
    if spec.strategy == "fsdp":
        # use_orig_params keeps the LoRA's frozen and trainable weights apart inside a flat shard
        return {"fsdp": "full_shard auto_wrap",
                "fsdp_config": {"use_orig_params": True, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}}
    return {"deepspeed": _zero(3 if spec.strategy == "zero3" else 2)}


class LoraSettings(TypedDict):
    """The ``LoraConfig`` arguments a spec decides, under PEFT's names."""

    r: int  # lora_rank
    lora_alpha: int
    lora_dropout: float  # TRAIN_LORA_DROPOUT
    target_modules: str  # TRAIN_LORA_TARGETS: every linear projection


def lora_settings(spec: RunSpec) -> LoraSettings:
    """PEFT ``LoraConfig`` arguments ``spec`` decides (the task type and saved modules are the method's)."""
    return {"r": spec.lora_rank, "lora_alpha": spec.lora_alpha, "lora_dropout": core_defaults.TRAIN_LORA_DROPOUT,
            "target_modules": core_defaults.TRAIN_LORA_TARGETS}


def trl_defaults(method: str) -> dict[str, object]:
    """TRL's own defaults for ``method``'s config class, read from the class (never copied): TRL name -> default."""
    import trl

    from whileai.jobs.trainer_record import _field_defaults

    cls = {"sft": trl.SFTConfig, "grpo": trl.GRPOConfig, "dpo": trl.DPOConfig, "rm": trl.RewardConfig}[method]
    return _field_defaults(cls)
