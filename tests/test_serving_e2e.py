"""End to end: push the sample set, train an SFT run, serve it, get a tool call through ``openai``, unserve.

Runs on the session's data root, where the kit's demo base is cached once for
every test that needs it (tests/test_jobs.py builds it too). The run is short:
it proves the path from a hosted run's adapter to a tool call on the endpoint,
not learning (benchmarks/ measures that). The demo base was pre-trained on
tool-call examples, so greedy decoding with tools emits tool-call blocks (after
12 steps every held-out ask tried got one, with the wrong tool or arguments).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

import whileai.simulations as wai  # noqa: E402
from whileai.kit.defaults import KIT_BASE_NAME  # noqa: E402
from whileai.platform.server import serve_in_thread  # noqa: E402
from whileai.platform.store import ensure_local_account, store_url  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sft_run(session_home, push_sample):
    """A finished SFT run on the sample set's passing rows, and held-out rows to ask with."""
    os.environ["WHILEAI_HOME"] = str(session_home)
    sets = push_sample("sample")
    passes, held = sets["passes"], sets["holdout"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(passes, method="sft", steps=12, holdout=held, wait=True, config={"holdout_rows": 8})
    assert run.status == "done", run.error
    return run, wai.datasets.load_rows(held)


def test_the_finished_run_carries_its_adapter_holdout_and_cost_basis(sft_run, session_home):
    run, _ = sft_run
    adapter = Path(run.adapter)
    assert adapter == session_home / "adapters" / run.id
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    training = run.training
    assert 0.0 <= training["before"] <= 1.0 and 0.0 <= training["after"] <= 1.0
    assert training["holdout_prompts"] == 8 and training["rows"] > 0 and training["seconds"] > 0
    assert training["gpu"] is None and training["cost_basis"]  # CPU: the basis says why there is no estimate
    assert run.config["base_model"] == KIT_BASE_NAME and run.config["method"] == "sft"


def _ask(row):
    messages = row["messages"]
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return messages[:first]


def test_a_trained_run_answers_with_a_tool_call_until_unserved(sft_run, session_home, monkeypatch):
    run, held = sft_run
    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        _, key = ensure_local_account(handle.store)
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key)
        # by id, so the registry call goes to this server (the run handle keeps the embedded client it was
        # made with, whose endpoint is the default address of `python -m whileai platform`)
        row = wai.serve(run.id, "sample-agent")
        assert row["adapter"] == run.adapter and row["adapterRunId"] == run.id
        assert row["endpoint"] == f"{handle.base_url}/v1"
        client = openai.OpenAI(base_url=row["endpoint"], api_key=key, max_retries=0, timeout=300)

        calls = []
        for example in held[:6]:
            reply = client.chat.completions.create(model="sample-agent", messages=_ask(example),
                                                   tools=example["tools"], temperature=0, max_tokens=64)
            choice = reply.choices[0]
            if choice.finish_reason == "tool_calls":
                calls.extend(choice.message.tool_calls)
                break
        assert calls, "no held-out prompt got a tool call back"
        assert calls[0].type == "function" and calls[0].function.name
        assert isinstance(json.loads(calls[0].function.arguments), dict)

        assert wai.unserve("sample-agent") == {"name": "sample-agent", "deleted": True}
        with pytest.raises(openai.NotFoundError, match="sample-agent"):
            client.chat.completions.create(model="sample-agent", messages=_ask(held[0]), max_tokens=4)
    finally:
        handle.stop()
