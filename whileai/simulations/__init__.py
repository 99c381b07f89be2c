"""whileai.simulations: rollouts in, better tool-using agents out, with the proof on a run page.

    import whileai.simulations as wai

Names load on first use, so ``import whileai.simulations`` stays fast and does
not pull in torch until a name that needs it is touched. docs/architecture.md
lists the module each name is defined in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from whileai.core import errors as _errors

from whileai.core.package import check_root

check_root()  # a namespace-imported whileai (a clone named whileai/ in the cwd) never wired the platform: say so here

# public name -> the module that defines it (relative to this package, or absolute)
_EXPORTS: dict[str, str] = {
    # run tracking and hosted training
    "TrainerCallback": "whileai.domain.tracking.callback",
    "TrainingRun": "whileai.domain.tracking",
    "training_run": "training",
    "get_run": "training",
    "list_runs": "training",
    "delete_run": "training",
    "resume": "training",
    "attach_holdout": "training",
    "attach_delta": "training",
    "train": "training",
    "serve": "training",
    "unserve": "training",
    "delete_model": "training",
    "models": "training",
    "reward_model": "training",
    # rollout rows and export
    "SimulationData": "whileai.domain.rows.rollouts",
    "training_rows": "whileai.domain.export",
    "export_dataset": "whileai.domain.export",
    "export_training": "whileai.domain.export",
    "export_preference": "whileai.domain.export",
    "to_trl": "whileai.domain.export",
    "tool_call_roundtrip": "whileai.domain.export",
    "loss_mask": "whileai.domain.export",
    # datasets on the platform, profile and selection
    "push": "datasets",
    "delete_dataset": "datasets",
    "profile": "datasets",
    "selection_report": "datasets",
    # judges, scoring and preference pairs
    "first_action_judge": "whileai.domain.judges.judging",
    "evaluate": "whileai.domain.judges.judging",
    "ScoredData": "whileai.domain.judges.judging",
    "judge_trust": "whileai.domain.judges.judging",
    "judge_pairs": "whileai.domain.judges.judging",
    "build_preference_pairs": "whileai.domain.judges.judging",
    # did training move the behaviour?
    "delta_report": "whileai.domain.report",
    # reward-hacking monitor
    "HackMonitor": "whileai.domain.monitor",
    "format_hack_monitor": "whileai.domain.monitor",
    # named exceptions and warnings (one hierarchy: whileai.core.errors; NOT_IN_SDK never reach a caller)
    **{name: "whileai.core.errors" for name in _errors.__all__ if name not in _errors.NOT_IN_SDK},
}

# submodules reachable as attributes: wai.datasets.cut(...), wai.defaults.MONITOR_ALPHA
_SUBMODULES: dict[str, str] = {"datasets": "whileai.simulations.datasets", "defaults": "whileai.domain.defaults"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES])

if TYPE_CHECKING:  # what the lazy loader below resolves, spelled out for type checkers and IDEs
    from whileai.core.errors import (
        ExportValidationError,
        ExportWarning,
        MirrorWarning,
        MissingPolicyWarning,
        MonitorWarning,
        NotFoundError,
        PlatformError,
        RowFormatError,
        ServingWarning,
        StoreVersionError,
        TrackingWarning,
        TrainingConfigError,
        TrainingSelectionError,
        TrainingWarning,
        WhileaiError,
        WhileaiWarning,
    )

    from whileai.simulations import datasets

    from whileai.domain import defaults
    from whileai.simulations.datasets import delete_dataset, profile, push, selection_report
    from whileai.domain.export import (
        export_dataset,
        export_preference,
        export_training,
        loss_mask,
        to_trl,
        tool_call_roundtrip,
        training_rows,
    )
    from whileai.domain.judges.judging import ScoredData, build_preference_pairs, evaluate, first_action_judge, judge_pairs, judge_trust
    from whileai.domain.monitor import HackMonitor, format_hack_monitor
    from whileai.domain.report import delta_report
    from whileai.domain.rows.rollouts import SimulationData
    from whileai.simulations.training import (
        attach_delta,
        attach_holdout,
        delete_model,
        delete_run,
        get_run,
        list_runs,
        models,
        resume,
        reward_model,
        serve,
        train,
        training_run,
        unserve,
    )
    from whileai.domain.tracking.callback import TrainerCallback
    from whileai.domain.tracking import TrainingRun


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        home = _EXPORTS[name]
        value = getattr(importlib.import_module(home if home.startswith("whileai.") else f".{home}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(_SUBMODULES[name])
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
