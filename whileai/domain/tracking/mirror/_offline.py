"""Nothing leaves the machine unless the user named a remote tracker.

Each tracker phones home on its own, apart from the run it stores: MLflow fetches a telemetry config from
``config.mlflow-telemetry.io`` when imported (``mlflow.telemetry``; off with MLFLOW_DISABLE_TELEMETRY or
DO_NOT_TRACK=true), and W&B's process-wide OpenTelemetry exporter posts to its default API host unless the
process's own settings (not the run's ``mode=``) say offline (``wandb.analytics.opentelemetry``; off with
WANDB_MODE=offline, and WANDB_ERROR_REPORTING=false for its error reports). They read these from the environment,
some at import and W&B's service process at its start, so :func:`keep_local` sets them in this process's
environment before any tracker is imported, only where the user has not set them. trackio stays local unless
TRACKIO_SPACE_ID (or TRACKIO_SERVER_URL) names a remote store.
"""

from __future__ import annotations

import os
import sys

__all__ = ["keep_local", "wandb_online", "QUIET_ENV", "WANDB_LOCAL_ENV"]

#: every tracker's telemetry and update checks off (set unless the user set them)
QUIET_ENV: dict[str, str] = {
    "MLFLOW_DISABLE_TELEMETRY": "true",   # mlflow.telemetry.utils.is_telemetry_disabled
    "DO_NOT_TRACK": "true",               # the same switch, read by mlflow ("true" only) and other tools
    "WANDB_ERROR_REPORTING": "false",     # W&B's error reports and OpenTelemetry logs (wandb.env.error_reporting_enabled)
    "HF_HUB_DISABLE_TELEMETRY": "1",      # trackio rides on huggingface_hub
}

#: W&B kept on this machine when the user has not set it up to go online
WANDB_LOCAL_ENV: dict[str, str] = {
    "WANDB_MODE": "offline",        # the process's settings, which W&B's telemetry exporter reads (not the run's)
    "WANDB_DISABLE_GIT": "true",    # no repository state (remote URL, diff) written into the offline run
    "WANDB_DISABLE_CODE": "true",   # no copy of the program's code either
}


def wandb_online() -> bool:
    """Whether the user set W&B up to go online (WANDB_MODE other than offline/disabled, or WANDB_API_KEY)."""
    mode = os.environ.get("WANDB_MODE", "").strip().lower()
    if mode:
        return mode not in ("offline", "dryrun", "disabled")
    return bool(os.environ.get("WANDB_API_KEY"))


def keep_local() -> None:
    """Turn every tracker's telemetry off, and W&B offline unless the user chose online; the user's own settings win."""
    wanted = dict(QUIET_ENV)
    if not wandb_online():
        wanted.update(WANDB_LOCAL_ENV)
    for name, value in wanted.items():
        if not os.environ.get(name):
            os.environ[name] = value
    _stop_mlflow_telemetry()


def _stop_mlflow_telemetry() -> None:
    """An MLflow imported before the switch started its telemetry client: set it again, now off."""
    module = sys.modules.get("mlflow.telemetry.client")
    if module is None:
        return
    try:
        found = module.get_telemetry_client()
        module.set_telemetry_client()  # reads the switch again: None when off
        if found is not None and module.get_telemetry_client() is None:
            found._clean_up()
    except Exception:  # noqa: BLE001 - a changed MLflow internal leaves its own switch, which is set
        pass
