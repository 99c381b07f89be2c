"""The OpenAI-compatible endpoint, end to end: a real uvicorn server on a loopback port, the official
``openai`` client, the kit's tiny model on disk and a real PEFT LoRA adapter on it.

The adapter is fitted in the test, in closed form: a LoRA on ``lm_head`` whose
low-rank update makes greedy decoding of one prompt reproduce one tool-call
reply exactly. So the endpoint's whole path (auth, registry, load, chat
template with tools, generate, tool-call parsing) runs on real weights, and
what the model says is known in advance.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import httpx
import pytest

openai = pytest.importorskip("openai")

from whileai.platform.server import serve_in_thread  # noqa: E402
from whileai.platform.store import store_url  # noqa: E402
from whileai.platform import defaults  # noqa: E402
from whileai.simulations import training  # noqa: E402
from whileai.simulations.serving import models, serve, unserve  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    # the fitted adapter sits on lm_head, which the kit ties to the embeddings; it is never merged
    pytest.mark.filterwarnings("ignore:Model has `tie_word_embeddings=True`:UserWarning"),
]

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


def _fit_tool_call_adapter(model, tokenizer, folder) -> None:
    """Save a LoRA on lm_head that makes greedy decoding answer ASK (with TOOLS) with CALL, then end the turn.

    With H the final hidden states at the reply's positions, the update D = B A
    solves H D^T = T, where T lifts each next token's logit a margin above the
    base's largest: an exact least-squares solution (rank <= reply length), split
    into LoRA factors by SVD. Positions before the reply are untouched in
    spirit; only the reply's are constrained.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    prompt = tokenizer.apply_chat_template(ASK, tools=TOOLS, add_generation_prompt=True, tokenize=True,
                                           return_dict=False)
    reply = {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": CALL}]}
    full = tokenizer.apply_chat_template(ASK + [reply], tools=TOOLS, tokenize=True, return_dict=False)
    end = full.index(tokenizer.eos_token_id, len(prompt)) + 1  # through the end-of-turn token
    targets = torch.tensor(full[len(prompt):end])
    rank = len(targets) + 2
    peft_model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=rank, target_modules=["lm_head"],
                                                  lora_dropout=0.0, init_lora_weights=True))
    lm_head = peft_model.base_model.model.lm_head
    with torch.no_grad():
        hidden = peft_model.base_model.model.model(input_ids=torch.tensor([full[:end]])).last_hidden_state[0]
        h = hidden[len(prompt) - 1:end - 1].double()  # the state that predicts each reply token
        logits = h @ lm_head.base_layer.weight.double().T
        lift = torch.zeros_like(logits)
        rows = torch.arange(len(targets))
        lift[rows, targets] = logits.max(dim=1).values - logits[rows, targets] + 20.0
        delta_t = torch.linalg.lstsq(h, lift).solution  # d x V with h @ delta_t == lift
        u, s, vh = torch.linalg.svd(delta_t.T, full_matrices=False)  # V x d = (u s) vh
        lm_head.lora_B["default"].weight.copy_((u[:, :rank] * s[:rank]).float())
        lm_head.lora_A["default"].weight.copy_(vh[:rank].float())
    peft_model.save_pretrained(folder, save_embedding_layers=False)
    tokenizer.save_pretrained(folder)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """The kit's tiny random model as a local base (cached by the kit), and the fitted tool-call adapter on it."""
    from whileai.kit import load_base
    from whileai.kit._base import tiny_model_dir

    base = tiny_model_dir()
    model, tokenizer = load_base(base)
    adapter = tmp_path_factory.mktemp("serving") / "adapter"
    _fit_tool_call_adapter(model, tokenizer, adapter)
    return {"base": str(base), "adapter": str(adapter)}


@pytest.fixture
def platform(home, monkeypatch, weights):
    """A real platform server with two accounts; the SDK talks to it as account a.

    Its operator lets it load the test's base and adapter folders (SERVE_DIRS_ENV).
    """
    folders = (str(Path(weights["base"]).parent), str(Path(weights["adapter"]).parent))
    monkeypatch.setenv(defaults.SERVE_DIRS_ENV, os.pathsep.join(folders))
    handle = serve_in_thread("127.0.0.1", 0, store_url())
    _, key_a = handle.store.create_account("a")
    _, key_b = handle.store.create_account("b")
    monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
    monkeypatch.setenv("WHILEAI_API_KEY", key_a)
    yield {"handle": handle, "url": handle.base_url, "key": key_a, "other_key": key_b}
    handle.stop()


def _done_run(weights) -> training.TrainingRun:
    run = training.training_run(config={"base_model": weights["base"], "method": "sft"})
    run.note(adapter=weights["adapter"])
    run.finish()
    return run


def _client(row_or_url, key) -> openai.OpenAI:
    url = row_or_url["endpoint"] if isinstance(row_or_url, dict) else row_or_url + "/v1"
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=120)


# --------------------------------------------------------------------------- end to end


def test_serve_call_with_tools_list_unserve_then_404(platform, weights):
    row = serve(_done_run(weights), "weather-agent")
    assert row["endpoint"] == f"{platform['url']}/v1" and row["version"] == 1
    client = _client(row, platform["key"])

    reply = client.chat.completions.create(model="weather-agent", messages=ASK, tools=TOOLS, temperature=0,
                                           max_tokens=40)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert reply.model == "weather-agent" and reply.object == "chat.completion"
    assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 40
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens

    listed = {m.id: m for m in client.models.list()}
    assert set(listed) == {"weather-agent"} and listed["weather-agent"].owned_by == "whileai"
    assert client.models.retrieve("weather-agent").id == "weather-agent"

    # the conversation goes on: the call and its result go back in, arguments as a JSON string
    follow = ASK + [choice.message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": "{\"temp\": 18}"}]
    again = client.chat.completions.create(model="weather-agent", messages=follow, tools=TOOLS, temperature=0,
                                           max_tokens=4)
    assert again.choices[0].finish_reason in ("stop", "length", "tool_calls")

    assert unserve("weather-agent") == {"name": "weather-agent", "deleted": True}
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="weather-agent", messages=ASK, max_tokens=4)
    message = caught.value.body["message"] if isinstance(caught.value.body, dict) else str(caught.value)
    assert "weather-agent" in message and "/v1/models" in message
    assert caught.value.code == "model_not_found"
    assert list(client.models.list()) == []
    with pytest.raises(openai.NotFoundError, match="weather-agent"):
        client.models.retrieve("weather-agent")


def test_bare_base_plain_content_length_and_tools_off(platform, weights):
    serve(None, "bare", base_model=weights["base"])
    client = _client(platform["url"], platform["key"])
    reply = client.chat.completions.create(model="bare", messages=ASK, temperature=0, max_tokens=3)
    choice = reply.choices[0]
    assert choice.finish_reason == "length" and isinstance(choice.message.content, str)
    assert choice.message.tool_calls is None and reply.usage.completion_tokens == 3

    # the adapter's tool call with tool_choice="none" is left as text, not parsed
    serve(_done_run(weights), "agent")
    text = client.chat.completions.create(model="agent", messages=ASK, tools=TOOLS, tool_choice="none",
                                          temperature=0, max_tokens=40)
    assert text.choices[0].message.tool_calls is None


def test_sampling_is_reproducible_with_a_seed_and_n_choices(platform, weights):
    serve(None, "bare", base_model=weights["base"])
    client = _client(platform["url"], platform["key"])
    kwargs = dict(model="bare", messages=ASK, temperature=1.0, top_p=0.9, seed=7, max_tokens=6, n=2)
    first, second = (client.chat.completions.create(**kwargs) for _ in range(2))
    assert [c.message.content for c in first.choices] == [c.message.content for c in second.choices]
    assert [c.index for c in first.choices] == [0, 1]
    assert 2 <= first.usage.completion_tokens <= 12


def test_streaming_gives_the_same_reply_in_chunks(platform, weights):
    serve(_done_run(weights), "agent")
    client = _client(platform["url"], platform["key"])
    chunks = list(client.chat.completions.create(model="agent", messages=ASK, tools=TOOLS, temperature=0,
                                                 max_tokens=40, stream=True,
                                                 stream_options={"include_usage": True}))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["tool_calls"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    # no content leaked before the tool-call block
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""

    serve(None, "bare", base_model=weights["base"])
    plain = client.chat.completions.create(model="bare", messages=ASK, temperature=0, max_tokens=5)
    streamed = client.chat.completions.create(model="bare", messages=ASK, temperature=0, max_tokens=5, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == plain.choices[0].message.content


# --------------------------------------------------------------------------- accounts and errors


def test_another_account_can_neither_see_nor_use_the_model(platform, weights):
    serve(None, "private", base_model=weights["base"])
    other = _client(platform["url"], platform["other_key"])
    assert list(other.models.list()) == []
    with pytest.raises(openai.NotFoundError, match="private"):
        other.chat.completions.create(model="private", messages=ASK, max_tokens=2)
    with pytest.raises(openai.AuthenticationError):
        _client(platform["url"], "wai_not_a_key").chat.completions.create(model="private", messages=ASK)
    with pytest.raises(openai.AuthenticationError):
        _client(platform["url"], "wai_not_a_key").models.list()


def test_bad_requests_get_openai_shaped_errors(platform, weights):
    serve(None, "bare", base_model=weights["base"])
    client = _client(platform["url"], platform["key"])
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="bare", messages=[])
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.chat.completions.create(model="bare", messages=ASK, temperature=3)
    with pytest.raises(openai.BadRequestError, match="SERVING_MAX_N"):
        client.chat.completions.create(model="bare", messages=ASK, n=defaults.SERVING_MAX_N + 1)
    with pytest.raises(openai.BadRequestError, match="role"):
        client.chat.completions.create(model="bare", messages=[{"role": "wizard", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        client.chat.completions.create(model="bare", messages=ASK, tools=TOOLS, tool_choice="required")

    headers = {"Authorization": f"Bearer {platform['key']}", "Content-Type": "application/json"}
    raw = httpx.post(f"{platform['url']}/v1/chat/completions", content=b"{not json", headers=headers)
    assert raw.status_code == 400
    error = raw.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and "JSON" in error["message"]
    missing = httpx.post(f"{platform['url']}/v1/chat/completions", json={"model": "bare"}, headers=headers)
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "messages"

    run = training.training_run(config={"base_model": weights["base"]})
    run.note(adapter=weights["adapter"] + "-gone")
    run.finish()
    serve(run, "lost")
    with pytest.raises(openai.InternalServerError, match="adapter-gone") as caught:
        client.chat.completions.create(model="lost", messages=ASK, max_tokens=2)
    assert caught.value.code == "model_load_failed"


# --------------------------------------------------------------------------- the pool


def _loaded(platform) -> dict[str, bool]:
    body = httpx.get(f"{platform['url']}/v1/models", headers={"Authorization": f"Bearer {platform['key']}"}).json()
    return {m["id"]: m["loaded"] for m in body["data"]}


def test_idle_models_unload_and_reload_on_the_next_call(home, monkeypatch, weights):
    monkeypatch.setenv(defaults.SERVING_IDLE_UNLOAD_ENV, "0.5")
    monkeypatch.setenv(defaults.SERVING_MAX_LOADED_ENV, "1")
    folders = (str(Path(weights["base"]).parent), str(Path(weights["adapter"]).parent))
    monkeypatch.setenv(defaults.SERVE_DIRS_ENV, os.pathsep.join(folders))  # its operator's folders
    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        _, key = handle.store.create_account("a")
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key)
        platform = {"url": handle.base_url, "key": key}
        serve(None, "bare", base_model=weights["base"])
        serve(_done_run(weights), "agent")
        client = _client(handle.base_url, key)
        assert _loaded(platform) == {"agent": False, "bare": False}

        client.chat.completions.create(model="bare", messages=ASK, temperature=0, max_tokens=1)
        assert _loaded(platform) == {"agent": False, "bare": True}
        client.chat.completions.create(model="agent", messages=ASK, temperature=0, max_tokens=1)
        assert _loaded(platform) == {"agent": True, "bare": False}  # one at most: the older one went

        deadline = time.monotonic() + 10
        while any(_loaded(platform).values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _loaded(platform) == {"agent": False, "bare": False}  # idle to zero
        reply = client.chat.completions.create(model="agent", messages=ASK, tools=TOOLS, temperature=0,
                                               max_tokens=40)
        assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
    finally:
        handle.stop()


def test_concurrent_requests_share_one_load(platform, weights):
    serve(_done_run(weights), "agent")
    client = _client(platform["url"], platform["key"])
    results, errors = [], []

    def call():
        try:
            reply = client.chat.completions.create(model="agent", messages=ASK, tools=TOOLS, temperature=0,
                                                   max_tokens=40)
            results.append(reply.choices[0].message.tool_calls[0].function.arguments)
        except Exception as exc:  # collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(results) == 3 and {json.loads(r)["city"] for r in results} == {"Paris"}
    pool = platform["handle"]._server.config.app.state.serving_pool
    assert pool.loaded() == [(weights["base"], weights["adapter"])]
    assert pool._entries[(weights["base"], weights["adapter"])].loads == 1
    assert models()[0]["name"] == "agent"


def test_the_command_line_serves_a_run_and_a_folder_lists_them_and_unserves_in_its_own_words(platform, weights):
    """``serve RUN|FOLDER --name``, ``models`` and ``unserve`` against a real server, as a person types them."""
    import subprocess
    import sys

    env = {**os.environ, "WHILEAI_BASE_URL": platform["url"], "WHILEAI_API_KEY": platform["key"]}

    def whileai(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "whileai", *args], capture_output=True, text=True, env=env,
                              timeout=300)

    run = _done_run(weights)
    served = whileai("serve", run.id, "--name", "cli-agent")
    assert served.returncode == 0, served.stderr
    assert served.stdout.startswith(f"cli-agent v1: run {run.id}'s adapter on {weights['base']}")
    assert f"endpoint {platform['url']}/v1" in served.stdout
    folder = whileai("serve", weights["base"], "--name", "cli-base", "--json")
    assert folder.returncode == 0, folder.stderr
    assert json.loads(folder.stdout)["baseModel"] == str(Path(weights["base"]).resolve())
    listed = whileai("models", "--json")
    assert sorted(m["name"] for m in json.loads(listed.stdout)["models"]) == ["cli-agent", "cli-base"]
    assert whileai("unserve", "cli-agent").stdout.strip() == "cli-agent: no longer served"
    again = whileai("unserve", "cli-agent")
    assert again.returncode == 2 and again.stderr.startswith("python -m whileai unserve: ")
    assert "DELETE" not in again.stderr and "-> 404" not in again.stderr, "the command line's words, not HTTP's"
    neither = whileai("serve", "nothing-here", "--name", "x")
    assert neither.returncode == 2 and "is neither a run id" in neither.stderr
