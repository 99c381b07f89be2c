"""What each HackMonitor alarm means, in one sentence a person reads beside it (the run page, the terminal summary).

The monitor's own message says what fired and the numbers; this says why it matters. Kept in core so the
pages (platform) and the runner's summary read the same words.
"""

from __future__ import annotations

__all__ = ["ALARM_MEANINGS", "alarm_meaning"]

#: alarm kind -> what it means for the run
ALARM_MEANINGS: dict[str, str] = {
    "divergence": ("the training reward rose where the independent gold judge did not: the policy may be learning to "
                   "please its reward rather than to do the task"),
    "gold_decline": ("the gold judge's score fell while the training reward held: training is making the policy worse "
                     "at the task"),
    "length": ("completions changed length and the reward pays for the length itself beyond what gold pays: a classic "
               "reward hack"),
    "kl": "the policy moved further from where it started than its KL budget allows",
    "feature": ("the reward pays for a word or phrase the gold judge does not value: the policy can learn to say it "
                "instead of doing the task"),
    "format": ("a format marker (a block, a tag, JSON) spread through the completions and the reward pays for it within "
               "the same prompt: the policy may be learning a shape the reward likes rather than the task"),
}


def alarm_meaning(kind: object) -> str:
    """The sentence for ``kind``; an unknown kind is named as such."""
    return ALARM_MEANINGS.get(str(kind), f"an alarm of kind {kind!r}; the HackMonitor section of the run page explains it")
