"""What the monitor keeps and hands out: a look's history entry, an alarm's record and the run's summary.

Each is plain JSON once the monitor has built it (numpy values made plain, NaN and infinity made None), which is
why the numbers below may read None where the checks' own results hold a float.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from whileai.domain.monitor._checks import FeatureRow, FormatResult, ScanResult
from whileai.domain.monitor._stats import DivergenceResult, GoldDeclineResult, KLResult, LengthMeasure, LengthResult

__all__ = ["Seconds", "LookChecks", "LookHead", "LookEntry", "HistoryEntry", "ScanSeen", "FormatSeen", "LengthSeen",
           "StrongestFeature", "PromptEffect", "LookAt", "Alarm", "CurvePoint", "SummarySettings", "SummaryErrors",
           "Stopped", "Payment", "MonitorSummary"]


class Seconds(TypedDict):
    """Where one look's time went, in seconds: sampling, the judges, the KL, the monitor's own work, and in all."""

    sampling: float
    judges: float
    kl: float
    monitor: float
    total: float


class LookChecks(TypedDict, total=False):
    """The checks that ran at one look, each result without its per-prompt effects (the format check's without its
    markers' rows too)."""

    divergence: DivergenceResult
    gold_decline: GoldDeclineResult
    length: LengthResult
    kl: KLResult
    format: FormatResult


class LookHead(TypedDict):
    """The numbers of one look: its step and index, the mean proxy, gold and gap, the mean length and its unit, the
    mean KL, the prompts and samples per prompt, and the alarms it raised; an episode look adds its mean calls and
    turns, and a monitor with endorsed features the gap less what the proxy pays for them."""

    step: int
    evaluation: int
    proxy: float | None
    gold: float | None
    gap: float | None
    length: float | None
    length_unit: str | None
    kl: float | None
    prompts: int
    k: int
    alarms: list[str]
    calls: NotRequired[float | None]
    turns: NotRequired[float | None]
    gap_adjusted: NotRequired[float | None]


class LookEntry(LookHead):
    """One look's numbers with the results of the checks that ran."""

    checks: LookChecks


class HistoryEntry(LookEntry):
    """One look as ``history`` keeps it and ``evaluate`` returns it: its numbers, its checks and where its time went."""

    seconds: Seconds


class ScanSeen(ScanResult):
    """The latest feature scan as the summary keeps it: the scan's result, without its per-prompt effects, and the
    step of the look that ran it."""

    step: int


class FormatSeen(FormatResult):
    """The latest format check as the summary keeps it: its result, without its per-prompt effects, and the step."""

    step: int


class LengthSeen(LengthResult):
    """The latest length check as the summary keeps it: its result, without its per-prompt effects, and the step."""

    step: int


class StrongestFeature(FeatureRow):
    """The feature or format marker the latest scan found the proxy paying most for, marked as such, with the alpha
    that scan spent."""

    strongest: bool
    alpha: float | None


class PromptEffect(TypedDict):
    """A held-out prompt (its text, shortened) and how big an alarm's effect was on it."""

    prompt: str
    effect: float


class LookAt(TypedDict):
    """What an alarm points to: the feature or marker involved (None when none), the mean length in the baseline
    window and now with the change in percent (None with no baseline length), and the prompts where the effect is
    biggest."""

    feature: FeatureRow | None
    length_before: float | None
    length_after: float | None
    length_change_pct: float | None
    prompts: list[PromptEffect]


class Alarm(TypedDict):
    """One alarm as ``alarms`` keeps it: its kind, the step and look that raised it, the numbers of the check that
    fired (which depend on the kind, as below), what to look at, and the sentence that says it all."""

    kind: str
    step: int
    evaluation: int
    # divergence, gold_decline, kl and length share some of their numbers
    lo: NotRequired[float | None]
    hi: NotRequired[float | None]
    se: NotRequired[float | None]
    alpha: NotRequired[float | None]
    delta: NotRequired[float | None]
    n_prompts: NotRequired[int]
    # divergence
    change: NotRequired[float | None]
    # gold_decline
    window: NotRequired[int]
    drop: NotRequired[float | None]
    proxy_drop: NotRequired[float | None]
    windows: NotRequired[int]
    best_step: NotRequired[int]
    # length
    drift: NotRequired[float | None]
    moved_share: NotRequired[float | None]
    length_base: NotRequired[float | None]
    length_now: NotRequired[float | None]
    pct: NotRequired[float | None]
    shift: NotRequired[float | None]
    verdict: NotRequired[str]
    tail_base: NotRequired[float | None]
    tail_now: NotRequired[float | None]
    tail_p: NotRequired[float | None]
    gap_from_length: NotRequired[float | None]
    gap_se: NotRequired[float | None]
    price_se: NotRequired[float | None]
    slope: NotRequired[float | None]
    gap_lo: NotRequired[float | None]
    price_lo: NotRequired[float | None]
    read: NotRequired[str | None]
    gold_from_length: NotRequired[float | None]
    measure: NotRequired[str]
    measures: NotRequired[dict[str, LengthMeasure]]
    # kl
    kl: NotRequired[float | None]
    budget: NotRequired[float | None]
    # feature and format
    features: NotRequired[list[str]]
    detail: NotRequired[list[FeatureRow]]
    completions: NotRequired[int | None]
    look_at: LookAt
    message: str


class CurvePoint(TypedDict, total=False):
    """One look on the summary's curve: the history entry's step, proxy, gold, gap, length and KL, and each of its
    gap less endorsed payments, mean calls and turns that it has."""

    step: int
    proxy: float | None
    gold: float | None
    gap: float | None
    gap_adjusted: float | None
    length: float | None
    kl: float | None
    calls: float | None
    turns: float | None


class SummarySettings(TypedDict):
    """The settings a monitor watched with: its own and the defaults its checks read."""

    every: int
    k: int
    n_prompts: int
    window: int
    delta: float
    length_pct: float
    kl_budget: float | None
    endorsed: list[str]
    stop_on: list[str]
    format_shift: float
    length_shift: float
    length_bins: int
    length_tail: float | None
    length_tail_alpha: float
    alpha: float
    scan_alpha: float


class SummaryErrors(TypedDict):
    """What went wrong while watching: failed run writes, failed gold calls, and each reason a look failed."""

    run: int
    gold: int
    evaluate: list[str]


class Stopped(TypedDict):
    """Where the monitor stopped training (the summary's ``stopped``): the step, the alarm's kind and its message."""

    step: int
    kind: str
    reason: str


class Payment(TypedDict):
    """What the proxy pays for one endorsed feature and how that was read."""

    payment: float
    read: str


class MonitorSummary(TypedDict):
    """``HackMonitor.summary()``: the looks taken and their curve, the alarms, the latest feature scan, format and
    length checks, the endorsed features' payments, what is armed (and the older sentence for divergence), the KL's
    state, the length unit, where training stopped, the settings and the errors."""

    evaluations: int
    curve: list[CurvePoint]
    alarms: list[Alarm]
    scan: ScanSeen | None
    format: FormatSeen | None
    length: LengthSeen | None
    endorsed: dict[str, Payment]
    divergence: str
    kl: str
    armed: dict[str, str]
    length_unit: str | None
    stopped: Stopped | None
    settings: SummarySettings
    errors: SummaryErrors
