"""The pieces of a run's ``training`` summary that the job hands from one step to the next, typed.

``body.run_job`` writes the summary as JSON (``run.note(training=...)``) and returns it. Each piece here goes
into that JSON as it is, key for key, so each is a TypedDict: what a method's ``fit`` adds (:class:`FitFields`;
``rm.RMFit``, ``sft.SFTFit``, ``dpo.DPOFit`` and :class:`GRPOFit` add their own beside it, GRPO's here because
``grpo`` and ``_episodes`` both make it), the held-out outcomes and how sure the result is
(:class:`HeldOutStats`), what the data gates mapped (:class:`DataGates`), the ``resumed`` note of a run
continued from a checkpoint (:class:`ResumedNote`), what the run records of its base (:class:`BaseNotes`),
what the trainer really ran with (:class:`TrainerSetup`), a proxy reward against the exact judge
(:class:`RewardVsExact`) and the export settings a method trained with (:class:`ExportOptions`). The summary
itself is :class:`TrainingSummary`, made of these pieces (with :class:`TrainedBatch`, :class:`WorldFields` and
:class:`CaseNotes`).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from whileai.core.stats import GroupResults, HoldoutResult
from whileai.jobs._grpo_watch import GroupStats

__all__ = ["FitFields", "GRPOFit", "StartFilterReport", "Outcomes", "HeldOutStats", "DataGates", "ResumedNote", "BaseWeights", "BaseNotes",
           "TrainerSetup", "RewardVsExact", "ExportOptions", "TrainedBatch", "WorldFields", "PairsByFailure",
           "CaseNotes", "TrainingSummary", "NoSummary"]


class FitFields(TypedDict, total=False):
    """What every method's ``fit`` adds to the summary, which the job reads back for its log line.

    A method adds its own fields beside these (a reward model's pairs and threshold, GRPO's rewards and
    sampled groups); the summary keeps them all, in the order the method wrote them.
    """

    rows: int  # the train-side rows the trainer's examples hold (a pair counts both of its rows)
    steps: int  # the optimizer steps the trainer took
    left_out_too_long: int  # examples left out for being longer than the model's context (never cut)
    trainer_received: int  # the examples the trainer's dataset held
    unit: str  # what one example is: rows, pairs, prompts or episodes (rows where a method says nothing)


class StartFilterReport(TypedDict):
    """What the start filter (``_start_filter.start_filtered``, ``prompt_filter_pool``) played and kept: the
    training summary's ``start_filter``."""

    pool: int  # training prompts the start played
    samples_per_prompt: int  # the run's generations: a group as GRPO would sample it
    temperature: float
    episodes: int
    kept: int  # prompts whose episodes were not all paid the same
    same_paid: dict[str, int]  # the other prompts, by what every one of their episodes was paid ("1.0": all passed)
    mean_paid: float  # the mean paid over every episode played
    seconds: float


class GRPOFit(FitFields, GroupStats, total=False):
    """What GRPO's fit adds to the run's training summary, beside every method's fields and the group watch's."""

    prompts: int
    tools: list[str]  # every row's tool names, first seen first (an environment's: its tool methods)
    tools_per_prompt: bool  # each prompt rendered with its own row's tools
    environment: str  # in an environment (``_episodes.fit_episodes``): its name and turn cap
    max_turns: int
    generations: int
    prompts_per_step: int
    reward: list[str]
    reward_weights: list[float] | None
    monitor: str  # what the run's summary says of the hack monitor (it notes its own summary apart)
    start_filter: StartFilterReport  # with prompt_filter_pool: what the start's episodes chose


class ExportOptions(TypedDict, total=False):
    """The export settings a run gave (TRAIN_EXPORT_KNOBS its method reads), the ones it left unset left out: the
    exporter's own default then holds (``domain.rows.context.export_options``)."""

    mask_mode: str  # which assistant turns carry the loss: assistant or final (sft)
    unroll: bool  # one example per assistant turn (sft)
    strip_think: bool  # drop reasoning text from the trained assistant turns (sft, dpo)
    max_tool_output_chars: int  # cut each tool output to this many characters (sft, dpo)


class Outcomes(TypedDict):
    """Each side's per-prompt outcomes (1: passed), in prompt order; None for a side without them."""

    before: list[int] | None
    after: list[int] | None


class HeldOutStats(TypedDict, total=False):
    """The held-out outcomes before and after and how sure the result is; empty without per-prompt outcomes."""

    outcomes: Outcomes
    stats: HoldoutResult  # whileai.core.stats.holdout_result over the outcomes
    by_group: GroupResults  # whileai.core.stats.group_results, where the held-out prompts name a group


class DataGates(TypedDict):
    """What the data gates changed or refused in the train-side rows (``domain.rows.datagate.gate_rows``)."""

    tool_names_mapped: int  # tool names the OpenAI wire refuses, renamed
    types_mapped: dict[str, int]  # JSON-Schema types mapped to the wire's, by type
    refused_rows: int  # rows with a problem no mapping fixes


class ResumedNote(TypedDict, total=False):
    """The run's ``resumed`` note: the platform's fields from when it resumed the run
    (``platform.launcher.jobs``), then the job's: the checkpoint step it continued from and how many times
    the run was resumed."""

    requested_at: float
    from_job: str
    earlier_seconds: float  # the interrupted jobs' time, which the run's seconds (and so its cost) count
    from_step: int
    times: int


class BaseWeights(TypedDict):
    """Which bytes the base is: their SHA-256 and what was hashed, or None and why they could not be read."""

    sha256: str | None
    of: NotRequired[str]  # the GGUF file, or the folder whose weights were hashed
    why: NotRequired[str]  # where sha256 is None: the error that kept the bytes from being read


class BaseNotes(TypedDict, total=False):
    """What the run records of its base beyond its name (``_loading.base_notes``); ``base_weights`` always."""

    #: the tool convention the tokenizer was given: ``whileai.kit.use_tool_format``'s answer (requested, used,
    #: renders_tools, why, parser), strings and a flag
    tool_format: dict[str, str | bool]
    base_import: dict[str, Any]  # a GGUF base's import record (``whileai.kit.gguf_record``), its JSON
    base_weights: BaseWeights


class TrainerSetup(TypedDict, total=False):
    """What the trainer really runs with, read from its arguments and model (``system.setup``; the run's ``setup``
    note, and the summary's LoRA rank and batch sizes). A key is missing where the trainer does not say."""

    base_model: str
    lora_rank: int
    lora_alpha: int | None
    batch_per_device: int
    gradient_accumulation: int
    batch_size: int  # the effective batch: per device x accumulation x processes


class RewardVsExact(TypedDict):
    """The held-out proxy reward against the exact judge, before and after, on the same prompts
    (``_rewards.proxy_vs_gold``): the means per prompt, and whether the reward rose more than the task."""

    reward_before: float
    reward_after: float
    exact_before: float
    exact_after: float
    gap_change: float  # per prompt, (reward after - before) - (exact after - before), averaged
    prompts: int
    reward_rose_more: int  # prompts where the reward rose more than the task
    task_rose_more: int
    p: float  # the exact two-sided sign test over the prompts where the two differ


class TrainedBatch(TypedDict, total=False):
    """The LoRA rank and batch sizes the trainer ran with, as the summary repeats them from :class:`TrainerSetup`;
    a key is missing where the trainer does not say."""

    lora_rank: int
    batch_per_device: int
    gradient_accumulation: int
    batch_size: int


class WorldFields(TypedDict):
    """How many processes trained the run and on how many nodes, and, past one process, how they shared the
    model's state (the spec's ``strategy``)."""

    world_size: int  # the processes this job really ran
    processes: int  # the spec's processes per node
    nodes: int
    strategy: NotRequired[str]


class PairsByFailure(TypedDict):
    """A reward model's held-out pairs it ranked right per failure kind (``{"right", "pairs"}``), before and
    after; before is None where nothing was measured before."""

    before: dict[str, dict[str, int]] | None
    after: dict[str, dict[str, int]]


class CaseNotes(BaseNotes, total=False):
    """The summary's fields that depend on the case, in the order the summary lists them: a proxy reward against
    the exact judge, what the run records of its base, the start run, a resume, the reward model's cut and its
    pairs per failure kind, why there is no cost estimate, and why before/after is missing."""

    reward_vs_exact: RewardVsExact
    init_from: str  # the run this stage started from
    before_read_back: str  # the start run whose kept "after" is this job's "before"
    resumed: ResumedNote
    job_seconds: float  # this job's own time, where seconds counts the interrupted jobs' time too
    threshold: float  # rm: the cut that best separates the held-out rows, and its accuracy
    threshold_row_accuracy: float | None
    pairs_by_failure: PairsByFailure
    cost_basis: str  # why there is no cost estimate (a CPU has no GPU price)
    holdout_note: str | None  # why before/after is missing


class TrainingSummary(TrainedBatch, WorldFields, FitFields, HeldOutStats, CaseNotes):
    """A run's ``training`` summary, which ``body.run_job`` notes on the run (as JSON) and returns: what trained
    on which base, the held-out result before and after, where and how long it trained, what the data gates did,
    the method's own fields, how sure the result is and the notes of the case.

    A method's ``fit`` may add fields of its own beside :class:`FitFields` (``rm.RMFit``, ``sft.SFTFit``,
    ``dpo.DPOFit``, :class:`GRPOFit`); the summary holds them too, where the method's fields stand.
    """

    method: str
    base_model: str | None
    before: float | None
    after: float | None
    metric: str
    holdout: str | None  # the held-out dataset's name
    holdout_prompts: int | None
    holdout_digest: str | None  # which prompts, in which order
    holdout_rows_given: int
    seconds: float
    train_seconds: float
    gpu: str | None  # in GPU_USD_PER_HOUR's spelling; None on a CPU
    device: str
    compute: dict[str, object]  # the CPU kernel path and threads the float sums took (``_environment.compute_path``)
    target: str
    data_gates: DataGates


class NoSummary(TypedDict):
    """What ``body.run_job`` answers on a rank past the first: nothing, since rank 0 writes the summary."""
