"""Held-out episodes: each held-out task played greedily by the policy, whole, and judged by the world it leaves.

Each distinct held-out episode (one per task: its environment's reset arguments and gold calls) is played
through :func:`~whileai.domain.episodes.loop.play_episode`, the loop that plays an episode as TRL's
``GRPOTrainer`` plays a rollout, and judged by :func:`~whileai.domain.episodes.judge.judge_episode` against the
gold calls replayed on a fresh environment. The result has the first-action measurement's shape (``value``,
``prompts``, per-episode ``outcomes`` in a fixed order, ``prompt_digest``, ``groups`` by the rows' category), so
the run's before/after, its paired test and ``diff`` read it alike; its metric is ``episode_pass_rate``.

The policy's token ids are built as TRL builds a rollout's: the prompt rendered once with the environment's tools,
then each sampled reply (up to and including its end of turn) and each tool answer's suffix appended, never the
conversation rendered again; each reply is parsed by TRL's own ``parse_response``. Every reply is greedy and capped
at ``eval_max_new_tokens``; an episode that would outgrow the model's context gets an empty reply there and ends.

An episode of several user turns (BFCL's) is played whole, past where TRL's loop stops (``play_episode``): a later
user turn's messages are appended as a tool answer is (their suffix after the reply's end of turn), and at a turn that
offers more functions (BFCL's withheld ones) the conversation is rendered again with the tools now offered, as BFCL
sends the whole conversation with its tool list at each request. ``stopped`` counts ``episode_cap`` beside
``answered`` and ``cap`` only where an episode reached EPISODE_MAX_ROUNDS.

Episodes are played at once, one thread each, and the policy's replies for all episodes waiting on one are
generated together in batches (:func:`play_together`), so a held-out set of hundreds of episodes costs a few
batched generations a turn instead of one generation per reply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from whileai.core.spec import RunSpec
from whileai.domain.episodes.rows import episode_digest, held_out_episodes

from whileai.jobs import defaults
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._rewards import AssistantMessage

__all__ = ["EPISODE_METRIC", "tool_suffix_ids", "user_suffix_ids", "play_together", "play_episodes",
           "episode_pass_rate", "environment_name", "factory_of", "routed"]

#: The held-out metric of a run played in an environment.
EPISODE_METRIC = "episode_pass_rate"


def environment_name(spec: RunSpec) -> str | None:
    """The environment the spec plays its episodes in (None: single-turn prompts, judged by their first call)."""
    return getattr(spec, "environment", None)


def factory_of(name: str, rows: Sequence[Mapping[str, Any]] | None = None) -> Any:
    """TRL's environment factory for the spec's environment string (``kit``, ``bfcl:CATEGORY``, ``python:...``):
    one factory, or TRL's dict of them (BFCL's: given ``rows``, one entry per environment name their golds name, so
    each row finds its class whatever category it was read from).

    A ``python:`` class imports from where a ``python:`` reward does: the launching user's directory on the
    embedded platform (the row's ``platform.reward_path``); on a server, only from the server's own environment,
    whose modules its operator allowed at launch (whileai/platform/_rewards.py)."""
    from whileai.domain.episodes import environment_factory, parse_environment_ref
    from whileai.domain.episodes.rows import episode_gold, has_episode
    from whileai.jobs._rewards import reward_search_path

    env, category = parse_environment_ref(name)
    names = None if rows is None else sorted({episode_gold(row).environment for row in rows if has_episode(row)})
    return environment_factory(env, category, search_path=reward_search_path(), names=names)


def routed(factory: Any) -> bool:
    """Whether ``factory`` is TRL's dict of factories, each row picking its own by its environment's name."""
    return isinstance(factory, Mapping)


def _suffix_ids(tokenizer: Any, dummy: list[dict[str, Any]], messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ids the chat template writes for ``messages`` and the next assistant header after ``dummy``'s last
    (assistant) turn ends: the full rendering less ``dummy``'s, cut after its last end of turn."""
    prefix = list(tokenizer.apply_chat_template(dummy, add_generation_prompt=False, tokenize=True, return_dict=False))
    full = list(tokenizer.apply_chat_template(dummy + [dict(m) for m in messages], add_generation_prompt=True,
                                              tokenize=True, return_dict=False))
    ends = [i for i, token in enumerate(prefix) if token == tokenizer.eos_token_id]
    if ends:
        prefix = prefix[: ends[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise ValueError(f"the chat template renders an assistant turn differently once {messages[0].get('role')} "
                         "messages follow it; they cannot be appended to a rollout's ids as TRL appends tool results")
    return full[len(prefix):]


def tool_suffix_ids(tokenizer: Any, tool_messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ids the chat template writes for ``tool_messages`` and the next assistant header, after an assistant turn's
    end: what TRL appends to a rollout's ids after running its tools (``GRPOTrainer._get_tool_suffix_ids``)."""
    calls = [{"type": "function", "function": {"name": tool_messages[0].get("name"), "arguments": {}}}]
    dummy: list[dict[str, Any]] = [{"role": "user", "content": "dummy"},
                                   {"role": "assistant", "content": "", "tool_calls": calls}]
    return _suffix_ids(tokenizer, dummy, tool_messages)


def user_suffix_ids(tokenizer: Any, user_messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ids the chat template writes for a later user turn's messages and the next assistant header, after a reply
    without calls: appended as :func:`tool_suffix_ids` appends a tool answer's."""
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "dummy"}]
    return _suffix_ids(tokenizer, dummy, user_messages)


def _tool_names(tools: Sequence[Any]) -> list[str]:
    return [tool["function"]["name"] if isinstance(tool, Mapping) else tool.__name__ for tool in tools]


class _Tokens:
    """One episode's ids as TRL builds them: the prompt rendered once, then each reply and each tool (or later user
    turn's) suffix; rendered again only where a later turn offers more tools."""

    def __init__(self, tokenizer: Any, environment: Any):
        self.tokenizer, self.environment = tokenizer, environment
        self.tools: list[Any] = []  # what the ids were rendered with, read once the environment is reset
        self.ids: list[int] = []
        self.seen = 0  # messages of the conversation already in ``ids``
        self.prompt = 0  # ids of the first rendering: what TRL calls the prompt; the rest is the completion

    def before_reply(self, conversation: Sequence[Mapping[str, Any]]) -> list[int]:
        """The ids the next reply continues, the conversation's new messages (tool answers, a user turn) appended."""
        from whileai.domain.episodes import offered_tools

        offered = offered_tools(self.environment)  # bound to this instance, as TRL offers them
        if not self.ids or _tool_names(offered) != _tool_names(self.tools):
            self.tools = offered
            self.ids = list(self.tokenizer.apply_chat_template(
                [dict(m) for m in conversation], tools=self.tools or None, add_generation_prompt=True, tokenize=True,
                return_dict=False))
            self.prompt = self.prompt or len(self.ids)
        elif len(conversation) > self.seen:
            new = conversation[self.seen:]
            suffix = user_suffix_ids if new[0].get("role") == "user" else tool_suffix_ids
            self.ids += suffix(self.tokenizer, new)
        self.seen = len(conversation)
        return self.ids

    def after_reply(self, reply_ids: list[int]) -> None:
        self.ids += reply_ids
        self.seen += 1  # the assistant message play_episode appends


class _Rendezvous:
    """Where the episodes' threads hand their conversations to the one generator and wait for their replies."""

    def __init__(self, live: int):
        self.lock = threading.Condition()
        self.live = live
        self.waiting: dict[int, Any] = {}
        self.answers: dict[int, Any] = {}
        self.failed: BaseException | None = None

    def ask(self, index: int, request: Any) -> Any:
        with self.lock:
            self.waiting[index] = request
            self.lock.notify_all()
            self.lock.wait_for(lambda: index in self.answers or self.failed is not None)
            if index not in self.answers:
                raise RuntimeError("the batched policy failed") from self.failed
            return self.answers.pop(index)

    def done(self) -> None:
        with self.lock:
            self.live -= 1
            self.lock.notify_all()

    def next_batch(self) -> dict[int, Any] | None:
        """Every live episode's request, once each has asked (None when every episode has ended)."""
        with self.lock:
            self.lock.wait_for(lambda: len(self.waiting) >= self.live)
            if not self.live:
                return None
            batch, self.waiting = self.waiting, {}
            return batch

    def answer(self, replies: Mapping[int, Any]) -> None:
        with self.lock:
            self.answers.update(replies)
            self.lock.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            self.failed = exc
            self.lock.notify_all()


def play_together(plays: Sequence[Callable[[Callable[[Any], Any]], Any]],
                  respond: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """Run each of ``plays`` in its own thread and return their results in order.

    A play is given an ``ask(request) -> reply`` function; the requests of all the plays still running are answered
    together by one call of ``respond`` (in the calling thread), so a batched generator serves every episode at
    once. An exception in a play or in ``respond`` is raised here once every thread has stopped."""
    meeting = _Rendezvous(len(plays))
    results: list[Any] = [None] * len(plays)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results[index] = plays[index](lambda request: meeting.ask(index, request))
        except BaseException as exc:  # handed to the caller, which raises it after the threads stop
            errors.append(exc)
        finally:
            meeting.done()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(plays))]
    for thread in threads:
        thread.start()
    try:
        while (batch := meeting.next_batch()) is not None:
            order = sorted(batch)
            meeting.answer(dict(zip(order, respond([batch[i] for i in order]), strict=True)))
    except BaseException as exc:  # the generator failed: every waiting play stops, and the error is raised
        meeting.fail(exc)
        errors.insert(0, exc)
    for thread in threads:
        thread.join()
    if errors:  # the first failure, raised again in the caller's thread
        first = errors[0]
        raise first
    return results


def _generate(model: Any, tokenizer: Any, prompts: list[list[int]], cap: int, limits: list[int]) -> list[list[int]]:
    """Greedy continuations of ``prompts`` (each cut after its first end of turn, at most ``cap`` tokens and never
    past its ``limits`` entry in all; none where it is reached), in batches of EPISODE_EVAL_BATCH sorted by length."""
    import torch

    from whileai.jobs._evaluation import left_padded

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    out: list[list[int]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for start in range(0, len(order), defaults.EPISODE_EVAL_BATCH):
        chunk = [i for i in order[start: start + defaults.EPISODE_EVAL_BATCH] if limits[i] - len(prompts[i]) > 0]
        if not chunk:
            continue
        room = {i: min(cap, limits[i] - len(prompts[i])) for i in chunk}
        input_ids, mask, width = left_padded([prompts[i] for i in chunk], pad, device)
        with torch.no_grad():
            sampled = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=max(room.values()),
                                     do_sample=False, pad_token_id=pad, eos_token_id=tokenizer.eos_token_id)
        for i, seq in zip(chunk, sampled[:, width:].tolist(), strict=True):
            seq = seq[: room[i]]
            if tokenizer.eos_token_id in seq:
                seq = seq[: seq.index(tokenizer.eos_token_id) + 1]
            out[i] = seq
    return out


def _replier(model: Any, tokenizer: Any, cap: int, limit: int,
             budget: int | None = None) -> Callable[[list[Any]], list[Any]]:
    """The batched policy: each request is ``(tokens, conversation)``; each reply the parsed assistant message, at
    most ``cap`` tokens, never past ``limit`` (the model's context) nor, with ``budget``, past ``budget`` tokens of
    the episode's completion (its replies and tool answers after the first prompt: TRL's ``max_completion_length``).
    A reply with no room left is empty, which ends the episode."""
    from trl.chat_template_utils import parse_response

    def respond(requests: list[tuple[_Tokens, Sequence[Mapping[str, Any]]]]) -> list[AssistantMessage]:
        prompts = [tokens.before_reply(conversation) for tokens, conversation in requests]
        limits = [limit if budget is None else min(limit, tokens.prompt + budget) for tokens, _ in requests]
        sampled = _generate(model, tokenizer, prompts, cap, limits)
        replies = []
        for (tokens, _), prompt, ids in zip(requests, prompts, sampled, strict=True):
            prefix = list(prompt)
            tokens.after_reply(ids)
            parsed = parse_response(tokenizer, ids, prefix=prefix, tools=list(tokens.tools)) if ids else {}
            reply: AssistantMessage = {"role": "assistant", "content": parsed.get("content") or ""}
            if parsed.get("tool_calls"):
                reply["tool_calls"] = parsed["tool_calls"]
            replies.append(reply)
        return replies

    return respond


class _Sampled:
    """The policy with each ``generate`` call sampled at ``sampling`` (temperature, top_p, top_k) instead of greedy."""

    def __init__(self, model: Any, sampling: Mapping[str, Any]):
        self.model, self.sampling = model, sampling

    def parameters(self) -> Any:
        return self.model.parameters()

    def generate(self, **kwargs: Any) -> Any:
        s = self.sampling
        return self.model.generate(**{**kwargs, "do_sample": True, "temperature": float(s["temperature"]),
                                      "top_p": float(s["top_p"]), "top_k": int(s["top_k"])})


def _play(factory: Any, start: Mapping[str, Any], tokenizer: Any, max_turns: int | None) -> Callable[..., Any]:
    """One episode as a play for :func:`play_together`: a fresh environment from the factory ``start`` routes to
    (TRL's rule: a dict's entry for its environment column, which reset does not get), reset from ``start``, played;
    the play returns ``(the episode, the environment it left)``."""
    from whileai.domain.episodes import play_episode
    from whileai.domain.episodes.protocol import route

    make, reset = route(factory, start)

    def play(ask: Callable[[Any], Any]) -> tuple[Any, Any]:
        environment = make()
        tokens = _Tokens(tokenizer, environment)
        episode = play_episode(lambda conversation: ask((tokens, conversation)), environment, reset,
                               max_turns=max_turns)
        return episode, environment

    return play


def play_episodes(model: Any, tokenizer: Any, factory: Any, starts: Sequence[Mapping[str, Any]],
                  max_turns: int | None, max_new_tokens: int,
                  sampling: Mapping[str, Any] | None = None, budget: int | None = None) -> list[tuple[Any, Any]]:
    """Every start row (the environment's ``reset`` arguments and the prompt; its environment's name too where
    ``factory`` is TRL's dict) played at once by the policy, in eval mode (its mode put back after): each reply greedy,
    or sampled at ``sampling``, at most ``max_new_tokens``; with ``budget``, an episode's whole completion at most that
    many tokens, as TRL's trainer caps a rollout; ``(episode, environment it left)`` for each, in order. The held-out
    measure, the HackMonitor's looks and GRPO's start filter play episodes through it."""
    from whileai.jobs._loading import max_length
    from whileai.jobs._trainer_setup import ensure_response_parser

    ensure_response_parser(tokenizer)  # each reply is parsed as TRL parses a rollout's
    policy = _Sampled(model, sampling) if sampling is not None else model
    was_training = model.training
    model.eval()
    try:
        return play_together([_play(factory, start, tokenizer, max_turns) for start in starts],
                             _replier(policy, tokenizer, max_new_tokens, max_length(model, episodes=True), budget))
    finally:
        model.train(was_training)


def episode_pass_rate(spec: RunSpec, model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]],
                      proxy: Any = None) -> HeldOutMeasure:
    """The share of held-out episodes the greedy policy passes (metric EPISODE_METRIC): ``value``, ``prompts``,
    ``outcomes`` and the rest of a :class:`~whileai.jobs._measure.HeldOutMeasure`.

    ``outcomes`` is each episode's pass (1) or fail (0) in a fixed order (drawn with the run's seed), so before and
    after pair episode by episode; ``stopped`` counts how the episodes ended (answered, or at the turn cap);
    ``records`` keeps each episode's verdict and conversation (``whileai.domain.episodes.record``). ``proxy`` (a
    TRL-shaped reward paid in the judge's place) scores the same episodes too: ``proxy_scores``, in the same order."""
    name = environment_name(spec)
    chosen = held_out_episodes(rows, spec.holdout_rows, spec.seed)
    if not name or not chosen:
        return HeldOutMeasure(metric=EPISODE_METRIC, value=None, prompts=0,
                              why="no held-out row carries an episode (make the rows with dataset=episodes)")
    factory = factory_of(name, chosen)
    starts = [_start_of(row, routed(factory)) for row in chosen]
    played = play_episodes(model, tokenizer, factory, starts, getattr(spec, "max_turns", None), spec.eval_max_new_tokens)
    measure = _result(chosen, _judged(factory, chosen, played))
    if proxy is None:
        return measure
    return replace(measure, proxy_scores=_proxy_scores(proxy, chosen, routed(factory), played))


def _proxy_scores(proxy: Any, rows: Sequence[Mapping[str, Any]], named: bool,
                  played: list[tuple[Any, Any]]) -> tuple[float, ...]:
    """``proxy`` on each played episode of ``rows``, each row's columns as GRPO's dataset holds them
    (``episode_prompts``: the gold, the task, ``reset``'s arguments): :func:`paid_scores`."""
    from whileai.jobs._episode_prompts import episode_prompts

    return tuple(paid_scores(proxy, [episode_prompts([row], routed=named)[0] for row in rows], played))


def paid_scores(reward: Any, starts: Sequence[Mapping[str, Any]], played: Sequence[tuple[Any, Any]]) -> list[float]:
    """``reward`` on each played episode, called as TRL calls a reward in an environment: the prompts, the messages
    after each prompt, the environments the episodes left (``environments=``), and every other column of the starts
    (TRL's dataset rows); a None score counts 0. The held-out measure's proxy scores and the start filter both pay
    episodes through it."""
    prompts = [list(start["prompt"]) for start in starts]
    completions = [[dict(m) for m in episode.messages[len(prompt):]]
                   for prompt, (episode, _) in zip(prompts, played, strict=True)]
    names = dict.fromkeys(key for start in starts for key in start if key != "prompt")
    columns = {key: [start.get(key) for start in starts] for key in names}
    scores = reward(prompts=prompts, completions=completions, environments=[env for _, env in played], **columns)
    return [float(s) if s is not None else 0.0 for s in scores]


def _start_of(row: Mapping[str, Any], named: bool = False) -> dict[str, Any]:
    """What an episode row's episode starts from: its prompt and its environment's ``reset`` arguments, and with
    ``named`` its environment's name (the column a dict of factories routes by)."""
    from whileai.domain.episodes.protocol import ROUTE_COLUMN
    from whileai.domain.episodes.rows import episode_gold
    from whileai.domain.rows.taskkey import prompt_messages

    gold = episode_gold(row)
    return {"prompt": prompt_messages(row), **gold.reset, **({ROUTE_COLUMN: gold.environment} if named else {})}


def _judged(factory: Any, rows: Sequence[Mapping[str, Any]], played: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Each played ``(episode, environment)`` of ``rows`` as ``(episode, verdict)``: the environment's own verdict
    where its episode judges itself (BFCL's multi-turn check), else judged against the row's gold calls replayed on
    a fresh environment, and the words its final reply must say (``EpisodeJudge``)."""
    from whileai.domain.episodes.judge import EpisodeJudge
    from whileai.domain.episodes.rows import episode_gold
    from whileai.domain.rows.taskkey import prompt_messages

    judge = EpisodeJudge(factory)
    return [(episode, judge(episode, environment, episode_gold(row), prompt_messages(row)))
            for row, (episode, environment) in zip(rows, played, strict=True)]


def _result(chosen: Sequence[Mapping[str, Any]], played: list[tuple[Any, Any]]) -> HeldOutMeasure:
    from whileai.core.defaults import HOLDOUT_GROUP_FIELD
    from whileai.domain.episodes import episode_record
    from whileai.domain.rows.rowsource import task_key

    outcomes = [int(verdict.passed) for _, verdict in played]
    stopped = {"answered": 0, "cap": 0}
    for episode, _ in played:
        stopped[episode.stopped] = stopped.get(episode.stopped, 0) + 1
    grouped = any(row.get(HOLDOUT_GROUP_FIELD) is not None for row in chosen)
    return HeldOutMeasure(
        metric=EPISODE_METRIC, value=sum(outcomes) / len(outcomes), prompts=len(outcomes), outcomes=tuple(outcomes),
        prompt_digest=episode_digest(chosen), stopped=stopped,
        mean_rounds=round(sum(episode.rounds for episode, _ in played) / len(played), 3),
        # each episode's verdict and conversation, for the summary's "episodes" (the run page shows them)
        records=tuple(episode_record(task_key(row), episode, verdict)
                      for row, (episode, verdict) in zip(chosen, played, strict=True)),
        groups=tuple(row.get(HOLDOUT_GROUP_FIELD) for row in chosen) if grouped else None,
    )
