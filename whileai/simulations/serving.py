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

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from whileai.core.errors import ServingWarning

from whileai.domain import defaults
from whileai.domain.client import Client, get_client
from whileai.domain.judges.reward_model import REWARD_SPAN_DEFAULT, RewardModelJudge

__all__ = ["delete_model", "models", "reward_model", "serve", "unserve"]


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
