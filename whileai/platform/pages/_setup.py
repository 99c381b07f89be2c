"""Beside a run's result: the base model, LoRA rank and batch size it trained with (past one process, the world
size, the per-device batch and the gradient accumulation too), and its worker's log.

``setup(record)`` reads each value where it is known, most exact first: what the
job noted the trainer ran with (``summary["setup"]``, whileai/jobs/system.py),
the keyword arguments ``wai.train`` resolved (the top of the config), the spec
as written (a runner's ``spec``), and last the job's default (TRAIN_LORA_R,
KIT_BASE_NAME). Each answer says whether the config set it or a default filled it.

``worker_log(store, account, run_id, offset)`` answers the log of the run's
newest job: the file the local launcher writes under the data root
(``job_log(job_id)``), found from the job row of this account's run, never from a
path a client sent. At most WORKER_LOG_MAX_BYTES are sent, from ``offset`` on
(the tail when the offset is further back), so a page tailing a live run asks
only for what is new.
"""

from __future__ import annotations

import os
from typing import Any

from whileai.core.spec import canonical
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults
from whileai.platform.launcher.jobs import job_log
from whileai.platform import defaults
from whileai.platform.pages._shapes import SetupField, WorkerLog
from whileai.platform.pages._views import config_parts
from whileai.platform.store.records import RunRecord

__all__ = ["setup", "worker_log"]

#: shown name -> (keys in the noted setup, keys in the config and spec, the job's default)
_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], Any]] = {
    "base_model": (("base_model",), ("base_model",), kit_defaults.KIT_BASE_NAME),
    "lora_rank": (("lora_rank",), ("lora_rank", "lora_r"), core_defaults.TRAIN_LORA_R),
    "batch_size": (("batch_size",), ("batch_size", "per_device_train_batch_size"), None),
    # past one process (shown only then): the world, and how the effective batch above was divided across it
    "world_size": (("world_size",), ("world_size",), None),
    "batch_per_device": (("batch_per_device",), (), None),
    "gradient_accumulation": (("gradient_accumulation",), (), None),
}
#: the fields a one-process run leaves off its page (it shows what it showed before processes were a setting)
_PAST_ONE = ("world_size", "batch_per_device", "gradient_accumulation")


def _first_value_at(where: Any, keys: tuple[str, ...]) -> Any:
    """The value of the first of ``keys`` that ``where`` (a dict) sets to something other than None or ""."""
    if not isinstance(where, dict):
        return None
    return next((where[k] for k in keys if where.get(k) not in (None, "")), None)


def setup(record: RunRecord) -> dict[str, SetupField] | None:
    """``{"base_model"|"lora_rank"|"batch_size": {"value", "source"}}``; None for a run with none of them.

    ``source`` is "config" when the run's config (or spec) set the value and
    "default" when the job filled it in.
    """
    # the run spec's canonical keys, whatever spec version recorded them (whileai.core.spec)
    config: dict[str, Any] = canonical(record["config"]) if isinstance(record.get("config"), dict) else {}
    summary: dict[str, Any] = record["summary"] if isinstance(record.get("summary"), dict) else {}
    raw_spec = config_parts(record)["spec"]
    spec = canonical(raw_spec) if isinstance(raw_spec, dict) and raw_spec is not record.get("config") else config
    trained: dict[str, Any] = summary["setup"] if isinstance(summary.get("setup"), dict) else {}
    training: dict[str, Any] = summary["training"] if isinstance(summary.get("training"), dict) else {}
    written_in = spec if isinstance(spec, dict) and spec is not config else {}
    kind = record.get("kind")
    out: dict[str, SetupField] = {}
    placed = config.get("processes"), config.get("nodes")  # the world the config asked for, whoever wrote it
    if all(isinstance(v, int) or v is None for v in placed):
        config = {**config, "world_size": (placed[0] or 1) * (placed[1] or 1)}
    for name, (noted, keys, default) in _FIELDS.items():
        written = _first_value_at(written_in if written_in and name != "world_size" else config, keys)
        value = _first_not_none(_first_value_at(trained, noted), _first_value_at(training, noted), written,
                                _first_value_at(config, keys))
        if value is None and kind == "hosted" and (trained or training or config.get("method")):
            value = default  # a hosted job fills what its config left out
        if value is None:
            continue
        same = written is not None and str(written) == str(value)
        source = "trainer" if not keys else "config" if same else "default" if written is None else "trainer"
        out[name] = {"value": value, "source": source}  # a field no config names is what the trainer derived
    world = out.get("world_size")
    if (world["value"] if world else None) in (None, 1):
        for name in _PAST_ONE:
            out.pop(name, None)
    return out or None


def _first_not_none(*values: Any) -> Any:
    """The first of ``values`` that is not None (an empty string counts: it was written)."""
    return next((v for v in values if v is not None), None)


def worker_log(store: Any, account_id: str, run_id: str, offset: int | None) -> WorkerLog:
    """The run's newest job's log from ``offset`` (or its tail): ``{"job", "text", "offset", "size", "note"}``.

    The caller has checked that ``run_id`` is this account's; the job is looked up
    in this account only, and the file is ``job_log(job id)``.
    """
    jobs = store.list_jobs(account_id, run_id=run_id, limit=1)
    if not jobs:
        return {"job": None, "text": "", "offset": 0, "size": 0,
                "note": "This run has no job on this platform (it was logged by a script), so there is no worker log."}
    job = jobs[0]
    path = job_log(job["id"])
    if job.get("target") not in (None, "local") and not path.exists():
        return {"job": job["id"], "text": "", "offset": 0, "size": 0,
                "note": f"The job ran on {job.get('target')}; its log is kept there, not on this platform."}
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = size - defaults.WORKER_LOG_MAX_BYTES if offset is None else offset
            start = max(0, min(start, size), size - defaults.WORKER_LOG_MAX_BYTES)
            f.seek(start)
            data = f.read(size - start)
    except FileNotFoundError:
        return {"job": job["id"], "text": "", "offset": 0, "size": 0, "note": "The job has not written a log yet."}
    if start > 0 and (offset is None or offset < start):  # a cut tail starts at the next whole line
        cut = data.find(b"\n")
        if 0 <= cut < len(data) - 1:
            start, data = start + cut + 1, data[cut + 1:]
    return {"job": job["id"], "text": data.decode("utf-8", "replace"), "offset": start, "size": start + len(data),
            "cut": start > 0 and (offset is None or offset < start), "note": None}
