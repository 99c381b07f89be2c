"""Which HackMonitor checks are armed (whileai/domain/monitor/_arming.py): the gold checks need a gold judge, the
KL check a budget, the format check stands down while the feature scan runs, and a caller's ``disarm`` reason wins.
Each state and each refusal of a bad ``disarm`` in its exact words."""

from __future__ import annotations

from whileai.domain.monitor._arming import ARMED, GOLD_CHECKS, SHARED_ALPHA, armed_state, check_disarm
from whileai.domain.monitor._report import ALARM_KINDS

NO_KL = ("off: no kl_budget, so the KL is measured and logged but never alarmed; pass kl_budget= in nats of sequence "
         "KL to arm it")
SCAN_RUNS = "off: the feature scan reads every format marker beyond gold already"


def test_with_gold_and_a_budget_every_check_but_format_is_armed():
    assert armed_state(has_gold=True, kl_budget=0.5, disarm={}) == {
        "divergence": ARMED, "gold_decline": ARMED, "length": ARMED, "kl": ARMED, "feature": ARMED, "format": SCAN_RUNS}
    assert armed_state(has_gold=True, kl_budget=0.0, disarm={})["kl"] == ARMED, "a budget of 0 is a budget"


def test_without_gold_the_gold_checks_are_off_and_the_format_check_runs_instead():
    assert armed_state(has_gold=False, kl_budget=None, disarm={}) == {
        "divergence": "off: no gold judge, so divergence would compare the reward with itself",
        "gold_decline": "off: no gold judge, so there is no independent score to see fall",
        "length": ARMED,
        "kl": NO_KL,
        "feature": ("off: no gold judge, so a phrase the reward pays for cannot be told from one that does the task "
                    "(the format-marker check runs instead)"),
        "format": ARMED,
    }


def test_a_callers_reason_wins_and_is_shown_as_off_once():
    state = armed_state(has_gold=True, kl_budget=None,
                        disarm={"feature": "the reward is a checklist", "kl": "Off by choice", "divergence": "offline"})
    assert state["feature"] == "off: the reward is a checklist" and state["kl"] == "Off by choice"
    assert state["divergence"] == "offline", "a reason that opens with 'off' is kept as it is"
    assert state["format"] == ARMED, "the scan is off, so the format check runs"
    assert state["gold_decline"] == ARMED and state["length"] == ARMED
    assert armed_state(has_gold=False, kl_budget=1.0, disarm={"format": "no markers here"})["format"] == (
        "off: no markers here")


def test_disarm_is_a_mapping_of_known_kinds_to_sentences_and_every_problem_is_named():
    assert check_disarm(None) == ({}, [])
    assert check_disarm({"kl": "  budget set elsewhere  "}) == ({"kl": "budget set elsewhere"}, [])
    assert check_disarm(["kl"]) == ({}, [
        "disarm=['kl'] must be a mapping of alarm kind to the reason it is off, e.g. {'divergence': 'the reward is "
        "the strictest judge there is'}; leave it None to arm every check that can run"])
    kept, problems = check_disarm({"loss": "x", "kl": " ", "length": 3, "format": "fine"})
    assert kept == {"format": "fine"}
    assert problems == [f"disarm names 'loss'; accepted kinds: {list(ALARM_KINDS)}",
                        "disarm['kl']=' ' must be a sentence saying why the check is off (summary()['armed'] shows it)",
                        "disarm['length']=3 must be a sentence saying why the check is off (summary()['armed'] shows it)"]


def test_the_gold_and_shared_alpha_checks_are_alarm_kinds():
    assert set(GOLD_CHECKS) <= set(ALARM_KINDS) and set(SHARED_ALPHA) <= set(ALARM_KINDS)
