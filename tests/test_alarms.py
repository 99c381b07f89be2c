"""whileai.core.alarms: every alarm kind the monitor raises has its sentence, and an unknown kind is named as such."""

from __future__ import annotations

from whileai.core.alarms import ALARM_MEANINGS, alarm_meaning
from whileai.domain.monitor._report import ALARM_KINDS


def test_every_alarm_kind_has_its_own_sentence():
    assert set(ALARM_KINDS) <= set(ALARM_MEANINGS)
    for kind in ALARM_KINDS:
        assert alarm_meaning(kind) == ALARM_MEANINGS[kind]
    assert len(set(ALARM_MEANINGS.values())) == len(ALARM_MEANINGS), "no two kinds share a sentence"


def test_a_kind_is_read_as_its_text_and_an_unknown_one_is_named():
    class Kind:
        def __str__(self) -> str:
            return "kl"

    assert alarm_meaning(Kind()) == ALARM_MEANINGS["kl"]
    assert alarm_meaning("reward_drift") == ("an alarm of kind 'reward_drift'; the HackMonitor section of the run page "
                                             "explains it")
    assert alarm_meaning(None) == "an alarm of kind None; the HackMonitor section of the run page explains it"
