"""System metrics a job logs into its run beside the trainer's: CPU, resident memory, GPU use.

:class:`SystemMetrics` is a ``transformers.TrainerCallback`` that, at most every
JOB_SYSTEM_METRICS_EVERY_S seconds, samples the job's process and logs

- ``system/cpu_percent``: the process's CPU use since the last sample (100 = one core busy),
- ``system/rss_mb``: its resident memory, in MB,
- ``system/gpu_util_percent``: the GPU's utilisation (when NVML answers),
- ``system/gpu_memory_mb``: GPU memory held by torch's allocator, in MB (on a GPU),

at the trainer's global step, so the page draws them with the loss. A failed
sample is skipped: reading the system never interrupts training.

At train begin it also notes ``setup`` on the run: what the trainer really
runs with (the base model, the LoRA rank and alpha of the adapter being trained,
the batch per device, the accumulation and the effective batch), read from the
trainer's arguments and model rather than the spec, so a method that sets its
own batch (GRPO: generations x prompts) is shown as it ran.
"""

from __future__ import annotations

import time
from typing import Any

from whileai.jobs import defaults
from whileai.jobs._training_fields import TrainerSetup

__all__ = ["SystemMetrics", "sample", "setup"]  # noqa: F822  (SystemMetrics: module __getattr__)

_MB = 1024 * 1024


def sample(process: Any = None) -> dict[str, float]:
    """One reading of this process (and the GPU torch uses, if any); keys as in the module docstring."""
    import psutil
    import torch

    proc = process or psutil.Process()
    out: dict[str, float] = {}
    try:
        out["system/cpu_percent"] = float(proc.cpu_percent(interval=None))
        out["system/rss_mb"] = proc.memory_info().rss / _MB
    except (psutil.Error, OSError):
        pass  # the process is being torn down: no reading this time
    if torch.cuda.is_available():
        try:
            out["system/gpu_memory_mb"] = torch.cuda.memory_reserved() / _MB
        except (RuntimeError, AssertionError):
            pass
        try:
            out["system/gpu_util_percent"] = float(torch.cuda.utilization())
        except Exception:  # noqa: BLE001, S110  NVML missing or refused (no pynvml, a MIG slice): no reading
            pass
    return out


def setup(args: Any, model: Any, base_model: str | None = None) -> TrainerSetup:
    """The trainer's effective settings: ``base_model``, ``lora_rank``, ``lora_alpha``, batch sizes."""
    out: TrainerSetup = {}
    if base_model:
        out["base_model"] = base_model
    configs = getattr(model, "peft_config", None)
    lora = configs.get("default") if isinstance(configs, dict) else None
    if lora is not None and getattr(lora, "r", None) is not None:
        out["lora_rank"] = int(lora.r)
        out["lora_alpha"] = int(getattr(lora, "lora_alpha", 0) or 0) or None
    per_device = getattr(args, "per_device_train_batch_size", None)
    accumulate = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
    devices = max(1, int(getattr(args, "world_size", 1) or 1))
    if per_device:
        out["batch_per_device"] = int(per_device)
        out["gradient_accumulation"] = accumulate
        out["batch_size"] = int(per_device) * accumulate * devices
    return out


def _define() -> type:
    import transformers

    class SystemMetrics(transformers.TrainerCallback):
        """Log :func:`sample` into ``run`` every ``every_s`` seconds of training (at a step's end)."""

        def __init__(self, run: Any, every_s: float = defaults.JOB_SYSTEM_METRICS_EVERY_S,
                     base_model: str | None = None):
            import psutil

            self.run = run
            self.base_model = base_model
            self.setup: TrainerSetup = {}
            self.every_s = float(every_s)
            self._process = psutil.Process()
            self._last = -float("inf")
            self._taken_at: int | None = None  # the step of the last sample: one point per step

        def _take(self, step: int) -> None:
            try:
                values = sample(self._process)
                if values:
                    self.run.log(step=step, **values)
            except Exception:  # noqa: BLE001, S110  a system reading must never stop a training loop
                pass
            self._last = time.monotonic()
            self._taken_at = step

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                try:
                    self.setup = setup(args, kwargs.get("model"), self.base_model)
                    self.run.note(setup=self.setup)
                except Exception:  # noqa: BLE001, S110  a note must never stop a training loop
                    pass
                self._process.cpu_percent(interval=None)  # the first reading only starts psutil's clock
                self._last = time.monotonic()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero and time.monotonic() - self._last >= self.every_s:
                self._take(state.global_step)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero and self._taken_at != state.global_step:
                self._take(state.global_step)

    SystemMetrics.__module__ = __name__
    SystemMetrics.__qualname__ = "SystemMetrics"
    return SystemMetrics


def __getattr__(name: str) -> Any:
    if name == "SystemMetrics":  # transformers is imported on first use, not with the module
        value = globals()["SystemMetrics"] = _define()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
