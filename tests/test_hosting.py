"""wai.train before any model: knob validation, the selection gate, warnings, idempotency, targets.

The job launch is replaced by a stub that records it (and a job row that stays
"running"), so nothing here loads a model or starts a process; the job runner
and the trainers are tested in tests/test_jobs*.py.
"""

from __future__ import annotations

import re
import warnings

import pytest

import whileai.simulations as wai
from whileai.platform.launcher import jobs as launcher_jobs
from whileai.domain import defaults
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults
from whileai.domain.client import get_client
from whileai.core.knobs import check_knob
from whileai.simulations.training import train_spec
from whileai.core.errors import TrainingConfigError, TrainingSelectionError


def _row(task: str, passed: bool, i: int, temperature: float = 0.7) -> dict:
    city = ["Paris", "Tokyo", "Rome", "Oslo"][i % 4]
    call = {"id": "call_0", "type": "function",
            "function": {"name": "get_weather", "arguments": f'{{"city": "{city if passed else "Lima"}"}}'}}
    return {
        "messages": [
            {"role": "system", "content": "You are a weather agent."},
            {"role": "user", "content": f"Weather in {city}? ({task})"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                                     "parameters": {"type": "object",
                                                                    "properties": {"city": {"type": "string"}}}}}],
        "gold": {"name": "get_weather", "arguments": {"city": city}},
        "reward": 1.0 if passed else 0.0,
        "passed": passed,
        "task_id": task,
        "rollout_index": i,
        "sampling": {"temperature": temperature},
    }


def rows(mixed: int = 4, all_pass: int = 2, all_fail: int = 0, k: int = 4, tag: str = "t") -> list[dict]:
    out = []
    for t in range(mixed):
        out += [_row(f"{tag}-mixed-{t}", i % 2 == 0, i) for i in range(k)]
    for t in range(all_pass):
        out += [_row(f"{tag}-pass-{t}", True, i) for i in range(k)]
    for t in range(all_fail):
        out += [_row(f"{tag}-fail-{t}", False, i) for i in range(k)]
    return out


@pytest.fixture
def launches(home, monkeypatch):
    """Record launches instead of starting workers; the job row says running with a live process."""
    calls = []

    def fake_local(store, account_id, job):
        calls.append(job)
        return store.update_job(account_id, job["id"], {"status": "running", "pid": 1})

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(launcher_jobs, "_launch_local", fake_local)
    monkeypatch.setattr(launcher_jobs, "_pid_alive", lambda pid, job_id: True)
    from whileai.jobs import _loading

    monkeypatch.setattr(_loading, "load_policy", no_model)
    return calls


def _runs_for(dataset_id: str) -> list[dict]:
    return get_client().request("GET", "/runs", params={"dataset": dataset_id})["runs"]


# ---------------------------------------------------------------------------
# Knobs
# ---------------------------------------------------------------------------


def test_a_bad_knob_quotes_the_range_and_the_paper(launches):
    ds = wai.push(rows(), name="knob")
    with pytest.raises(TrainingConfigError) as err:
        wai.train(ds, method="grpo", beta=2.0)
    message = str(err.value)
    assert "beta=2 is outside [0, 1] for grpo (DeepSeekMath used 0.04; arXiv:2402.03300)" in message
    assert "pass a value in range or leave it None" in message
    assert not launches and not _runs_for(ds.id)


def test_every_problem_is_reported_at_once(launches):
    ds = wai.push(rows(), name="many")
    with pytest.raises(TrainingConfigError) as err:
        wai.train(ds, method="grpo", beta=-1, learning_rate=0.5, loss_type="dapo", generations=1,
                  temperature=0, target="cloud", epochs=2)
    problems = err.value.problems
    assert len(problems) == 7, problems
    joined = "\n".join(problems)
    for needle in ("beta=-1", "learning_rate=0.5", "loss_type='dapo'", "'bnpo', 'grpo', 'dr_grpo'",
                   "generations=1", "temperature=0 is outside (0, 2]", "target='cloud'",
                   "epochs=2 does not apply to grpo"):
        assert needle in joined
    assert not launches


def test_closed_arguments_and_types_are_checked(launches):
    ds = wai.push(rows(), name="closed")
    with pytest.raises(TrainingConfigError) as err:
        wai.train(ds, method="ppo", check="maybe", steps=2.5)
    joined = "\n".join(err.value.problems)
    assert "method='ppo'" in joined and "check='maybe'" in joined
    with pytest.raises(TrainingConfigError, match="steps=2.5 is not a whole number"):
        wai.train(ds, method="dpo", steps=2.5)
    with pytest.raises(TrainingConfigError, match="truncated='zero' does not apply to sft"):
        wai.train(ds, method="sft", truncated="zero", check="off")
    with pytest.raises(TrainingConfigError, match="not a pushed dataset"):
        wai.train([{"messages": []}])


def test_a_knob_given_in_config_is_refused_with_the_argument_to_use(launches):
    # config={"beta": 0.5} used to land under config["extra"] with a warning while the run trained at the default
    ds = wai.push(rows(), name="knob-in-config")
    with pytest.raises(TrainingConfigError) as err:
        wai.train(ds, method="dpo", config={"beta": 0.5, "loss_type": "apo_zero", "pair_source": "rows"})
    joined = "\n".join(err.value.problems)
    assert len(err.value.problems) == 2, err.value.problems
    assert "config key 'beta' is a train() argument" in joined and "pass beta=0.5 to train() instead" in joined
    assert "pass loss_type='apo_zero' to train() instead" in joined
    assert not launches and not _runs_for(ds.id)


def test_dpo_accepts_every_trl_loss_and_grpo_only_three():
    for loss in core_defaults.TRL_DPO_LOSS_TYPES:
        assert check_knob("loss_type", loss, "dpo", defaults.TRAINING_KNOBS["loss_type"]) is None
    assert check_knob("loss_type", "dapo", "grpo", defaults.TRAINING_KNOBS["loss_type"]) is not None
    for loss in ("bnpo", "grpo", "dr_grpo"):
        assert check_knob("loss_type", loss, "grpo", defaults.TRAINING_KNOBS["loss_type"]) is None
    # DPO's learning-rate range stops below the rate measured to collapse the held-out rate
    assert "outside" in check_knob("learning_rate", 1e-3, "dpo", defaults.TRAINING_KNOBS["learning_rate"])
    assert check_knob("learning_rate", 1e-4, "dpo", defaults.TRAINING_KNOBS["learning_rate"]) is None


def test_every_knob_has_a_range_default_and_reference():
    for table in (defaults.TRAINING_KNOBS, defaults.TRAINING_HOST_KEYS):
        for name, per_method in table.items():
            for method, spec in per_method.items():
                assert method in core_defaults.TRAIN_METHODS, (name, method)
                # a range or choices, not both; or, for a free-text knob (reward_model), the pattern alone
                assert ("range" in spec) + ("choices" in spec) + ("pattern" in spec and "choices" not in spec) == 1, (
                    name, method)
                assert "default" in spec and "paper" in spec and "source" in spec, (name, method)
                if spec["default"] is not None and name not in ("steps",):
                    assert check_knob(name, spec["default"], method, per_method) is None, (name, method)


def test_train_resolves_a_frozen_spec_with_where_each_value_came_from():
    from whileai.core.spec import GRPOSpec
    from whileai.jobs.trainer_config import trl_defaults, trl_settings

    resolved = train_spec("grpo", {"truncated": "mask", "beta": 0.02}, {"epsilon_high": 0.2, "mystery": 1},
                          base_model=None, target=None, holdout=None)
    assert not resolved.problems
    spec = resolved.spec
    assert isinstance(spec, GRPOSpec) and spec.model_config["frozen"]
    assert spec.learning_rate == defaults.TRAINING_KNOBS["learning_rate"]["grpo"]["default"]
    assert spec.loss_type == "bnpo" and spec.beta == 0.02 and spec.epsilon_high == 0.2 and spec.scale_rewards == "group"
    assert spec.extra == {"mystery": 1} and "mystery" in resolved.notes[0]
    assert spec.base_model == kit_defaults.KIT_BASE_NAME
    assert resolved.provenance["beta"] == "argument" and resolved.provenance["epsilon_high"] == "argument"
    assert resolved.provenance["loss_type"].startswith("grpo's default")
    # what we hand TRL differs from TRL's own defaults where we chose otherwise, read from TRL's class
    ours, theirs = trl_settings(spec), trl_defaults("grpo")
    assert ours["mask_truncated_completions"] is True and theirs["mask_truncated_completions"] is False
    assert theirs["beta"] != ours["beta"]


def test_a_stage_inherits_its_start_s_base_and_lora_shape_and_says_so():
    start = {"method": "sft", "base_model": "b", "lora_rank": 4, "lora_alpha": 8}
    resolved = train_spec("grpo", {}, {}, base_model=None, target=None, holdout=None, start=start, start_label="run_x")
    assert resolved.spec is not None and resolved.spec.lora_rank == 4 and resolved.spec.base_model == "b"
    assert resolved.provenance["lora_rank"].startswith("inherited from run_x")


# ---------------------------------------------------------------------------
# The selection gate
# ---------------------------------------------------------------------------


def test_sft_with_failing_rows_is_refused_before_anything_starts(launches):
    ds = wai.push(rows(mixed=3), name="sft-fails")
    with pytest.raises(TrainingSelectionError) as err:
        wai.train(ds, method="sft")
    assert "6 failing rows of 20" in str(err.value) and "scored.passes()" in str(err.value)
    assert err.value.report["method"] == "sft"
    assert not launches and not _runs_for(ds.id)


def test_a_grouped_method_without_a_mixed_task_is_refused(launches):
    ds = wai.push(rows(mixed=0, all_pass=3, all_fail=2), name="unanimous")
    for method in ("grpo", "dpo", "rm"):
        with pytest.raises(TrainingSelectionError, match="3 all-pass, 2 all-fail"):
            wai.train(ds, method=method)
    assert not launches and not _runs_for(ds.id)


def test_check_warn_says_the_same_and_starts(launches):
    ds = wai.push(rows(mixed=2), name="warned")
    with pytest.warns(UserWarning, match="check='warn': sft would train on 4 failing rows"):
        run = wai.train(ds, method="sft", check="warn")
    assert len(launches) == 1 and run.status == "running"
    assert run.selection["dropped"][0]["class"] == "failing"


def test_check_off_reads_no_profile(launches, monkeypatch):
    from whileai.simulations import datasets

    monkeypatch.setattr(datasets, "profile", lambda *a, **k: pytest.fail("profile was read"))
    ds = wai.push(rows(mixed=2), name="off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = wai.train(ds, method="sft", check="off")
    assert run.selection is None and len(launches) == 1


def test_few_mixed_tasks_and_dropped_classes_warn_with_counts(launches):
    ds = wai.push(rows(mixed=3, all_pass=2), name="few")
    with pytest.warns(UserWarning) as caught:
        run = wai.train(ds, method="grpo", min_mixed_tasks=5)
    text = " ".join(str(w.message) for w in caught)
    assert "grpo uses 3 mixed tasks, fewer than min_mixed_tasks=5" in text
    assert "grpo uses 12 of 20 rows (3 of 5 tasks)" in text
    assert "unanimous_pass: 8 rows of 2 tasks where every row passed" in text and "carries no advantage" in text
    assert run.selection["mixed_tasks"] == 3
    assert run.config["min_mixed_tasks"] == 5


def _long(row: dict, words: int = 300) -> dict:
    """``row`` with its ask padded past the kit base's context (KIT_MAX_POSITIONS tokens)."""
    messages = [dict(m) for m in row["messages"]]
    messages[1]["content"] += " please" * words
    return {**row, "messages": messages}


def _dropped_class(report: dict, name: str) -> dict | None:
    return next((d for d in report["dropped"] if d["class"] == name), None)


def test_rows_longer_than_the_context_are_counted_left_out_and_warned(launches):
    from whileai.kit import defaults as kit_defaults

    passes = [_row(f"ctx-{t}", True, i) for t in range(4) for i in range(2)]
    ds = wai.push(passes[:5] + [_long(r) for r in passes[5:]], name="ctx")  # ctx-2 loses a row, ctx-3 both
    with pytest.warns(UserWarning) as caught:
        run = wai.train(ds, method="sft")
    limit = kit_defaults.KIT_MAX_POSITIONS
    report = run.selection
    context = report["context"]
    assert context["checked"] and context["limit"] == limit and context["too_long"] == 3 and context["unit"] == "rows"
    assert [u["rows"] for u in context["left_out"]] == [[5], [6], [7]]
    assert all(u["tokens"] > limit for u in context["left_out"])
    assert (report["rows"], report["tasks"]) == (5, 3)
    assert _dropped_class(report, "too_long") == {"class": "too_long", "rows": 3, "tasks": 1,
                                                   "reason": _dropped_class(report, "too_long")["reason"]}
    assert "a base with a longer context" in _dropped_class(report, "too_long")["reason"]
    assert report["rows"] + sum(d["rows"] for d in report["dropped"]) == report["rows_given"] == 8
    assert f"3 rows longer than the context of {limit} tokens (1 tasks lose every row; row 5: " in report["summary"]
    text = " ".join(str(w.message) for w in caught)
    assert f"sft uses 5 of 8 rows (3 of 4 tasks); dropped too_long: 3 rows longer than the context of {limit}" in text
    stored = wai.get_run(run.id)["summary"]["selection"]
    assert stored["context"]["too_long"] == 3 and stored["rows"] == 5
    assert len(launches) == 1


def test_a_set_whose_every_row_is_too_long_is_refused_naming_the_limit(launches):
    from whileai.kit import defaults as kit_defaults

    limit = kit_defaults.KIT_MAX_POSITIONS
    sft = wai.push([_long(_row(f"all-{t}", True, i)) for t in range(2) for i in range(2)], name="all-long")
    with pytest.raises(TrainingSelectionError) as err:
        wai.train(sft, method="sft")
    message = str(err.value)
    assert f"every row sft would train on is longer than the context of {limit} tokens of {kit_defaults.KIT_BASE_NAME}" in message
    assert "4 rows longer than the context" in message and "a base with a longer context" in message
    assert err.value.report["context"]["too_long"] == 4 and err.value.report["rows"] == 0
    grpo = wai.push([_long(_row(f"g-{t}", i % 2 == 0, i)) for t in range(2) for i in range(4)], name="all-long-grpo")
    with pytest.raises(TrainingSelectionError, match="every prompt grpo would train on .* lower max_completion_length"):
        wai.train(grpo, method="grpo")
    assert not launches and not _runs_for(sft.id) and not _runs_for(grpo.id)
    with pytest.warns(UserWarning, match="check='warn': every row sft would train on is longer"):
        wai.train(sft, method="sft", check="warn")
    assert len(launches) == 1  # said, and started: the job leaves them out and fails with the same count


def test_grpo_counts_its_prompt_with_room_for_the_reply(launches):
    from whileai.kit import build_tokenizer
    from whileai.kit import defaults as kit_defaults
    from whileai.domain.rows.context import prompt_length
    from whileai.domain.rows.rollouts import prompt_messages

    data = rows(mixed=3, all_pass=0, tag="room")
    data[:4] = [_long(r, words=100) for r in data[:4]]  # one task's ask, each of its rows
    ds = wai.push(data, name="room")
    tokens = prompt_length(build_tokenizer(kit_defaults.KIT_BASE_SEED), prompt_messages(data[0]), data[0]["tools"])
    room = kit_defaults.KIT_MAX_POSITIONS - tokens
    assert 0 < room < kit_defaults.KIT_MAX_POSITIONS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = wai.train(ds, method="grpo", max_completion_length=room)
        over = wai.train(ds, method="grpo", max_completion_length=room + 1)
    assert fits.selection["context"]["too_long"] == 0 and fits.selection["prompts"] == 3
    assert over.selection["context"]["too_long"] == 1 and over.selection["prompts"] == 2
    assert over.selection["context"]["left_out"] == [{"task": "room-mixed-0", "rows": [0],
                                                      "tokens": kit_defaults.KIT_MAX_POSITIONS + 1}]
    assert _dropped_class(over.selection, "too_long")["rows"] == 4
    assert f"max_completion_length={room + 1} exceeds the context" in over.selection["summary"]


def test_a_base_not_on_this_machine_leaves_the_context_check_to_the_job(launches):
    ds = wai.push([_long(_row(f"hub-{t}", True, i)) for t in range(2) for i in range(2)], name="hub")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="sft", base_model="nobody/not-in-the-local-cache")
    context = run.selection["context"]
    assert context["checked"] is False and context["limit"] is None and context["too_long"] == 0
    assert "local Hugging Face cache" in context["why"] and "the job counts" in context["why"]
    assert "context not checked: " in run.selection["summary"] and run.selection["rows"] == 4
    assert len(launches) == 1  # the job loads the base and checks there


def test_warnings_for_an_unserved_base_and_another_temperature(launches):
    ds = wai.push(rows(tag="temp"), name="temp")
    with pytest.warns(UserWarning) as caught:
        run = wai.train(ds, method="grpo", base_model="some/other-base", temperature=1.1)
    text = " ".join(str(w.message) for w in caught)
    assert "'some/other-base' is not in SERVED_BASES" in text
    assert "temperature=1.1 differs from the dataset's sampling.temperature (0.7)" in text
    assert run.config["temperature"] == 1.1


def test_every_knob_lands_on_the_run_config(launches):
    ds = wai.push(rows(tag="cfg"), name="cfg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="grpo", steps=7, config={"scale_rewards": "none"})
    config = run.config
    for knob in ("steps", "generations", "beta", "learning_rate", "seed", "max_completion_length", "loss_type",
                 "temperature", "truncated", "min_mixed_tasks", "epsilon_high", "scale_rewards", "balance",
                 "lora_rank", "lora_alpha", "base_model", "method", "target"):
        assert knob in config, knob
    assert config["steps"] == 7 and config["scale_rewards"] == "none" and config["target"] == "local"
    assert config["generations"] == 4  # the dataset's group size
    assert config["temperature"] == 0.7  # rolled out where the rows were measured
    assert launches[0]["spec"]["run_id"] == run.id and launches[0]["kind"] == "grpo"


def test_a_dataset_already_training_answers_with_that_run(launches):
    ds = wai.push(rows(tag="idem"), name="idem")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = wai.train(ds, method="dpo")
    with pytest.warns(UserWarning, match=f"already training in {first.id}"):
        second = wai.train(ds, method="dpo")
    assert second.id == first.id and len(launches) == 1
    first.refresh()
    get_client().request("PATCH", f"/runs/{first.id}", json={"status": "done"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        third = wai.train(ds, method="dpo")
    assert third.id != first.id and len(launches) == 2


def test_other_knobs_on_a_dataset_already_training_start_their_own_runs(launches):
    ds = wai.push(rows(tag="knobs"), name="knobs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = [wai.train(ds, method="dpo", beta=beta, seed=seed) for beta, seed in ((0.1, 0), (0.1, 1), (0.2, 0))]
        again = wai.train(ds, method="dpo", beta=0.1, seed=1)
    assert len({r.id for r in runs}) == 3 and len(launches) == 3
    assert again.id == runs[1].id
    assert [(r.config["beta"], r.config["seed"]) for r in runs] == [(0.1, 0), (0.1, 1), (0.2, 0)]


def test_holdout_defaults_to_the_split_sibling(launches):
    ds = wai.push(rows(mixed=6, all_pass=4, tag="cut"), name="cut")
    train_side, held = wai.datasets.cut(ds, holdout=0.3, seed=0)
    passes = wai.push([r for r in wai.datasets.load_rows(train_side) if r["passed"]], name="passes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(train_side, method="dpo")
        other = wai.train(passes, method="sft", holdout=held)
    assert run.config["holdout"] == held.id and launches[0]["spec"]["holdout"] == held.id
    assert other.config["holdout"] == held.id


def test_target_comes_from_the_platform_configuration(launches, monkeypatch):
    from whileai.platform.launcher import modal_backend

    spawned = []

    class Recorder:
        def spawn(self, payload, gpu):
            spawned.append((payload, gpu))
            return "fc-test"

        def poll(self, call_id):
            return None

        def pull(self, job_id, start):
            return []

        def fetch_adapter(self, remote, dest):
            raise AssertionError("not finished")

    monkeypatch.setattr(modal_backend, "_BACKEND", Recorder())
    monkeypatch.setenv(core_defaults.TRAIN_TARGET_ENV, "modal")
    ds = wai.push(rows(tag="modal"), name="modal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="rm", config={"gpu": "H100"})
    assert run.config["target"] == "modal" and not launches
    payload, gpu = spawned[0]
    assert gpu == "H100" and payload["spec"]["gpu"] == "H100" and len(payload["rows"]) == 24
    job = get_client().request("GET", "/jobs", params={"run_id": run.id})["jobs"][0]
    assert job["call_id"] == "fc-test" and job["status"] == "running" and job["target"] == "modal"


def test_wait_times_out(launches):
    ds = wai.push(rows(tag="wait"), name="wait")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="dpo")
    with pytest.raises(TimeoutError, match="still running"):
        run.wait(poll=0.01, timeout=0.2)


def test_the_launch_route_checks_what_it_is_asked(launches):
    from whileai.core.errors import NotFoundError, PlatformError

    client = get_client()
    run = client.request("POST", "/runs", json={"name": "route", "kind": defaults.TRAIN_RUN_KIND})
    with pytest.raises(PlatformError, match="kind='ppo' is not a training method") as err:
        client.request("POST", "/jobs/launch", json={"run_id": run["id"], "kind": "ppo", "spec": {}})
    assert err.value.status == 422
    with pytest.raises(PlatformError, match="target='cloud' is not a place jobs run"):
        client.request("POST", "/jobs/launch", json={"run_id": run["id"], "kind": "sft", "target": "cloud", "spec": {}})
    with pytest.raises(NotFoundError):
        client.request("POST", "/jobs/launch", json={"run_id": "run_0000000000000000", "kind": "sft", "spec": {}})
    assert not launches


def test_a_job_that_cannot_start_fails_its_run_and_says_why(launches, monkeypatch):
    from whileai.platform.launcher import modal_backend
    from whileai.core.errors import PlatformError

    class NoToken:
        def spawn(self, payload, gpu):
            raise RuntimeError("no Modal token: run `modal token new`")

    monkeypatch.setattr(modal_backend, "_BACKEND", NoToken())
    ds = wai.push(rows(tag="notoken"), name="notoken")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PlatformError, match="could not start on modal .*no Modal token") as err:
            wai.train(ds, method="dpo", target="modal")
    assert err.value.status == 503
    run = _runs_for(ds.id)[0]
    assert run["status"] == "failed" and "no Modal token" in run["error"]


# ---------------------------------------------------------------------------
# Export settings, stages (init_from) and stop, before any model
# ---------------------------------------------------------------------------


def test_export_settings_are_checked_and_travel_on_the_job_spec(launches):
    ds = wai.push(rows(mixed=0, all_pass=3, tag="export"), name="export")
    with pytest.raises(TrainingConfigError) as err:
        wai.train(ds, method="sft", mask_mode="last", strip_think="yes", max_tool_output_chars=0, unroll=1)
    joined = "\n".join(err.value.problems)
    assert len(err.value.problems) == 4, err.value.problems
    for needle in ("mask_mode='last' is not accepted for sft; pass one of 'assistant', 'final'",
                   "strip_think='yes' is not accepted", "max_tool_output_chars=0 is outside [1, ",
                   "unroll=1 is not accepted"):
        assert needle in joined
    ds_mixed = wai.push(rows(tag="export-dpo"), name="export-dpo")
    with pytest.raises(TrainingConfigError, match=r"unroll=True does not apply to dpo \(it is read by sft\)"):
        wai.train(ds_mixed, method="dpo", unroll=True)
    with pytest.raises(TrainingConfigError, match=r"strip_think=False does not apply to grpo \(it is read by sft, dpo\)"):
        wai.train(ds_mixed, method="grpo", strip_think=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = wai.train(ds, method="sft")
        run = wai.train(ds_mixed, method="dpo", strip_think=False, max_tool_output_chars=500,
                        mask_mode="assistant", unroll=False)  # the exporter's own values: accepted, no-ops
        ds_grpo = wai.push(rows(tag="export-grpo"), name="export-grpo")
        grpo = wai.train(ds_grpo, method="grpo", **defaults.TRAIN_EXPORT_DEFAULTS)
    assert not any(k in grpo.config for k in defaults.TRAIN_EXPORT_KNOBS)
    assert {k: default.config[k] for k in defaults.TRAIN_EXPORT_KNOBS} == {
        "mask_mode": "assistant", "unroll": False, "strip_think": True, "max_tool_output_chars": None}
    assert run.config["strip_think"] is False and run.config["max_tool_output_chars"] == 500
    assert "mask_mode" not in run.config  # dpo does not read it
    spec = next(job["spec"] for job in launches if job["run_id"] == run.id)
    assert spec["strip_think"] is False and spec["max_tool_output_chars"] == 500


def _finished(name: str, config: dict | None = None, summary: dict | None = None, status: str = "done",
              client=None) -> dict:
    client = client or get_client()
    record = client.request("POST", "/runs", json={"name": name, "kind": defaults.TRAIN_RUN_KIND,
                                                   "config": config or {}, "summary": summary or {}})
    return client.request("PATCH", f"/runs/{record['id']}", json={"status": status})


def _with_adapter(name: str, base: str = kit_defaults.KIT_BASE_NAME, method: str = "sft") -> dict:
    """A done run whose adapter folder exists where the platform keeps adapters."""
    record = _finished(name, {"method": method, "base_model": base, "lora_rank": 8, "lora_alpha": 16})
    folder = launcher_jobs.adapter_dir(record["id"])
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    return get_client().request("PATCH", f"/runs/{record['id']}", json={"summary": {"adapter": str(folder)}})


def test_init_from_refusals_name_the_run_and_the_fix(launches):
    from whileai.platform.store import Store, store_url

    ds = wai.push(rows(tag="init"), name="init")
    store = Store(store_url())
    try:
        _, other_key = store.create_account("someone-else")
    finally:
        store.close()
    theirs = _finished("theirs", client=get_client(api_key=other_key))
    running = get_client().request("POST", "/runs", json={"name": "running", "kind": defaults.TRAIN_RUN_KIND})
    failed = _finished("failed", status="failed")
    bare = _finished("no adapter", {"method": "sft", "base_model": kit_defaults.KIT_BASE_NAME})
    reward = _with_adapter("reward", method="rm")
    good = _with_adapter("good")
    cases = [
        (dict(init_from=theirs["id"]), "is not a run of this account (the platform answered 404)"),
        (dict(init_from=running["id"]), "is still running: a stage starts from a finished run's adapter"),
        (dict(init_from=failed["id"]), "ended failed, so it has no adapter to continue from"),
        (dict(init_from=bare["id"]), "has no adapter on its record"),
        (dict(init_from=reward["id"]), "is a reward model (rm)"),
        (dict(init_from=good["id"], base_model="Qwen/Qwen3-0.6B"), "differs from the base of init_from"),
        (dict(init_from=good["id"], config={"lora_rank": 32}), "the adapter keeps its shape"),
        (dict(init_from=3), "init_from=3 is not a run"),
    ]
    for kwargs, message in cases:
        with pytest.raises(TrainingConfigError, match=re.escape(message)):
            wai.train(ds, **{"method": "dpo", **kwargs})
    with pytest.raises(TrainingConfigError) as err:  # several at once, with the knobs' problems
        wai.train(ds, method="dpo", init_from=failed["id"], beta=5.0)
    assert len(err.value.problems) == 2
    assert not launches


def test_init_from_a_finished_run_inherits_its_base_and_lora_shape(launches):
    ds = wai.push(rows(tag="stage"), name="stage")
    start = _with_adapter("sft start")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="grpo", init_from=start)  # the record, as get_run returns it
    assert run.config["init_from"] == start["id"] and run.config["base_model"] == kit_defaults.KIT_BASE_NAME
    assert run.config["lora_rank"] == 8 and run.config["lora_alpha"] == 16
    spec = launches[-1]["spec"]
    assert spec["init_from"] == start["id"] and spec["init_adapter"] == str(launcher_jobs.adapter_dir(start["id"]))


def test_a_reward_model_may_start_from_a_policy_run_and_keeps_its_lora_shape(launches):
    """rm with init_from: the policy's base and LoRA shape (its weights load into the classifier's backbone), the
    adapter the platform resolved on the job; a launch by hand from a reward model's run is refused by the
    platform too."""
    from whileai.core.errors import PlatformError
    from whileai.core.spec import SFTSpec

    ds = wai.push(rows(tag="rmstart"), name="rmstart")
    start = _with_adapter("policy start")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="rm", init_from=start["id"])
    assert run.config["init_from"] == start["id"] and run.config["base_model"] == kit_defaults.KIT_BASE_NAME
    assert run.config["lora_rank"] == 8 and run.config["lora_alpha"] == 16
    assert launches[-1]["kind"] == "rm"
    assert launches[-1]["spec"]["init_adapter"] == str(launcher_jobs.adapter_dir(start["id"]))

    client = get_client()
    reward = _with_adapter("a reward model", method="rm")
    stage = client.request("POST", "/runs", json={"name": "from rm", "kind": defaults.TRAIN_RUN_KIND})
    with pytest.raises(PlatformError, match=re.escape(f"init_from={reward['id']!r} is a reward model (rm): its "
                                                      "adapter scores rows")) as err:
        client.request("POST", "/jobs/launch", json={"run_id": stage["id"], "kind": "sft", "spec": {
            **SFTSpec().knobs(), "base_model": kit_defaults.KIT_BASE_NAME, "method": "sft",
            "init_from": reward["id"], "dataset": ds.id}})
    assert err.value.status == 422


def test_the_platform_resolves_the_start_adapter_itself(launches):
    """A caller cannot point a job at a folder: init_adapter is the platform's, checked on launch."""
    from whileai.core.errors import PlatformError

    client = get_client()
    start = _with_adapter("start")
    run = client.request("POST", "/runs", json={"name": "stage", "kind": defaults.TRAIN_RUN_KIND, "config": {}})
    from whileai.core.spec import DPOSpec, SFTSpec

    dpo = {**DPOSpec(base_model=kit_defaults.KIT_BASE_NAME).knobs(), "base_model": kit_defaults.KIT_BASE_NAME}  # resolved
    data = client.request("POST", "/datasets", json={"name": "d", "rows": [
        {"messages": [{"role": "user", "content": "hi"}]}]})["id"]  # a launch names its dataset
    client.request("POST", "/jobs/launch", json={"run_id": run["id"], "kind": "dpo", "spec": {
        **dpo, "method": "dpo", "init_from": start["id"], "init_adapter": "/etc", "dataset": data}})
    assert launches[-1]["spec"]["init_adapter"] == str(launcher_jobs.adapter_dir(start["id"]))
    gone = _with_adapter("gone")
    import shutil

    shutil.rmtree(launcher_jobs.adapter_dir(gone["id"]))
    other = client.request("POST", "/runs", json={"name": "stage2", "kind": defaults.TRAIN_RUN_KIND})
    with pytest.raises(PlatformError, match="has no adapter on this platform") as err:
        client.request("POST", "/jobs/launch", json={"run_id": other["id"], "kind": "sft",
                                                      "spec": {**SFTSpec().knobs(), "base_model": kit_defaults.KIT_BASE_NAME,
                                                               "method": "sft", "init_from": gone["id"],
                                                               "dataset": data}})
    assert err.value.status == 422
    assert client.request("GET", f"/runs/{other['id']}")["status"] == "failed"


def test_stop_marks_a_run_stopped_once_and_keeps_it_so(launches):
    from whileai.core.errors import NotFoundError
    from whileai.domain.tracking import TrainingRun

    client = get_client()
    run = wai.training_run(name="by hand")
    assert run.stop() == "stopped"
    record = wai.get_run(run.id)
    assert record["status"] == "stopped" and "stopped on request" in record["error"]
    assert record["summary"]["stop"]["detail"].startswith("it had no job")
    client.request("PATCH", f"/runs/{run.id}", json={"status": "done", "error": None})  # a late finish
    assert wai.get_run(run.id)["status"] == "stopped"
    with pytest.warns(UserWarning, match="already ended stopped; nothing to stop"):
        assert run.stop() == "stopped"
    done = TrainingRun(_finished("finished"), client)
    with pytest.warns(UserWarning, match="already ended done"):
        assert done.stop() == "done"
    from whileai.platform.store import Store, store_url

    store = Store(store_url())
    try:
        _, other_key = store.create_account("stranger")
    finally:
        store.close()
    with pytest.raises(NotFoundError):
        get_client(api_key=other_key).request("POST", f"/runs/{run.id}/stop")


def test_stop_cancels_a_modal_call_through_the_seam(launches, monkeypatch):
    from whileai.platform.launcher import modal_backend

    class Recorder:
        cancelled: list = []

        def spawn(self, payload, gpu):
            return "fc-stop"

        def poll(self, call_id):
            return None  # still running, as far as Modal says

        def pull(self, job_id, start):
            return []

        def cancel(self, call_id):
            self.cancelled.append(call_id)

    backend = Recorder()
    monkeypatch.setattr(modal_backend, "_BACKEND", backend)
    ds = wai.push(rows(tag="modal-stop"), name="modal-stop")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="dpo", target="modal")
    assert run.stop() == "stopped" and backend.cancelled == ["fc-stop"]
    job = get_client().request("GET", "/jobs", params={"run_id": run.id})["jobs"][0]
    assert job["status"] == "stopped"
    assert "Modal call fc-stop was cancelled" in run.error
    assert run.refresh().status == "stopped"


# ---------------------------------------------------------------------------
# The typed spec on the way in and on the record
# ---------------------------------------------------------------------------


def test_the_reference_camel_case_keys_are_aliases_recorded_in_snake_case(launches):
    from whileai.core.spec import SPEC_VERSION

    ds = wai.push(rows(tag="alias"), name="alias")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="grpo", config={"epsilonHigh": 0.3, "scaleRewards": "batch", "loraRank": 8,
                                                   "holdoutRows": 12})
    config = run.config
    assert config["spec_version"] == SPEC_VERSION
    assert (config["epsilon_high"], config["scale_rewards"], config["lora_rank"], config["holdout_rows"]) == (
        0.3, "batch", 8, 12)
    assert not {"epsilonHigh", "scaleRewards", "loraRank", "holdoutRows"} & set(config)
    spec = launches[-1]["spec"]
    assert spec["epsilon_high"] == 0.3 and "epsilonHigh" not in spec
    with pytest.raises(TrainingConfigError, match=r"epsilon_high=50 is outside \[0, 10\] for grpo"):
        wai.train(ds, method="grpo", config={"epsilonHigh": 50})


def test_the_launch_route_refuses_what_is_not_a_run_spec(launches):
    from whileai.core.errors import PlatformError

    client = get_client()
    run = client.request("POST", "/runs", json={"name": "bad spec", "kind": defaults.TRAIN_RUN_KIND})
    with pytest.raises(PlatformError, match="generations is not a sft setting") as err:
        client.request("POST", "/jobs/launch", json={"run_id": run["id"], "kind": "sft",
                                                      "spec": {"generations": 4, "lora_rank": "wide"}})
    assert err.value.status == 422 and "lora_rank='wide'" in str(err.value)
    assert not launches


def test_the_launch_route_refuses_a_spec_that_is_not_resolved(launches):
    """The platform fills nothing: {"method": "grpo"} with every knob unset is refused naming what is missing
    (before, the job trained with balance=False and died at float(None))."""
    from whileai.core.errors import PlatformError

    client = get_client()
    run = client.request("POST", "/runs", json={"name": "bare", "kind": defaults.TRAIN_RUN_KIND})
    with pytest.raises(PlatformError, match="the spec is not resolved") as err:
        client.request("POST", "/jobs/launch", json={"run_id": run["id"], "kind": "grpo", "spec": {"method": "grpo"}})
    assert err.value.status == 422
    for key in ("beta", "balance", "truncated", "learning_rate", "generations", "base_model"):
        assert key in str(err.value), key
    with pytest.raises(PlatformError, match="does not name base_model, seed"):
        client.request("POST", "/jobs/launch", json={"run_id": run["id"], "kind": "grpo",
                                                      "spec": {"method": "grpo", "beta": None}})
    assert not launches


def test_a_refused_launch_fails_its_run_and_the_same_config_trains_again(launches, tmp_path):
    # a run left running with no job read as crashed for ever: wait() never returned, and a second submit of the
    # same config answered with that run
    from whileai.core.errors import PlatformError

    ds = wai.push(rows(tag="refused"), name="refused")
    from whileai.core.paths import data_root

    outside = data_root() / "adapters" / "merged-base"  # model-shaped, but in the platform's adapters: never a base
    outside.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (outside / name).write_text("{}")
    for _ in range(2):
        with pytest.raises(PlatformError, match="is not a base this platform trains on") as err:
            wai.train(ds, method="rm", base_model=str(outside), check="off")
        assert err.value.status == 422
    refused = [r for r in _runs_for(ds.id)]
    assert len(refused) == 2 and {r["status"] for r in refused} == {"failed"}, refused
    assert all("the job was refused: " in r["error"] for r in refused)
    assert not launches


def test_dpo_pair_source_and_nll_weight_are_checked_and_recorded(launches):
    ds = wai.push(rows(tag="dpo-policy"), name="dpo-policy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="dpo", config={"pair_source": "policy", "nll_weight": 1.0, "policy_samples": 4})
    assert (run.config["pair_source"], run.config["nll_weight"], run.config["policy_samples"]) == ("policy", 1.0, 4)
    assert launches[-1]["spec"]["pair_source"] == "policy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = wai.train(ds, method="dpo", steps=3)
    # the defaults are plain DPO on the dataset's own rows, and they land on the record too
    assert (plain.config["pair_source"], plain.config["nll_weight"]) == ("rows", 0.0)
    with pytest.raises(TrainingConfigError) as raised:
        wai.train(ds, method="dpo", config={"pair_source": "sampled", "nll_weight": -1, "policy_samples": 1})
    said = str(raised.value)
    assert "3 problem(s)" in said and "pair_source='sampled'" in said and "'rows', 'policy'" in said
    assert "nll_weight=-1" in said and "policy_samples=1" in said
    with pytest.raises(TrainingConfigError, match="pair_source"):
        wai.train(ds, method="sft", config={"pair_source": "policy"})


def test_the_runner_record_and_provenance_are_typed_parts_of_the_run(launches, push_sample):
    """The runner's record travels as the spec's ``runner`` and each value's origin as ``provenance``: no unknown
    key, no ``extra``, and no warning to filter out by its text."""
    import inspect
    import warnings

    from whileai.core.spec import read_spec

    sets = push_sample("typed-record", tasks=8)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        run = wai.train(sets["passes"], method="sft", steps=3, check="off",
                        config={"runner": {"recipe": "sft_tooluse", "stage": "train"},
                                "provenance": {"steps": "recipes/sft_tooluse.yaml:9"}})
    assert not [w for w in said if "runner" in str(w.message) or "provenance" in str(w.message)]
    config = run.config
    assert "extra" not in config and config["runner"]["recipe"] == "sft_tooluse"
    assert config["provenance"]["steps"] == "recipes/sft_tooluse.yaml:9"
    assert config["provenance"]["learning_rate"].startswith("the kit base's measured SFT recipe")
    spec = read_spec(config)
    assert spec.runner is not None and spec.runner.recipe == "sft_tooluse" and spec.provenance == config["provenance"]
    # wai.train's keyword arguments are the knobs declared with surface argument/export: one list, not two
    params = set(inspect.signature(wai.train).parameters)
    assert set(defaults.TRAINING_KNOBS) <= params


# ---------------------------------------------------------------------------
# One kind of setting: keyword arguments or the spec object
# ---------------------------------------------------------------------------


def test_every_knob_is_a_keyword_argument_and_config_still_takes_the_host_keys(launches):
    """lora_rank, batch_size, prompt_source, ... are keyword arguments as beta is; config= resolves to the same run."""
    import inspect

    from whileai.core.spec import knob_table

    assert set(knob_table()) <= set(inspect.signature(wai.train).parameters)  # every method's every knob
    ds = wai.push(rows(tag="kw"), name="kw")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="grpo", steps=3, lora_rank=8, epsilon_high=0.3, prompt_source="mixed",
                        prompts_per_step=2)
        again = wai.train(ds, method="grpo", steps=3, config={"loraRank": 8, "epsilon_high": 0.3,
                                                              "prompt_source": "mixed", "prompts_per_step": 2})
        alias = wai.train(ds, method="grpo", steps=3, loraRank=8, epsilon_high=0.3, prompt_source="mixed",
                          prompts_per_step=2)
    config = run.config
    assert (config["lora_rank"], config["epsilon_high"], config["prompts_per_step"]) == (8, 0.3, 2)
    assert config["provenance"]["lora_rank"] == "argument" and config["provenance"]["beta"].startswith("grpo's default")
    assert again.id == run.id and alias.id == run.id  # the same resolved spec: the one run answers all three
    assert len(launches) == 1


def test_an_unknown_keyword_names_the_nearest_settings_and_a_setting_given_twice_is_refused(launches):
    ds = wai.push(rows(tag="typo"), name="typo")
    with pytest.raises(TrainingConfigError) as err:
        wai.train(ds, method="sft", lora_rnak=8, steps=2)
    problem = err.value.problems[0]
    assert problem.startswith("lora_rnak=8 is not a setting of train() (did you mean lora_rank"), problem
    assert "; pass one of the settings: " in problem and "batch_size" in problem and "prompt_source" in problem
    with pytest.raises(TrainingConfigError, match=r"lora_rank is given twice: lora_rank=8 and config\['lora_rank'\]=16"):
        wai.train(ds, method="sft", lora_rank=8, config={"lora_rank": 16})
    with pytest.raises(TrainingConfigError, match=r"batch_size=4 does not apply to grpo \(it is read by sft, dpo, rm\)"):
        wai.train(ds, method="grpo", batch_size=4)
    assert not launches and not _runs_for(ds.id)


def test_a_spec_object_is_the_settings_and_a_resolved_spec_resolves_to_itself(launches):
    """spec= gives every setting at once (keyword arguments beside it change them); the spec a run recorded, handed
    back, is that same run."""
    from whileai.core.spec import GRPOSpec, read_spec

    ds = wai.push(rows(tag="obj"), name="obj")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, spec=GRPOSpec(beta=0.02, lora_rank=8, steps=5), steps=3)
        config = run.config
        assert (config["method"], config["beta"], config["lora_rank"], config["steps"]) == ("grpo", 0.02, 8, 3)
        assert config["generations"] == 4 and config["temperature"] == 0.7  # unset on the spec: the dataset decides
        back = wai.train(ds, spec=read_spec(config))
    assert back.id == run.id and len(launches) == 1
    with pytest.raises(TrainingConfigError, match=r"method='sft' differs from the spec's method \('grpo'\)"):
        wai.train(ds, method="sft", spec=GRPOSpec())
    with pytest.raises(TrainingConfigError, match="spec=.* is not a run spec"):
        wai.train(ds, spec={"method": "grpo"})
