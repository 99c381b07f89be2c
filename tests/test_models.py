"""The model registry through the SDK (serve, unserve/delete_model, models) and reward-model judges.

Registry tests run on the embedded platform (the same FastAPI app and SQLite
store, in process) and, for account scoping, on a real uvicorn server on a
loopback port with two accounts. The reward-model judge loads a real
sequence-classification LoRA (score head saved through ``modules_to_save``)
built on the kit's tiny model in the test.
"""

from __future__ import annotations

import math

import pytest

from whileai.simulations import serving as _models, training

from whileai.kit import defaults as kit_defaults
from whileai.simulations.serving import delete_model, models, reward_model, serve, unserve
from whileai.core.errors import NotFoundError, PlatformError
from whileai.platform import defaults as platform_defaults

BASE = kit_defaults.KIT_BASE_NAME


@pytest.fixture(autouse=True)
def _adapters_folder_allowed(monkeypatch):
    """The registry tests name adapters under /adapters: the operator lets the platform load from there."""
    monkeypatch.setenv(platform_defaults.SERVE_DIRS_ENV, "/adapters")


def _finished_run(adapter: str | None = "/adapters/a", base: str | None = BASE, status: str = "done",
                  method: str | None = "sft", **summary):
    config = {k: v for k, v in (("base_model", base), ("method", method)) if v is not None}
    run = training.training_run(config=config)
    if adapter is not None:
        summary["adapter"] = adapter
    if summary:
        run.note(**summary)
    run.finish(status) if status != "running" else run.flush()
    return run


# --------------------------------------------------------------------------- registry semantics


def test_serve_bumps_version_unserve_removes_and_serving_again_starts_at_one(home):
    first = _finished_run(adapter="/adapters/one")
    row = serve(first, "agent")
    assert row["name"] == "agent" and row["version"] == 1
    assert row["adapter"] == "/adapters/one" and row["adapterRunId"] == first.id and row["baseModel"] == BASE
    assert row["endpoint"].endswith("/v1")

    second = _finished_run(adapter="/adapters/two")
    bumped = serve(training.get_run(second.id), "agent")  # the record get_run returns
    assert bumped["version"] == 2 and bumped["adapter"] == "/adapters/two" and bumped["adapterRunId"] == second.id
    listed = models()
    assert [(m["name"], m["version"], m["adapter"]) for m in listed] == [("agent", 2, "/adapters/two")]
    assert listed[0]["endpoint"] == row["endpoint"]

    assert unserve("agent") == {"name": "agent", "deleted": True}
    assert models() == []
    again = serve(first.id, "agent")  # a run id works too
    assert again["version"] == 1 and again["adapter"] == "/adapters/one"


def test_delete_model_is_unserve_and_unknown_names_are_named(home):
    assert delete_model is unserve
    serve(_finished_run(), "a")
    assert delete_model("a") == {"name": "a", "deleted": True}
    with pytest.raises(NotFoundError, match="'a'"):
        unserve("a")
    with pytest.raises(NotFoundError, match="never-served"):
        delete_model("never-served")


def test_base_model_override_and_the_bare_base(home):
    run = _finished_run(base="someone/its-own-base")
    with pytest.warns(UserWarning, match="SERVED_BASES"):  # the run's own base: served, with a warning
        assert serve(run, "m")["baseModel"] == "someone/its-own-base"
    with pytest.warns(UserWarning, match="SERVED_BASES"), pytest.raises(PlatformError, match="SERVED_BASES"):
        serve(run, "other", base_model="someone/unknown-base")  # neither served nor the run's: refused
    bare = serve(None, "bare", base_model=BASE)
    assert bare["adapter"] is None and bare["adapterRunId"] is None and bare["baseModel"] == BASE
    with pytest.raises(ValueError, match="base_model"):
        serve(None, "bare2")
    assert sorted(m["name"] for m in models()) == ["bare", "m"]


def test_names_with_slashes_and_spaces_round_trip(home):
    serve(None, "org/agent v1", base_model=BASE)
    assert [m["name"] for m in models()] == ["org/agent v1"]
    assert unserve("org/agent v1")["deleted"] is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "running"}, "'running'.*wait"),
        ({"status": "failed"}, "'failed'"),
        ({"adapter": None}, "no adapter"),
        ({"base": None}, "base_model="),
    ],
)
def test_serve_refuses_a_run_it_cannot_serve(home, kwargs, message):
    run = _finished_run(**kwargs)
    with pytest.raises(ValueError, match=message):
        serve(run, "agent")
    assert models() == []


def test_serve_refuses_bad_arguments(home):
    for name in (None, "", "  padded ", 3):
        with pytest.raises(ValueError, match="name="):
            serve(None, name, base_model=BASE)
    with pytest.raises(TypeError, match="run_"):
        serve(3.5, "agent")
    with pytest.raises(NotFoundError, match="run_0000000000000000"):
        serve("run_0000000000000000", "agent")


def test_models_are_scoped_to_the_account(home, monkeypatch):
    from whileai.platform.server import serve_in_thread
    from whileai.platform.store import store_url

    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        _, key_a = handle.store.create_account("a")
        _, key_b = handle.store.create_account("b")
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        run = training.training_run(config={"base_model": BASE}, api_key=key_a)
        run.note(adapter="/adapters/a")
        run.finish()
        row = serve(run, "shared-name")  # the handle's own client: account a
        assert row["endpoint"] == f"{handle.base_url}/v1"
        assert [m["name"] for m in models(api_key=key_a)] == ["shared-name"]
        assert models(api_key=key_b) == []
        with pytest.raises(NotFoundError, match="shared-name"):
            unserve("shared-name", api_key=key_b)
        with pytest.raises(NotFoundError):  # b cannot serve a's run either
            serve(run.id, "mine", api_key=key_b)
        assert serve(None, "shared-name", base_model=BASE, api_key=key_b)["version"] == 1
        assert models(api_key=key_a)[0]["version"] == 1  # a's row untouched
    finally:
        handle.stop()


# --------------------------------------------------------------------------- reward_model


ROWS = [
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "c0", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
         "type": "object", "properties": {"city": {"type": "string"}}}}}],
     "passed": True},
    {"messages": [{"role": "user", "content": "Weather in Oslo?"},
                  {"role": "assistant", "content": "It is sunny."}], "passed": False},
    {"messages": [{"role": "user", "content": "Set a timer for 5 minutes"},
                  {"role": "assistant", "content": "Done, a timer for five minutes is set now."}], "passed": True},
]


@pytest.fixture(scope="module")
def rm_adapter(tmp_path_factory):
    """A tiny base on disk and a sequence-classification LoRA on it, saved in PEFT's format."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from whileai.kit._base import tiny_model_dir

    root = tmp_path_factory.mktemp("rm")
    base = tiny_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="SEQ_CLS",
                        modules_to_save=["score"])
    peft_model = get_peft_model(model, config)
    with torch.no_grad():  # a head that is not the fresh random one, so loading it is what gets tested
        peft_model.base_model.model.score.modules_to_save["default"].weight.fill_(0.01)
    peft_model.save_pretrained(root / "adapter")
    tokenizer.save_pretrained(root / "adapter")
    return {"base": str(base), "adapter": str(root / "adapter")}


@pytest.fixture
def rm_folder_allowed(monkeypatch, rm_adapter):
    """The operator lets the platform load the test's reward adapter (a client loads only what the platform resolves)."""
    from pathlib import Path

    monkeypatch.setenv(platform_defaults.SERVE_DIRS_ENV, str(Path(rm_adapter["adapter"]).parent))


def _rm_run(rm_adapter, threshold=0.0, method="rm", status="done"):
    kwargs = {"training": {"threshold": threshold}} if threshold is not None else {}
    return _finished_run(adapter=rm_adapter["adapter"], base=rm_adapter["base"], method=method, status=status,
                         **kwargs)


def test_reward_model_judge_scores_rows_in_evaluate_and_judge_trust(home, rm_adapter, rm_folder_allowed):
    import whileai.simulations as wai

    run = _rm_run(rm_adapter)
    scores = reward_model(run).score(ROWS)  # batched
    assert len(scores) == 3 and all(math.isfinite(s) for s in scores)
    assert len(set(round(s, 6) for s in scores)) == 3  # different rows, different scores

    low = sorted(scores)
    cut = (low[0] + low[1]) / 2  # one row below the cut, two above it
    judge = reward_model(run.id, threshold=cut)
    single = [judge(row) for row in ROWS]
    assert [v["reward"] for v in single] == pytest.approx(scores, abs=1e-5)  # one at a time == batched
    assert [v["passed"] for v in single] == [s >= cut for s in scores]
    assert sum(v["passed"] for v in single) == 2

    scored = wai.evaluate(ROWS, judge)
    assert [r["reward"] for r in scored.rows] == pytest.approx(scores, abs=1e-5)
    assert scored.pass_rate == pytest.approx(2 / 3)
    trust = wai.judge_trust(ROWS, judge=judge)
    assert trust["n"] == 3 and 0.0 <= trust["accuracy"] <= 1.0
    graded = wai.SimulationData(ROWS).grade(judge=judge)
    assert [r["passed"] for r in graded.rows] == [s >= cut for s in scores]

    own = reward_model(training.get_run(run.id))  # the run's own threshold (0.0 here)
    assert own.threshold == 0.0 and own(ROWS[0])["passed"] == (scores[0] >= 0.0)


def test_reward_model_refuses_runs_that_are_not_finished_reward_models(home, rm_adapter, rm_folder_allowed):
    with pytest.raises(ValueError, match="method='sft'"):
        reward_model(_rm_run(rm_adapter, method="sft"))
    with pytest.raises(ValueError, match="'running'"):
        reward_model(_rm_run(rm_adapter, status="running"))
    with pytest.raises(ValueError, match="threshold="):
        reward_model(_rm_run(rm_adapter, threshold=None))
    assert reward_model(_rm_run(rm_adapter, threshold=None), threshold=1.5).threshold == 1.5
    with pytest.raises(ValueError, match="finite"):
        reward_model(_rm_run(rm_adapter), threshold=float("nan"))
    judge = reward_model(_rm_run(rm_adapter))
    with pytest.raises(ValueError, match="no messages"):
        judge({"reward": 1.0})


def test_reward_model_names_a_missing_adapter(home, tmp_path, rm_adapter, monkeypatch):
    monkeypatch.setenv(platform_defaults.SERVE_DIRS_ENV, str(tmp_path))  # a folder the operator added, since emptied
    run = _finished_run(adapter=str(tmp_path / "gone"), base=rm_adapter["base"], method="rm",
                        training={"threshold": 0.0})
    judge = reward_model(run)  # lazy: nothing loads until the first row
    with pytest.raises(FileNotFoundError, match="gone"):
        judge(ROWS[0])


def test_the_sdk_module_exports(home):
    assert set(_models.__all__) >= {"serve", "unserve", "delete_model", "models", "reward_model"}
