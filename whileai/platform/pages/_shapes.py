"""The shapes of what the pages' readers (``_views``) answer: the parts a run page, a runs list, a compare and a
sweep page draw.

Each is a plain dict at run time: the page-data routes send it as JSON, so each is a ``TypedDict`` whose keys stand
in the order the reader builds them. A value read from a run's config or summary is whatever its writer put
there (``Any``); the readers never check more than the page needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from whileai.core.stats import HoldoutResult
from whileai.platform.store.records import RunRecord
from whileai.platform.store.values import CostBasis

if TYPE_CHECKING:  # the chart series is built (and its type defined) beside the columns it reads
    from whileai.platform.pages._series import ChartSeries

__all__ = ["StageView", "ConfigParts", "HeldOutPair", "HeadlineItem", "ExpectLineView", "ExpectView", "ExpectBrief",
           "ResumedView", "Facts", "ListRow", "ChartGroup", "CurvePoint", "AlarmView", "MonitorView", "ConfigRow",
           "LaidChart", "ChartSection", "ChartLayout", "SetupField", "WorkerLog", "RunsPage", "EpisodeStep",
           "EpisodeSide", "EpisodePair", "PassedCount", "EpisodesView", "ServedName", "CompareChart", "ConfigView",
           "LiveSettings", "RunView"]


class StageView(TypedDict):
    """Which stage of a runner's staged recipe a run is, as its config says."""

    name: Any
    index: Any
    stages: Any
    previous_run: Any


class ConfigParts(TypedDict):
    """``config_parts``' answer: a run's config split the way its page shows it."""

    spec: Any  #: the resolved spec (a dict), or the config itself where it is not an object
    overrides: Any  #: the runner's overrides, a list of ``key=value`` or a dict
    recipe: Any
    command: str | None
    versions: Any
    git: Any
    constraints_differ: dict[str, Any] | None  #: package to the versions that differ from constraints.txt
    constraints_text: str | None  #: those packages in words; None when none differs or nothing was compared
    #: the packages against constraints.txt in words: ``none``, the packages, ``no constraints.txt to compare with``
    #: or ``not recorded`` (``core.stats.constraints_words``)
    constraints_words: str
    sweep: str | int | None
    init_from: Any
    reproduces: NotRequired[Any]  #: absent where the config is not an object
    stage: StageView | None
    runner: bool  #: whether the runner's record with its spec is on the config


class HeldOutPair(TypedDict):
    """One held-out figure before and after, as the summary keeps it, and which way is better."""

    label: str
    metric: str
    before: Any
    after: Any
    better: str  #: ``higher`` or ``lower``


class HeadlineItem(HeldOutPair):
    """One item of ``headline``: the held-out pair with its change, its text and how sure it is."""

    change: float | None
    before_text: str
    after_text: str
    n: Any  #: the held-out prompts (None for a loss)
    stats: HoldoutResult | None  #: as the job kept it on the summary (None for a loss)
    certainty: str | None
    significance: str | None
    groups: list[str]  #: the per-category lines, where the held-out rows name one


class ExpectLineView(TypedDict):
    """One line of the runner's expect verdict as the page shows it: its key, what was wanted and seen, whether it
    held, where written.

    The stored JSON view of the runner's ``ExpectLine`` (``whileai/runner/expect.py``, a layer above this one): the
    same keys in the same order, each read from the run's summary as whatever was stored there.
    """

    key: Any
    want: Any
    seen: Any
    passed: Any
    where: Any


class ExpectView(TypedDict):
    """``expect_view``'s answer: the verdict, how many lines failed, each line, and the recipe checked."""

    passed: bool
    failed: int
    lines: list[ExpectLineView]
    recipe: str | None


class ExpectBrief(TypedDict):
    """The verdict alone, as a runs list shows it."""

    passed: bool
    failed: int


class ResumedView(TypedDict):
    """How often a run was continued from a checkpoint, and from which step (as its summary says)."""

    times: Any
    from_step: Any


class _FactFields(TypedDict):
    """The facts a run's page and a runs-list row both show (``facts``), but the expect verdict, which each shows in its
    own cut."""

    method: str | None
    recipe: str | None
    sweep: str | int | None
    holdout: HeadlineItem | None
    verdict: Any
    status_text: str
    alarms: int
    phase: str | None
    resumed: ResumedView | None
    started: float | None
    duration_s: float | None


class Facts(_FactFields):
    """``facts``' answer: a run's one-line facts, with the expect verdict line by line."""

    expect: ExpectView | None


class ListRow(_FactFields):
    """``list_row``'s answer: the record's fields a runs list shows (None where the record lacks one), then its
    facts, with the expect verdict cut to its count."""

    id: str | None
    name: str | None
    status: str | None
    kind: str | None
    dataset: str | None
    step: int | None
    total_steps: int | None
    created_at: float | None
    updated_at: float | None
    finished_at: float | None
    cost_usd: float | None
    cost_basis: CostBasis | None
    error: str | None
    expect: ExpectView | ExpectBrief | None


class ChartGroup(TypedDict):
    """One chart of ``chart_groups``: its id, title and the metric names drawn on it."""

    id: str
    title: str
    metrics: list[str]


class CurvePoint(TypedDict):
    """One point of the HackMonitor's curve: proxy and gold at a step."""

    step: Any
    proxy: Any
    gold: Any


class AlarmView(TypedDict):
    """One alarm the HackMonitor raised: its step and kind, what the kind means, and its message."""

    step: Any
    kind: Any
    meaning: str
    text: str


class MonitorView(TypedDict):
    """``monitor_view``'s answer: the HackMonitor's series, curve, alarms, evaluations, settings and notes."""

    metrics: list[str]
    curve: list[CurvePoint]
    alarms: list[AlarmView]
    evaluations: Any
    settings: dict[str, Any] | None  #: the monitor's settings as its summary kept them
    notes: list[str]


class ConfigRow(TypedDict):
    """One row of ``compare_config``: a dotted config key, each run's value, where it is set, and whether they differ."""

    key: str
    values: list[Any]
    present: list[bool]
    differs: bool


class LaidChart(ChartGroup):
    """One chart of a run page's layout (``_charts.layout``): a chart group and the repeated series it stands for."""

    also: dict[str, str]  #: a dropped repeat's name to the name drawn in its place


class ChartSection(TypedDict):
    """One section of a run page's charts: its id and title, whether it starts folded, and its charts."""

    id: str
    title: str
    collapsed: bool
    charts: list[LaidChart]


class ChartLayout(TypedDict):
    """``_charts.layout``'s answer: the sections, the once-logged scalars (their last value), and every repeat."""

    sections: list[ChartSection]
    scalars: dict[str, float]
    aliases: dict[str, str]


class SetupField(TypedDict):
    """One field of a run's setup (base model, LoRA rank, batch size...): its value and who set it."""

    value: Any
    source: str  #: ``config``, ``default`` or ``trainer``


class WorkerLog(TypedDict):
    """``_setup.worker_log``'s answer: the run's newest job, the log's text from ``offset``, its size and a note."""

    job: str | None
    text: str
    offset: int
    size: int
    cut: NotRequired[bool]  #: whether the text starts past a cut line (only where the log was read)
    note: str | None


class RunsPage(TypedDict):
    """``_list.list_page``'s answer: one page of run records, the total, each filter's choices, and the paging."""

    records: list[RunRecord]
    total: int
    choices: dict[str, list[str]]  #: filter name to the values the account's runs hold
    page: int
    per_page: int
    pages: int
    filters: dict[str, str]  #: the filters that were given


class EpisodeStep(TypedDict):
    """One message of an episode as its page shows it: who spoke and what; an assistant's turn and calls, a tool's
    name, call id and error."""

    role: str
    text: str
    turn: NotRequired[int]  #: an assistant's turn, counted from 1
    calls: NotRequired[list[dict[str, str]]]  #: an assistant's tool calls: ``{"id", "name", "arguments"}``
    name: NotRequired[str]  #: a tool's
    call_id: NotRequired[str]
    error: NotRequired[str | None]  #: the error a tool's reply reports (``tool_error``), None for a result


class EpisodeSide(TypedDict):
    """One side (before or after) of an episode: passed or not, why, how many turns, why it stopped, its steps."""

    passed: bool
    reason: str
    turns: int | None
    stopped: str | None
    steps: list[EpisodeStep]


class EpisodePair(TypedDict):
    """One task's episode before and after, and what changed (a name from ``CHANGES``)."""

    task_id: str
    change: str
    before: EpisodeSide | None
    after: EpisodeSide | None


class PassedCount(TypedDict):
    """Episodes passed on one side, of how many it played."""

    passed: int
    of: int


class EpisodesView(TypedDict):
    """``_episodes.episodes_view``'s answer: each pair, the pairs per change, the passes per side, those left out."""

    pairs: list[EpisodePair]
    counts: dict[str, int]
    passed: dict[str, PassedCount]  #: ``before`` and ``after``
    left_out: int


class ServedName(TypedDict):
    """A name the account serves from a run, as the run page lists it: its version and where to call it."""

    name: str
    version: int
    endpoint: str
    baseModel: str | None


class CompareChart(ChartGroup):
    """One chart of the compare page: one metric, and whether every run compared logged it."""

    in_all: bool


class ConfigView(ConfigParts):
    """A run page's config section: the config's parts and the commands that make the run again."""

    reproduce: list[dict[str, str]]  #: ``{"label", "text"}``, the most exact first


class LiveSettings(TypedDict):
    """How a running run's page polls: every ``poll_ms``, into charts of ``buckets`` buckets."""

    poll_ms: int
    buckets: int


class RunView(TypedDict):
    """A run page's data (``routes._run_view``): the record, its facts and figures, charts, sections and what its
    summary kept; a summary's own parts (``delta``, ``selection``, ``export``, ``training``) as the job wrote them."""

    run: dict[str, Any]  #: the record without its config and summary
    facts: Facts
    headline: list[HeadlineItem]
    delta: dict[str, Any] | None
    charts: list[LaidChart]
    sections: list[ChartSection]
    scalars: dict[str, float]
    setup: dict[str, SetupField] | None
    series: dict[str, ChartSeries]
    unstepped: int
    monitor: MonitorView | None
    selection: dict[str, Any] | None
    export: dict[str, Any] | None
    training: dict[str, Any] | None
    episodes: EpisodesView | None
    adapter: Any
    served: list[ServedName]
    config: ConfigView
    summary_other: dict[str, Any]  #: the summary's keys no section above shows
    live: LiveSettings
