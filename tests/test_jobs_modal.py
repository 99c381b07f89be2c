"""Modal jobs through the one seam, with a fake backend that runs the real job body here.

``FakeModal`` stands in for Modal's cloud (unreachable from this machine): it
runs ``modal_app.execute`` — the function body the deployed app runs — on a
thread, with a dict as the progress store and a folder as the Volume. Everything
on the platform side is real: ``train(target="modal")``, the spawn payload,
pulling and replaying progress on each read, copying the adapter home, cost.
GRPO and DPO run a few steps end to end this way.
"""

from __future__ import annotations

import os
import shutil
import threading
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.kit import load_sample
from whileai.jobs import _environment, modal_app
from whileai.platform.launcher import modal_backend
from whileai.core import defaults as core_defaults
from whileai.platform import defaults as platform_defaults
from whileai.domain.client import get_client

pytestmark = pytest.mark.slow


class FakeModal:
    """A ModalBackend that runs ``execute`` on a thread: a dict for the Dict, a folder for the Volume."""

    def __init__(self, root: Path):
        self.progress: dict = {}
        self.volume = root / "volume"
        self.calls: dict[str, tuple[threading.Thread, dict]] = {}
        self.spawned: list[tuple[dict, str]] = []
        self.uploaded: list[str] = []
        self.cancelled: list[str] = []

    def spawn(self, payload: dict, gpu: str) -> str:
        call_id = f"fc-{len(self.calls)}"
        result: dict = {}

        def body() -> None:
            try:
                result.update(modal_app.execute(payload, self.progress, self.volume))
            except BaseException as exc:  # a call that dies the way a lost container does
                result.update(status="failed", error=f"{type(exc).__name__}: {exc}")

        thread = threading.Thread(target=body, daemon=True)
        self.calls[call_id] = (thread, result)
        self.spawned.append((payload, gpu))
        thread.start()
        return call_id

    def poll(self, call_id: str) -> dict | None:
        thread, result = self.calls[call_id]
        return None if thread.is_alive() else dict(result)

    def pull(self, job_id: str, start: int) -> list[dict]:
        count = self.progress.get(modal_app.count_key(job_id), 0)
        return [self.progress[modal_app.progress_key(job_id, i)] for i in range(start, count)]

    def fetch_adapter(self, remote: str, dest: Path) -> Path:
        shutil.copytree(remote, dest, dirs_exist_ok=True)
        return dest

    def put_adapter(self, run_id: str, local: Path) -> str:
        remote = self.volume / run_id
        if not remote.is_dir():
            self.uploaded.append(run_id)
            shutil.copytree(local, remote)
        return str(remote)

    def cancel(self, call_id: str) -> None:
        self.cancelled.append(call_id)  # a thread cannot be killed; the platform stops reading the call


@pytest.fixture(scope="module")
def sets(session_home):
    rows = load_sample()
    tasks = sorted({r["task_id"] for r in rows})
    small = [r for r in rows if r["task_id"] in set(tasks[:60])]
    data = wai.push(small, name="modal-sample")
    train_side, held = wai.datasets.cut(data, holdout=0.2, seed=0)
    from whileai.kit._base import tiny_model_dir

    return {"train": train_side, "holdout": held, "base": str(tiny_model_dir())}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    backend = FakeModal(tmp_path)
    monkeypatch.setattr(modal_backend, "_BACKEND", backend)
    monkeypatch.setattr(_environment, "gpu_name", lambda spec: spec.gpu)  # as if on Modal's GPU
    return backend


def _train(sets, method: str, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wai.train(sets["train"], method=method, target="modal", base_model=sets["base"], **kwargs)


def test_grpo_on_modal_through_the_seam(sets, fake, session_home):
    monitor = {"every": 1, "k": 2, "n_prompts": 2, "max_new_tokens": 8}  # HackMonitor on, kept tiny
    run = _train(sets, "grpo", steps=2, generations=2, max_completion_length=16,
                 config={"holdout_rows": 4, "gpu": "A10G", "monitor": monitor})
    payload, gpu = fake.spawned[0]
    assert gpu == "A10G" and payload["spec"]["target"] == "modal" and payload["run"]["id"] == run.id
    assert len(payload["rows"]) == sets["train"].rows and len(payload["holdout_rows"]) == sets["holdout"].rows
    assert run.wait(poll=2, timeout=240) == "done", run.error
    record = wai.get_run(run.id)
    assert record["step"] == 2 and record["series"], "progress recorded on Modal was pulled and replayed"
    assert any(k.startswith("rewards/") for p in record["series"] for k in p["metrics"])
    adapter = Path(run.adapter)
    assert adapter == session_home / "adapters" / run.id and (adapter / "adapter_config.json").is_file()
    assert run.summary["adapter_remote"] == f"modal://{platform_defaults.MODAL_VOLUME_NAME}{fake.volume / run.id}"
    training = run.training
    assert training["gpu"] == "A10G" and training["target"] == "modal" and training["generations"] == 2
    assert training["monitor"].startswith("on with the alarms that need no gold judge") and "monitor" in run.summary
    assert any(k.startswith("monitor/") for p in record["series"] for k in p["metrics"])
    assert run.cost_usd is not None and run.cost_basis["gpu"] == "A10G"
    assert run.cost_usd == round(training["seconds"] / 3600 * core_defaults.GPU_USD_PER_HOUR["A10G"], 2)
    job = get_client().request("GET", "/jobs", params={"run_id": run.id})["jobs"][0]
    assert job["status"] == "done" and job["call_id"] == "fc-0"
    assert job["platform"]["pulled"] == fake.progress[modal_app.count_key(job["id"])]


def test_dpo_on_modal_through_the_seam(sets, fake):
    run = _train(sets, "dpo", steps=2, config={"holdout_rows": 4, "batch_size": 2})
    assert run.wait(poll=2, timeout=240) == "done", run.error
    assert run.training["pairs"] > 0 and run.training["before"] is not None
    assert run.summary["holdout_after"] == run.training["after"]


def test_a_stage_on_modal_reads_its_start_adapter_from_the_volume(sets, fake, session_home):
    """DPO on Modal from an SFT run whose adapter is only here: it is uploaded to the Volume and the job continues it."""
    from whileai.platform.launcher.jobs import adapter_dir

    sft = _train(sets, "sft", steps=1, check="off", config={"holdout_rows": 2})
    assert sft.wait(poll=1, timeout=240) == "done", sft.error
    shutil.rmtree(fake.volume / sft.id)  # as for a run trained locally: its adapter is only in the data root
    run = _train(sets, "dpo", steps=2, init_from=sft, config={"holdout_rows": 2, "batch_size": 2})
    payload, _gpu = fake.spawned[-1]
    assert fake.uploaded == [sft.id] and payload["spec"]["init_adapter"] == str(fake.volume / sft.id)
    assert payload["spec"]["init_from"] == sft.id
    assert run.wait(poll=1, timeout=240) == "done", run.error
    assert run.config["init_from"] == sft.id and run.training["init_from"] == sft.id
    assert Path(run.adapter) == adapter_dir(run.id) and (Path(run.adapter) / "adapter_config.json").is_file()


def test_stopping_a_modal_run_cancels_its_call_and_nothing_flips_it_back(sets, fake):
    run = _train(sets, "dpo", steps=1, config={"holdout_rows": 2, "batch_size": 2})
    assert run.stop() == "stopped" and fake.cancelled == ["fc-0"]
    thread, _result = fake.calls["fc-0"]
    thread.join(240)  # the call ends on its own here; its result is never read
    assert run.refresh().status == "stopped" and run.adapter is None
    job = get_client().request("GET", "/jobs", params={"run_id": run.id})["jobs"][0]
    assert job["status"] == "stopped"


def test_a_modal_call_that_dies_fails_the_run(sets, fake, monkeypatch):
    """The container dies before the job can record anything: the call's failure fails the run."""

    def lost(*args, **kwargs):
        raise MemoryError("CUDA out of memory")

    monkeypatch.setattr(modal_app, "execute", lost)
    run = _train(sets, "dpo", steps=2)
    assert run.wait(poll=2, timeout=60) == "failed"
    assert run.error.startswith("MemoryError: CUDA out of memory")


def test_a_crashing_job_on_modal_reports_its_error(sets, fake, monkeypatch):
    from whileai.jobs import body

    def crash(*args, **kwargs):
        raise ValueError("the trainer fell over")

    monkeypatch.setattr(body, "run_job", crash)
    run = _train(sets, "dpo", steps=2)
    assert run.wait(poll=2, timeout=60) == "failed"
    assert run.error.startswith("ValueError: the trainer fell over") and "Traceback" in run.error


def test_a_failed_modal_run_resumes_from_the_volume_without_logging_a_step_twice(sets, fake, monkeypatch):
    """``wai.resume`` on a Modal run: the new call finds the Volume's checkpoint and the run's stored points."""
    from collections import Counter

    import transformers

    save = transformers.Trainer._save_checkpoint
    died: list[bool] = []

    def save_then_die(self, *args, **kwargs):
        save(self, *args, **kwargs)
        if not died:
            died.append(True)
            raise RuntimeError("the container was lost")

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_then_die)
    run = _train(sets, "dpo", steps=4, config={"save_steps": 2, "batch_size": 2})
    assert run.wait(poll=1, timeout=240) == "failed" and "the container was lost" in run.error
    assert (fake.volume / "checkpoints" / run.id / "checkpoint-2").is_dir()
    resumed = wai.resume(run)
    payload, _gpu = fake.spawned[-1]
    assert payload["stored"] and all(step <= 2 for _name, step in payload["stored"])
    assert resumed.wait(poll=1, timeout=240) == "done", resumed.error
    record = wai.get_run(run.id)
    assert record["summary"]["training"]["steps"] == 4 and record["summary"]["resumed"]["from_step"] == 2
    pairs = Counter((name, p["step"]) for p in record["series"] for name in p["metrics"])
    assert max(pairs.values()) == 1 and {s for (n, s) in pairs if n == "loss"} == {1, 2, 3, 4}


def test_run_job_local_runs_the_deployed_function_body(sets, tmp_path, monkeypatch):
    """``run_job.local`` with the Dict and Volume swapped for local ones."""
    progress: dict = {}

    class Volume:
        commits = 0

        def commit(self):
            Volume.commits += 1

    monkeypatch.setattr(modal_app, "_progress_dict", lambda: progress)
    monkeypatch.setattr(modal_app, "_volume", Volume())
    monkeypatch.setattr(platform_defaults, "MODAL_VOLUME_MOUNT", str(tmp_path / "adapters"))
    client = get_client()
    record = client.request("POST", "/runs", json={"name": "local-modal", "kind": "hosted"})
    spec = {"method": "dpo", "base_model": sets["base"], "learning_rate": 1e-4, "beta": 0.1, "loss_type": "sigmoid",
            "max_completion_length": 64, "steps": 1, "batch_size": 2, "seed": 0, "target": "modal", "gpu": "A10G"}
    payload = {"job_id": "job_local", "spec": spec, "rows": wai.datasets.load_rows(sets["train"]),
               "holdout_rows": None, "run": record}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = modal_app.run_job.local(payload)
    assert result["status"] == "done", result["error"]
    assert Path(result["adapter"], "adapter_config.json").is_file() and Volume.commits == 1
    assert result["training"]["holdout_note"].startswith("no held-out set")
    count = progress[modal_app.count_key("job_local")]
    entries = [progress[modal_app.progress_key("job_local", i)] for i in range(count)]
    assert entries[-1]["method"] == "PATCH" and entries[-1]["json"]["status"] == "done"
    assert any(e["path"].endswith("/points") for e in entries)
    # replayed onto the platform's run, the recorded requests finish it
    from whileai.platform.store import Store, store_url

    store = Store(store_url())
    try:
        account = client.request("GET", "/me")["account_id"]
        modal_backend.replay(store, account, record["id"], entries)
        assert store.get_run(account, record["id"], series=False)["status"] == "done"
    finally:
        store.close()


def test_without_modal_credentials_the_real_backend_fails_the_launch_saying_how_to_log_in(sets, tmp_path,
                                                                                           monkeypatch):
    """No fake here: the real ModalCloud, with no token on this machine, answers at once and says what to do."""
    import modal.config

    from whileai.core.errors import PlatformError

    if modal.config.config.get("token_id") or os.environ.get("MODAL_TOKEN_ID"):
        pytest.skip("this machine has Modal credentials: the real backend would reach Modal's cloud")

    monkeypatch.setattr(modal_backend, "_BACKEND", None)
    for var in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "no-modal.toml"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(PlatformError, match="modal token new") as caught:
        _train(sets, "dpo", steps=2)
    assert "target='local'" in str(caught.value)
    failed = [r for r in wai.list_runs() if r["status"] == "failed" and "modal token new" in (r.get("error") or "")]
    assert failed, "the launch's run is marked failed with the reason"


def test_grpo_on_modal_scores_with_its_gold_judge_from_the_volume(sets, fake):
    judge = _train(sets, "rm", steps=2, holdout=sets["holdout"], config={"holdout_rows": 8, "gpu": "A10G"})
    assert judge.wait(poll=2, timeout=240) == "done", judge.error
    monitor = {"every": 1, "k": 2, "n_prompts": 2, "max_new_tokens": 8}
    # a partial-credit reward is watched against the judge gold_judge names (under the exact reward it would be off)
    run = _train(sets, "grpo", steps=2, generations=2, max_completion_length=16, reward=["fine_grained"],
                 config={"holdout_rows": 4, "gpu": "A10G", "monitor": monitor, "gold_judge": judge.id})
    payload, _gpu = fake.spawned[-1]
    # the platform resolved the judge and sent its adapter to the Volume; the payload names the Volume's copy
    assert payload["platform"]["gold"]["run_id"] == judge.id
    assert payload["platform"]["gold"]["adapter"] == str(fake.volume / judge.id)
    assert (fake.volume / judge.id / "adapter_config.json").is_file()
    assert run.wait(poll=2, timeout=300) == "done", run.error
    assert run.training["monitor"].startswith(f"on, gold judge {judge.id}"), run.training["monitor"]
    series = wai.get_run(run.id)["series"]
    assert any(k.startswith("monitor/gold") for p in series for k in p["metrics"]), \
        sorted({k for p in series for k in p["metrics"] if k.startswith("monitor/")})
    # a graded reward's mean is logged as the reward, and the exact judge's verdicts as the sampled pass rate
    steps = [p["metrics"] for p in series if "mixed_groups" in p["metrics"]]
    assert steps and all("sampled_reward" in m and 0 <= m["sampled_pass_rate"] <= 1 for m in steps), steps
    assert set(run.training["sampled_reward"]) == {"first", "last", "mean"}
