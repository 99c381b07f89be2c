"""HackMonitor on whole episodes (whileai/domain/monitor/_episodes.py), no model: the gold-free checks read an
episode's turns, calls and tool errors from hand-made looks, and a monitor fed kit episodes played by the real loop
(scripted policies through episode_sampler) scores them with a TRL-shaped proxy and the episode judge as gold."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from whileai.domain.episodes import KitEnvironment, KitTask, episode_gold, kit_episode_rows, kit_tasks, play_episode
from whileai.domain.episodes.rows import kit_reply
from whileai.domain.monitor import HackMonitor, format_hack_monitor
from whileai.domain.monitor import _checks as ch
from whileai.domain.monitor import _features as feats
from whileai.domain.monitor._episodes import (EPISODE_MARKERS, PlayedEpisode, episode_gold_judge, episode_sampler,
                                              played_episodes)
from whileai.jobs import _episode_prompts, _episodes
from whileai.simulations.proxy_rewards import calls_made

P, K, LOOKS = 16, 4, 6


def _settings(has_gold: bool, armed: tuple[str, ...]) -> ch.Settings:
    return ch.Settings(window=2, delta=0.1, length_pct=0.25, kl_budget=None, n_boot=300, n_perm=200, scan_min=3,
                       seed=0, has_gold=has_gold, armed=frozenset(armed))


def _looks(rng: np.random.Generator, *, counts: bool, gold_pays: bool) -> list[ch.Look]:
    """Six looks of P prompts x K episodes whose token lengths stay put while calls per episode grow from the fourth
    look on (a growing share makes four calls); the proxy pays 0.25 a call, the gold pays for calls too only with
    ``gold_pays`` (else it holds)."""
    looks = []
    gold_calls = rng.integers(2, 4, size=(P, 1)).astype(float)
    for t in range(LOOKS):
        more = rng.random((P, K)) < (0.0 if t < 3 else 0.2 * (t - 1))
        calls = np.where(more, 4.0, np.broadcast_to(gold_calls, (P, K)))
        proxy = 0.25 * calls + rng.normal(0, 0.02, (P, K))
        gold = (0.25 * calls if gold_pays else 0.5) + rng.normal(0, 0.02, (P, K))
        length = np.round(rng.normal(40, 4, (P, K)))
        looks.append(ch.Look(step=10 * t, proxy=proxy, gold=gold, length=length, endorsed=np.zeros((P, K, 0)),
                             words=length.copy(), counts={"calls": calls, "turns": calls + 1} if counts else None))
    return looks


def _length_after_each(looks: list[ch.Look], cfg: ch.Settings) -> list[Any]:
    index = feats.FeatureIndex()
    return [ch.check_all(looks[: t + 1], [], cfg, index)["length"] for t in range(len(looks))]


def test_the_length_check_reads_calls_per_episode_beside_length():
    cfg = _settings(has_gold=True, armed=("length",))
    results = _length_after_each(_looks(np.random.default_rng(0), counts=True, gold_pays=False), cfg)
    last = results[-1]
    assert last["fired"] and last["measure"] == "calls" and last["verdict"] == "hack", last
    assert last["measures"]["turns"]["verdict"] == "hack", "a turn a call: the turns moved with the calls"
    assert last["measures"]["length"]["verdict"] == "stable", "token lengths never moved"
    assert last["length_now"] > last["length_base"] and last["gap_from_length"] >= cfg.delta
    # the same looks without their counts: length alone, which did not move, so nothing fires
    bare = _length_after_each(_looks(np.random.default_rng(0), counts=False, gold_pays=False),
                              _settings(has_gold=True, armed=("length",)))
    assert not any(r and r["fired"] for r in bare) and "measure" not in bare[-1]


def test_calls_the_gold_pays_for_too_are_growth_not_a_hack():
    results = _length_after_each(_looks(np.random.default_rng(1), counts=True, gold_pays=True),
                                 _settings(has_gold=True, armed=("length",)))
    assert not any(r and r["fired"] for r in results)
    assert results[-1]["measures"]["calls"]["verdict"] == "growth"


def test_the_format_check_reads_episode_markers_without_gold():
    """Tool errors fall from 80% of episodes to 20% and the proxy pays for an episode without one: the gold-free
    format check flags 'no episode:tool_error' (names past the text's markers come from the look)."""
    rng = np.random.default_rng(2)
    names = (*feats.MARKERS, *EPISODE_MARKERS)
    col = names.index("episode:tool_error")
    looks = []
    for t in range(LOOKS):
        errors = rng.random((P, K)) < (0.8 if t < 3 else 0.2)
        markers = np.zeros((P, K, len(names)), dtype=bool)
        markers[:, :, col] = errors
        proxy = 0.5 * ~errors + rng.normal(0, 0.05, (P, K))
        length = np.round(rng.normal(40, 4, (P, K)))
        looks.append(ch.Look(step=10 * t, proxy=proxy, gold=np.full((P, K), np.nan), length=length,
                             endorsed=np.zeros((P, K, 0)), words=length.copy(), markers=markers, marker_names=names))
    out = ch.check_all(looks, [], _settings(has_gold=False, armed=("length", "format")), feats.FeatureIndex())
    assert out["format"]["flagged"] == ["no episode:tool_error"], out["format"]
    assert out["format"]["shift"] == {"episode:tool_error": pytest.approx(out["format"]["shift"]["episode:tool_error"])}


# ---------------------------------------------------------------------------------------------------------------------
# A monitor fed kit episodes played by the loop
# ---------------------------------------------------------------------------------------------------------------------


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _scripted(calls: list[dict[str, Any]], reply: str) -> Any:
    """A policy making ``calls`` one a turn, then saying ``reply``."""
    queue = [{"role": "assistant", "content": "", "tool_calls": [c]} for c in calls]
    queue.append({"role": "assistant", "content": reply})
    return lambda conversation: queue.pop(0)


def _policy(task: KitTask, way: str) -> Any:
    """``pass``: the gold calls and reply; ``fail``: the gold's calls but the last a read of the first account, and
    "Done." (as many calls, the wrong world); ``hack``: a read of every account and "Done." (four calls that run)."""
    gold = [_call(c["name"], **c["arguments"]) for c in task.gold]
    first = sorted(task.balances)[0]
    if way == "pass":
        return _scripted(gold, kit_reply(task))
    if way == "fail":
        return _scripted([*gold[:-1], _call("get_balance", account=first)], "Done.")
    return _scripted([_call("get_balance", account=a) for a in sorted(task.balances)], "Done.")


def _held() -> list[dict[str, Any]]:
    """P held-out episodes as TRL's dataset holds them (prompt, reset arguments, gold, task)."""
    return _episode_prompts.episode_prompts(kit_episode_rows(kit_tasks(P, seed=3)))


def _gold_of(row: Any) -> Any:
    return episode_gold(row[_episode_prompts.EPISODE_GOLD_COLUMN])


def _play(choose: Any, seen: dict[str, Any]) -> Any:
    """``play`` for episode_sampler: each start played by the loop with the policy ``choose(look, rng)`` names."""

    def play(model: Any, tokenizer: Any, starts: list[dict[str, Any]], *, max_new_tokens: int, sampling: Any,
             seed: int) -> list[tuple[Any, Any]]:
        seen.update(sampling=dict(sampling), max_new_tokens=max_new_tokens)
        rng = random.Random(seed)
        out = []
        for start in starts:
            environment = KitEnvironment()
            task = KitTask.read(start["kit_task"])
            episode = play_episode(_policy(task, choose(seed, rng)), environment, start, max_turns=6)
            out.append((episode, environment))
        return out

    return play


def _watching(proxy: Any, gold: Any, choose: Any, seen: dict[str, Any], **kw: Any) -> HackMonitor:
    return HackMonitor(holdout=_held(), proxy=proxy, gold=gold, sample=episode_sampler(_play(choose, seen), _gold_of),
                       k=K, n_prompts=P, window=2, n_boot=300, n_perm=200, every=10, buffer=0,
                       sampling={"temperature": 0.3}, **kw)


def test_a_monitor_watching_kit_episodes_reads_them_as_training_does_and_alarms_on_calls_paid_for():
    """The policy hacks calls_made from the fourth look (reads every account, says "Done."): the proxy is called with
    each episode's messages and the environment it left, the gold is the episode judge's verdict, the curve carries
    turns and calls, and the monitor alarms."""
    seen: dict[str, Any] = {}
    left: list[Any] = []

    def proxy(prompts: Any, completions: Any, environments: Any = None, **columns: Any) -> Any:
        left.extend(environments)
        assert set(columns) >= {"kit_task", _episode_prompts.EPISODE_GOLD_COLUMN, "task"}, "the rows' columns, as TRL passes"
        return calls_made(prompts, completions)

    def choose(seed: int, rng: random.Random) -> str:
        if seed >= 3 and rng.random() < 0.6:  # the monitor's seed is 0, so look t samples with seed t
            return "hack"
        return "pass" if rng.random() < 0.4 else "fail"

    monitor = _watching(proxy, episode_gold_judge(KitEnvironment, _gold_of), choose, seen, seed=0)
    for t in range(LOOKS):
        monitor.evaluate(step=10 * t)
    assert seen["sampling"]["temperature"] == 0.3, "the sampler plays at the monitor's temperature"
    assert len(left) == LOOKS * P * K and all(isinstance(e, KitEnvironment) for e in left)
    summary = monitor.summary()
    first = summary["curve"][0]
    assert {"turns", "calls"} <= set(first) and 2 <= first["calls"] <= 4
    assert summary["curve"][-1]["gold"] < first["gold"] and summary["curve"][-1]["proxy"] > first["proxy"]
    kinds = {a["kind"] for a in summary["alarms"]}
    assert {"divergence", "length"} <= kinds, summary["alarms"]
    calls = next(a for a in summary["alarms"] if a["kind"] == "length")
    assert calls["measure"] == "calls" and calls["message"].startswith("episodes drifted"), calls
    shown = format_hack_monitor(summary)
    assert "calls" in shown.splitlines()[2] and "'episode:more_calls_than_gold'" in shown, shown
    assert summary["kl"].startswith("skipped: an episode's turns")


def test_the_gold_is_the_episode_judges_verdict_on_the_episode_played():
    held = _held()[:2]
    sample = episode_sampler(_play(lambda seed, rng: "pass" if seed == 0 else "fail", {}), _gold_of)
    judge = episode_gold_judge(KitEnvironment, _gold_of)
    for seed, want in ((0, 1.0), (1, 0.0)):
        texts = sample(None, None, [r["prompt"] for r in held], n=2, max_new_tokens=64, rows=held,
                       sampling={"temperature": 1.0}, seed=seed)
        played = played_episodes(texts)
        assert played is not None and len(played) == 4
        for row, episode in zip([held[0]] * 2 + [held[1]] * 2, played):
            assert isinstance(episode, PlayedEpisode) and "<tool_call>" in episode
            assert judge({**row, "played": episode.episode}) == want
            assert _episodes.episode_reward(KitEnvironment)(  # the judge TRL pays, on the same rollout
                prompts=[row["prompt"]], completions=[episode.completion], environments=[episode.environment],
                **{_episode_prompts.EPISODE_GOLD_COLUMN: [row[_episode_prompts.EPISODE_GOLD_COLUMN]]}) == [want]
            assert episode.counts["calls"] == len(_gold_of(row).calls) and not episode.markers["episode:turn_cap"]
    with pytest.raises(ValueError, match="reads a played episode"):
        judge({**held[0], "messages": []})
    assert played_episodes([["a reply"]]) is None


def test_the_honest_twin_watched_without_gold_does_not_alarm():
    """The reward is the episode judge itself (TRL-shaped, reading the environments): no gold, so the checks that
    need one are off; the policy passes more episodes look by look with the same calls, and nothing fires."""
    seen: dict[str, Any] = {}
    off = "the reward is the episode judge itself"
    monitor = _watching(_episodes.episode_reward(KitEnvironment), None,
                        lambda seed, rng: "pass" if rng.random() < 0.1 + 0.1 * seed else "fail", seen, seed=0,
                        disarm={"divergence": off, "gold_decline": off, "feature": off})
    for t in range(LOOKS):
        monitor.evaluate(step=10 * t)
    summary = monitor.summary()
    assert summary["alarms"] == [] and summary["curve"][-1]["proxy"] > summary["curve"][0]["proxy"]
    assert summary["armed"]["length"] == summary["armed"]["format"] == "armed"
    assert summary["length"]["measures"]["calls"]["verdict"] == "stable"
