"""Constants the platform and the SDK share, each beside its reason and its source.

The bottom layer's settings: where the data root is named, the platform's
address, the GPU price table both the platform (a run's cost) and the SDK (its
cost text) read, and the training methods, targets and LoRA shape that the SDK
asks for and the platform launches and serves. Everything else lives with its
owner: whileai/domain/defaults.py (the SDK's knobs), whileai/platform/
defaults.py (limits, ports, serving), whileai/kit/defaults.py (the kit's recipe),
whileai/jobs/defaults.py (a job's process and the Modal image).
"""

from __future__ import annotations

import socket

# ---------------------------------------------------------------------------
# Data root and platform connection
# ---------------------------------------------------------------------------

#: Environment variable naming the data root (store, spool, model cache, adapters).
HOME_ENV = "WHILEAI_HOME"

#: Environment variable that lets model loads reach the Hugging Face hub. Off
#: unless set to 1: every load in a job, in the platform's serving and in a
#: reward-model judge passes ``local_files_only`` (without it, a job whose spec
#: names ``evil-org/anything`` makes ~90 requests to the hub from the platform's
#: machine). An operator who wants hub downloads sets it to 1 where the platform
#: and its workers run; a hub base otherwise has to be in the local cache.
HUB_ALLOW_ENV = "WHILEAI_ALLOW_HUB"

#: Loopback by default: a platform server is reachable from other hosts only when
#: its operator says so (``--host 0.0.0.0``).
PLATFORM_HOST = "127.0.0.1"

#: Port of ``python -m whileai platform``. 8470 is unassigned by IANA and clear of
#: the ports notebooks and dev servers usually take (8000, 8080, 8888).
PLATFORM_PORT = 8470

#: Random bytes in a record id (``run_`` + 16 hex digits; whileai.core.ids). 64 bits:
#: ids are unguessable enough that an account cannot find another's by trying, and
#: a run id the SDK picks itself while the platform is unreachable meets another
#: run's with odds near n^2 / 2^65 (about 1 in 37 million for a million runs);
#: the platform refuses such an id rather than mixing two runs.
ID_HEX_BYTES = 8

#: Socket options for every client connection whileai opens (the SDK's client, the
#: serving forwarder to a remote deployment): Nagle off (TCP_NODELAY), as urllib3
#: does by default. A request goes out as two writes (headers, then the JSON body);
#: with Nagle on, the body can wait for the server's delayed ACK of the headers
#: (Linux's delayed ACK is 40 ms) on every call over a real network.
NO_NAGLE = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

# ---------------------------------------------------------------------------
# Cost estimates
# ---------------------------------------------------------------------------

#: Modal's on-demand list price per GPU-hour, USD. The platform's hosted trainer
#: runs on Modal, so a run's cost is estimated as seconds / 3600 * rate. An
#: estimate, not a bill. Source: modal.com/pricing, read 2026-09-20 (per-second
#: prices x 3600, rounded to the cent).
GPU_USD_PER_HOUR: dict[str, float] = {
    "B200": 6.25,
    "H200": 4.54,
    "H100": 3.95,
    "A100-80GB": 2.50,
    "A100-40GB": 2.10,
    "L40S": 1.95,
    "A10G": 1.10,
    "L4": 0.80,
    "T4": 0.59,
}
GPU_PRICE_SOURCE = "modal.com/pricing"
GPU_PRICE_READ_ON = "2026-09-20"

# ---------------------------------------------------------------------------
# Hosted training: what the SDK asks for and the platform launches and serves
# ---------------------------------------------------------------------------

#: The training methods: what ``train`` accepts and the job kinds the platform launches.
TRAIN_METHODS = ("sft", "grpo", "dpo", "rm")

#: Where a hosted job runs when ``train(target=None)``: "local" (a detached
#: process on this machine) unless TRAIN_TARGET_ENV or the platform's config
#: file (``{"train_target": ...}`` in ``<data_root>/config.json``) says "modal".
TRAIN_TARGETS = ("local", "modal")
TRAIN_TARGET_ENV = "WHILEAI_TRAIN_TARGET"
TRAIN_TARGET_DEFAULT = "local"

#: LoRA shape for every method. r=16 / alpha=32 on every linear projection is
#: the common small-model setting (QLoRA, arXiv:2305.14314, used r=64 on all
#: linear layers; "LoRA Without Regret", Schulman et al. 2025, found all-layer
#: LoRA matches full fine-tuning where attention-only does not, and rank matters
#: little below capacity). The kit's base overrides these with KIT_SFT_* when set.
TRAIN_LORA_R = 16
TRAIN_LORA_ALPHA = 32
TRAIN_LORA_DROPOUT = 0.0
TRAIN_LORA_TARGETS = "all-linear"

#: The hub models a served adapter may sit on, besides the kit's demo base: the
#: small instruct models the Modal vLLM image serves with LoRA. The SDK warns
#: when ``train`` picks another base (SERVED_BASES in whileai/simulations/
#: defaults.py adds the kit's base); the platform's registry serves only these,
#: the kit's base, a run's own base, or a folder its operator allows.
SERVED_HUB_BASES: tuple[str, ...] = (
    "Qwen/Qwen2.5-0.5B-Instruct",
    "Qwen/Qwen2.5-1.5B-Instruct",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-1.7B",
    "meta-llama/Llama-3.2-1B-Instruct",
)

# ---------------------------------------------------------------------------
# How sure a held-out result is (whileai.core.stats)
# ---------------------------------------------------------------------------

#: Coverage of the interval every held-out rate is shown with (Wilson score interval). 95% is the
#: convention papers and the delta report use; Wilson rather than the normal approximation because
#: held-out sets here are tens of prompts and rates sit near 0 or 1, where the normal interval
#: leaves [0, 1] or collapses to a point (Brown, Cai & DasGupta 2001, "Interval Estimation for a
#: Binomial Proportion", recommend Wilson for small n).
STATS_CONFIDENCE = 0.95

#: Below this a p-value is shown as "p < 0.001": the exact value of a tail that small says nothing
#: more about a before/after on tens of prompts, and a long string of zeros reads as precision.
STATS_P_SHOWN_FLOOR = 0.001


#: The significance level a before/after is judged at when a spec names none (the runner's
#: ``expect.holdout_gain_significant`` names its own): 0.05, the complement of STATS_CONFIDENCE, so
#: an interval and a test shown side by side agree on what "sure" means.
STATS_ALPHA = round(1 - STATS_CONFIDENCE, 10)

#: Decimals of every held-out rate or loss shown anywhere (the terminal's summary, ``runs``,
#: ``diff``, the pages): three, so a column of rates lines up (0.082, 1.000) and a change of
#: one prompt in a few hundred still shows. One number, read by ``whileai.core.stats.rate_text``.
STATS_RATE_DECIMALS = 3

# ---------------------------------------------------------------------------
# Hosted training: the numbers the run spec's knobs default to (whileai.core.spec)
# ---------------------------------------------------------------------------

#: The values of ``train``'s closed-set arguments (TRAIN_METHODS, the methods,
#: is shared with the platform's launcher: whileai/core/defaults.py).
TRAIN_CHECKS = ("require", "warn", "off")
TRAIN_TRUNCATED = ("mask", "zero")
#: GRPO's named rewards (the ``reward`` knob); a ``python:MODULE:FUNCTION`` value names the user's own. The exact
#: first-action judge is Tool-N1's binary reward (arXiv:2505.00024), fine_grained ToolRL's decomposition
#: (arXiv:2504.13958), rm a learned reward model (Gao et al., arXiv:2210.10760).
TRAIN_REWARDS = ("first_action", "fine_grained", "rm")
#: The setting (an environment variable of the platform's server, or ``reward_modules`` in config.json) that lists
#: the modules a shared server may run as user code (``python:`` rewards and environments), comma-separated (a
#: module, or a package and everything under it). Unset: none; the embedded platform runs the local user's own.
REWARD_MODULES_ENV = "WHILEAI_REWARD_MODULES"
#: A user's reward function: ``python:`` then an importable module path and a function name in it.
TRAIN_REWARD_PYTHON_PATTERN = r"python:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"
#: What ``reward_model`` names: a run id, or ``stages.NAME`` (an rm stage of the same recipe, resolved by the runner).
TRAIN_REWARD_MODEL_PATTERN = rf"run_[0-9a-f]{{{2 * ID_HEX_BYTES}}}|stages\.[A-Za-z_][A-Za-z0-9_-]*"
#: The environments GRPO can play whole episodes in (the ``environment`` field of a GRPO spec): the kit's
#: own tool world, BFCL's multi-turn APIs (``bfcl`` or ``bfcl:CATEGORY``), or a user's class
#: (``python:MODULE:CLASS``). whileai.domain.episodes resolves each name to TRL's ``environment_factory``.
TRAIN_ENVIRONMENT_PATTERN = (r"kit|bfcl(:[a-z_]+)?|python:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
                             r":[A-Za-z_][A-Za-z0-9_]*")
#: The range of an episode's turn cap (``max_turns``: tool-calling rounds, TRL's ``max_tool_calling_iterations``).
#: At least one round, or no tool result ever reaches the model. 64 is a bound against typos, not a measured
#: limit: BFCL's own inference stops a user turn after 20 steps (bfcl_eval ``MAXIMUM_STEP_LIMIT``), and every
#: round's tool output shares one completion budget (TRL's ``max_completion_length``).
TRAIN_MAX_TURNS_RANGE = (1, 64)
#: The per-turn judges GRPO in an environment may add beside the episode judge (the ``turn_reward`` knob): each
#: call of a rollout scored against the gold call at its place by the exact first-action judge, or by ToolRL's
#: fine-grained decomposition (arXiv:2504.13958), whose per-call terms are its "process" credit.
TRAIN_TURN_REWARDS = ("first_action", "fine_grained")
#: The per-turn score's weight beside the episode verdict's 1.0 (TRL's ``reward_weights=[1.0, w]``). Half: the
#: episode verdict stays the larger term, so a policy cannot trade the end state for per-turn credit, while a
#: group whose episodes all fail still tells its rollouts apart by how far each got. ToolRL (arXiv:2504.13958)
#: pays its fine-grained score alone on single calls; in an episode the end state is the task, so it stays first.
TRAIN_TURN_REWARD_WEIGHT = 0.5
#: The accepted weights: above 0 (0 would add a term that pays nothing), at most 1. With a weight w <= 1 a passing
#: episode never scores below a failing one (1 + w * its turn score >= w * at most 1), whatever route it took; a
#: larger w would let a failing episode that copies the gold calls outscore a passing one that took another route.
TRAIN_TURN_REWARD_WEIGHT_RANGE = (0.0, 1.0)
#: The loss masks export.loss_mask accepts (its "assistant" and "final"), for the
#: ``mask_mode`` knob of a hosted run.
EXPORT_MASK_MODES = ("assistant", "final")

#: Mixed tasks (a pass and a fail under one prompt) a grouped method (grpo, dpo,
#: rm) should see before the GPU is spent; fewer is a warning, none is refused.
#: Only a mixed task carries a group advantage or a preference pair; with fewer
#: than this the run revisits a handful of prompts until it memorises them, and
#: the held-out rate it is judged by moves mostly by noise (the documented
#: threshold of ``train``; Lambert 2025, "RLHF", chapter
#: Reinforcement Learning).
TRAIN_MIN_MIXED_TASKS = 32

#: Learning-rate schedule of every hosted method: a constant rate after a short
#: linear warmup (this share of the steps). The kit's LoRA SFT recipe was measured
#: with it (benchmarks/kit_lora_sft.py), and short LoRA runs lose most of their
#: progress to a linear decay that spends half the run at half the rate
#: ("LoRA Without Regret", Schulman et al. 2025, trained at a constant rate).
TRAIN_LR_SCHEDULER = "constant_with_warmup"
TRAIN_WARMUP_RATIO = 0.05

#: Sequences per optimizer step (per device) for SFT, DPO and RM. GRPO steps on
#: TRAIN_GRPO_PROMPTS_PER_STEP prompts x ``generations`` completions instead.
TRAIN_BATCH_SIZE = 8
#: Prompts per GRPO optimizer step, in forward/backward passes of
#: TRAIN_GRPO_PROMPTS_PER_MICROBATCH prompts each (gradient accumulation; all of a
#: step's completions are sampled in one generation batch). Measured on the kit base:
#: with 2 prompts a step the policy's tool and argument-key choices barely
#: depend on the prompt, so one update flipped a whole task kind (timer 9/9 -> 0/9 while
#: weather went 2 -> 10) and higher rates only lost ground; with 8 no run lost a kind.
TRAIN_GRPO_PROMPTS_PER_STEP = 8
TRAIN_GRPO_PROMPTS_PER_MICROBATCH = 2
#: A GRPO run whose share of mixed groups (a pass and a fail among one prompt's
#: completions: the only groups with an advantage) stays under this says so on the run
#: (summary note ``grpo_groups``): nearly every group is unanimous, so the updates carry
#: almost no signal (on the kit, a 60-step SFT start sampled 98% unanimous groups and
#: GRPO from it moved nothing). Start from a policy that sometimes passes when sampled.
TRAIN_GRPO_MIN_MIXED_SHARE = 0.1

#: Token cap of a training sequence (prompt + reply) for SFT, DPO and RM.
#: A rendered tool-use conversation of the sample task is under 200 tokens; real
#: agent traces are longer, and 2048 keeps a 1.5B model's batch on an A10G.
TRAIN_MAX_LENGTH = 2048
#: Token cap of an episode in an environment (its prompt with the environment's tools, and every turn played after
#: it) for SFT's gold episodes, GRPO's prompts and the held-out play, in TRAIN_MAX_LENGTH's place; the model's own
#: context still bounds it. BFCL's multi-turn prompts carry 20-39 functions: 2,645-5,867 tokens with the kit's tokenizer on the committed
#: sample's multi_turn_base entries (measured), all over TRAIN_MAX_LENGTH, so at 2048 no entry could be played.
#: 8192 holds the longest with room for its turns; the kit's episodes (KIT_MAX_POSITIONS) are bounded by the model.
EPISODE_MAX_LENGTH = 8192

#: Held-out rows the before/after pass rate is measured on (at most; a holdout
#: bigger than this is subsampled with the run's seed). 200 rows keep the kit
#: base's greedy before and after under a minute on a CPU
#: (benchmarks/MEASURED.md#holdout-row-time) while the rate's standard error
#: stays under 0.04.
TRAIN_HOLDOUT_MAX_ROWS = 200

#: The row field a held-out measurement is broken down by, before and after per value, when the
#: held-out rows carry it (``wai.datasets.from_bfcl`` names each row's BFCL category there). Any
#: dataset gets the breakdown by setting this field on its rows; the overall figure is unchanged.
HOLDOUT_GROUP_FIELD = "category"

#: Optimizer steps between two checkpoints of a job's trainer state (LoRA weights,
#: optimizer, scheduler, RNG and data position), kept under the run's folder so
#: ``python -m whileai resume RUN_ID`` (or a Modal retry after preemption) continues
#: from the last one. A LoRA's checkpoint is small (its adapter and an optimizer
#: state twice its size: a few MB at rank 16 on a 1.5B base), and saving it costs
#: well under a second; a preempted run loses at most 50 steps, a few minutes of
#: a GPU run at a step of seconds. 0 turns them off; a
#: run of this many steps or fewer saves none (it would only resume at its end).
TRAIN_SAVE_STEPS = 50

#: Checkpoints a job keeps (TRL's ``save_total_limit``): the newest one to resume
#: from and the one before it, in case the newest was cut short while written.
TRAIN_CHECKPOINTS_KEPT = 2

#: Token cap of a held-out greedy reply (the first action: one tool call or a
#: short answer). Also the default ``max_completion_length`` for GRPO/DPO.
TRAIN_EVAL_MAX_NEW_TOKENS = 96

#: The losses DPOTrainer 1.16 accepts (trl/trainer/dpo_config.py, ``loss_type``).
TRL_DPO_LOSS_TYPES = (
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard",
    "aot", "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm",
)

# ---------------------------------------------------------------------------
# Past one process: placement and strategies (whileai/jobs/distributed.py)
# ---------------------------------------------------------------------------

#: The most processes one node may run: 8 GPUs per node is the largest common machine (H100:8, B200:8);
#: 64 leaves room for CPU ranks and larger boxes while catching a typo (``processes=800``).
MAX_PROCESSES_PER_NODE = 64

#: The most nodes one job may span: SLURM clusters and Modal's clustered functions go to a few dozen
#: nodes for LoRA fine-tunes; the bound catches a typo, it is not a platform limit.
MAX_NODES = 256

#: The most GPUs a launch's ``gpu`` may ask for on one node (``"H100:8"``): Modal attaches at most 8 GPUs to a
#: container (Modal's GPU guide, modal.com/docs/guide/gpu), and 8 is the largest common machine.
GPU_MAX_COUNT = 8

# ---------------------------------------------------------------------------
# A step's size (whileai/core/_spec_models.py, step_problem)
# ---------------------------------------------------------------------------

#: Memory of each GPU the price table names, GiB (NVIDIA's data sheets; B200 as DGX B200 splits its 1,440 GB).
GPU_MEMORY_GIB: dict[str, int] = {
    "B200": 180, "H200": 141, "H100": 80, "A100-80GB": 80, "A100-40GB": 40, "L40S": 48, "A10G": 24, "L4": 24,
    "T4": 16,
}
#: Memory assumed per device when a spec names no GPU (or one the table lacks): the largest common single GPU
#: (H100, A100-80GB), so only a step no such device holds is refused.
STEP_DEFAULT_GIB = 80
#: The most tokens one GiB of a device holds in a step (completions sampled, or sequences trained at once).
#: An upper bound, not a fit: a token costs at least its KV cache while it is sampled, 23 KiB on SmolLM2-135M,
#: the smallest base served (30 layers x 3 KV heads x 64 dims x K and V x 2 bytes in bf16), and a trained
#: token costs its activations on top; 64 Ki tokens (16 KiB each) per GiB is more than any base fits, so a
#: step refused past it could never run, and one under it may still run out of memory.
STEP_TOKENS_PER_GIB = 65_536

#: Characters of a value a spec's refusal echoes (a huge string sent as a knob is shown cut, with its length), so a
#: refusal stays readable and fits a run's error.
SPEC_SHOWN_CHARS = 200

#: The data-parallel and sharding strategies a job may ask for, each mapped onto accelerate's and TRL's
#: own configuration (``whileai.jobs.trainer_config.strategy_settings``): DDP replicates the model,
#: FSDP and DeepSpeed ZeRO-2/3 shard optimizer state (and, FSDP and ZeRO-3, the weights).
TRAIN_STRATEGIES = ("ddp", "fsdp", "zero2", "zero3")

#: torchrun's rendezvous backend: c10d runs the rendezvous on node 0's TCP store, with no etcd to
#: deploy (PyTorch's recommended backend for torchrun since 1.13).
RDZV_BACKEND = "c10d"

#: The port node 0's rendezvous listens on when a SLURM or Modal job names none. 29500 is torchrun's
#: own default (MASTER_PORT); a local job picks a free loopback port instead.
RDZV_PORT = 29500

#: torchrun's seconds between checks of its workers: a rank that dies is noticed this fast, then the
#: others are ended. torchrun's default is 0.1 s in recent releases; stated so the bound is ours.
MONITOR_INTERVAL_S = 0.5

#: Where GRPO's completions are generated: HF ``generate`` in the trainer, or vLLM (TRL's ``use_vllm``).
TRAIN_GENERATION_BACKENDS = ("hf", "vllm")
#: How vLLM runs beside the trainer (TRL's ``vllm_mode``): ``colocate`` shares the training GPUs in the trainer's own
#: processes; ``server`` runs ``trl vllm-serve`` (vLLM's own server) on a GPU of its own, for bases whose
#: training and generation do not fit one GPU together (TRL docs, "vLLM integration").
TRAIN_VLLM_MODES = ("colocate", "server")

#: The trackers ``report_to`` can mirror a run to (``whileai.domain.tracking.mirror``): the three that teams
#: already read results in and that run without a server of their own (W&B offline, an MLflow SQLite file,
#: trackio's local store). transformers' ``report_to`` knows more; these are the ones tested offline here.
MIRROR_TRACKERS = ("wandb", "mlflow", "trackio")

#: The pip extra that installs every mirror's client (pyproject.toml ``[project.optional-dependencies]``).
MIRROR_EXTRA = "mirror"


#: The committed file of pinned versions (``python scripts/make_constraints.py`` writes it at the
#: checkout's root): the versions the recipes' figures were measured with. A run records which of the
#: computing packages it ran with at another version (a newer transformers or TRL moved the DPO and
#: reward-model figures once), and ``reproduce`` and the run page say so beside the result.
CONSTRAINTS_FILE = "constraints.txt"
