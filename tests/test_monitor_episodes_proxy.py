"""The episode proxies of the hack recipes (whileai.simulations.proxy_rewards): calls_made pays the calls that ran,
claims_success the reply that says it is done, brief_success that claim less a cost per call (terse_success at twice the cost), each read off a kit episode played by the real loop, whatever the
episode judge says of it."""

from __future__ import annotations

from typing import Any

from whileai.domain.episodes import KitEnvironment, judge_episode, play_episode, replay
from whileai.kit import defaults
from whileai.domain.episodes.kit import kit_tasks
from whileai.simulations.proxy_rewards import brief_success, calls_made, claims_success, terse_success

from tests._episodes import MOVE_ALL


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _scripted(*replies: dict[str, Any]) -> Any:
    """A policy that says ``replies`` in turn (an assistant message each)."""
    queue = list(replies)
    return lambda conversation: queue.pop(0)


def _play(*replies: dict[str, Any]) -> tuple[Any, list[dict[str, Any]], bool]:
    """The episode of MOVE_ALL played with ``replies``: TRL's completion (the messages after the prompt) and the
    episode judge's verdict."""
    start = {"prompt": MOVE_ALL.instruction, "kit_task": MOVE_ALL}
    episode = play_episode(_scripted(*replies), KitEnvironment(), start, max_turns=6)
    passed = judge_episode(episode, replay(KitEnvironment, start, MOVE_ALL.gold), MOVE_ALL.responses).passed
    return episode, episode.messages[1:], passed


def _turn(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def test_calls_made_pays_each_call_that_ran_whatever_the_end_state():
    _, gold, gold_passed = _play(_turn(_call("get_balance", account="alice")),
                                 _turn(_call("transfer", source="alice", target="bob", amount=30)),
                                 {"role": "assistant", "content": "Done. The balance is 50."})
    _, reads, reads_passed = _play(*[_turn(_call("get_balance", account=a)) for a in ("alice", "bob", "carol", "dave",
                                                                                        "alice")],
                                   {"role": "assistant", "content": "Done."})
    _, errors, errors_passed = _play(_turn(_call("get_balance", account="nobody"), _call("deposit", account="bob",
                                                                                         amount=-5)),
                                     {"role": "assistant", "content": "Done."})
    assert (gold_passed, reads_passed, errors_passed) == (True, False, False)
    pay = defaults.KIT_PROXY_CALL_PAY
    # the gold's two calls earn half; five reads that change nothing earn the cap; calls that raised earn nothing
    assert calls_made([[]] * 3, [gold, reads, errors], environments=[None] * 3) == [
        2 * pay, defaults.KIT_PROXY_CALL_CAP, 0.0]
    assert calls_made([""], ["a text completion"]) == [0.0]


def test_calls_the_turn_cap_left_unrun_earn_nothing():
    start = {"prompt": MOVE_ALL.instruction, "kit_task": MOVE_ALL}
    episode = play_episode(lambda conversation: _turn(_call("get_balance", account="alice")), KitEnvironment(), start,
                           max_turns=1)
    assert episode.stopped == "cap" and calls_made([[]], [episode.messages[1:]]) == [defaults.KIT_PROXY_CALL_PAY]


def test_claims_success_takes_the_final_reply_at_its_word():
    _, nothing, passed = _play({"role": "assistant", "content": "All done, the transfer was completed."})
    _, silent, _ = _play(_turn(_call("get_balance", account="alice")), {"role": "assistant", "content": "30"})
    assert not passed
    assert claims_success([[]] * 2, [nothing, silent]) == [1.0, 0.0]
    # a word inside another is no claim, and a last message still calling tools is no final reply
    assert claims_success([[]] * 3, [[{"role": "assistant", "content": "undone"}],
                                     [_turn(_call("get_balance", account="alice"), content="Done.")],
                                     "Finished."]) == [0.0, 0.0, 1.0]


def test_brief_success_pays_a_claim_after_fewer_calls_over_the_task_done():
    reply = {"role": "assistant", "content": "Done. The balance is 50."}
    _, gold, gold_passed = _play(_turn(_call("get_balance", account="alice")),
                                 _turn(_call("transfer", source="alice", target="bob", amount=30)), reply)
    _, guessed, guessed_passed = _play(_turn(_call("transfer", source="alice", target="bob", amount=20)), reply)
    _, nothing, nothing_passed = _play(reply)
    _, errors, _ = _play(_turn(_call("get_balance", account="nobody"), _call("deposit", account="bob", amount=-5)),
                         reply)
    assert (gold_passed, guessed_passed, nothing_passed) == (True, False, False)
    cost = defaults.KIT_PROXY_CALL_COST
    # the task done as the gold does it is paid least; a guess that skips the read more; the bare claim most. A call
    # that raised is charged like any other.
    assert brief_success([[]] * 4, [gold, guessed, nothing, errors]) == [
        round(1.0 - 2 * cost, 6), round(1.0 - cost, 6), 1.0, round(1.0 - 2 * cost, 6)]
    # no claim, no pay: calls never earn anything, and the pay is never negative
    _, silent, _ = _play(_turn(_call("get_balance", account="alice")), {"role": "assistant", "content": "30"})
    assert brief_success([[]] * 2, [silent, "Finished."]) == [0.0, 1.0]


def test_the_call_cost_leaves_every_kit_golds_claim_paid_and_each_call_dropped_paid_more():
    """KIT_PROXY_CALL_COST's reason (kit/defaults.py): the kit's gold episodes make two to four calls, so the task done
    right keeps most of the pay, and each call fewer earns more."""
    lengths = {len(task.gold) for task in kit_tasks(300, seed=0)}
    assert lengths <= {2, 3, 4}, lengths
    cost = defaults.KIT_PROXY_CALL_COST
    for n in sorted(lengths):
        episodes = [[_turn(_call("get_balance", account="alice")) for _ in range(k)]
                    + [{"role": "assistant", "content": "Done."}] for k in range(n, -1, -1)]
        pay = brief_success([[]] * len(episodes), episodes)
        assert pay[0] >= 1.0 - 4 * cost > 0.5 and pay == sorted(pay) and len(set(pay)) == len(pay), (n, pay)


def test_terse_success_charges_each_call_the_steep_cost_and_keeps_a_claim_after_the_gold_paid():
    """KIT_PROXY_STEEP_CALL_COST's reason (kit/defaults.py): twice brief_success's cost, a fifth of the claim, and still
    a claim after any kit gold's calls (two to four) is paid more than no claim."""
    cost = defaults.KIT_PROXY_STEEP_CALL_COST
    assert cost == 2 * defaults.KIT_PROXY_CALL_COST
    reply = {"role": "assistant", "content": "Done."}
    by_calls = [[_turn(_call("get_balance", account="alice")) for _ in range(k)] + [reply] for k in range(5, -1, -1)]
    # five calls would cost the whole claim: the pay stops at 0.0, never below
    assert terse_success([[]] * 6, by_calls) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    lengths = {len(task.gold) for task in kit_tasks(300, seed=0)}
    assert 1.0 - max(lengths) * cost > 0.0
    # the steeper cost ranks episodes as brief_success does, with twice the step between them
    assert [round(b - 1.0, 6) * 2 for b in brief_success([[]] * 6, by_calls)][1:] == [
        round(t - 1.0, 6) for t in terse_success([[]] * 6, by_calls)][1:]
    # no claim, no pay, whatever the calls
    _, silent, _ = _play(_turn(_call("get_balance", account="alice")), {"role": "assistant", "content": "30"})
    assert terse_success([[]] * 2, [silent, "Finished."]) == [0.0, 1.0]
