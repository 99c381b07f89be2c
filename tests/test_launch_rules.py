"""The rules a job's spec passes, for a launch and for a resume, tested at the server's own edge.

A real uvicorn server on loopback (SQLite) takes raw HTTP launches that no client-side check has seen: the
spec's ranges (``beta=5``), the size of a step, strings where numbers go, GPU counts, bases named like the
platform's or a job's folders, refusals too long to keep. A resume runs the rules of now (an operator who
took a reward module off the allow-list, a bound added since) and works out the row's paths again. Modal is
the one fake: an accepted launch spawns on it, so no job process starts. A fuzz of launch bodies drawn from the
spec's schema runs through the app in this process (benchmarks/launch_fuzz.py sends 5,000).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from whileai.core import defaults as core_defaults
from whileai.core.spec import SPEC_MODELS, knob_fields, knob_of, parse_spec
from whileai.platform import defaults
from whileai.kit import defaults as kit_defaults
from whileai.platform.launcher import modal_backend
from whileai.platform.server import serve_in_thread

API = "/api/v1"
KIT = kit_defaults.KIT_BASE_NAME
ROOT = Path(__file__).resolve().parents[1]
MODULE = "team_rewards.tool_calls"
REWARD = f"python:{MODULE}:score"


class _Modal:
    """Modal's seam: records what was spawned and spawns nothing."""

    def __init__(self) -> None:
        self.spawned: list[dict[str, Any]] = []

    def spawn(self, payload: dict[str, Any], gpu: str) -> str:
        self.spawned.append(payload)
        return f"fc-{len(self.spawned)}"

    def poll(self, call_id: str) -> None:
        return None

    def pull(self, job_id: str, start: int) -> list[dict[str, Any]]:
        return []

    def cancel(self, call_id: str) -> None:
        return None

    def put_adapter(self, run_id: str, local: Path) -> str:
        return f"/adapters/{run_id}"


@pytest.fixture
def platform(home, monkeypatch):
    """``(handle, client, account, dataset id, fake Modal)``: a real server with one account, launches on Modal."""
    fake = _Modal()
    monkeypatch.setattr(modal_backend, "_BACKEND", fake)
    monkeypatch.setenv(core_defaults.TRAIN_TARGET_ENV, "modal")
    monkeypatch.setenv(core_defaults.REWARD_MODULES_ENV, MODULE)
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        acct, key = handle.store.create_account("a")
        with httpx.Client(base_url=handle.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            rows = client.post(f"{API}/datasets", json={"name": "rows", "rows": [{"messages": []}]}).json()
            yield handle, client, acct, rows["id"], fake


def _spec(kind: str, dataset: str, **changes: Any) -> dict[str, Any]:
    """A resolved spec of ``kind`` (every knob at its declared default) on the kit's base, with ``changes``."""
    return {**SPEC_MODELS[kind](base_model=KIT).knobs(), "method": kind, "base_model": KIT, "dataset": dataset,
            **changes}


def _launch(client: httpx.Client, kind: str, spec: Any, body: dict[str, Any] | None = None) -> tuple[str, httpx.Response]:
    """A raw launch on a new run, with ``body`` changing the launch's own fields: ``(run id, answer)``."""
    run = client.post(f"{API}/runs", json={"name": kind, "config": {"method": kind}}).json()
    answer = client.post(f"{API}/jobs/launch", content=json.dumps({"run_id": run["id"], "kind": kind,
                                                                     "spec": spec, **(body or {})}),
                         headers={"Content-Type": "application/json"})
    return run["id"], answer


def _refused(client: httpx.Client, answer: httpx.Response, run_id: str, *said: str) -> str:
    """Assert a 422 naming each of ``said``, no job, and the run failed with the same reason; the message."""
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    for words in said:
        assert words in message, (words, message[:2000])
    run = client.get(f"{API}/runs/{run_id}").json()
    assert run["status"] == "failed" and message in run["error"], run
    assert client.get(f"{API}/jobs", params={"run_id": run_id}).json()["jobs"] == []
    return message


# --------------------------------------------------------------------------- the spec's ranges, at the server


def _ranged() -> list[tuple[str, str]]:
    return [(method, name) for method, model in SPEC_MODELS.items() for name in knob_fields(model)
            if knob_of(model, name).range is not None and not knob_of(model, name).many]


def test_a_raw_launch_with_beta_5_is_refused_naming_beta(platform):
    """The client checks beta before it sends; the server checks it again. A launch straight to the server, past
    the client's check, is refused by the server's own (the spec model's range)."""
    _handle, client, _acct, dataset, fake = platform
    for method in ("grpo", "dpo"):
        run_id, answer = _launch(client, method, _spec(method, dataset, beta=5))
        _refused(client, answer, run_id, "beta=5 is outside [0, 1]" if method == "grpo" else "beta=5 is outside (0, 1]")
    assert fake.spawned == []


def test_every_range_of_the_spec_is_checked_by_the_server(platform):
    """Each knob with a range, sent past its top by raw HTTP, is refused naming the knob; a spec in range starts."""
    _handle, client, _acct, dataset, fake = platform
    for method, name in _ranged():
        _lo, hi = knob_of(SPEC_MODELS[method], name).range  # type: ignore[misc]
        past = int(hi) * 2 + 1 if isinstance(hi, int) else hi * 2 + 1
        run_id, answer = _launch(client, method, _spec(method, dataset, **{name: past}))
        _refused(client, answer, run_id, f"{name}=")
    assert fake.spawned == []
    run_id, answer = _launch(client, "grpo", _spec("grpo", dataset))
    assert answer.status_code == 201 and len(fake.spawned) == 1, answer.text


# --------------------------------------------------------------------------- a step's size


def test_a_step_past_what_the_targets_memory_holds_is_refused_naming_product_limit_and_knob(platform):
    _handle, client, _acct, dataset, fake = platform
    run_id, answer = _launch(client, "grpo", _spec("grpo", dataset, prompts_per_step=4096, generations=64))
    message = _refused(client, answer, run_id, "prompts_per_step=4096 x generations=64 x max_completion_length=96",
                       "25,165,824 tokens in one step", "STEP_TOKENS_PER_GIB", "lower prompts_per_step (to 853")
    assert "80 GiB (STEP_DEFAULT_GIB" in message
    run_id, answer = _launch(client, "dpo", _spec("dpo", dataset, batch_size=4096, max_completion_length=4096,
                                                  gpu="T4"))
    _refused(client, answer, run_id, "batch_size=4096 x 2 (2 sequences a pair) x max_completion_length=4096",
             "16 GiB (a T4's)", "lower batch_size")
    run_id, answer = _launch(client, "rm", _spec("rm", dataset, batch_size=4096))
    _refused(client, answer, run_id, "x 2048 (TRAIN_MAX_LENGTH)", "lower batch_size (to 1280")
    # micro-batches hold less at once: the same DPO step in batch_per_device=8 fits
    run_id, answer = _launch(client, "dpo", _spec("dpo", dataset, batch_size=4096, max_completion_length=4096,
                                                  gpu="T4", batch_per_device=8))
    assert answer.status_code == 201, answer.text
    assert len(fake.spawned) == 1


def test_validate_refuses_a_step_past_the_targets_memory(tmp_path):
    """The client's side of the same rule: validate refuses it before anything loads."""
    from test_runner_validate import run_cli

    done = run_cli("validate", "recipe=grpo_tooluse", "prompts_per_step=4096", "generations=64", home=tmp_path)
    assert done.returncode == 2, done.stdout
    assert "prompts_per_step=4096 x generations=64" in done.stderr and "STEP_TOKENS_PER_GIB" in done.stderr


def test_every_gpu_the_price_table_names_has_its_memory():
    assert set(core_defaults.GPU_MEMORY_GIB) == set(core_defaults.GPU_USD_PER_HOUR)


def test_no_committed_default_is_refused_for_its_step():
    """Each method's declared defaults pass the bound on the smallest GPU the table names (recipes: the recipe
    validation test runs every recipe through the same model)."""
    small = min(core_defaults.GPU_MEMORY_GIB, key=core_defaults.GPU_MEMORY_GIB.__getitem__)
    for method in SPEC_MODELS:
        spec, problems = parse_spec({"method": method, "gpu": small})
        assert spec is not None and problems == [], (method, problems)


# --------------------------------------------------------------------------- what answered 500, or was let through


def test_launches_that_answered_500_or_were_let_through_are_refused_and_fail_their_run(platform):
    """batch_per_device 0 or false (ZeroDivisionError), a method given as a list or object (unhashable), a base
    whose first part is longer than a file name (OSError), a string where a number goes, a GPU count no node has,
    names a job writes in its own folder, and a refusal longer than a run's error can hold."""
    _handle, client, _acct, dataset, fake = platform
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("sft", {"batch_per_device": 0}, "batch_per_device=0 is outside [1, 4096]"),
        ("sft", {"batch_per_device": False}, "spec batch_per_device=False is a bool where a number goes"),
        ("sft", {"method": ["sft"]}, "method=['sft'] is not a training method"),
        ("grpo", {"method": {"grpo": 1}}, "is not a training method"),
        ("sft", {"base_model": "a" * 300}, "has a part longer than 255 bytes"),
        ("sft", {"base_model": "é" * 200 + "/x"}, "has a part longer than 255 bytes"),
        ("sft", {"steps": "10"}, "spec steps='10' is a string where a whole number or null goes"),
        ("grpo", {"beta": "0.04"}, "spec beta='0.04' is a string where a number goes"),
        ("grpo", {"reward_weights": ["1"]}, "spec reward_weights[0]='1' is a string"),
        ("sft", {"gpu": "H100:99999"}, "asks for 99999 GPUs on one node; a node holds 1 to 8 (GPU_MAX_COUNT)"),
        ("sft", {"gpu": "H100:0"}, "is not a GPU jobs run on"),
        ("sft", {"base_model": "trainer/checkpoint-5"}, "names a folder of the platform's own data"),
        ("sft", {"base_model": "worker.log"}, "names a folder of the platform's own data"),
        ("sft", {"base_model": "pairs.trl.jsonl"}, "names a folder of the platform's own data"),
        ("sft", {"extra": {"note": "\x00"}}, "NUL"),
        ("sft", {"seed": 2**70}, "64 bits"),
    ]
    for kind, changes, said in cases:
        run_id, answer = _launch(client, kind, _spec(kind, dataset, **changes))
        _refused(client, answer, run_id, said)
    many = {f"key_{i}_" + "k" * 90: i for i in range(2000)}  # a refusal of ~200,000 characters before the bound
    run_id, answer = _launch(client, "sft", _spec("sft", dataset, **many))
    message = _refused(client, answer, run_id, "are not sft settings")
    assert len(message) <= defaults.LAUNCH_REFUSAL_MAX_CHARS + 200, len(message)
    for body in ({"kind": 5}, {"target": ["modal"]}, {"spec": [1]}, {"colour": "red"}):
        run_id, answer = _launch(client, "sft", _spec("sft", dataset), body)
        _refused(client, answer, run_id)
    run_id, answer = _launch(client, "sft", _spec("sft", dataset, gpu="H100:8"))
    assert answer.status_code == 201, answer.text
    assert len(fake.spawned) == 1


# --------------------------------------------------------------------------- a resume runs the rules of now


def _stopped_grpo(client: httpx.Client, dataset: str, **changes: Any) -> str:
    run_id, answer = _launch(client, "grpo", _spec("grpo", dataset, **changes))
    assert answer.status_code == 201, answer.text
    assert client.post(f"{API}/runs/{run_id}/stop").json()["stopped"]
    return run_id


def test_a_resume_the_allow_list_now_refuses_fails_its_run_with_the_reason(platform, monkeypatch):
    """A GRPO run with a python: reward, allowed when it started, is stopped; the operator takes the module off
    WHILEAI_REWARD_MODULES. A fresh launch is refused, and so is the resume (it was answered 201 and the job
    imported the module again): the run reads failed, saying why. Allowed again, the run resumes."""
    _handle, client, _acct, dataset, fake = platform
    run_id = _stopped_grpo(client, dataset, reward=[REWARD])
    assert len(fake.spawned) == 1
    monkeypatch.setenv(core_defaults.REWARD_MODULES_ENV, "team_rewards.other")
    fresh, answer = _launch(client, "grpo", _spec("grpo", dataset, reward=[REWARD]))
    _refused(client, answer, fresh, f"reward={REWARD!r}: this server runs only the code modules")
    resumed = client.post(f"{API}/runs/{run_id}/resume")
    assert resumed.status_code == 422, resumed.text
    assert f"reward={REWARD!r}" in resumed.text and core_defaults.REWARD_MODULES_ENV in resumed.text
    run = client.get(f"{API}/runs/{run_id}").json()
    assert run["status"] == "failed" and "the resume was refused" in run["error"] and REWARD in run["error"], run
    assert len(fake.spawned) == 1, "a refused resume spawned a job"
    assert client.get(f"{API}/jobs", params={"run_id": run_id}).json()["jobs"][0]["status"] == "failed"
    monkeypatch.setenv(core_defaults.REWARD_MODULES_ENV, MODULE)
    again = client.post(f"{API}/runs/{run_id}/resume")
    assert again.status_code == 201, again.text
    assert again.json()["run"]["status"] == "running" and len(fake.spawned) == 2


def test_a_python_environment_is_user_code_under_the_rewards_rule(platform, monkeypatch):
    """An environment's class is code the job runs on every turn, as a reward's function is on every completion:
    a shared server launches a ``python:`` environment only from a module its operator allows (the reward
    modules' list), for SFT's held-out episodes and GRPO's alike, and names the knob and the fix otherwise."""
    _handle, client, _acct, dataset, fake = platform
    env = f"python:{MODULE}:Bank"
    for kind in ("sft", "grpo"):
        run_id, answer = _launch(client, kind, _spec(kind, dataset, environment=env))
        assert answer.status_code == 201, answer.text
        assert not answer.json()["platform"].get("reward_path"), answer.json()
    monkeypatch.setenv(core_defaults.REWARD_MODULES_ENV, "team_rewards.other")
    for kind in ("sft", "grpo"):
        run_id, answer = _launch(client, kind, _spec(kind, dataset, environment=env))
        _refused(client, answer, run_id, f"environment={env!r}: this server runs only the code modules",
                 f"ask the operator to add {MODULE!r}, or play environment=kit or bfcl")
    run_id, answer = _launch(client, "grpo", _spec("grpo", dataset, environment="kit"))
    assert answer.status_code == 201, answer.text
    assert len(fake.spawned) == 3


def test_the_rule_names_every_piece_of_user_code_a_spec_carries(monkeypatch):
    """The inner check, without a server: a spec with a python: reward and a python: environment has two
    problems on a server with none allowed, none embedded; the embedded row records where both import from."""
    from whileai.platform._rewards import reward_code_problems, reward_path, user_code

    monkeypatch.delenv(core_defaults.REWARD_MODULES_ENV, raising=False)
    spec = SPEC_MODELS["grpo"](base_model=KIT, reward=[REWARD], environment="python:team_envs:Bank")
    assert user_code(spec) == [("reward", REWARD), ("environment", "python:team_envs:Bank")]
    problems = reward_code_problems(spec, embedded=False)
    assert len(problems) == 2 and problems[1].startswith("environment='python:team_envs:Bank'"), problems
    assert "now: none" in problems[0] and "now: none" in problems[1]
    assert reward_code_problems(spec, embedded=True) == []
    assert reward_path(spec, embedded=True) == os.getcwd() and reward_path(spec, embedded=False) is None
    only_env = SPEC_MODELS["sft"](base_model=KIT, environment="python:team_envs.bank:Bank")
    assert reward_path(only_env, embedded=True) == os.getcwd()
    monkeypatch.setenv(core_defaults.REWARD_MODULES_ENV, "team_envs")
    assert reward_code_problems(only_env, embedded=False) == []
    assert reward_path(SPEC_MODELS["sft"](base_model=KIT, environment="kit"), embedded=True) is None


def test_a_resume_applies_the_bounds_and_ids_of_now(platform):
    """A job row the rules of its day let through (written straight to the store: a step past the bound, another
    account's holdout) is not resumed: each is named, and the run says so."""
    handle, client, acct, dataset, fake = platform
    other, _ = handle.store.create_account("b")
    theirs, _ = handle.store.create_dataset(other, [{"messages": []}], name="theirs")
    for changes, said in (({"prompts_per_step": 4096, "generations": 64}, "25,165,824 tokens in one step"),
                          ({"holdout": theirs["id"]}, "is not a dataset of this account"),
                          ({"steps": "10"}, "spec steps='10' is a string")):
        run_id = _stopped_grpo(client, dataset)
        job = client.get(f"{API}/jobs", params={"run_id": run_id}).json()["jobs"][0]
        handle.store.update_job(acct, job["id"], {"spec": {**job["spec"], **changes}})
        resumed = client.post(f"{API}/runs/{run_id}/resume")
        assert resumed.status_code == 422 and said in resumed.text, (changes, resumed.text)
        run = client.get(f"{API}/runs/{run_id}").json()
        assert run["status"] == "failed" and said in run["error"], run
    assert len(fake.spawned) == 3  # the three launches; no resume


def test_a_resumed_job_takes_no_path_from_the_row_it_continues(platform, tmp_path):
    """A job row an embedded client wrote on a shared store names that client's folder (reward_path) and a base
    folder of its own. Resumed through the server, the folder is not imported from (the platform writes the new
    row's paths itself: none on a server), and the base folder is refused as any launch's would be."""
    handle, client, acct, dataset, fake = platform
    run_id = _stopped_grpo(client, dataset, reward=[REWARD])
    job = client.get(f"{API}/jobs", params={"run_id": run_id}).json()["jobs"][0]
    elsewhere = tmp_path / "clients_folder"
    elsewhere.mkdir()
    handle.store.update_job(acct, job["id"], {"spec": {**job["spec"], "init_adapter": str(elsewhere)},
                                              "platform": {**job["platform"], "reward_path": str(elsewhere)}})
    resumed = client.post(f"{API}/runs/{run_id}/resume")
    assert resumed.status_code == 201, resumed.text
    new = resumed.json()["job"]
    assert "reward_path" not in new["spec"] and "init_adapter" not in new["spec"], new["spec"]
    assert "reward_path" not in fake.spawned[-1]["spec"], fake.spawned[-1]["spec"]
    assert str(elsewhere) not in json.dumps(fake.spawned[-1]["spec"])
    assert "reward_path" not in new["platform"] and str(elsewhere) not in json.dumps(fake.spawned[-1]["platform"])
    client.post(f"{API}/runs/{run_id}/stop")
    own_base = tmp_path / "my_model"
    own_base.mkdir()
    (own_base / "config.json").write_text("{}")
    handle.store.update_job(acct, new["id"], {"spec": {**new["spec"], "base_model": str(own_base)}})
    refused = client.post(f"{API}/runs/{run_id}/resume")
    assert refused.status_code == 422 and "is not a base this platform trains on" in refused.text, refused.text


# --------------------------------------------------------------------------- fuzz


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("launch_fuzz", ROOT / "benchmarks" / "launch_fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: bodies the suite sends; benchmarks/launch_fuzz.py sends 5,000 (and any number with --bodies)
FUZZ_BODIES = int(os.environ.get("WHILEAI_LAUNCH_FUZZ_BODIES", "150"))


def test_no_fuzzed_launch_answers_anything_but_201_400_or_422(home):
    """Bodies drawn from the spec's own schema with values mutated (types, bounds, sizes, unicode) go to the app;
    every answer is 201, 400 or 422, and a refused launch's run reads failed with a bounded reason."""
    fuzz = _fuzz_module()
    statuses, wrong, _seconds = fuzz.run_fuzz(seed=7, n=FUZZ_BODIES, home=home)
    assert wrong == [], "\n".join(wrong[:10])
    assert statuses[201] > 0 and statuses[422] > 0, statuses
