"""The job runner, platform side: one job row per hosted run, launched locally or on Modal, and watched.

A local job is a detached worker process (``python -m whileai.jobs.worker
<job_id>``) in its own session, so the process that asked for it can exit. It
reaches the platform with a job-scoped API key minted here (stored hashed like
any key, revoked when the job ends) through the embedded client on the same
store. A one-process job is forked from the data root's warm worker, which has
torch, transformers, TRL and PEFT imported already (``_warm``), and started cold
where that cannot be (the first job of a data root, torchrun, switched off); the
job's log says which. A Modal job is a spawned function call; its progress is
pulled from Modal when the run or job is read.

Nothing watches jobs in the background: :func:`reconcile` runs whenever a job
or its run is read, and settles a job whose process died without a word
(killed, out of memory) or stopped beating (JOB_STALE_S), so no run stays
"running" forever.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn, TypedDict

from whileai.core.errors import ResumeRefused
from whileai.core.jobrow import JobPlatform, ResolvedJudge, platform_of
from whileai.core.spec import JOB_ROW_KEYS, RMSpec, RunSpec, continues_runs, knob_of, read_spec, spec_json, updated
from whileai.platform.store.records import JobRecord, RunRecord
from whileai.platform.store.values import RUN_STOP_MARK
from whileai.platform import defaults
from whileai.core import defaults as core_defaults
from whileai.platform._faults import fault_point
from whileai.platform._rewards import reward_path
from whileai.platform.launcher import _pids, _warm
from whileai.platform.launcher._rules import bounded, launch_problems
from whileai.platform.launcher._shared import (  # noqa: F401  (re-exported: the launcher's names)
    FINISHED,
    hub_env,
    JOB_ID_ENV,
    adapter_dir,
    checkpoint_dir,
    end_job,
    job_dir,
    job_log,
    remove_run_files,
)
from whileai.core.paths import data_root, setting

__all__ = [
    "launch",
    "default_target",
    "reconcile",
    "reconcile_run",
    "end_job",
    "stop_run",
    "job_dir",
    "job_log",
    "launch_spec",
    "missing_keys",
    "PLATFORM_SPEC_KEYS",
    "adapter_dir",
    "checkpoint_dir",
    "remove_run_files",
    "resume_run",
    "ResumeRefused",
    "start_adapter",
    "gold_judge",
    "reward_model_run",
    "worker_env",
    "hub_env",
    "local_commands",
    "job_processes",
    "rank_failure",
    "silent_rank",
    "JOB_ID_ENV",
    "FINISHED",
    "STOP_MARK",
]

#: the summary key a run stopped on request carries (when, and what was ended); the store keeps such a run stopped
STOP_MARK = RUN_STOP_MARK

#: worker processes this process started, by pid: polled (and so reaped) instead of
#: trusting ``kill(pid, 0)``, which also succeeds on a zombie
_CHILDREN: dict[int, subprocess.Popen] = {}
_CHILDREN_LOCK = threading.Lock()


#: spec fields only the platform writes (where a job runs and what it may reach); a launch may not send them
PLATFORM_SPEC_KEYS = JOB_ROW_KEYS


def launch_spec(spec: Mapping[str, Any], embedded: bool = False) -> tuple[RunSpec | None, list[str]]:
    """A launch's spec validated once into its method's model (:func:`whileai.core.spec.parse_spec`), with what
    else the platform refuses (a base model path outside its model folders, ``_loadable``; on the ``embedded``
    platform, a path without a model): ``(spec, [])``, or
    ``(None, every problem)``."""
    from whileai.core.spec import parse_spec
    from whileai.platform._loadable import launch_base_problem

    typed, problems = parse_spec(spec)
    problem = launch_base_problem(spec["base_model"], embedded) if isinstance(spec.get("base_model"), str) else None
    if problem:
        return None, problems + [problem]
    return typed, problems


def missing_keys(spec: Mapping[str, Any]) -> list[str]:
    """The knobs a launch spec does not name (:func:`whileai.core.spec.missing_keys`): the platform fills none."""
    from whileai.core.spec import missing_keys as missing

    return missing(spec)


def worker_env(store: Any, key: str, job_id: str) -> dict[str, str]:
    """The worker's environment: the job key, this data root and this store, no server address.

    The worker always uses the embedded client on the same store (a server that
    launched it may be stopped or restarted while the job runs; the store stays).
    """
    env = dict(os.environ)
    env.pop("WHILEAI_BASE_URL", None)
    env["WHILEAI_API_KEY"] = key
    env[core_defaults.HOME_ENV] = str(data_root())
    env[defaults.STORE_URL_ENV] = store.url
    env[JOB_ID_ENV] = job_id
    for name, value in defaults.JOB_ENV_DEFAULTS.items():
        env.setdefault(name, value)
    env.update(hub_env())
    return env


# ---------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------


def default_target() -> str:
    """Where a job runs when ``train`` names no target: TRAIN_TARGET_ENV, else ``train_target`` in the
    data root's config.json, else TRAIN_TARGET_DEFAULT ("local")."""
    return setting(core_defaults.TRAIN_TARGET_ENV, "train_target") or core_defaults.TRAIN_TARGET_DEFAULT


def launch(store: Any, account_id: str, *, run_id: str, kind: str, target: str, spec: RunSpec,
           reward_path: str | None = None, embedded: bool = False) -> JobRecord:
    """Create the job row for ``run_id`` and start it on ``target`` ("local" or "modal"). Returns the job record.

    ``spec`` is the run's validated spec; the row holds its JSON (:func:`whileai.core.spec.spec_json`) and, apart,
    what only the platform writes (:class:`whileai.core.jobrow.JobPlatform`: ``reward_path``, where the job imports
    a ``python:`` reward from; the judges resolved here). A launch that fails marks the job and the run failed with
    the reason and raises. ``embedded``: the local user's own platform, whose reward-model runs may sit on a base
    folder of theirs (``_loadable``).
    """
    if target not in core_defaults.TRAIN_TARGETS:
        raise ValueError(f"target={target!r} is not a place jobs run; pass one of {', '.join(core_defaults.TRAIN_TARGETS)}")
    platform = JobPlatform(reward_path=reward_path)
    job = store.create_job(account_id, run_id=run_id, kind=kind, target=target, status="queued",
                           spec=_row_spec(spec), platform=platform)
    fault_point("after_job_row")
    try:
        start = start_adapter(store, account_id, spec, target)
        resolved = updated(platform, gold=gold_judge(store, account_id, kind, spec, embedded),
                           reward_rm=reward_model_run(store, account_id, kind, spec, embedded))
        if resolved != platform:
            job = store.update_job(account_id, job["id"], {"platform": resolved})
        if target == "local":
            if start is not None:
                job = store.update_job(account_id, job["id"], {"spec": _row_spec(spec, str(start))})
            return _launch_local(store, account_id, job)
        from whileai.platform.launcher.modal_backend import launch_modal

        return launch_modal(store, account_id, job, start)
    except Exception as exc:
        end_job(store, account_id, job, "failed", f"the job could not start: {type(exc).__name__}: {exc}")
        raise


def _row_spec(spec: RunSpec, init_adapter: str | None = None) -> dict[str, Any]:
    """The spec a job row holds, as the spec's own JSON: the launch's, its start adapter the folder the platform
    resolved (``init_adapter``; a caller's is dropped, and a spec without ``init_from`` names none)."""
    row = {k: v for k, v in spec_json(spec).items() if k != "init_adapter"}
    return {**row, "init_adapter": init_adapter} if init_adapter else row


def _named(spec: RunSpec, field: str) -> Any:
    """The value ``spec`` holds for ``field``; None when its method has no such field."""
    return getattr(spec, field, None)


def start_adapter(store: Any, account_id: str, spec: RunSpec, target: str) -> Path | None:
    """The adapter folder a run with ``init_from`` starts from, checked; None without ``init_from``.

    The run named must be this account's, a policy (a reward model's adapter scores rows and writes none, so
    nothing starts from it; a reward model may itself start from a policy), finished ``done``, with its adapter
    in this platform's adapters folder (a Modal run's adapter is copied there when it ends; one that stayed on
    the Volume can still start a Modal job). Raises ValueError saying which of these fails.
    """
    source = _named(spec, "init_from")
    if not source:
        return None
    try:
        record = store.get_run(account_id, str(source), series=False)
    except LookupError:
        raise ValueError(f"init_from={source!r} is not a run of this account; pass the id of one of its "
                         "finished runs") from None
    method = str((record.get("config") or {}).get("method"))
    if not continues_runs(method):
        raise ValueError(f"init_from={source!r} is a reward model ({method}): its adapter scores rows, it does not "
                         "write them; start from an sft, grpo or dpo run")
    if record["status"] != "done":
        raise ValueError(f"init_from={source!r} is {record['status']}, not done: a run continues only from a "
                         "finished run's adapter; wait for it to end, or pick a done run")
    folder = adapter_dir(record["id"])
    if (folder / "adapter_config.json").is_file():
        return folder
    remote = (record.get("summary") or {}).get("adapter_remote")
    if target == "modal" and remote:
        return folder  # not copied home; the Modal job reads it from the Volume
    raise ValueError(f"init_from={source!r} has no adapter on this platform (nothing at {folder}); "
                     "train that run again, or start from another finished run")


def gold_judge(store: Any, account_id: str, kind: str, spec: RunSpec,
               embedded: bool = False) -> ResolvedJudge | None:
    """The gold judge a GRPO job's monitor loads, resolved here; None when the spec names none.

    The job never loads what a run's summary says: the run named by ``gold_judge``
    must be this account's, a finished ``rm`` run, with the adapter its own job
    saved (``adapter_dir(run_id)``), and its base must pass the same rule as a
    launch's base (``_loadable.launch_base_problem``). Returns the resolution
    (run id, adapter folder, base, threshold, span), which the platform writes on
    the job's row (``platform.gold``, only the platform's); raises ValueError
    naming what fails.
    """
    return _reward_model_run(store, account_id, kind, spec, "gold_judge", "gold judge", "its monitor's gold",
                             embedded)


def reward_model_run(store: Any, account_id: str, kind: str, spec: RunSpec,
                     embedded: bool = False) -> ResolvedJudge | None:
    """The reward model a GRPO job with ``reward=rm`` optimises (``reward_model``), resolved by the same rule as
    :func:`gold_judge`; written on the job's row as ``platform.reward_rm``. None when the spec names none."""
    return _reward_model_run(store, account_id, kind, spec, "reward_model", "reward model", "its reward", embedded)


def _reward_model_run(store: Any, account_id: str, kind: str, spec: RunSpec, field: str, what: str,
                      role: str, embedded: bool = False) -> ResolvedJudge | None:
    from whileai.platform._loadable import launch_base_problem

    name = _named(spec, field)
    if not name:
        return None
    if kind != "grpo":
        raise ValueError(f"{field}={name!r} applies only to grpo ({role}); leave it out of a {kind} spec")
    try:
        record = store.get_run(account_id, str(name), series=False)
    except LookupError:
        raise ValueError(f"{field}={name!r} is not a run of this account; pass the id of one of its finished "
                         "reward-model (rm) runs") from None
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    problems = []
    if record["status"] != "done":
        problems.append(f"it is {record['status']}, not done")
    if config.get("method") != "rm":
        problems.append(f"it was trained with method={config.get('method')!r}, not 'rm'")
    folder = adapter_dir(record["id"])
    if not (folder / "adapter_config.json").is_file():
        problems.append(f"no job of it saved an adapter on this platform (nothing at {folder})")
    base = config.get("base_model")
    problem = launch_base_problem(base, embedded)
    if problem:
        problems.append(f"its base: {problem}")
    training = (record.get("summary") or {}).get("training")
    threshold = training.get("threshold") if isinstance(training, dict) else None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        problems.append("it has no threshold (summary['training']['threshold'], which its rm job records)")
        threshold = 0.0
    if problems:
        raise ValueError(f"{field}={name!r} cannot be this job's {what}: {'; '.join(problems)}; "
                         "name a finished rm run of this account trained by the platform")
    declared = knob_of(RMSpec, "reward_span")  # a record of before the knob: the declared default, as it ran
    span = config.get("reward_span") if config.get("reward_span") in (declared.choices or ()) else declared.default
    return ResolvedJudge(run_id=record["id"], adapter=str(folder), base_model=str(base), threshold=float(threshold),
                         span=str(span))


def _launch_local(store: Any, account_id: str, job: JobRecord) -> JobRecord:
    job_id = job["id"]
    folder = job_dir(job_id)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = job_log(job_id)
    key = store.issue_job_key(account_id, job_id)
    spec = dict(job["spec"] or {})
    platform = updated(platform_of(job), host=socket.gethostname(), launched_at=time.time())
    store.update_job(account_id, job_id, {"platform": platform})
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # the owner's only, like the store
    os.fchmod(fd, 0o600)  # a log made looser before is tightened too
    commands = local_commands(job_id, spec)
    env = worker_env(store, key, job_id)
    procs = []
    with os.fdopen(fd, "ab") as log:
        forked, how = _start_warm(commands, env, folder, log_path)
        log.write(f"whileai job {job_id}: {how}\n".encode())
        log.flush()
        if forked is not None:
            return _running(store, account_id, job_id, platform, forked.pid, forked.started)
        # one launcher per node, all on this host (nodes past one meet at a loopback rendezvous); the first is the
        # job's process
        for command in commands:
            procs.append(subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(folder),
                start_new_session=True,  # its own session: a Ctrl-C or exit of the caller does not reach it
                close_fds=True,
            ))
    started = _pids.start_time(procs[0].pid)  # not reaped yet: there to read even if it has already exited
    for proc in procs:
        with _CHILDREN_LOCK:
            _CHILDREN[proc.pid] = proc
        # reap it the moment it exits, so a long-lived launcher (a server, a notebook) keeps no zombies
        threading.Thread(target=_reap, args=(proc, folder), name=f"whileai-reap-{job_id}", daemon=True).start()
    return _running(store, account_id, job_id, platform, procs[0].pid, started)


def _reap(proc: subprocess.Popen, folder: Path) -> None:
    """Wait for a job's process started cold, and note how it ended in the job's folder (``_pids.note_exit``)."""
    _, status = os.waitpid(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    _pids.note_exit(folder, proc.pid, status)


def _running(store: Any, account_id: str, job_id: str, platform: JobPlatform, pid: int,
             started: str | None) -> JobRecord:
    """The job row running, with its process: the pid and its start time (``pid_started``), the pair the reconciler
    and a stop know it by."""
    return store.update_job(account_id, job_id, {"pid": pid, "status": "running",
                                                 "platform": updated(platform, pid_started=started)})


def _start_warm(commands: list[list[str]], env: dict[str, str], folder: Path,
                log: Path) -> tuple[_warm.Forked | None, str]:
    """Fork a one-process job from the warm worker: its pid and start time and how it started; None where it starts
    cold, and why.

    torchrun is never forked: its elastic agent starts every rank as a fresh ``python -m`` of the worker and must
    be each rank's parent to watch it, end it and name it when it fails.
    """
    from whileai.core.launch import WORKER_MODULE

    if len(commands) != 1 or commands[0][1:3] != ["-m", WORKER_MODULE]:
        return None, ("started cold: torchrun starts each rank as a fresh interpreter under its own agent, which "
                      "the warm worker cannot fork for it")
    forked, how = _warm.start_job(commands[0], env, folder, log)
    return forked, how if forked is not None else f"started cold: {how}"


def local_commands(job_id: str, spec: dict[str, Any]) -> list[list[str]]:
    """The commands a local job starts, one per node, from the one launch function
    (``whileai.jobs.distributed.launch_command``): the plain worker for one process, else torchrun."""
    from whileai.core.launch import launch_command

    processes, nodes = int(spec.get("processes") or 1), int(spec.get("nodes") or 1)
    endpoint = f"{core_defaults.PLATFORM_HOST}:{_free_port()}" if processes * nodes > 1 else None
    return [launch_command(job_id, processes=processes, nodes=nodes, endpoint=endpoint) for _ in range(nodes)]


def _free_port() -> int:
    """A loopback port free now, for a local job's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((core_defaults.PLATFORM_HOST, 0))
        return int(sock.getsockname()[1])


def job_processes(job_id: str) -> list[int]:
    """The processes on this host whose command line runs job ``job_id``: a torchrun job's launchers and all their
    ranks (read from /proc). A job forked from the warm process is not among them (its command line stays the warm
    process's): it is known by its row's pid and start time (``_pids``).

    torchrun starts each rank in a session of its own, so a signal to the launcher's group does not reach
    them; the job id on their command line does.
    """
    from whileai.core.launch import WORKER_MODULE

    found: list[int] = []
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return found
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else ""
        if state in ("Z", "X"):
            continue
        if WORKER_MODULE.encode() in argv and job_id.encode() in argv:
            found.append(int(entry.name))
    return found


# ---------------------------------------------------------------------------
# Ending and reconciling
# ---------------------------------------------------------------------------


def _pid_alive(pid: int | None, job: JobRecord) -> bool:
    """Whether the worker process of ``job`` still runs: the process its row names by pid and start time (a zombie,
    or the pid now another's, counts as gone). A row of before the start time was kept: a process of that pid whose
    command line names the job."""
    if not pid:
        return False
    with _CHILDREN_LOCK:
        proc = _CHILDREN.get(pid)
    if proc is not None and proc.returncode is not None:
        with _CHILDREN_LOCK:
            _CHILDREN.pop(pid, None)
        return False
    if Path("/proc/self").exists():
        started = platform_of(job).pid_started
        if started is None:
            return _runs_job(pid, job["id"])
        return _pids.state(pid, str(started)) not in (None, "Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _runs_job(pid: int, job_id: str) -> bool:
    """Whether process ``pid`` lives and its command line names job ``job_id``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return _pids.state(pid, None) not in (None, "Z", "X") and job_id.encode() in cmdline


def _log_tail(job_id: str) -> str:
    path = job_log(job_id)
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - defaults.JOB_LOG_TAIL_CHARS))
            text = f.read().decode(errors="replace").strip()
    except OSError:
        return ""
    return f"\nLast lines of its log ({path}):\n{text}" if text else f" Its log ({path}) is empty."


def rank_failure(job_id: str) -> str | None:
    """The error of a multi-process job whose rank died, from torchrun's summary in the job's log; else None.

    It names the first rank that failed, its exit code (a signal by name), and that rank's last log lines.
    """
    import re

    try:
        with open(job_log(job_id), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - defaults.JOB_LOG_TAIL_CHARS * 8))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    cause = text.rfind("Root Cause")
    found = re.search(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)", text[cause:]) \
        if cause >= 0 else None
    if not found:
        return None
    rank, code = int(found.group(1)), int(found.group(3))
    how = f"exit code {code}"
    if code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    prefix = f"[rank {rank}] "
    before = text[:cause]
    launcher = re.search(r"\n[EW]\d{4} [^\n]*torch/distributed/elastic", before)  # torchrun's own report begins
    if launcher:
        before = before[:launcher.start()]
    own = [line for line in before.splitlines() if (line.startswith(prefix) if rank else "[rank " not in line)]
    last = "\n".join(own[-12:])
    return (f"rank {rank} of the job failed ({how}); torchrun ended the other ranks. Its last log lines:\n{last}"
            f"\n(the job's log: {job_log(job_id)})")


def silent_rank(job_id: str) -> str | None:
    """The error of a multi-process job one of whose ranks was killed without a word while its launcher still ran
    (the launcher then died before its summary could name it), from the ranks' records (``mark_rank``); else None.
    """
    from whileai.core.launch import rank_records

    records = rank_records(job_dir(job_id) / "ranks")
    for rank, record in sorted(records.items()):
        if "ended" not in record:
            return (f"rank {rank} of the job (pid {record.get('pid')}) ended without reporting: it was killed (e.g. "
                    "SIGKILL, or the out-of-memory killer) before its launcher could name it; the launcher then "
                    f"ended too, and the other ranks saved what they had.{_log_tail(job_id)}")
    for rank, record in sorted(records.items(), key=lambda item: item[1].get("ended") or 0):
        if str(record.get("how", "")).startswith("failed") and record.get("launcher_alive"):
            return f"rank {rank} of the job {record['how']}{_log_tail(job_id)}"
    return None


def _ranks_after(job_id: str) -> str:
    """What a dead launcher's ranks did after it: each was sent SIGTERM and ended on its own."""
    from whileai.core.launch import rank_records

    records = rank_records(job_dir(job_id) / "ranks")
    orphans = sorted(rank for rank, record in records.items() if record.get("launcher_alive") is False)
    if not orphans:
        return ""
    step = records.get(0, {}).get("step")
    saved = f" (rank 0's last logged step, {step}, was flushed)" if 0 in orphans and step is not None else ""
    return (f" Its launcher ended first: rank{'s' if len(orphans) > 1 else ''} {', '.join(map(str, orphans))} "
            f"were sent SIGTERM and ended on their own{saved}.")


def reconcile(store: Any, account_id: str, job: JobRecord) -> JobRecord:
    """The job as it stands now: a job whose worker is gone, hung or finished remotely is settled first."""
    if job["status"] in FINISHED:
        return job
    if job.get("target") == "modal":
        from whileai.platform.launcher.modal_backend import reconcile_modal

        return reconcile_modal(store, account_id, job)
    return _reconcile_local(store, account_id, job)


def _reconcile_local(store: Any, account_id: str, job: JobRecord) -> JobRecord:
    platform = platform_of(job)
    now = time.time()
    beat = job.get("heartbeat_at")
    if beat is not None:
        silent_for = now - beat
        stale = silent_for > defaults.JOB_STALE_S
    else:
        silent_for = now - (platform.launched_at or job["created_at"])
        stale = silent_for > defaults.JOB_START_GRACE_S
    if job["status"] == "queued" and not job.get("pid"):
        if not stale:
            return job
        return _settle_dead(store, account_id, job, f"the job never started: no worker was launched in "
                            f"{silent_for:.0f} s (JOB_START_GRACE_S)")
    same_host = platform.host in (None, socket.gethostname())
    pid = job.get("pid")
    alive = _pid_alive(pid, job) if same_host else None
    if alive is False:
        if not stale and job_processes(job["id"]):
            return job  # its launcher is gone and its ranks are still saving (RANK_ORPHAN_GRACE_S): settled after
        failed = rank_failure(job["id"]) or silent_rank(job["id"])
        if failed:
            return _settle_dead(store, account_id, job, failed)
        # nothing reported and no rank named by torchrun: the launcher itself is gone (killed with SIGKILL, by the
        # out-of-memory killer, or with its machine); the run reads crashed, which says no error was ever recorded
        return _settle_dead(store, account_id, job, _ended_silently(job), status="crashed")
    if stale and alive and silent_for <= defaults.JOB_STALE_S + defaults.JOB_BUSY_GRACE_S \
            and _computing(job["id"], job.get("pid")):
        return job  # silent but computing: a stalled machine, or beats that cannot get through (JOB_BUSY_GRACE_S)
    if stale:
        how = "its process is gone" if alive is None else "its process still exists but is hung; it was stopped"
        if alive and pid:  # alive means its pid is set
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        return _settle_dead(store, account_id, job, (
            f"the job sent no heartbeat for {silent_for:.0f} s (JOB_STALE_S is {defaults.JOB_STALE_S:g} s); {how}."
            + _log_tail(job["id"])
        ))
    return job


def _ended_silently(job: JobRecord) -> str:
    """The error of a job whose process ended without reporting: how it ended where its reaper noted it (``killed by
    SIGKILL``), what else its ranks did, and its log's tail."""
    pid = job.get("pid")
    how = _pids.ended_how(job_dir(job["id"]), pid, wait_s=defaults.EXIT_NOTE_WAIT_S)
    said = (f"the job process (pid {pid}) was {how} before it could record an error"
            + (" (the out-of-memory killer sends SIGKILL too)." if how == "killed by SIGKILL" else ".")) if how else (
        f"the job process (pid {pid}) ended without reporting: it was killed (e.g. SIGKILL, or the out-of-memory "
        "killer) or crashed before it could record an error.")
    return said + _ranks_after(job["id"]) + _log_tail(job["id"])


def _cpu_ticks(pids: set[int]) -> int:
    """The CPU time (user and system, in clock ticks) the processes ``pids`` have used so far; gone ones count 0."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields and len(fields) > 12:
            total += int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15 of /proc/PID/stat
    return total


def _computing(job_id: str, pid: int | None) -> bool:
    """Whether the job's processes on this host (its launcher and ranks) used CPU over JOB_BUSY_SAMPLE_S."""
    pids = {*job_processes(job_id), *([pid] if pid else [])}
    first = _cpu_ticks(pids)
    time.sleep(defaults.JOB_BUSY_SAMPLE_S)
    return _cpu_ticks(pids) > first


def _settle_dead(store: Any, account_id: str, job: JobRecord, error: str,
                 status: str = "failed") -> JobRecord:
    """A worker that is gone: trust what it managed to record, else end the job and its run ``status`` with
    ``error`` (``failed`` where a cause is known, ``crashed`` where the process vanished without a word)."""
    latest = store.get_job(account_id, job["id"])
    if latest["status"] in FINISHED:
        return latest
    run_status = None
    if latest.get("run_id"):
        try:
            run_status = store.get_run(account_id, latest["run_id"], series=False)["status"]
        except LookupError:
            run_status = None
    if run_status in FINISHED:  # the run finished; the process died before it could close the job
        return end_job(store, account_id, latest, run_status)
    return end_job(store, account_id, latest, status, error)


def reconcile_run(store: Any, account_id: str, run_id: str) -> None:
    """Settle the unfinished jobs of one run (called when the run is read)."""
    for job in store.list_jobs(account_id, run_id=run_id, limit=10):
        if job["status"] not in FINISHED:
            reconcile(store, account_id, job)


# ---------------------------------------------------------------------------
# Stopping
# ---------------------------------------------------------------------------


def _stat_fields(pid: int | None) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split() if pid else None
    except OSError:
        return None


def _end_process(job: JobRecord) -> str:
    """SIGKILL a local worker's process group and wait (JOB_STOP_WAIT_S at most) until it is gone; what happened."""
    pid = job.get("pid")
    platform = platform_of(job)
    if platform.host not in (None, socket.gethostname()):
        return (f"its worker runs on {platform.host}, which this platform cannot signal; its key is revoked, so "
                "it ends itself at its next heartbeat")
    ranks = [p for p in job_processes(job["id"]) if p != pid]  # torchrun's ranks, node launchers past the first
    alive = _pid_alive(pid, job)
    if not alive and not ranks:
        return "its worker had already exited"
    started = platform.pid_started or _pids.start_time(pid)
    for target in [*([pid] if alive else []), *ranks]:  # a pid now another process's is left alone
        try:
            if target and os.getpgid(target) == target:  # each leads its own session and group
                os.killpg(target, signal.SIGKILL)
            elif target:
                os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + defaults.JOB_STOP_WAIT_S
    while (alive and _pids.state(pid, started) not in (None, "Z", "X")) or job_processes(job["id"]):
        if time.monotonic() > deadline:
            return f"its worker (pid {pid}) was sent SIGKILL but had not exited {defaults.JOB_STOP_WAIT_S:g} s later"
        time.sleep(0.05)
    more = f" and its {len(ranks)} other processes (ranks, node launchers)" if ranks else ""
    return f"its worker (pid {pid}){more} and its process group were ended"


def _cancel_call(job: JobRecord) -> str:
    from whileai.platform.launcher.modal_backend import get_backend

    call_id = job.get("call_id")
    if not call_id:
        return "it had no Modal call yet"
    try:
        get_backend().cancel(call_id)
    except Exception as exc:  # the run is stopped either way; say that the GPU may still be running
        return (f"cancelling its Modal call {call_id} failed ({type(exc).__name__}: {exc}); cancel it with "
                f"`modal app stop` or in Modal's dashboard")
    return f"its Modal call {call_id} was cancelled"


def _discard_adapter(run_id: str) -> None:
    """Remove what a stopped job may have left in its adapter folder (a finished save, or a partial one)."""
    import shutil

    folder = adapter_dir(run_id)
    for path in [folder, *folder.parent.glob(f".{run_id}.partial-*")] if folder.parent.is_dir() else []:
        shutil.rmtree(path, ignore_errors=True)


class RunStopped(TypedDict):
    """:func:`stop_run`'s answer: the run as it stands, whether this call stopped it, and what was done or why not."""

    run: RunRecord
    stopped: bool
    detail: str


def stop_run(store: Any, account_id: str, run_id: str) -> RunStopped:
    """Stop a run: its unfinished jobs ended (a local worker's process group killed, a Modal call cancelled).

    The job's key is revoked first, so nothing its worker still sends is taken,
    then the process is ended; the run is marked ``stopped`` with STOP_MARK on
    its summary (the store keeps it stopped whatever a late finish says), and
    any adapter the job had written is removed, so a stopped run has no result.
    A run that has already ended is left as it is. Returns ``{"run", "stopped",
    "detail"}``; raises LookupError for a run that is not the account's.
    """
    run = store.get_run(account_id, run_id, series=False)
    if run["status"] in FINISHED:
        return {"run": run, "stopped": False, "detail": f"{run_id} already ended {run['status']}; nothing to stop"}
    said = []
    for job in store.list_jobs(account_id, run_id=run_id, limit=10):
        if job["status"] in FINISHED:
            continue
        end_job(store, account_id, job, "stopped", "stopped on request")
        how = _cancel_call(job) if job.get("target") == "modal" else _end_process(job)
        said.append(f"job {job['id']}: {how}")
    detail = "; ".join(said) or "it had no job (a run logged by hand): marked stopped"
    latest = store.get_run(account_id, run_id, series=False)
    if latest["status"] in ("done", "failed", "crashed"):  # it ended on its own while the stop was under way
        return {"run": latest, "stopped": False, "detail": f"{run_id} ended {latest['status']} before it could be "
                f"stopped ({detail})"}
    mark = {"at": time.time(), "detail": detail}
    run = store.update_run(account_id, run_id, {"status": "stopped", "error": f"stopped on request ({detail})",
                                               "summary": {STOP_MARK: mark, "adapter": None}})
    _discard_adapter(run_id)
    return {"run": run, "stopped": True, "detail": detail}


# ---------------------------------------------------------------------------
# Resuming
# ---------------------------------------------------------------------------


def _job_seconds(job: JobRecord) -> float:
    """The wall seconds ``job`` ran: from its creation to its end, or to its last heartbeat where that came first
    (a killed job is settled later than it died)."""
    ends = [t for t in (job.get("finished_at"), job.get("heartbeat_at")) if isinstance(t, (int, float))]
    start = job.get("created_at")
    return max(0.0, min(ends) - start) if ends and isinstance(start, (int, float)) else 0.0


def resume_run(store: Any, account_id: str, run_id: str, embedded: bool = False) -> JobRecord:
    """Start a new job for a stopped, failed or crashed run, continuing from its last checkpoint.

    The new job runs the spec of the run's last job under the rules a launch passes now (``_rules``: the reward
    modules its operator allows, the account's ids, strict types, the bounds), with what only the platform writes
    (its ``platform`` fields: ``reward_path``, the judges; the start adapter) worked out again here, never read from
    that job's row; it finds the run's checkpoint folder
    (``checkpoint_dir``), resumes the trainer from the newest checkpoint, reuses the held-out
    "before" measured by the interrupted job, and logs no point the run already has. The run
    stays one run: it turns ``running`` again (the stop mark lifted) and its summary counts the
    resumes. Returns the new job's record; raises LookupError for a run that is not the account's and
    :class:`ResumeRefused` naming why (done, still running, no job, no checkpoint); a spec the rules refuse fails
    the run with the reason and raises ValueError with it.
    """
    from whileai.core.paths import last_checkpoint

    reconcile_run(store, account_id, run_id)  # a run whose worker was killed is settled (crashed) first
    run = store.get_run(account_id, run_id, series=False)
    if run["status"] == "done":
        raise ResumeRefused(f"{run_id} is done: nothing to resume; its adapter is the result (python -m whileai show "
                            f"{run_id}), or train again with `python -m whileai reproduce {run_id}`")
    jobs = store.list_jobs(account_id, run_id=run_id, limit=100)
    if run["status"] == "running":
        raise ResumeRefused(f"{run_id} is still running (job {jobs[0]['id'] if jobs else 'none'}): nothing to "
                            f"resume; wait for it, or stop it first (python -m whileai resume resumes a stopped run)")
    if not jobs:
        raise ResumeRefused(f"{run_id} has no job (a run logged by hand): the platform has nothing to resume; "
                            "train it with wai.train or python -m whileai run")
    last = jobs[0]
    row = last.get("spec") if isinstance(last.get("spec"), dict) else {}
    sent = {k: v for k, v in row.items() if k != "init_adapter"}  # the platform's start adapter: resolved again
    target = last.get("target") or "local"
    start = last_checkpoint(checkpoint_dir(run_id))
    if target == "local" and start is None:
        raise ResumeRefused(_no_checkpoint(run_id, sent))
    summary = run.get("summary") or {}
    earlier: dict[str, Any] = summary["resumed"] if isinstance(summary.get("resumed"), dict) else {}
    note = {**earlier, "requested_at": time.time(), "from_job": last["id"],
            "from_step": int(start.name.partition("-")[2]) if start is not None else earlier.get("from_step"),
            "earlier_seconds": round(sum(_job_seconds(j) for j in jobs), 2)}
    checked, problems = launch_problems(store, account_id, run_id, last["kind"], sent, embedded, resolved=False)
    store.reopen_run(account_id, run_id, {"resumed": note, "phase": "resuming from its last checkpoint"})
    if checked is None or problems:
        _refuse_resume(store, account_id, run_id, last, sent, "; ".join(problems))
    return launch(store, account_id, run_id=run_id, kind=last["kind"], target=target, spec=checked,
                  reward_path=reward_path(checked, embedded), embedded=embedded)


def _no_checkpoint(run_id: str, sent: Mapping[str, Any]) -> str:
    """Why a local run has nothing to resume from: its spec's save_steps and steps, as its job ran them."""
    save_steps: Any
    steps: Any
    try:
        spec = read_spec(sent)
        save_steps, steps = spec.save_steps, spec.steps
    except ValueError:  # a spec the rules of now refuse: what its row says
        save_steps, steps = sent.get("save_steps"), sent.get("steps")
    why = ("checkpoints were off" if not save_steps else "the run is not longer than save_steps"
           if isinstance(steps, int) and isinstance(save_steps, int) and steps <= save_steps
           else "it ended before its first checkpoint")
    return (f"{run_id} saved no checkpoint (save_steps={save_steps}, steps={steps}: {why}); run it again with "
            f"`python -m whileai reproduce {run_id}` (a smaller save_steps checkpoints sooner)")


def _refuse_resume(store: Any, account_id: str, run_id: str, last: JobRecord, sent: dict[str, Any],
                   reason: str) -> NoReturn:
    """End a resume the rules of now refuse (an allow-list that dropped its reward module, a dataset gone, a bound
    it is past): a job row that records the refusal, failed, and with it the run, so the run says why; raises
    ValueError with the reason. The run was reopened first: a run stopped on request keeps its status otherwise."""
    message = bounded(f"{run_id} cannot resume under this platform's rules now: {reason}")
    job = store.create_job(account_id, run_id=run_id, kind=last["kind"], target=last.get("target") or "local",
                           status="queued", spec=sent)
    end_job(store, account_id, job, "failed", f"the resume was refused: {message}")
    raise ValueError(message)
