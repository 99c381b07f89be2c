"""What actually ran: the trainer's resolved configuration, recorded on the run when training starts.

The spec says what was asked; this says what the trainer saw. At ``on_train_begin`` the
job records, under the run's ``trainer`` summary field:

- ``config``: every field of the TRL config object (``SFTConfig``, ``GRPOConfig``, ...), library
  defaults filled in, and ``config_class``;
- ``peft``: the PEFT (LoRA) config of each adapter, as PEFT holds it;
- ``library_defaults``: the config fields whose value is the library's own default (the job
  did not set them, or set them to what the library would have used), so ``python -m whileai
  diff`` can tell a difference that only a library upgrade made from one a user made;
- ``versions``: trl, transformers, peft, torch, accelerate, datasets.

TRL has changed defaults between minor versions (GRPO's ``loss_type``, ``beta``,
``scale_rewards``); with this record two runs of the same spec under two TRL versions show why
they differ.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from typing import Any, TypedDict

from transformers import TrainerCallback

__all__ = ["TrainerRecord", "TrainerConfigRecord", "resolved_trainer_config", "LIBRARIES"]

#: The libraries whose versions decide what a trainer does with a spec.
LIBRARIES = ("trl", "transformers", "peft", "torch", "accelerate", "datasets")


class TrainerConfigRecord(TypedDict):
    """The run's ``trainer`` summary field (the module docstring): the config and each adapter's, as their JSON."""

    config_class: str
    config: dict[str, Any]  # every field of the TRL config object, as JSON
    library_defaults: list[str]
    peft: dict[str, dict[str, Any]]  # adapter name -> its PEFT config, as JSON
    versions: dict[str, str | None]


def _plain(value: Any) -> Any:
    """A JSON value for a config field (enums by value, sets sorted, anything else as text)."""
    return json.loads(json.dumps(value, default=lambda v: sorted(v) if isinstance(v, (set, frozenset))
                                 else getattr(v, "value", str(v))))


def _field_defaults(config: Any) -> dict[str, object]:
    """Each field's default where ``config`` (a dataclass or its class) has one; a factory that needs the environment
    gives none. The values are only compared and shown, never computed with."""
    found: dict[str, object] = {}
    if not dataclasses.is_dataclass(config):
        return found
    for field in dataclasses.fields(config):
        if field.default is not dataclasses.MISSING:
            found[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            try:
                found[field.name] = field.default_factory()
            except Exception:  # a factory that needs the environment: no default to compare with
                continue
    return found


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def resolved_trainer_config(args: Any, model: Any = None) -> TrainerConfigRecord:
    """The record described in the module docstring, for a trainer's ``args`` and its (PEFT) ``model``."""
    values = _plain(args.to_dict() if hasattr(args, "to_dict") else dataclasses.asdict(args))
    defaults = {k: _plain(v) for k, v in _field_defaults(args).items()}
    library_defaults = sorted(k for k, v in values.items() if k in defaults and defaults[k] == v)
    peft = {name: _plain(config.to_dict() if hasattr(config, "to_dict") else vars(config))
            for name, config in (getattr(model, "peft_config", None) or {}).items()}
    return {
        "config_class": type(args).__name__,
        "config": values,
        "library_defaults": library_defaults,
        "peft": peft,
        "versions": _versions(),
    }


class TrainerRecord(TrainerCallback):
    """Notes :func:`resolved_trainer_config` on ``run`` when training begins (never raises into training)."""

    def __init__(self, run: Any):
        self.run = run
        self.recorded: TrainerConfigRecord | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        try:
            self.recorded = resolved_trainer_config(args, model)
            self.run.note(trainer=self.recorded)
        except Exception as exc:  # a record that cannot be made must not stop the training it describes
            print(f"the trainer's resolved config was not recorded: {type(exc).__name__}: {exc}", flush=True)
