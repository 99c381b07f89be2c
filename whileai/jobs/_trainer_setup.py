"""The TRL trainer set-up every LoRA method shares: its config arguments and the trainer itself."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from whileai.core.errors import NonFiniteTraining
from whileai.core.paths import last_checkpoint
from whileai.core.spec import RunSpec

from whileai.jobs._loading import peft_config
from whileai.jobs.trainer_config import trl_settings

__all__ = ["trainer_settings", "train_lora", "checkpointing", "checkpoints_on", "last_checkpoint", "fit_trainer",
           "on_save", "ensure_response_parser"]

#: the run's checkpoint folder while its job trains (``checkpointing``); None: the job keeps no checkpoint
_CHECKPOINTS: ContextVar[Path | None] = ContextVar("whileai_checkpoints", default=None)


@contextmanager
def checkpointing(folder: Path | None) -> Iterator[None]:
    """Within the block, trainers save their state under ``folder`` (the run's, not the job's) every
    ``save_steps`` and start from the newest checkpoint found there (``fit_trainer``)."""
    token = _CHECKPOINTS.set(folder)
    try:
        yield
    finally:
        _CHECKPOINTS.reset(token)


def checkpoints_on(spec: RunSpec) -> bool:
    """Whether ``spec``'s job saves checkpoints: ``save_steps`` is on and the run is longer than it (a run of
    ``save_steps`` steps or fewer would only save at its end, which nothing resumes from)."""
    if spec.save_steps <= 0:
        return False
    return spec.steps is None or spec.steps > spec.save_steps


def on_save(action: Callable[[], None]) -> Any:
    """A trainer callback that runs ``action`` after every checkpoint is written (a Volume's commit)."""
    from transformers import TrainerCallback

    class _OnSave(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            action()

    return _OnSave()


def fit_trainer(trainer: Any) -> Any:
    """``trainer.train()``, from the run's newest checkpoint when there is one; returns the trainer.

    Raises ``core.errors.NonFiniteTraining`` when the trainer's finite guard stopped it at a step whose loss or
    gradient norm was not finite: the weights are then not finite, and nothing may go on to use them.
    """
    from whileai.jobs._finite_guard import tripped_guard

    start = last_checkpoint(_CHECKPOINTS.get())
    if start is not None:
        print(f"resuming from {start.name} (the trainer's weights, optimizer, scheduler, RNG and data position)",
              flush=True)
    trainer.train(resume_from_checkpoint=str(start) if start is not None else None)
    guard = tripped_guard(trainer.callback_handler.callbacks)
    if guard is not None:
        raise NonFiniteTraining(guard.explain(_CHECKPOINTS.get()))
    return trainer


def trainer_settings(spec: RunSpec, folder: Path) -> dict[str, Any]:
    """The trainer config's arguments: the spec's (``trainer_config.trl_settings``), and this machine's and the
    job's own (checkpoints under the run's folder when ``checkpointing`` names one and the run is longer than
    ``save_steps``, no reporters, a log line every step)."""
    import torch

    on_gpu = torch.cuda.is_available()
    settings: dict[str, Any] = {
        "output_dir": str(folder / "trainer"),
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "use_cpu": not on_gpu,
        "bf16": bool(on_gpu and torch.cuda.is_bf16_supported()),
        # recomputing activations saves GPU memory on long sequences; on a CPU it only costs time
        "activation_checkpointing": on_gpu,
        "dataloader_num_workers": 0,
    }
    if spec.world_size > 1:  # gloo on CPUs, nccl on GPUs
        settings["ddp_backend"] = "nccl" if on_gpu else "gloo"
    checkpoints = _CHECKPOINTS.get()
    if checkpoints is not None and checkpoints_on(spec):
        from whileai.core import defaults

        settings.update(output_dir=str(checkpoints), save_strategy="steps", save_steps=spec.save_steps,
                        save_total_limit=defaults.TRAIN_CHECKPOINTS_KEPT)
    settings.update(trl_settings(spec))  # what the spec decides: the one pure mapping, checked against validate
    return settings


def train_lora(trainer_cls: Any, config_cls: Any, spec: RunSpec, folder: Path, model: Any, tokenizer: Any,
               examples: list[dict[str, Any]], callbacks: list[Any], *, task_type: str = "CAUSAL_LM",
               **config: Any) -> Any:
    """One TRL trainer with the run's LoRA, trained on ``examples``; returns the trainer.

    The config is ``config_cls`` over :func:`trainer_settings`, the run's batch
    size (``batch_size``, else TRAIN_BATCH_SIZE) and the method's own ``config``;
    the rows reach TRL through ``export.to_hf_dataset``. SFT, DPO and RM differ only
    in the trainer, their config keys and (RM) the LoRA task type.
    """
    from whileai.domain.export import decoding_chat_template, to_hf_dataset

    args = config_cls(
        **trainer_settings(spec, folder),
        **config,
    )
    # rows whose values differ in JSON type between rows reach the trainer with arguments as JSON text
    # (to_hf_dataset); the template still renders each row's own objects
    with decoding_chat_template(tokenizer):
        trainer = trainer_cls(
            model=model,
            args=args,
            train_dataset=to_hf_dataset(examples),
            processing_class=tokenizer,
            peft_config=peft_config(model, spec, task_type=task_type),
            callbacks=callbacks,
        )
        fit_trainer(trainer)
    return trainer


def ensure_response_parser(tokenizer: Any) -> None:
    """TRL parses replies into tool calls with the tokenizer's response template; the kit's needs one set."""
    if getattr(tokenizer, "response_template", None) is not None or getattr(tokenizer, "response_schema", None) is not None:
        return
    template = tokenizer.chat_template or ""
    if "<tool_call>" in template and "<|im_start|>" in template:
        from trl.chat_template_utils import qwen3_template

        tokenizer.response_template = qwen3_template  # same markup: ChatML turns, JSON in <tool_call> blocks
        return
    from trl.chat_template_utils import add_response_schema

    add_response_schema(tokenizer)
