"""The run spec's models: :class:`RunSpec` and one model per method (SFTSpec, GRPOSpec, DPOSpec, RMSpec), each knob
declared on its method's model, with the rules their validation applies once every knob is in its range (what the
knobs cannot do together: a batch and the processes, a step's tokens and the target's memory, the reward knobs and
the environment). Those rules read the methods' models, so they live beside them; the checks of plain values they
call are ``_spec_checks``'s. ``whileai.core.spec`` re-exports the public names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from whileai.core import defaults as d
from whileai.core._knob import _unset, is_whole, knob, knob_fields, knob_of
from whileai.core._spec_checks import is_python_ref, micro_problem, split_problem
from whileai.core._spec_versions import RETIRED, SPEC_VERSION, canonical
from whileai.core.knobs import many_value
from whileai.core.runnerrecord import RunnerRecord

__all__ = [
    "RunSpec",
    "SFTSpec",
    "GRPOSpec",
    "DPOSpec",
    "RMSpec",
    "SPEC_MODELS",
    "environment_reward_problems",
    "step_memory",
    "step_problem",
]

Method = Literal["sft", "grpo", "dpo", "rm"]


_LR_HELP = "peak learning rate of the LoRA weights (after a short warmup; lr_scheduler_type says what follows)"
_LR_REASON = ("LoRA wants ~10x the full fine-tuning rate (LoRA Without Regret, Schulman et al. 2025); "
              "the papers' values are full fine-tuning")
_STEPS_HELP = "optimizer steps of the run"
_BALANCE = knob(True, choices=(True, False), help="every prompt contributes the same number of pairs or prompts",
                reason="a task with many rollouts should not dominate the update")
_BATCH = knob(d.TRAIN_BATCH_SIZE, range=(1, 4096), help="sequences per optimizer step",
              reason="TRAIN_BATCH_SIZE: fits a 1.5B model's batch on an A10G at TRAIN_MAX_LENGTH")
_STRIP_THINK = knob(True, surface="export", choices=(True, False),
                    help="drop reasoning text from the trained assistant turns (export_dataset's strip_think)",
                    reason="an adapter trained on stripped turns answers at once",
                    source="export.training_rows")
_MAX_TOOL_OUTPUT = knob(None, surface="export", range=(1, 100_000_000),
                        help="cut each tool output to this many characters (None: keep it whole)",
                        reason="the exporter's own default: nothing is cut unless asked",
                        source="Lambert 2025, RLHF, chapter Tool Use (context cost of tool output)")


#: A policy's environment (SFT and GRPO): where its held-out episodes are played (both methods) and its rollouts
#: sampled (GRPO); None: single-turn prompts judged by their first call
_ENVIRONMENT: Any = Field(None, pattern=rf"^(?:{d.TRAIN_ENVIRONMENT_PATTERN})$")
_MAX_TURNS: Any = Field(None, ge=d.TRAIN_MAX_TURNS_RANGE[0], le=d.TRAIN_MAX_TURNS_RANGE[1])


class RunSpec(BaseModel):
    """What every method's run carries: where it runs, what it starts from, and the knobs every method reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec_version: int = SPEC_VERSION
    method: Method
    #: the base the LoRA trains on (resolution fills it: the kit's demo base when none is named)
    base_model: str | None = None
    target: str | None = None
    holdout: str | None = None
    init_from: str | None = None
    gpu: str | None = None
    #: processes per node and nodes of the job (the runner's ``target`` group); batch sizes stay global
    processes: int = Field(1, ge=1, le=d.MAX_PROCESSES_PER_NODE)
    nodes: int = Field(1, ge=1, le=d.MAX_NODES)
    #: config keys the trainer does not read, kept on the run as given (a user's notes)
    extra: dict[str, Any] | None = None
    #: key -> where its value came from (typed on the command line, recipe file:line, inherited, default)
    provenance: dict[str, str] | None = None
    #: the experiment runner's record of the recipe and stage that started this run (``core.runnerrecord``)
    runner: RunnerRecord | None = None
    #: set by the job launcher for the job's own copy of the spec
    run_id: str | None = None
    dataset: str | None = None
    init_adapter: str | None = None

    seed: int = knob(0, surface="argument", range=(0, 2**32 - 1), help="seed of every random draw of the job",
                     reason="runs are reproducible by default")
    min_mixed_tasks: int = knob(d.TRAIN_MIN_MIXED_TASKS, surface="argument", range=(1, 10_000_000),
                                help="fewer mixed tasks than this warns before training (grouped methods)",
                                reason="TRAIN_MIN_MIXED_TASKS", source="TRAIN_MIN_MIXED_TASKS")
    lora_rank: int = knob(d.TRAIN_LORA_R, range=(1, 1024), paper=64, source="QLoRA, arXiv:2305.14314",
                          help="rank of the LoRA update", reason="TRAIN_LORA_R")
    lora_alpha: int = knob(d.TRAIN_LORA_ALPHA, range=(1, 4096), paper=16, source="QLoRA, arXiv:2305.14314",
                           help="LoRA scaling numerator (the update is scaled by alpha / rank)", reason="TRAIN_LORA_ALPHA")
    holdout_rows: int = knob(d.TRAIN_HOLDOUT_MAX_ROWS, range=(1, 1_000_000),
                             help="held-out rows measured before and after (at most; subsampled with the seed)",
                             reason="TRAIN_HOLDOUT_MAX_ROWS: before+after under a minute on a CPU")
    eval_max_new_tokens: int = knob(d.TRAIN_EVAL_MAX_NEW_TOKENS, range=(1, 32768),
                                    help="token cap of each greedy held-out reply, before and after (a prompt whose "
                                         "gold reply is longer cannot pass: the job warns and counts them)",
                                    reason="TRAIN_EVAL_MAX_NEW_TOKENS: one tool call or a short answer; BFCL's "
                                           "parallel_multiple calls run past it")
    save_steps: int = knob(d.TRAIN_SAVE_STEPS, range=(0, 1_000_000),
                           help="optimizer steps between checkpoints of the trainer's state, which "
                                "`python -m whileai resume RUN_ID` continues from (0: none; a run of this many "
                                "steps or fewer saves none)",
                           reason="TRAIN_SAVE_STEPS: a preempted GPU loses at most a few minutes")
    lr_scheduler_type: Literal["constant_with_warmup", "linear", "cosine"] = knob(
        d.TRAIN_LR_SCHEDULER, choices=("constant_with_warmup", "linear", "cosine"), paper="cosine",
        source="InstructGPT, arXiv:2203.02155 (its SFT trained with cosine decay)",
        help="the learning-rate schedule after the warmup",
        reason="TRAIN_LR_SCHEDULER; on the kit's rm_tooluse cosine measured no better than constant")
    strategy: Literal["ddp", "fsdp", "zero2", "zero3"] = knob(
        "ddp", choices=d.TRAIN_STRATEGIES, source="accelerate (DDP, FSDP, DeepSpeed ZeRO)",
        help="how processes share the work past one: ddp replicates the model; fsdp, zero2 and zero3 shard it "
             "(read only when processes x nodes > 1)",
        reason="a LoRA's trainable state is small: replicating it costs least")

    batch_per_device: int | None = knob(
        None, range=(1, 4096), source="transformers TrainingArguments.gradient_accumulation_steps",
        help="the most sequences (GRPO: completions) one device holds at once; the rest of its share of the "
             "effective batch is accumulated over micro-batches, so the spec trains the same on any device "
             "(None: the whole share at once)",
        reason="a 4-8B base at TRAIN_MAX_LENGTH fills a GPU before the effective batch does; accumulating keeps "
               "the effective batch, and with it the learning rate's meaning, unchanged")

    tool_format: Literal["auto", "native", "hermes"] = knob(
        "auto", choices=("auto", "native", "hermes"),
        source="Hermes 2 Pro function-calling format (NousResearch), as Qwen2.5's template writes it",
        help="how tools reach the model: the base's own template where it renders tools (auto), always its own "
             "(native, refused where it drops tools), or the hermes convention (<tools> in the system turn, "
             "<tool_call>{json}</tool_call> replies)",
        reason="measured: SmolLM2-135M-Instruct's template renders the same text with tools= as without, so a "
               "native-only default would train a model that never sees a tool schema")
    report_to: list[Literal["wandb", "mlflow", "trackio"]] = knob(
        [], many=True, choices=d.MIRROR_TRACKERS, source="transformers TrainingArguments.report_to",
        help="other trackers that get a copy of the run: its points, resolved spec, held-out result and status "
             "(a list, or a comma string: wandb,mlflow; offline unless the tracker is configured to go online)",
        reason="a run's data stays on the platform unless asked; each mirror needs pip install 'whileai[mirror]'")

    #: declared by each method's model with its own default, range and paper
    learning_rate: float
    steps: int | None

    @model_validator(mode="before")
    @classmethod
    def _read_old(cls, data: Any) -> Any:
        """Aliases renamed and retired keys dropped, so a record of any version reads; a comma string of a list
        knob (``report_to="wandb,mlflow"``) read as its list."""
        if isinstance(data, Mapping):
            data = {k: v for k, v in canonical(data).items() if k not in RETIRED and not (v is None and _unset(cls, k))}
            for name in ("report_to", "reward", "reward_weights"):
                if name in data:
                    data[name] = many_value(data[name], numbers=name == "reward_weights")
        return data

    @model_validator(mode="after")
    def _in_range(self) -> RunSpec:
        from whileai.core.knobs import check_knob

        problems = []
        for name in knob_fields(type(self)):
            value = getattr(self, name)
            if value is None:
                continue
            problem = check_knob(name, value, self.method, {self.method: knob_of(type(self), name).row()},
                                 whole=is_whole(type(self), name))
            if problem:
                problems.append(problem)
        problems.extend(environment_reward_problems(dict(self)))
        if not problems:  # the products of knobs are judged once each knob is in its range
            problems.extend(_batch_problems(self))
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def world_size(self) -> int:
        """Processes over all nodes: what a global batch is divided across."""
        return self.processes * self.nodes

    def knobs(self) -> dict[str, Any]:
        """The knobs this method's trainer reads, as a plain dict."""
        return {name: getattr(self, name) for name in knob_fields(type(self))}


class SFTSpec(RunSpec):
    """Supervised fine-tuning (TRL ``SFTTrainer``) on the passing rows."""

    method: Literal["sft"] = "sft"
    learning_rate: float = knob(2e-4, surface="argument", range=(1e-7, 1e-2), paper=2e-4,
                                source="QLoRA, arXiv:2305.14314 (LoRA on 7B-13B)", help=_LR_HELP, reason=_LR_REASON)
    steps: int | None = knob(None, surface="argument", range=(1, 1_000_000), source="epochs decide",
                             help=_STEPS_HELP + " (None: epochs decide)", reason="epochs decide the length")
    epochs: float | None = knob(3.0, surface="argument", range=(0.0, 100.0), open_low=True, paper=2.0,
                                source="Tulu 3, arXiv:2411.15124",
                                help="passes over the rows (not read when steps is set)",
                                reason="a few passes over a small tool-use set")
    batch_size: int = _BATCH
    metric: Literal["pass_rate", "loss"] = knob("pass_rate", choices=("pass_rate", "loss"),
                                                help="held-out measurement: first-action pass rate, or loss on "
                                                     "the passing rows (lower is better)",
                                                reason="the pass rate is what a tool-using agent is judged by")
    mask_mode: Literal["assistant", "final"] = knob(
        "assistant", surface="export", choices=d.EXPORT_MASK_MODES, paper="assistant",
        source="Lambert 2025, RLHF, chapter Instruction Tuning (multi-turn masking)",
        help="which assistant turns carry the loss", reason="the exporter's own default")
    unroll: bool = knob(False, surface="export", choices=(False, True),
                        source="Lambert 2025, RLHF, chapter Instruction Tuning (multi-turn masking)",
                        help="one example per assistant turn", reason="the exporter's own default")
    strip_think: bool = _STRIP_THINK
    max_tool_output_chars: int | None = _MAX_TOOL_OUTPUT
    #: the environment the held-out episodes are played in (the rows are its gold episodes); None: the first action
    environment: str | None = _ENVIRONMENT
    #: a held-out episode's tool-calling rounds; None: the domain's EPISODE_MAX_TURNS. Read only with an environment.
    max_turns: int | None = _MAX_TURNS


class GRPOSpec(RunSpec):
    """Group-relative policy optimisation (TRL ``GRPOTrainer``) on tasks with mixed outcomes."""

    method: Literal["grpo"] = "grpo"
    learning_rate: float = knob(1e-5, surface="argument", range=(1e-8, 1e-3), paper=1e-6,
                                source="DeepSeekMath, arXiv:2402.03300 (full fine-tuning)", help=_LR_HELP,
                                reason=_LR_REASON)
    steps: int = knob(200, surface="argument", range=(1, 1_000_000),
                      source="Lambert 2025, RLHF, chapter Reinforcement Learning", help=_STEPS_HELP,
                      reason="a few hundred steps of prompts_per_step prompts")
    generations: int = knob(8, surface="argument", range=(2, 64), paper=64, source="DeepSeekMath, arXiv:2402.03300",
                            help="completions sampled per prompt (the group); None in a recipe: the dataset's "
                                 "rollouts per task", reason="TRL's num_generations default")
    beta: float = knob(0.04, surface="argument", range=(0.0, 1.0), paper=0.04, source="DeepSeekMath, arXiv:2402.03300",
                       help="weight of the KL penalty against the start policy (0: no reference model)",
                       reason="ProRL (arXiv:2505.24864) kept a KL penalty over long runs; TRL defaults to 0")
    max_completion_length: int = knob(d.TRAIN_EVAL_MAX_NEW_TOKENS, surface="argument", range=(1, 32768), paper=1024,
                                      source="DeepSeekMath, arXiv:2402.03300",
                                      help="token cap of a sampled completion",
                                      reason="TRAIN_EVAL_MAX_NEW_TOKENS: the reward judges the first action")
    loss_type: Literal["bnpo", "grpo", "dr_grpo"] = knob(
        "bnpo", surface="argument", choices=("bnpo", "grpo", "dr_grpo"), paper="bnpo",
        source="DAPO token-level loss, arXiv:2503.14476",
        help="bnpo: token-level over the batch (DAPO); grpo: per-sequence mean; dr_grpo: no length normalisation",
        reason="DAPO's token-level loss on one device")
    temperature: float = knob(1.0, surface="argument", range=(0.0, 2.0), open_low=True, paper=1.0,
                              source="DAPO, arXiv:2503.14476 (ProRL, arXiv:2505.24864, used 1.2)",
                              help="sampling temperature of the completions (None in a recipe: the rows' own)",
                              reason="sample the policy itself")
    truncated: Literal["mask", "zero"] = knob(
        "mask", surface="argument", choices=d.TRAIN_TRUNCATED, paper="mask",
        source="DAPO overlong filtering, arXiv:2503.14476",
        help="a completion cut by the token cap: masked out of the loss, or scored 0",
        reason="a cut reply scored 0 teaches shorter replies before the task")
    epsilon_high: float = knob(0.28, range=(0.0, 10.0), paper=0.28, source="DAPO clip-higher, arXiv:2503.14476",
                               help="upper clip of the policy ratio (clip-higher)", reason="DAPO's value")
    scale_rewards: Literal["group", "batch", "none"] = knob(
        "group", choices=("group", "batch", "none"), paper="none", source="Dr. GRPO, arXiv:2503.20783",
        help="how advantages are scaled: by the group's std, the batch's, or not at all",
        reason="the GRPO paper's and TRL's choice")
    balance: bool = _BALANCE
    prompts_per_step: int = knob(d.TRAIN_GRPO_PROMPTS_PER_STEP, range=(1, 4096),
                                 source="TRL GRPOConfig generation_batch_size (prompts x num_generations a step)",
                                 help="prompts per optimizer step, each sampled `generations` times (all processes "
                                      "together)",
                                 reason="TRAIN_GRPO_PROMPTS_PER_STEP: with 2 a step on the kit, one update flipped "
                                        "a whole task kind; a real base on a CPU pays per prompt token")
    prompt_source: Literal["mixed", "gold"] = knob(
        "mixed", choices=("mixed", "gold"), paper="gold",
        source="DeepSeekMath, arXiv:2402.03300 (every question of the set, scored against its reference answer)",
        help="which tasks GRPO prompts: mixed (tasks whose rows hold both a pass and a fail) or gold (every task "
             "with a gold first action; the policy's own samples make the group, as for a benchmark's reference "
             "calls)",
        reason="rollouts of the policy tell which tasks a group can disagree on; a benchmark has only its gold")
    prompt_filter_pool: int | None = knob(
        None, range=(1, 1_000_000),
        source="DAPO dynamic sampling, arXiv:2503.14476 (groups whose samples are all right or all wrong are dropped)",
        help="in an environment: before training, the start policy plays `generations` episodes of this many training "
             "prompts (drawn with the seed) at `temperature`, each paid as the trainer pays it, and GRPO trains only "
             "on the prompts whose episodes were not all paid the same (None: off, every prompt trains). Read only "
             "with an environment",
        reason="off: a group paid all alike has no advantage, but choosing the prompts costs the pool's episodes")
    generation_backend: Literal["hf", "vllm"] = knob(
        "hf", choices=d.TRAIN_GENERATION_BACKENDS, source="TRL GRPOConfig use_vllm",
        help="where completions are sampled: hf (the trainer's generate) or vllm (colocated, needs a GPU)",
        reason="runs anywhere; vllm is faster where there is a GPU")
    vllm_mode: Literal["colocate", "server"] = knob(
        "colocate", choices=d.TRAIN_VLLM_MODES, source="TRL GRPOConfig vllm_mode; trl vllm-serve",
        help="with generation_backend=vllm: colocate (vLLM in the trainer's processes, on their GPUs) or server "
             "(trl vllm-serve on a GPU of its own on node 0: processes must leave one GPU free there)",
        reason="colocate needs no spare GPU; server mode is for bases whose training and generation do not fit "
               "one GPU together")
    reward: list[str] = knob(
        ["first_action"], surface="argument", many=True, choices=d.TRAIN_REWARDS,
        pattern=d.TRAIN_REWARD_PYTHON_PATTERN, pattern_hint="python:MODULE:FUNCTION",
        paper="first_action", source="Tool-N1, arXiv:2505.00024 (binary first-call reward)",
        help="what GRPO optimises: first_action (1 when the reply's first action is the gold one), fine_grained "
             "(format, tool names, argument names and values, ToolRL's decomposition, in [0, 1]), rm (a finished "
             "reward-model run, named by reward_model), or python:MODULE:FUNCTION (your own TRL reward function); "
             "several are summed with reward_weights",
        reason="the exact judge is the task itself: a reward that pays for anything else can be hacked")
    reward_weights: list[float] | None = knob(
        None, surface="argument", many=True, range=(-100.0, 100.0), source="TRL GRPOConfig reward_weights",
        help="one weight per reward, in the order of reward (None: 1.0 each)",
        reason="TRL sums the rewards with equal weights unless told otherwise")
    reward_model: str | None = knob(
        None, surface="argument", pattern=d.TRAIN_REWARD_MODEL_PATTERN, pattern_hint="a run id or stages.NAME",
        source="Gao et al., arXiv:2210.10760 (a learned reward model as the proxy)",
        help="the finished rm run that reward=rm scores with: its id, or stages.NAME for an rm stage of the recipe",
        reason="no reward model unless reward names rm")
    turn_reward: Literal["first_action", "fine_grained"] | None = knob(
        None, surface="argument", choices=d.TRAIN_TURN_REWARDS,
        source="ToolRL, arXiv:2504.13958 (fine-grained per-call credit, a process reward)",
        help="in an environment, a second reward beside the episode judge: each call of a rollout scored against "
             "the gold call at its place (first_action: 1 when it is that call; fine_grained: ToolRL's score of it), "
             "averaged over max(calls made, gold calls); None: the episode judge alone. Read only with an "
             "environment",
        reason="off: the episode verdict is the task; a per-turn score pays partial credit, which can be hacked")
    turn_reward_weight: float = knob(
        d.TRAIN_TURN_REWARD_WEIGHT, surface="argument", range=d.TRAIN_TURN_REWARD_WEIGHT_RANGE, open_low=True,
        source="ToolRL, arXiv:2504.13958 (per-call credit); TRL GRPOConfig reward_weights ([1.0, this])",
        help="the weight of turn_reward's score beside the episode judge's 1.0 (read only with turn_reward)",
        reason="TRAIN_TURN_REWARD_WEIGHT: the episode verdict stays the larger term, so a policy cannot trade the end "
               "state for per-turn credit")
    #: the independent judge the HackMonitor's divergence alarm compares against (a finished rm run)
    gold_judge: str | None = None
    #: the HackMonitor: True (on, its defaults), its settings, or False (off); None in a record of before version 3
    #: reads as on, as it ran
    monitor: dict[str, Any] | bool | None = True
    #: the environment whole episodes are played in (TRL's ``environment_factory``, resolved by
    #: whileai.domain.episodes): kit, bfcl or bfcl:CATEGORY, or python:MODULE:CLASS; None: single-turn prompts
    environment: str | None = _ENVIRONMENT
    #: an episode's tool-calling rounds (TRL's ``max_tool_calling_iterations``); None: the domain's
    #: EPISODE_MAX_TURNS. Read only with an environment.
    max_turns: int | None = _MAX_TURNS

    @property
    def vllm_server(self) -> bool:
        """Whether completions come from a vLLM server of the job's own (vllm in server mode), on a spare GPU."""
        return self.generation_backend == "vllm" and self.vllm_mode == "server"


class DPOSpec(RunSpec):
    """Direct preference optimisation (TRL ``DPOTrainer``) on pass/fail pairs of the same task."""

    method: Literal["dpo"] = "dpo"
    learning_rate: float = knob(1e-4, surface="argument", range=(1e-8, 5e-4), paper=1e-6,
                                source="DPO, arXiv:2305.18290 (full fine-tuning)", help=_LR_HELP,
                                reason=_LR_REASON + "; measured here: LoRA DPO at 1e-3 collapsed the held-out rate "
                                                    "0.86 -> 0.55 where 1e-4 raised it to 0.92")
    steps: int = knob(200, surface="argument", range=(1, 1_000_000), source="Lambert 2025, RLHF, chapter Direct "
                      "Alignment", help=_STEPS_HELP, reason="a few epochs over a few hundred pairs")
    beta: float = knob(0.1, surface="argument", range=(0.0, 1.0), open_low=True, paper=0.1,
                       source="DPO, arXiv:2305.18290", help="strength of the implicit KL constraint",
                       reason="the DPO paper's value")
    max_completion_length: int = knob(d.TRAIN_MAX_LENGTH, surface="argument", range=(1, 32768),
                                      source="TRL DPOConfig max_length",
                                      help="token cap of a completion (with the longest prompt: the pair's max_length)",
                                      reason="TRAIN_MAX_LENGTH")
    loss_type: str = knob("sigmoid", surface="argument", choices=d.TRL_DPO_LOSS_TYPES, paper="sigmoid",
                          source="DPO, arXiv:2305.18290", help="DPOTrainer's loss", reason="the DPO paper's loss")
    batch_size: int = _BATCH
    balance: bool = _BALANCE
    pair_source: Literal["rows", "policy", "policy_gold"] = knob(
        "rows", choices=("rows", "policy", "policy_gold"), paper="policy",
        source="Iterative RPO, arXiv:2404.19733 (pairs sampled from the model)",
        help="rows: the dataset's pass and fail rows; policy: the start policy's own judged samples; "
             "policy_gold: the same, with the dataset's passing reply where every sample failed (SPIN)",
        reason="rows need no sampling")
    policy_samples: int = knob(8, range=(2, 64), paper=30,
                               source="Iterative RPO, arXiv:2404.19733 (N=30 samples per prompt)",
                               help="replies sampled per training prompt (pair_source policy*)",
                               reason="2 pairs of 8 samples beat 1 pair of 4 on the kit (33->45 vs 33->39 of 73)")
    nll_weight: float = knob(0.0, range=(0.0, 10.0), paper=1.0, source="Iterative RPO, arXiv:2404.19733 (alpha = 1)",
                             help="weight of an NLL term on the chosen side (RPO's alpha; 0: plain DPO)",
                             reason="plain DPO unless asked")
    strip_think: bool = _STRIP_THINK
    max_tool_output_chars: int | None = _MAX_TOOL_OUTPUT


class RMSpec(RunSpec):
    """A reward model (TRL ``RewardTrainer``) on pass/fail pairs: a LoRA with a fresh score head."""

    method: Literal["rm"] = "rm"
    learning_rate: float = knob(1e-4, surface="argument", range=(1e-8, 1e-3), paper=9e-6,
                                source="InstructGPT, arXiv:2203.02155 (6B reward model)", help=_LR_HELP,
                                reason=_LR_REASON)
    steps: int = knob(200, surface="argument", range=(1, 1_000_000),
                      source="Lambert 2025, RLHF, chapter Reward Modeling", help=_STEPS_HELP,
                      reason="a few epochs over a few hundred pairs")
    batch_size: int = _BATCH
    balance: bool = _BALANCE
    reward_span: Literal["conversation", "first_action"] = knob(
        "conversation", choices=("conversation", "first_action"),
        help="what the model reads of a row: the whole conversation, or the prompt and first assistant turn",
        reason="a judge of whole rows by default; first_action for a GRPO gold judge")
    near_misses: int = knob(0, range=(0, 64),
                            source="FC-RewardBench, arXiv:2509.11963 (wrong parameter values: the commonest "
                                   "tool-call error, 650 of 1,500 pairs)",
                            help="near-miss pairs per passing row (needs reward_span=first_action)",
                            reason="the rows' own pairs unless asked; 3 measured best on rm_tooluse")


SPEC_MODELS: dict[str, type[RunSpec]] = {"sft": SFTSpec, "grpo": GRPOSpec, "dpo": DPOSpec, "rm": RMSpec}


def _batch_problems(spec: RunSpec) -> list[str]:
    """What the knobs, each in its range, cannot do together: a batch that does not divide across the processes or
    into micro-batches, a device that cannot hold one group, a step larger than the target's memory."""
    problems = []
    batch, cap = getattr(spec, "batch_size", None), spec.batch_per_device
    split = split_problem("batch_size", batch, spec.world_size) if isinstance(batch, int) else None
    if split:
        problems.append(split)
    elif isinstance(batch, int) and cap is not None:
        problems.extend(filter(None, [micro_problem(batch // spec.world_size, cap)]))
    groups = getattr(spec, "generations", None)
    if isinstance(groups, int) and cap is not None and cap < groups:
        problems.append(f"batch_per_device={cap} is under generations={groups}: a device holds at least one "
                        f"prompt's group of completions; pass batch_per_device >= {groups} (a multiple of it uses "
                        "the memory fully), or fewer generations")
    return problems + list(filter(None, [step_problem(spec)]))


def environment_reward_problems(values: Mapping[str, Any]) -> list[str]:
    """Why a GRPO spec's reward knobs, or its ``prompt_filter_pool``, do not fit where it plays (``values``: its
    ``environment``, ``reward``, ``reward_weights``, ``turn_reward`` and ``prompt_filter_pool``; any other method's
    has none of them, and no problem).

    In an environment the reward is the episode judge, and per-turn scores come from ``turn_reward``, so a
    ``reward`` other than the default, or ``reward_weights``, would not be read; without one there are no
    episodes, so ``turn_reward`` would not be. The one exception is the user's own code: ``reward`` naming only
    ``python:MODULE:FUNCTION`` rewards is paid in the judge's place (each called as TRL calls a reward in an
    environment run, ``environments=`` included; ``reward_weights`` weigh them), and the episode judge becomes
    what the HackMonitor watches it against; ``turn_reward``, a score beside the judge, is then refused. Each
    problem names the value and the fix.

        environment_reward_problems({"environment": None, "turn_reward": "fine_grained"})   # ["turn_reward=..."]
    """
    return _filter_problems(values) + _reward_problems(values)


def _filter_problems(values: Mapping[str, Any]) -> list[str]:
    """Why ``prompt_filter_pool`` cannot be read where the spec plays: without an environment there are no episodes
    to sample, and in BFCL's the trainer's rollouts play an entry's first user turn while the filter would play all."""
    environment, pool = values.get("environment"), values.get("prompt_filter_pool")
    if pool is None or (environment is not None and str(environment).partition(":")[0] != "bfcl"):
        return []
    where = ("this spec plays no environment (environment=None): single-turn GRPO's prompt_source=mixed already "
             "trains on tasks whose rollouts both pass and fail" if environment is None else
             f"in environment={environment} GRPO's rollouts play only an entry's first user turn while the filter "
             "would play every turn")
    return [f"prompt_filter_pool={pool} chooses GRPO's prompts by the start's sampled episodes, and {where}; leave "
            "prompt_filter_pool None, or play environment=kit or python:MODULE:CLASS"]


def _reward_problems(values: Mapping[str, Any]) -> list[str]:
    """The reward knobs' part of :func:`environment_reward_problems`."""
    environment, turn = values.get("environment"), values.get("turn_reward")
    if environment is None:
        return [] if turn is None else [
            f"turn_reward={turn} scores an episode's calls against its gold calls, and this spec plays no "
            "environment (environment=None); pick an environment (environment=kit, bfcl or python:MODULE:CLASS), or "
            "leave turn_reward None (single-turn prompts: reward=fine_grained pays the first action's parts)"]
    if turn is not None and str(environment).partition(":")[0] == "bfcl":
        return [f"turn_reward={turn} scores a rollout's calls against the gold calls of the whole entry, and in "
                f"environment={environment} GRPO's rollouts play only the entry's first user turn (TRL's tool loop "
                "has no next user turn), so every later turn's gold call would count as missed; leave turn_reward "
                "None (the episode judge, BFCL's check of the turns played, pays it), or play environment=kit"]
    default = knob_of(GRPOSpec, "reward").default
    reward = many_value(values.get("reward") or default)
    weights = values.get("reward_weights")
    if reward and all(is_python_ref(str(r)) for r in reward):  # the user's code, paid instead of the judge
        return [] if turn is None else [
            f"turn_reward={turn} scores calls beside the episode judge, and reward={','.join(map(str, reward))} is "
            f"paid in the judge's place (environment={environment}), so there is no judge for it to sit beside; "
            "score the calls inside your reward function, or leave turn_reward None"]
    out = []
    if reward != default:
        named = next((r for r in reward if r in d.TRAIN_TURN_REWARDS), None)
        fix = f"pass turn_reward={named}" if named else f"pass turn_reward={' or '.join(d.TRAIN_TURN_REWARDS)}"
        out.append(f"reward={','.join(map(str, reward))} is not read in environment={environment}: there the reward "
                   "is the episode judge (the end state and the final reply), and per-turn scores come from "
                   f"turn_reward; {fix} (weighted by turn_reward_weight) and leave reward at its default "
                   f"({','.join(default)}), or play without an environment")
    if weights is not None:
        out.append(f"reward_weights={weights} is not read in environment={environment}: the episode judge weighs "
                   "1.0 and turn_reward's score turn_reward_weight; pass turn_reward_weight=... and leave "
                   "reward_weights None")
    return out


def step_memory(spec: RunSpec) -> tuple[int, str]:
    """GiB of one device of ``spec``'s target and how that was decided: its ``gpu`` (GPU_MEMORY_GIB), else
    STEP_DEFAULT_GIB."""
    name = spec.gpu.partition(":")[0] if isinstance(spec.gpu, str) else None
    if name in d.GPU_MEMORY_GIB:
        return d.GPU_MEMORY_GIB[name], f"{d.GPU_MEMORY_GIB[name]} GiB (a {name}'s)"
    return d.STEP_DEFAULT_GIB, f"{d.STEP_DEFAULT_GIB} GiB (STEP_DEFAULT_GIB: the spec names no known gpu)"


def _step_factors(spec: RunSpec) -> list[tuple[str, int]]:
    """The factors of the tokens one step holds at once, each named by the knob (or constant) it comes from.

    GRPO samples all of a step's completions in one generation batch; DPO and RM hold a chosen and a rejected
    sequence per row, for the whole batch or ``batch_per_device`` rows per process. SFT is not bounded here."""
    if isinstance(spec, GRPOSpec):
        return [("prompts_per_step", spec.prompts_per_step), ("generations", spec.generations),
                ("max_completion_length", spec.max_completion_length)]
    if not isinstance(spec, (DPOSpec, RMSpec)):
        return []
    rows = [("batch_size", spec.batch_size)]
    if spec.batch_per_device is not None and spec.batch_per_device * spec.world_size < spec.batch_size:
        rows = [("batch_per_device", spec.batch_per_device), ("processes x nodes", spec.world_size)]
    tokens = (("max_completion_length", spec.max_completion_length) if isinstance(spec, DPOSpec)
              else ("TRAIN_MAX_LENGTH", d.TRAIN_MAX_LENGTH))
    return [*rows, ("2 sequences a pair", 2), tokens]


def step_problem(spec: RunSpec) -> str | None:
    """Why one optimizer step of ``spec`` holds more tokens than its target's memory can, else None.

    The bound is STEP_TOKENS_PER_GIB per GiB of each device (:func:`step_memory`) times the processes; the
    refusal names the product, the bound and the knob to lower. Example: GRPO at prompts_per_step=4096 and
    generations=64 is refused on any GPU.
    """
    factors = _step_factors(spec)
    if not factors:
        return None
    tokens = math.prod(value for _, value in factors)
    gib, how = step_memory(spec)
    limit = d.STEP_TOKENS_PER_GIB * gib * spec.world_size
    if tokens <= limit:
        return None
    first, value = factors[0]
    fits = limit // (tokens // value)
    knobs = [name for name, _ in factors if name in type(spec).model_fields]
    product = " x ".join(f"{name}={value}" if name in knobs else f"{value} ({name})" for name, value in factors)
    return (f"{spec.method}: {product} = {tokens:,} tokens in one step, over the {limit:,} the target's memory can "
            f"hold (STEP_TOKENS_PER_GIB={d.STEP_TOKENS_PER_GIB:,} a GiB x {how} x {spec.world_size} process"
            f"{'es' if spec.world_size > 1 else ''}); lower {first} (to {fits} or less)"
            f"{''.join(f', or {name}' for name in knobs[1:])}, or name a gpu with more memory")
