"""HackMonitor on whole episodes: sampled episodes as the completions it reads, the episode judge as its gold.

A run in an environment is paid for episodes, not replies, so a look plays ``k`` episodes of each held-out episode
row with the live policy (:func:`episode_sampler`, around a ``play`` function that plays them with the model, as
the held-out play does but sampled) and hands the monitor each one as a :class:`PlayedEpisode`:

- as a string it is what the model generated, its assistant turns' text and calls joined (``<tool_call>`` blocks
  as the model writes them), so the length check reads the tokens the policy wrote and never a tool's answer;
- the proxy is called as TRL calls a reward in an environment run: the episode's messages after the prompt as the
  completion and the environment it left in ``environments=``;
- the gold is the episode judge's verdict on the episode played (:func:`episode_gold_judge`): the environment's
  own where its episode judges itself (BFCL's multi-turn check on the state and the responses), else its end state
  against the gold calls replayed on a fresh environment, and its final reply against what the task asks;
- the gold-free checks read, beside length, its turn and call counts (``counts``: the length check's machinery,
  each a measure of its own) and its episode markers (:data:`EPISODE_MARKERS`: the format-marker check's and the
  feature scan's machinery).

``play(model, tokenizer, starts, max_new_tokens=, sampling=, seed=)`` returns one ``(Episode, environment)`` per
start row, in order; each start row is a held-out row as TRL's dataset holds it (the prompt, ``reset``'s
arguments, the gold), which ``reset`` receives whole, as TRL's loop passes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from whileai.domain.episodes.judge import EpisodeJudge
from whileai.domain.episodes.loop import Episode
from whileai.domain.episodes.record import tool_error
from whileai.domain.episodes.rows import EpisodeGold
from whileai.domain.monitor._features import completion_text

__all__ = ["EPISODE_MARKERS", "EPISODE_COUNTS", "EpisodeCount", "PlayedEpisode", "episode_sampler", "episode_gold_judge",
           "played_episodes", "episode_gold_row", "episode_arrays"]

#: Episode markers, each a yes or no per episode, read by the format-marker check and the feature scan beside the
#: text's format markers: more calls than the gold makes, a tool answered with an error, stopped by the turn cap,
#: and no final reply (the last assistant turn says nothing).
EPISODE_MARKERS = ("episode:more_calls_than_gold", "episode:tool_error", "episode:turn_cap", "episode:no_reply")

#: The name of one episode count.
EpisodeCount = Literal["calls", "turns"]

#: Episode counts the length check reads as measures of their own beside length: calls made, assistant turns.
EPISODE_COUNTS: tuple[EpisodeCount, ...] = ("calls", "turns")

#: The gold row's keys holding the played :class:`~whileai.domain.episodes.loop.Episode` and the environment it left
#: (the judge reads both).
_PLAYED = "played"
_LEFT = "environment_left"

#: Finds a row's gold: the jobs pass their dataset column's reader (``episode_gold(row["episode_gold"])``).
GoldOf = Callable[[Mapping[str, Any]], EpisodeGold]


class PlayedEpisode(str):
    """One sampled episode: as text, what the model generated (see the module); beside it, the episode, the
    environment it left, TRL's completion (the messages after the prompt), its counts and its markers."""

    episode: Episode
    environment: Any
    completion: list[dict[str, Any]]
    counts: dict[EpisodeCount, float]
    markers: dict[str, bool]

    def __new__(cls, episode: Episode, environment: Any, prompt_messages: int, gold_calls: int) -> PlayedEpisode:
        completion = [dict(m) for m in episode.messages[prompt_messages:]]
        replies = [m for m in completion if m.get("role") == "assistant"]
        self = super().__new__(cls, "\n".join(completion_text(m) for m in replies))
        calls = sum(len(m.get("tool_calls") or []) for m in replies)
        self.episode, self.environment, self.completion = episode, environment, completion
        self.counts = {"calls": float(calls), "turns": float(len(replies))}
        self.markers = {
            "episode:more_calls_than_gold": calls > gold_calls,
            "episode:tool_error": any(m.get("role") == "tool" and tool_error(m.get("content")) is not None
                                      for m in completion),
            "episode:turn_cap": episode.stopped == "cap",
            "episode:no_reply": not str((replies[-1] if replies else {}).get("content") or "").strip(),
        }
        return self


def _prompt_messages(row: Mapping[str, Any]) -> int:
    """How many messages open an episode started from ``row`` (the loop's start: its prompt, or one user message)."""
    prompt = row.get("prompt")
    return len(prompt) if isinstance(prompt, list) and prompt else 1


def episode_sampler(play: Callable[..., list[tuple[Episode, Any]]], gold_of: GoldOf) -> Callable[..., Any]:
    """HackMonitor's ``sample=`` for episodes: ``n`` episodes of each held-out row played by ``play`` (see the module),
    each handed back as a :class:`PlayedEpisode`, ``n`` per row in the rows' order.

    The monitor gives it its rows, its sampling settings (the temperature the policy is read at) and a seed per
    look, so the same look samples the same episodes."""

    def sample(model: Any, tokenizer: Any, prompts: Sequence[Any], *, n: int, max_new_tokens: int,
               rows: Sequence[Mapping[str, Any]], sampling: Mapping[str, Any], seed: int) -> list[list[PlayedEpisode]]:
        starts = [dict(row) for row in rows for _ in range(n)]
        played = play(model, tokenizer, starts, max_new_tokens=max_new_tokens, sampling=sampling, seed=seed)
        if len(played) != len(starts):
            raise ValueError(f"play returned {len(played)} episodes for {len(starts)} starts; it must return one "
                             "(episode, environment) per start, in order")
        out = [PlayedEpisode(episode, environment, _prompt_messages(start), len(gold_of(start).calls))
               for start, (episode, environment) in zip(starts, played, strict=True)]
        return [out[i * n: (i + 1) * n] for i in range(len(rows))]

    return sample


def played_episodes(texts: Sequence[Sequence[str]]) -> list[PlayedEpisode] | None:
    """Every sampled completion, flattened, when each is a :class:`PlayedEpisode` (an episode look); else None."""
    flat = [t for ts in texts for t in ts]
    played = [t for t in flat if isinstance(t, PlayedEpisode)]
    return played if flat and len(played) == len(flat) else None


def episode_gold_row(prompt: Any, played: PlayedEpisode, columns: Mapping[str, Any]) -> dict[str, Any]:
    """The row :func:`episode_gold_judge` reads: the held-out row's columns, its prompt and the episode played."""
    return {**columns, "prompt": prompt, "messages": list(played.episode.messages), _PLAYED: played.episode,
            _LEFT: played.environment}


def episode_gold_judge(factory: Any, gold_of: GoldOf) -> Callable[[Mapping[str, Any]], float]:
    """The episode judge as HackMonitor's gold (the one the held-out measure calls, ``EpisodeJudge``): 1.0 when the
    played episode passes, else 0.0. Where the environment it left judges its own episode (BFCL's multi-turn check)
    that verdict stands; else its end state must equal its gold calls replayed on a fresh environment from
    ``factory`` (TRL's ``environment_factory``: one factory, or a dict of them by environment name) and its final
    reply say what the task asks. Raises ValueError for a row with no played episode (a reply, not an episode)."""
    judge = EpisodeJudge(factory)

    def episode_judge(row: Mapping[str, Any]) -> float:
        episode = row.get(_PLAYED)
        if not isinstance(episode, Episode):
            raise ValueError("the episode judge reads a played episode, and this row has none (a single reply); "
                             "judge episodes sampled by episode_sampler")
        return 1.0 if judge(episode, row.get(_LEFT), gold_of(row), row.get("prompt")).passed else 0.0

    return episode_judge


def episode_arrays(played: Sequence[PlayedEpisode], n: int, k: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The look's counts, ``{name: (n, k)}`` for each of EPISODE_COUNTS, and its episode markers, (n, k,
    len(EPISODE_MARKERS)) presence."""
    counts: dict[str, np.ndarray] = {name: np.array([p.counts[name] for p in played], dtype=float).reshape(n, k)
                                     for name in EPISODE_COUNTS}
    markers = np.array([[p.markers[name] for name in EPISODE_MARKERS] for p in played], dtype=bool)
    return counts, markers.reshape(n, k, len(EPISODE_MARKERS))
