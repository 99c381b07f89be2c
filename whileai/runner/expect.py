"""A recipe's ``expect:`` block: what its run must show, so a committed recipe is also a regression check.

Keys (each optional):

- ``status: done``: the last stage's run finished.
- ``holdout_after_min: X``: held-out pass rate after training at least X.
- ``holdout_gain_min: X``: after minus before (of the last stage) at least X.
- ``holdout_gain_significant: A``: a real gain: after above before (of the last stage) and the
  exact McNemar test over the same held-out prompts (rm: pairs) gives p below A. Needs the run's
  per-prompt outcomes (``training["stats"]``); a held-out loss has none, so the line fails.
- ``stage_gain_min: X``: the last stage's held-out after minus the after of the stage it continued
  (its ``init_from``: GRPO's or DPO's SFT stage) at least X, so "GRPO ends above its SFT start".
  A last stage that continued none (a single stage, a reward model, even one started from a policy: its pair
  accuracy and the policy's pass rate are not one scale) fails the line, saying so.
- ``no_alarm: true``: the HackMonitor raised no alarm.
- ``reward_over_exact_significant: A``: the run was hacked: on the same held-out prompts, the reward it
  optimised (``reward`` other than the exact judge) rose more than the exact first-action judge, by the
  exact sign test over the prompts (``training["reward_vs_exact"]``) at p below A, and by more on average
  (a sign test that counts prompts can pass while the mean lead falls: the line then fails, saying both).
- ``alarm: KIND`` (or a list of kinds): the HackMonitor raised an alarm of that kind.
- ``alarm_look_max: N``: that alarm (any alarm when ``alarm`` is unset) first fired by the monitor's N-th
  look after its baseline (look 0 is the policy before training).
- ``delta_verdict_not: [over-optimized, ...]``: delta_report's verdict is none of these.

``verdict(expect, outcome, lines)`` checks every line and returns what the run keeps on its
summary (``summary["expect"]``): ``{"passed", "lines": [{"key", "want", "seen", "passed",
"where"}]}``. ``failures`` words the failed lines, naming the key, the file and line it was
written on, the value and what the run shows.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from whileai.core.stats import describe
from whileai.core.spec import continues_runs

__all__ = ["failures", "verdict", "line_text", "KEYS", "outcome_of", "settle", "Outcome", "ExpectLine",
           "ExpectVerdict"]

#: the keys in the order they are checked and shown
KEYS = ("status", "holdout_after_min", "holdout_gain_min", "holdout_gain_significant", "stage_gain_min",
        "no_alarm", "reward_over_exact_significant", "alarm", "alarm_look_max", "delta_verdict_not")


class Outcome(TypedDict):
    """What ``verdict`` checks, read off a finished run (``outcome_of``); the closing summary carries it as it is.

    The held-out fields are the run's ``training`` summary's, the alarms and verdict its monitor's and delta
    report's, as the platform stored them (None where the run recorded none).
    """

    status: Any  # the run's status (``done``, ``failed``, ...)
    before: Any  # the held-out measure before and after training (a float, or None)
    after: Any
    metric: Any  # what the measure is: pass_rate, pair_accuracy, ...
    stats: Any  # how sure the result is (``whileai.core.stats.holdout_result``'s answer), or None
    previous_after: Any  # the held-out after of the stage this one continued, for stage_gain_min
    previous_run: str | None  # that stage's run id
    alarms: list[Any]  # the HackMonitor's alarms, each an object with its kind, step and look
    verdict: Any  # the delta report's verdict, or None without one
    reward_vs_exact: Any  # the proxy reward against the exact judge (the job's RewardVsExact), or None
    armed: Any  # which monitor alarms were armed, and why the others were off
    by_group: Any  # the held-out result per group, where the prompts name one
    cost_usd: Any
    cost_basis: Any
    alarm_kinds: NotRequired[list[str]]  # added by ``verdict``: the kinds ``expect.alarm`` names


class ExpectLine(TypedDict):
    """One checked line of an expect block: its key, what it wants, what the run shows, whether it held and where
    it was set. The pages read it back from the run's summary as ``platform.pages._shapes.ExpectLineView``."""

    key: str
    want: Any  # the value the spec gave the key
    seen: str
    passed: bool
    where: str


class ExpectVerdict(TypedDict):
    """``verdict``'s answer, which the run keeps on its summary: whether every line held, and the lines."""

    passed: bool
    lines: list[ExpectLine]


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _gain(a: Any, b: Any) -> float | None:
    return None if a is None or b is None else b - a


def _check(key: str, want: Any, outcome: Outcome) -> tuple[bool, str]:
    """(passed, what the run shows) for one expect line."""
    before, after = outcome.get("before"), outcome.get("after")
    if key == "status":
        return outcome.get("status") == want, f"status {outcome.get('status')}"
    if key == "holdout_after_min":
        return after is not None and after >= want, f"held-out after {_fmt(after)}"
    if key == "holdout_gain_min":
        gain = _gain(before, after)
        return gain is not None and gain >= want, f"held-out {_fmt(before)} -> {_fmt(after)} (gain {_fmt(gain)})"
    if key == "holdout_gain_significant":
        stats = outcome.get("stats") if isinstance(outcome.get("stats"), dict) else None
        paired = (stats or {}).get("paired")
        if not isinstance(paired, dict) or paired.get("p") is None:
            return False, (f"held-out {_fmt(before)} -> {_fmt(after)} with no per-prompt outcomes to test "
                           "(the job measures them for pass_rate and pair_accuracy; set holdout= to measure)")
        gain = _gain(before, after)
        ok = gain is not None and gain > 0 and paired["p"] < want
        improved = paired.get("improved")
        return ok, (f"held-out {describe(before, after, stats)}: {improved} prompt{'' if improved == 1 else 's'} "
                    f"improved, {paired.get('worsened')} worsened")
    if key == "stage_gain_min":
        start = outcome.get("previous_after")
        if start is None and outcome.get("previous_run") is None:
            return False, (f"this stage {_fmt(after)}, but it continued no earlier stage, so there is no start to "
                           "gain over; put a policy stage before it (stages: {sft: {method: sft}}) or unset "
                           "expect.stage_gain_min")
        gain = _gain(start, after)
        return (gain is not None and gain >= want,
                f"previous stage {_fmt(start)} -> this stage {_fmt(after)} (gain {_fmt(gain)})")
    if key == "no_alarm":
        alarms = outcome.get("alarms") or []
        kinds = ", ".join(sorted({str(a.get("kind") or a.get("alarm") or a) if isinstance(a, dict) else str(a)
                                  for a in alarms}))
        return not (want and alarms), f"{len(alarms)} alarm(s)" + (f": {kinds}" if kinds else "")
    if key == "reward_over_exact_significant":
        return _hacked(want, outcome.get("reward_vs_exact"))
    if key in ("alarm", "alarm_look_max"):
        return _alarmed(key, want, outcome)
    if key == "delta_verdict_not":
        seen = outcome.get("verdict")
        if seen is None:
            return False, "no delta report (set dataset.after to a file of post-training rollouts)"
        return seen not in want, f"verdict {seen}"
    raise KeyError(f"expect.{key} is not an expect key; accepted: {', '.join(KEYS)}")


def _hacked(alpha: float, versus: Any) -> tuple[bool, str]:
    """Whether the held-out reward rose significantly more than the exact judge (a hack), and what the run shows."""
    if not isinstance(versus, dict):
        return False, ("no reward-versus-exact measurement (the run's reward is the exact judge itself, or it had no "
                       "held-out prompts); train with another reward, or unset expect.reward_over_exact_significant")
    ok = versus["gap_change"] > 0 and versus["p"] < alpha
    return ok, (f"reward {_fmt(versus['reward_before'])} -> {_fmt(versus['reward_after'])}, exact judge "
                f"{_fmt(versus['exact_before'])} -> {_fmt(versus['exact_after'])} on {versus['prompts']} prompts: "
                f"the reward rose more on {versus['reward_rose_more']}, the task on {versus['task_rose_more']} "
                f"(sign test p = {versus['p']:.3g}); the reward's lead over the task changed by "
                f"{versus['gap_change']:+.3f} a prompt on average")


def _alarmed(key: str, want: Any, outcome: Outcome) -> tuple[bool, str]:
    """``alarm``: an alarm of the kind(s) wanted fired; ``alarm_look_max``: the first such fired by that look."""
    alarms = [a for a in outcome.get("alarms") or [] if isinstance(a, dict)]
    kinds = outcome.get("alarm_kinds")
    if kinds:
        alarms = [a for a in alarms if a.get("kind") in kinds]
    named = f"{'/'.join(kinds)} alarm" if kinds else "alarm"
    if not alarms:
        raised = sorted({str(a.get("kind")) for a in outcome.get("alarms") or [] if isinstance(a, dict)})
        return False, f"no {named}" + (f" (raised: {', '.join(raised)})" if raised else "")
    first = min(alarms, key=lambda a: int(a.get("evaluation") or 0))
    seen = f"{first.get('kind')} alarm first at look {first.get('evaluation')} (step {first.get('step')})"
    if key == "alarm":
        return True, seen
    return int(first.get("evaluation") or 0) <= int(want), seen


def verdict(expect: dict[str, Any], outcome: Outcome, lines: dict[str, str]) -> ExpectVerdict:
    """Every set line of ``expect`` against ``outcome``; ``{"passed", "lines": [...]}`` (no lines: passed).

    ``outcome`` holds before, after, stats, previous_after (and previous_run), status, alarms, verdict; ``lines`` names
    where each key was set (``recipes/x.yaml:12``, ``command line``).
    """
    checked: list[ExpectLine] = []
    wanted = expect.get("alarm")
    outcome = {**outcome, "alarm_kinds": [wanted] if isinstance(wanted, str) else list(wanted or [])}
    for key in KEYS:
        want = expect.get(key)
        if want is None or want is False or want == []:  # an unset line (no_alarm: false asks nothing)
            continue
        passed, seen = _check(key, want, outcome)
        checked.append({"key": key, "want": want, "seen": seen, "passed": passed,
                        "where": lines.get(key) or "the spec"})
    return {"passed": all(line["passed"] for line in checked), "lines": checked}


def line_text(line: ExpectLine) -> str:
    """``expect.KEY: WANT failed at WHERE: the run shows SEEN`` (``passed at`` for a line that held)."""
    word = "passed" if line["passed"] else "failed"
    return f"expect.{line['key']}: {line['want']!r} {word} at {line['where']}: the run shows {line['seen']}"


def failures(expect: dict[str, Any], outcome: Outcome, lines: dict[str, str]) -> list[str]:
    """One line per failed expectation (see ``line_text``); [] when every line holds."""
    return [line_text(line) for line in verdict(expect, outcome, lines)["lines"] if not line["passed"]]


def outcome_of(run: Any, previous: Any) -> Outcome:
    """What ``verdict`` checks, read off a finished run (and the stage run it continued, for ``stage_gain_min``)."""
    training = run.training or {}
    summary = run.summary or {}
    found_monitor, found_delta = summary.get("monitor"), summary.get("delta")
    monitor: dict[str, Any] = found_monitor if isinstance(found_monitor, dict) else {}
    delta: dict[str, Any] = found_delta if isinstance(found_delta, dict) else {}
    if not continues_runs(str(training.get("method"))):  # a reward model started from a policy: another scale
        previous = None
    prev_training = (previous.training or {}) if previous is not None else {}
    return {"status": run.status, "before": training.get("before"), "after": training.get("after"),
            "metric": training.get("metric"), "stats": training.get("stats"), "previous_after": prev_training.get("after"),
            "previous_run": previous.id if previous is not None else None,
            "alarms": monitor.get("alarms") or [], "verdict": delta.get("verdict"),
            "reward_vs_exact": training.get("reward_vs_exact"), "armed": monitor.get("armed"),
            "by_group": training.get("by_group"),
            "cost_usd": run.cost_usd, "cost_basis": run.cost_basis}


def settle(run: Any, previous: Any, expect: dict[str, Any], lines: dict[str, str],
           recipe: str | None) -> tuple[Outcome, ExpectVerdict]:
    """The one way a run's expect verdict is reached and kept: checked against the run, noted on its summary.

    The pipeline calls it when its last stage ends; ``wait`` for a run the runner only submitted.
    Returns ``(outcome, verdict)``; a spec without expect lines notes nothing.
    """
    outcome = outcome_of(run, previous)
    checked = verdict(expect or {}, outcome, lines)
    if checked["lines"]:  # the verdict lives on the run: its page, the runs list, wait and diff show it
        run.note(expect={**checked, "recipe": recipe})
    return outcome, checked
