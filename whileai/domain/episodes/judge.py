"""The state judge: an episode passes when it leaves the world as the gold actions leave it, and says what it must.

The gold is replayed, not stored: a fresh environment from the same factory, reset with the same row, then
the gold calls in order (:func:`replay`). The episode's end state (every public attribute of the
environment, :func:`~whileai.domain.episodes.protocol.end_state`) must equal the replay's, key by key.
A task may also ask for something to be said (``responses``): each must appear in the episode's final
reply as a whole word or number. The verdict says why, naming the first differences.

An environment whose episode judges itself (``protocol.JudgesItself``: BFCL's, by BFCL's multi-turn check on the
turns played) is judged by that instead (:func:`own_verdict`); :class:`EpisodeJudge` is the one verdict the
reward and the held-out measure take, either way, for one factory or TRL's dict of them.

    gold = replay(KitEnvironment, row, task.gold)
    verdict = judge_episode(episode, gold, task.responses)   # Verdict(passed=True, reason="...")
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, cast

from whileai.domain import defaults
from whileai.domain.episodes.loop import Episode, _arguments
from whileai.domain.episodes.protocol import ROUTE_COLUMN, Factories, JudgesItself, end_state, route

__all__ = ["Verdict", "GoldCall", "read_gold_call", "replay", "state_differences", "judge_episode", "GoldJudge",
           "own_verdict", "EpisodeJudge"]


class GoldCall(TypedDict):
    """One call of an episode's gold: the tool's name and its arguments by name (the task's own values)."""

    name: str
    arguments: dict[str, Any]


def read_gold_call(value: Mapping[str, Any]) -> GoldCall:
    """A gold call as read back from JSON or a row: a copy of ``value``, which holds ``{"name", "arguments"}``."""
    return cast(GoldCall, dict(value))


@dataclass(frozen=True)
class Verdict:
    """Whether an episode passed, and why (the differences from the gold replay, or the reply's missing words)."""

    passed: bool
    reason: str


def replay(factory: Callable[[], Any], row: Mapping[str, Any], calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The end state the gold ``calls`` (``{"name", "arguments"}`` each) leave on a fresh environment reset with
    ``row``. A gold call that raises is the task's error, raised as ValueError naming the call."""
    environment = factory()
    environment.reset(**row)
    for index, call in enumerate(calls):
        name = str(call.get("name"))
        try:
            getattr(environment, name)(**_arguments(call.get("arguments")))
        except Exception as exc:  # a gold that does not run is a broken task, said as such
            raise ValueError(f"gold call {index} ({name} with {call.get('arguments')!r}) raised "
                             f"{type(exc).__name__}: {exc}; the task's gold must run on a fresh environment: fix "
                             "the task's gold actions") from exc
    return end_state(environment)


def _differences(key: str, got: Any, want: Any) -> list[str]:
    if got == want:
        return []
    if isinstance(got, Mapping) and isinstance(want, Mapping):
        out = []
        for sub in sorted({*got, *want}, key=str):
            shown_got = repr(got[sub]) if sub in got else "absent"
            shown_want = repr(want[sub]) if sub in want else "absent"
            if got.get(sub, ...) != want.get(sub, ...):
                out.append(f"{key}[{sub!r}] is {shown_got}, gold {shown_want}")
        return out
    return [f"{key} is {got!r}, gold {want!r}"]


def state_differences(state: Mapping[str, Any], gold: Mapping[str, Any]) -> list[str]:
    """Each place ``state`` differs from ``gold``: a key of either, one level into a mapping, with both values."""
    out = []
    for key in sorted({*state, *gold}):
        if key not in state or key not in gold:
            out.append(f"{key} is {'absent' if key not in state else repr(state[key])}, gold "
                       f"{'absent' if key not in gold else repr(gold[key])}")
        else:
            out += _differences(key, state[key], gold[key])
    return out


def _says(reply: str, text: str) -> bool:
    """Whether ``reply`` contains ``text`` as a whole word or number ("30" is not said by "130" or "3.0")."""
    return re.search(rf"(?<![\w.]){re.escape(text)}(?![\w]|\.\d)", reply, flags=re.IGNORECASE) is not None


def judge_episode(episode: Episode, gold_state: Mapping[str, Any], responses: Sequence[str] = ()) -> Verdict:
    """Pass when ``episode``'s end state equals ``gold_state`` and its final reply says each of ``responses`` (as a
    whole word or number, case aside)."""
    reasons = []
    differences = state_differences(episode.end_state, gold_state)
    if differences:
        shown = differences[: defaults.EPISODE_DIFFS_SHOWN]
        more = len(differences) - len(shown)
        reasons.append("the end state differs from the gold replay's: " + "; ".join(shown)
                       + (f" (and {more} more)" if more else ""))
    reply = episode.final_reply
    missing = [text for text in responses if not _says(reply, text)]
    if missing:
        reasons.append(f"the final reply does not say {', '.join(repr(m) for m in missing)} (it says {reply!r})")
    if reasons:
        return Verdict(False, "; ".join(reasons))
    said = f", and the final reply says {', '.join(repr(r) for r in responses)}" if responses else ""
    capped = f" (stopped at the turn cap of {episode.rounds} rounds)" if episode.stopped == "cap" else ""
    return Verdict(True, f"the end state equals the gold replay's{said}{capped}")


class _Gold(Protocol):
    """What the judge reads of an episode's gold (``rows.EpisodeGold`` is one)."""

    @property
    def environment(self) -> str: ...

    @property
    def reset(self) -> dict[str, Any]: ...

    @property
    def calls(self) -> tuple[GoldCall, ...]: ...

    @property
    def responses(self) -> tuple[str, ...]: ...

    def to_json(self) -> str: ...


class GoldJudge:
    """:func:`judge_episode` against an episode's gold (an :class:`~whileai.domain.episodes.rows.EpisodeGold`), its
    calls replayed on a fresh environment from ``factory`` once per gold and kept (a gold's replay never changes):
    the one judge the reward, the held-out measure and the HackMonitor's gold all call.

        judge = GoldJudge(KitEnvironment)
        judge(episode, gold, prompt).passed
    """

    def __init__(self, factory: Callable[[], Any]):
        self.factory = factory
        self._replays: dict[str, dict[str, Any]] = {}

    def __call__(self, episode: Episode, gold: _Gold, prompt: Any) -> Verdict:
        """``episode``'s verdict against ``gold`` (the environment reset with ``prompt`` and the gold's arguments)."""
        key = gold.to_json()
        if key not in self._replays:
            self._replays[key] = replay(self.factory, {"prompt": prompt, **gold.reset}, gold.calls)
        return judge_episode(episode, self._replays[key], gold.responses)


def own_verdict(environment: object) -> Verdict | None:
    """The environment's own verdict on the episode it played, where its ``episode`` judges itself
    (:class:`~whileai.domain.episodes.protocol.JudgesItself`: BFCL's multi-turn check on the turns played); None
    for an environment the gold replay judges."""
    episode = getattr(environment, "episode", None)
    if not isinstance(episode, JudgesItself):
        return None
    said = episode.verdict()
    return Verdict(bool(said.passed), str(said.reason))


class EpisodeJudge:
    """The verdict on a played episode: the environment's own (:func:`own_verdict`) where its episode judges itself,
    else :class:`GoldJudge`'s against the row's gold, replayed on a fresh environment from the factory the gold's
    environment routes to (one GoldJudge per factory, each keeping its replays). ``factories`` is TRL's
    ``environment_factory``: one factory, or a dict of them by environment name.

        judge = EpisodeJudge(factories)
        judge(episode, environment, gold, prompt).passed
    """

    def __init__(self, factories: Factories):
        self.factories = factories
        self._judges: dict[int, GoldJudge] = {}

    def __call__(self, episode: Episode, environment: object, gold: _Gold, prompt: Any) -> Verdict:
        own = own_verdict(environment)
        if own is not None:
            return own
        factory, _ = route(self.factories, {ROUTE_COLUMN: gold.environment})
        judge = self._judges.setdefault(id(factory), GoldJudge(factory))
        return judge(episode, gold, prompt)
