"""One chat completion on a loaded model: the request, the prompt, generation and the reply.

Plain functions over the model and tokenizer a pool entry holds; the HTTP side
lives in :mod:`whileai.platform.serving`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from whileai.core.errors import ChatRequestError  # the request refusals parse_request raises
from whileai.platform import defaults

__all__ = [
    "ChatRequest",
    "Completion",
    "ChatRequestError",
    "completion_body",
    "generate",
    "parse_request",
    "render_prompt",
    "reply_message",
    "safe_prefix_length",
]

# Sampling reads torch's global generator, so a seeded request is reproducible
# only if no other sampled generation draws from it meanwhile.
_SAMPLING_LOCK = threading.Lock()


class ChatRequest(BaseModel):
    """The chat-completions fields this endpoint reads; other OpenAI fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0, le=defaults.SERVING_MAX_SEED)
    n: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    logprobs: bool | None = None
    response_format: dict[str, Any] | None = None


@dataclass
class Completion:
    """One generated reply: its text (stop sequence removed) and how it ended."""

    text: str
    completion_tokens: int
    ended: Literal["stop", "length"]
    #: the format the model's chat template writes calls in: the parser that reads them (whileai.core.toolcalls)
    tool_format: str = "hermes"


def parse_request(body: Any) -> ChatRequest:
    """Validate a decoded JSON body; every problem is named in one message."""
    if not isinstance(body, dict):
        raise ChatRequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    try:
        req = ChatRequest.model_validate(body)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()]
        first = exc.errors()[0]["loc"]
        raise ChatRequestError(
            "invalid chat completion request: " + "; ".join(problems), param=str(first[0]) if first else None
        ) from None
    n = req.n or 1
    if n > defaults.SERVING_MAX_N:
        raise ChatRequestError(f"n={n} is more than this endpoint's SERVING_MAX_N ({defaults.SERVING_MAX_N}); "
                           "ask for fewer choices per request", param="n")
    if req.logprobs:
        raise ChatRequestError("logprobs is not supported by this endpoint; omit it or pass false", param="logprobs")
    if req.response_format and req.response_format.get("type", "text") != "text":
        raise ChatRequestError(f"response_format type {req.response_format.get('type')!r} is not supported; "
                           "omit response_format or pass {'type': 'text'}", param="response_format")
    if req.tool_choice not in (None, "auto", "none"):
        raise ChatRequestError(f"tool_choice={req.tool_choice!r} is not supported: the model decides on its own; "
                           "pass 'auto' (the default) or 'none'", param="tool_choice")
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    if len(stops) > defaults.SERVING_MAX_STOP or any(not s for s in stops):
        raise ChatRequestError(f"stop takes up to {defaults.SERVING_MAX_STOP} non-empty strings, got {req.stop!r}",
                           param="stop")
    if req.stream and n > 1:
        raise ChatRequestError("stream=true with n > 1 is not supported; stream one choice or drop stream",
                           param="n")
    for i, tool in enumerate(req.tools or []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type", "function") != "function" or not isinstance(fn, dict) or not fn.get("name"):
            raise ChatRequestError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ..., "
                               f"'parameters': ...}}}}, got {tool!r}", param=f"tools[{i}]")
    normalise_messages(req.messages)  # raises on a message the template cannot render
    return req


def normalise_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI wire messages in the shape the chat template renders.

    Content parts are joined to text, ``developer`` becomes ``system``, and tool
    call arguments sent as JSON strings become dicts (the template prints them as
    JSON inside the tool-call block).
    """
    out = []
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise ChatRequestError(f"messages[{i}].role={msg.get('role')!r} is not one of system, developer, user, "
                               "assistant, tool", param=f"messages[{i}].role")
        new = {"role": role, "content": _text(msg.get("content"), i)}
        if role == "tool" and msg.get("tool_call_id") is not None:
            new["tool_call_id"] = msg["tool_call_id"]
        if msg.get("name") is not None:
            new["name"] = msg["name"]
        if role == "assistant" and msg.get("tool_calls"):
            new["tool_calls"] = [_template_call(call, i) for call in msg["tool_calls"]]
        out.append(new)
    return out


def _text(content: Any, i: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ChatRequestError(f"messages[{i}].content part of type {kind!r} is not supported; this endpoint "
                                   "serves text models, send text parts only", param=f"messages[{i}].content")
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise ChatRequestError(f"messages[{i}].content must be a string or a list of text parts, got "
                       f"{type(content).__name__}", param=f"messages[{i}].content")


def _template_call(call: Any, i: int) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not fn.get("name"):
        raise ChatRequestError(f"messages[{i}].tool_calls entries must carry function.name, got {call!r}",
                           param=f"messages[{i}].tool_calls")
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            decoded = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            decoded = None
        args = decoded if isinstance(decoded, dict) else args
    new = {"type": "function", "function": {"name": fn["name"], "arguments": args if args is not None else {}}}
    if call.get("id") is not None:
        new["id"] = call["id"]
    return new


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """Token ids of the conversation so far plus the assistant's opening, rendered by the chat template."""
    try:
        ids = tokenizer.apply_chat_template(
            normalise_messages(messages), tools=tools or None, add_generation_prompt=True, tokenize=True,
            return_dict=False,
        )
    except ChatRequestError:
        raise
    except Exception as exc:  # the template refused the conversation (role order, a missing field)
        raise ChatRequestError(f"the model's chat template could not render these messages: {exc}",
                           param="messages") from None
    if hasattr(ids, "keys"):  # some tokenizers answer a BatchEncoding regardless
        ids = ids["input_ids"]
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    return [int(t) for t in ids]


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    eos = eos if isinstance(eos, list) else [eos]
    return [int(e) for e in eos if e is not None]


def generate(model: Any, tokenizer: Any, prompt_ids: list[int], req: ChatRequest, *,
             streamer: Any = None, cancel: threading.Event | None = None) -> list[Completion]:
    """Generate ``req.n`` replies to ``prompt_ids``. Greedy when temperature is 0.

    ``streamer`` is a transformers streamer (n must be 1); ``cancel`` stops the
    generation at the next token once set (the client went away).
    """
    import torch
    from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

    n = req.n or 1
    context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    room = context - len(prompt_ids) if context else None
    if room is not None and room < 1:
        raise ChatRequestError(f"the prompt is {len(prompt_ids)} tokens and the model's context is {context}; "
                           "send fewer or shorter messages", param="messages", code="context_length_exceeded")
    asked = req.max_completion_tokens or req.max_tokens or defaults.SERVING_DEFAULT_MAX_TOKENS
    max_new = min(asked, room) if room is not None else asked
    temperature = defaults.SERVING_DEFAULT_TEMPERATURE if req.temperature is None else req.temperature
    sample = temperature >= defaults.SERVING_MIN_TEMPERATURE  # below it: greedy (a tiny one overflows to inf)
    eos = _eos_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if eos else 0)
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    config = GenerationConfig(
        max_new_tokens=max_new,
        do_sample=sample,
        temperature=temperature if sample else None,
        top_p=(req.top_p if req.top_p is not None else 1.0) if sample else None,
        top_k=0 if sample else None,  # OpenAI samples from the whole distribution (top_p aside)
        num_return_sequences=n if sample else 1,
        eos_token_id=eos or None,
        pad_token_id=pad,
        stop_strings=stops or None,
    )

    class _Cancelled(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), bool(cancel is not None and cancel.is_set()),
                              dtype=torch.bool, device=input_ids.device)

    device = next(model.parameters()).device
    inputs = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    kwargs: dict[str, Any] = {
        "input_ids": inputs,
        "attention_mask": torch.ones_like(inputs),
        "generation_config": config,
        "stopping_criteria": StoppingCriteriaList([_Cancelled()]),
        "streamer": streamer,
    }
    if stops:
        kwargs["tokenizer"] = tokenizer
    with torch.inference_mode():
        if sample:
            with _SAMPLING_LOCK:
                if req.seed is not None:
                    torch.manual_seed(req.seed)
                out = model.generate(**kwargs)
        else:
            out = model.generate(**kwargs)
    replies = []
    for row in out[:, len(prompt_ids):].tolist():
        replies.append(_finish(row, tokenizer, eos, stops, max_new))
    return replies * n if not sample else replies


def _finish(ids: list[int], tokenizer: Any, eos: list[int], stops: list[str], max_new: int) -> Completion:
    """Cut a generated row at its end token, decode it, cut at the first stop sequence."""
    ended: Literal["stop", "length"] = "length"
    for i, t in enumerate(ids):
        if t in eos:
            ids, ended = ids[:i], "stop"
            count = i + 1
            break
    else:
        count = len(ids)
    text = decode(tokenizer, ids)
    cut = [text.find(s) for s in stops if s in text]
    if cut:
        text, ended = text[: min(cut)], "stop"
    elif ended == "length" and count < max_new:
        ended = "stop"  # a stopping criterion ended it early: not the token cap
    from whileai.kit import reply_format

    return Completion(text=text, completion_tokens=count, ended=ended, tool_format=reply_format(tokenizer))


def decode(tokenizer: Any, ids: list[int]) -> str:
    """Text of generated ids, keeping the tool-call markers but not padding or end tokens."""
    drop = {tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id} - {None}
    return tokenizer.decode([t for t in ids if t not in drop], skip_special_tokens=False)


def reply_message(text: str, tools_on: bool, tool_format: str = "hermes") -> tuple[dict[str, Any], bool]:
    """The assistant message for ``text``, and whether it is a tool call.

    With tools in the request, a call written in ``tool_format`` (the model's
    template's, ``Completion.tool_format``) becomes OpenAI ``tool_calls`` (parsed
    by ``whileai.core.toolcalls``); otherwise the text is the content.
    """
    if tools_on:
        from whileai.kit import parse_tool_calls

        content, calls = parse_tool_calls(text, tool_format)
        if calls:
            wire = []
            for call in calls:
                call = dict(call)
                call.setdefault("id", f"call_{uuid.uuid4().hex[:24]}")
                call.setdefault("type", "function")
                fn = dict(call["function"])
                if not isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.dumps(fn.get("arguments") or {})
                call["function"] = fn
                wire.append(call)
            return {"role": "assistant", "content": content or None, "tool_calls": wire}, True
    return {"role": "assistant", "content": text}, False


def completion_body(name: str, version: Any, prompt_tokens: int, replies: list[Completion],
                    tools_on: bool) -> dict[str, Any]:
    """The chat.completion object for ``replies``."""
    choices = []
    for i, reply in enumerate(replies):
        message, is_call = reply_message(reply.text, tools_on, reply.tool_format)
        finish = "tool_calls" if is_call else reply.ended
        choices.append({"index": i, "message": message, "finish_reason": finish, "logprobs": None})
    completion_tokens = sum(r.completion_tokens for r in replies)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": name,
        "system_fingerprint": f"whileai-{name}-v{version}",
        "choices": choices,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def safe_prefix_length(text: str, markers: list[str]) -> int:
    """How much of ``text`` can be streamed as content: up to the first marker or a marker's possible start."""
    safe = len(text)
    for marker in markers:
        at = text.find(marker)
        if at >= 0:
            safe = min(safe, at)
            continue
        for k in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:k]):
                safe = min(safe, len(text) - k)
                break
    return safe
