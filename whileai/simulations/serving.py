"""Hosted models: serve a finished run's adapter, list and remove served names, reward-model judges.

``serve`` registers a name in the account's model registry; the platform's
OpenAI-compatible endpoint (``<platform>/v1``) answers for that name from then
on, loading the weights on first use. ``unserve`` (also ``delete_model``)
removes the name. ``reward_model`` turns a finished reward-model run into a
judge that scores rollout rows in this process.

    model = wai.serve(run, "weather-agent")
    client = openai.OpenAI(base_url=model["endpoint"], api_key=key)
    client.chat.completions.create(model="weather-agent", messages=[...], tools=[...])
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from whileai.core.errors import ServingWarning
from whileai.core.spec import RMSpec, knob_of

from . import defaults
from .client import Client, get_client

__all__ = ["RewardModelJudge", "delete_model", "models", "reward_model", "serve", "unserve"]


# --------------------------------------------------------------------------- runs


def _client_for(run: Any, api_key: str | None) -> Client:
    """The client a run handle was made with (so its account answers), else the credential chain's."""
    client = getattr(run, "_client", None)  # a TrainingRun keeps the client it was made with
    if api_key is None and isinstance(client, Client):
        return client
    return get_client(api_key=api_key)


def run_record(run: Any, client: Client) -> dict[str, Any]:
    """The run's current record: ``run`` is a TrainingRun, a record dict or a ``run_...`` id."""
    from whileai.core.errors import NotFoundError

    if isinstance(run, Mapping):
        run_id = run.get("id")
        if not run_id:  # a record that never came from the platform: take it as it is
            return dict(run)
    else:
        run_id = run if isinstance(run, str) else getattr(run, "id", None)
    if not isinstance(run_id, str) or not run_id:
        raise TypeError(
            f"run={run!r} is not a run; pass a TrainingRun (what wai.train returns), the record wai.get_run "
            "returns, or a 'run_...' id"
        )
    try:
        return client.request("GET", f"/runs/{quote(run_id, safe='')}", params={"series": "false"})
    except NotFoundError:
        raise NotFoundError(
            f"run {run_id!r} is not in this account; check the id (wai.list_runs() lists yours)", status=404
        ) from None


def _check_done(record: Mapping[str, Any], what: str) -> None:
    """ValueError naming the run's state and what to do when it is not ``done``."""
    run_id = record.get("id", "the run")
    status = record.get("status")
    if status != "done":
        hint = {
            "running": "wait for it first (run.wait(), or wai.train(..., wait=True))",
            "failed": f"it failed ({str(record.get('error') or 'no error text').splitlines()[0][:200]}); "
                      "fix the cause and train again",
            "stopped": "it was stopped before it finished; train again",
        }.get(str(status), "only a finished run has weights to use")
        raise ValueError(f"run {run_id} is {status!r}, not 'done', so {what}: {hint}")


def _finished_adapter(record: Mapping[str, Any], what: str) -> tuple[str, str | None]:
    """(adapter directory, base model from the run's config) of a run that is done; clear errors otherwise."""
    _check_done(record, what)
    run_id = record.get("id", "the run")
    found_summary = record.get("summary")
    summary: Mapping[str, Any] = found_summary if isinstance(found_summary, Mapping) else {}
    adapter = summary.get("adapter")
    if not isinstance(adapter, str) or not adapter:
        raise ValueError(
            f"run {run_id} is done but has no adapter (summary['adapter'] is {adapter!r}), so {what}: only runs "
            "trained by wai.train save one. For weights you trained yourself, note the PEFT adapter "
            "directory on the run (run.note(adapter=path)) before finishing it"
        )
    found_config = record.get("config")
    config: Mapping[str, Any] = found_config if isinstance(found_config, Mapping) else {}
    base = config.get("base_model")
    return adapter, base if isinstance(base, str) and base else None


def platform_adapter(client: Client, record: Mapping[str, Any], what: str) -> tuple[str, str | None]:
    """(adapter directory, base model) of a finished run of the client's account, as the platform resolves them
    (``GET /runs/{id}/adapter``: the folder its job saved, or one under a folder the operator added), never the
    path the run's summary names. ValueError saying why when there is none."""
    from whileai.core.errors import PlatformError

    _check_done(record, what)  # the run's own state first, worded for the caller
    run_id = record.get("id")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"this run record names no id, so {what}: only a run the platform holds has weights it "
                         "resolves; pass a TrainingRun, a record from wai.get_run or a 'run_...' id")
    try:
        found = client.request("GET", f"/runs/{quote(run_id, safe='')}/adapter")
    except PlatformError as exc:
        if exc.status != 409:
            raise
        error = exc.body.get("error") if isinstance(exc.body, dict) else None
        said = error.get("message") if isinstance(error, dict) else str(exc)
        raise ValueError(f"{said}; so {what}") from None
    base = found.get("base_model")
    return str(found["adapter"]), base if isinstance(base, str) and base else None


# --------------------------------------------------------------------------- registry


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(
            f"name={name!r} is not a model name; pass a non-empty string without surrounding spaces, "
            "e.g. 'weather-agent' (clients send it as the OpenAI 'model')"
        )
    return name


def _warn_unserved_base(base: str) -> None:
    """Warn when neither the Modal image (SERVED_BASES) nor a local directory can supply ``base``."""
    import os
    import warnings

    from whileai.kit import is_gguf_base

    served = getattr(defaults, "SERVED_BASES", ())
    if base in served or os.path.isdir(os.path.expanduser(base)) or is_gguf_base(base):
        return  # a GGUF base: the endpoint loads the folder it was imported into
    warnings.warn(
        f"base model {base!r} is not in SERVED_BASES ({', '.join(served)}) and is not a local directory: the "
        "platform's endpoint loads it only if it is a hub model already in this machine's cache, and the "
        "Modal vLLM deployment does not serve it. Pass base_model= one of SERVED_BASES or a local path",
        ServingWarning,
        stacklevel=3,
    )


def serve(run: Any = None, name: str | None = None, base_model: str | None = None, *,
          api_key: str | None = None) -> dict[str, Any]:
    """Host a finished run's adapter under ``name``; returns the model row.

    ``run`` is a TrainingRun, the record ``get_run`` returns, or a ``run_...``
    id; the adapter and base model come from the run unless ``base_model`` is
    given. ``run=None`` serves the bare base, which then needs ``base_model``.
    A base outside ``SERVED_BASES`` that is not a local directory is a warning:
    the endpoint may not be able to load it.
    Serving a name the account already serves points it at the new weights and
    bumps its ``version``; after ``unserve`` the name starts again at 1.

    The row is ``{name, baseModel, adapter, adapterRunId, version, endpoint}``:
    ``endpoint`` is an OpenAI-compatible base URL, the account's API key is the
    bearer and ``name`` the model.

        row = wai.serve(run, "weather-agent")
        openai.OpenAI(base_url=row["endpoint"], api_key=key).chat.completions.create(
            model="weather-agent", messages=[{"role": "user", "content": "Weather in Oslo?"}])
    """
    name = _check_name(name)
    if base_model is not None and (not isinstance(base_model, str) or not base_model.strip()):
        raise ValueError(f"base_model={base_model!r} is not a model name or path; pass a string or leave it None")
    client = _client_for(run, api_key)
    if run is None:
        if base_model is None:
            raise ValueError(
                f"serve(None, {name!r}) serves a bare base model and needs base_model= (e.g. the kit's base, "
                "whileai.kit.KIT_BASE_NAME); to serve trained weights pass the run"
            )
        body: dict[str, Any] = {"name": name, "baseModel": base_model}
    else:
        record = run_record(run, client)
        adapter, run_base = _finished_adapter(record, "it cannot be served")
        base = base_model or run_base
        if base is None:
            raise ValueError(
                f"run {record.get('id')} does not say which base model its adapter was trained on "
                "(config['base_model'] is missing); pass base_model= to serve it"
            )
        body = {"name": name, "baseModel": base, "adapter": adapter}
        if record.get("id"):
            body["adapterRunId"] = record["id"]
    _warn_unserved_base(body["baseModel"])
    row = client.request("POST", "/models", json=body)
    row.setdefault("endpoint", client.url("/v1"))
    return row


def chat_completion(name: str, messages: list[dict[str, Any]], *, api_key: str | None = None,
                    timeout: float | None = None, **body: Any) -> dict[str, Any]:
    """One chat completion from the served model ``name``, through the SDK's own client seam.

    The request goes where every other SDK call goes: a platform server when the
    credential chain names one, otherwise the embedded platform in this process,
    whose app answers ``/v1`` as the server does. The bearer is the chain's key
    (``api_key``, ``WHILEAI_API_KEY``, ``config.json``, or the embedded local
    account's) and is never shown. ``body`` adds fields of the OpenAI request
    (``tools``, ``max_tokens``, ``temperature``, ...); the answer is the decoded
    completion object. ``timeout`` is in seconds (CLIENT_TIMEOUT_S when None).

        reply = chat_completion("weather-agent", [{"role": "user", "content": "Weather in Oslo?"}])
        reply["choices"][0]["message"]
    """
    name = _check_name(name)
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"messages={messages!r} is not a non-empty list of chat messages; pass "
                         '[{"role": "user", "content": "..."}]')
    payload = {key: value for key, value in body.items() if value is not None}
    payload.update(model=name, messages=messages, stream=False)
    return get_client(api_key=api_key).request("POST", "/v1/chat/completions", json=payload, timeout=timeout)


def unserve(name: str, *, api_key: str | None = None) -> dict[str, Any]:
    """Stop hosting ``name``: its registry row goes and the endpoint answers 404 for it.

    The adapter and its training run stay; serve the run again to bring the
    name back (at version 1). Returns ``{"name": name, "deleted": True}``;
    a name the account does not serve raises ``NotFoundError``.

        wai.unserve("weather-agent")
    """
    name = _check_name(name)
    return get_client(api_key=api_key).request("DELETE", f"/models/{quote(name, safe='')}")


#: The same function as :func:`unserve`, named like ``delete_run`` and ``delete_dataset``.
delete_model = unserve


def models(*, api_key: str | None = None) -> list[dict[str, Any]]:
    """The account's served models: ``{name, baseModel, adapter, adapterRunId, version, endpoint}`` each.

    A row is a registry entry, not a running machine: the endpoint loads a
    model when it is called and drops it when idle.

        [m["name"] for m in wai.models()]
    """
    client = get_client(api_key=api_key)
    rows = client.request("GET", "/models")["models"]
    for row in rows:
        row.setdefault("endpoint", client.url("/v1"))
    return rows


# --------------------------------------------------------------------------- reward model


#: What a reward model reads of a row (config ``reward_span``): the whole conversation, or the prompt and
#: the first assistant turn only (what the first-action judge decides on, and all a GRPO completion is); its choices
#: and default are the knob's declaration (``RMSpec.reward_span``).
REWARD_SPANS: tuple[str, ...] = tuple(knob_of(RMSpec, "reward_span").choices or ())
REWARD_SPAN_DEFAULT: str = knob_of(RMSpec, "reward_span").default


def near_miss_problem(near_misses: Any, span: Any) -> str | None:
    """Why ``near_misses`` cannot run with reward span ``span`` (config ``reward_span``), or None when it can."""
    if not near_misses or str(span or REWARD_SPAN_DEFAULT) == "first_action":
        return None
    return (f"near_misses={near_misses} needs reward_span='first_action' (reward_span={str(span or REWARD_SPAN_DEFAULT)!r}): "
            "a near miss changes the first action, so the tool response and reply after it would no longer follow "
            "from it; pass reward_span=first_action, or near_misses=0")


def reward_text_messages(row: Mapping[str, Any], span: str = REWARD_SPAN_DEFAULT) -> list[dict[str, Any]]:
    """A row's messages as the reward model read them in training: tool-call arguments as dicts.

    ``span="first_action"`` ends them at the first assistant turn (the prompt and the first action).
    """
    if span not in REWARD_SPANS:
        raise ValueError(f"span={span!r} is not a reward span; pass one of {', '.join(map(repr, REWARD_SPANS))}")
    messages = list(row.get("messages") or [])
    if span == "first_action":
        first = next((i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "assistant"),
                     len(messages) - 1)
        messages = messages[: first + 1]
    out = []
    for msg in messages:
        msg = dict(msg)
        if msg.get("tool_calls"):
            calls = []
            for call in msg["tool_calls"]:
                call = dict(call)
                fn = dict(call.get("function") or {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        decoded = json.loads(args)
                    except ValueError:
                        decoded = None
                    if isinstance(decoded, dict):
                        fn["arguments"] = decoded
                call["function"] = fn
                calls.append(call)
            msg["tool_calls"] = calls
        out.append(msg)
    return out


def reward_pair_example(pair: Mapping[str, Any], span: str = REWARD_SPAN_DEFAULT) -> dict[str, Any]:
    """A pass-vs-fail pair as the reward trainer reads it: ``{"chosen", "rejected", "tools"}``, each side's messages
    as ``reward_text_messages`` renders them (TRL's implicit prompt)."""
    chosen, rejected = pair["chosen"], pair["rejected"]
    return {"chosen": reward_text_messages(chosen, span), "rejected": reward_text_messages(rejected, span),
            "tools": chosen.get("tools") or rejected.get("tools") or []}


class RewardModelJudge:
    """A judge backed by a reward-model adapter: ``judge(row) -> {"reward": score, "passed": bool}``.

    The score is the sequence-classification head's output over the chat
    template of the row (its ``tools`` included) as the model was trained to read
    it: the whole conversation, or up to the first action (``span``, the run's
    ``reward_span``); ``passed`` is ``score >= threshold``. The
    model loads on the first call, once, and is shared by every thread.
    ``score(rows)`` scores many rows in batches of REWARD_MODEL_BATCH_SIZE.
    """

    def __init__(self, adapter: str, base_model: str, threshold: float, run_id: str | None = None,
                 span: str = REWARD_SPAN_DEFAULT):
        self.adapter, self.base_model, self.threshold, self.run_id = adapter, base_model, threshold, run_id
        self.span = span
        self.__name__ = f"reward_model({run_id or adapter})"
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None

    def __repr__(self) -> str:
        return f"<RewardModelJudge {self.run_id or self.adapter} threshold={self.threshold:g}>"

    def load(self) -> RewardModelJudge:
        """Load the model now rather than on the first call (a job does, so a judge that cannot load fails it
        before training starts); returns the judge."""
        self._load()
        return self

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._model is None:
                self._model, self._tokenizer = load_reward_model(self.base_model, self.adapter)
            return self._model, self._tokenizer

    def __call__(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return self.judge_many([row])[0]

    def judge_many(self, rows: Any) -> list[dict[str, Any]]:
        """``{"reward", "passed"}`` for each row, scored in batches."""
        return [{"reward": s, "passed": s >= self.threshold} for s in self.score(rows)]

    def score(self, rows: Any, batch_size: int | None = None) -> list[float]:
        """The reward model's score of each row (a list of rows, SimulationData, ScoredData or JSONL path)."""
        import torch

        from .rowsource import rows_of

        rows = [rows] if isinstance(rows, Mapping) else rows_of(rows)
        size = defaults.REWARD_MODEL_BATCH_SIZE if batch_size is None else int(batch_size)
        if size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be at least 1; leave it None for the default")
        model, tokenizer = self._load()
        encoded = [self._encode(tokenizer, model, row, i, self.span) for i, row in enumerate(rows)]
        with self._lock, torch.inference_mode():  # one forward at a time: the model is shared
            scores = score_token_batches(model, encoded, tokenizer.pad_token_id, size)
        for i, s in enumerate(scores):
            if not math.isfinite(s):
                raise ValueError(f"the reward model scored row {i} as {s}; its weights are broken, retrain the run")
        return scores

    @staticmethod
    def _encode(tokenizer: Any, model: Any, row: Mapping[str, Any], index: int, span: str) -> list[int]:
        if not isinstance(row, Mapping) or not row.get("messages"):
            raise ValueError(f"row {index} has no messages; a reward model scores rollout rows "
                             "({'messages': [...], 'tools'?: [...]})")
        ids = tokenizer.apply_chat_template(reward_text_messages(row, span), tools=row.get("tools") or None,
                                            tokenize=True, return_dict=True)["input_ids"]
        limit = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        return list(ids[-limit:]) if limit else list(ids)  # keep the end: the score reads the last token


def load_reward_model(base_model: str, adapter: str) -> tuple[Any, Any]:
    """The base as a one-label sequence classifier with the reward adapter (score head included) on it.

    Nothing is fetched from the hub unless the operator allowed it (HUB_ALLOW_ENV):
    a hub base must already be in the local cache.
    """
    from pathlib import Path

    import torch
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from whileai.core.paths import hub_allowed
    from whileai.kit import import_gguf, is_gguf_base

    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"reward model adapter {str(path)!r} has no adapter_config.json: it is not a PEFT adapter directory "
            "on this machine; check the run's summary['adapter']"
        )
    if base_model == defaults.KIT_BASE_NAME:
        from whileai.kit import demo_base

        base_dir = str(demo_base())
    elif is_gguf_base(base_model):  # a .gguf file or a packaged one (SmolLM2): the folder it was imported into
        base_dir = str(import_gguf(base_model))
    else:
        base_dir = base_model  # a local directory, or a hub name already in the local cache
    local_only = not hub_allowed()
    saved_beside = (path / "tokenizer_config.json").is_file()  # the tokenizer training used
    try:
        model = AutoModelForSequenceClassification.from_pretrained(base_dir, num_labels=1, local_files_only=local_only)
        tokenizer = AutoTokenizer.from_pretrained(str(path) if saved_beside else base_dir, local_files_only=local_only)
    except OSError as exc:
        raise FileNotFoundError(
            f"the reward model's base {base_model!r} is not on this machine and the hub is off "
            f"({defaults.HUB_ALLOW_ENV} is not 1); use a base in the local cache or a local directory, or let its "
            f"operator set {defaults.HUB_ALLOW_ENV}=1"
        ) from exc
    if not saved_beside:  # the base's own tokenizer: tools rendered as the job rendered them (tool_format auto)
        from whileai.kit import use_tool_format

        use_tool_format(tokenizer, "auto")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    model = PeftModel.from_pretrained(model, str(path), local_files_only=local_only)
    if torch.cuda.is_available():
        model = model.to("cuda")
    model.eval()
    return model, tokenizer


def reward_model(run: Any, threshold: float | None = None, *, api_key: str | None = None) -> RewardModelJudge:
    """A judge backed by a finished reward-model run (``wai.train(..., method="rm")``).

    ``judge(row)`` returns ``{"reward": score, "passed": score >= threshold}``;
    the threshold defaults to the run's own (the cut that best separated its
    held-out pairs, ``summary["training"]["threshold"]``). The model loads on the
    first call. Use it wherever a judge goes:

        judge = wai.reward_model(run)
        scored = wai.evaluate(rollouts, judge)
        wai.judge_trust(scored.rows, judge=judge)

    The scores are the model's: a reward model trained on one agent's pairs says
    nothing certain about another agent's rollouts.
    """
    client = _client_for(run, api_key)
    record = run_record(run, client)
    found_config = record.get("config")
    config: Mapping[str, Any] = found_config if isinstance(found_config, Mapping) else {}
    method = config.get("method")
    if method is not None and method != "rm":
        raise ValueError(
            f"run {record.get('id')} was trained with method={method!r}; reward_model needs a reward-model run "
            "(wai.train(dataset, method='rm'))"
        )
    adapter, base = platform_adapter(client, record, "it cannot be used as a judge")
    if base is None:
        raise ValueError(f"run {record.get('id')} does not say its base model (config['base_model']); "
                         "a reward-model run made by wai.train always does")
    if threshold is None:
        found_summary = record.get("summary")
        summary: Mapping[str, Any] = found_summary if isinstance(found_summary, Mapping) else {}
        found_training = summary.get("training")
        training: Mapping[str, Any] = found_training if isinstance(found_training, Mapping) else {}
        threshold = training.get("threshold")
        if threshold is None:
            raise ValueError(f"run {record.get('id')} has no threshold (summary['training']['threshold']); "
                             "pass threshold= to reward_model")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValueError(f"threshold={threshold!r} is not a finite number; pass one, or None for the run's own")
    return RewardModelJudge(adapter, base, float(threshold), record.get("id"),
                            span=str((config or {}).get("reward_span") or REWARD_SPAN_DEFAULT))


def score_token_batches(model: Any, encoded: list[list[int]], pad: int, size: int) -> list[float]:
    """The score head's first logit for each token sequence, right-padded ``size`` at a time.

    Shared by the reward-model judge and the rm job's threshold search, so both
    score a row exactly the same way. The caller sets eval mode and no-grad.
    """
    import torch

    device = next(model.parameters()).device
    scores: list[float] = []
    for start in range(0, len(encoded), size):
        batch = encoded[start:start + size]
        width = max(len(ids) for ids in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, seq in enumerate(batch):
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, : len(seq)] = 1
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        scores.extend(float(v) for v in logits[:, 0].float().cpu())
    return scores
