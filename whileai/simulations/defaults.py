"""The SDK's tunable numbers, each beside its reason and its source.

Docstrings elsewhere name these constants instead of repeating their values, so
there is one copy to keep true. Grouped by the part of the SDK that reads them. A
value that came from a paper cites it; a price cites the page and the day it was
read; a value we measured says what was measured.

Settings live with their owner: whileai/core/defaults.py holds what the SDK shares
with the platform (the data root's variable, the platform's address, the GPU price
table, the training methods, targets and LoRA shape), whileai/platform/defaults.py
the platform's limits, ports and serving, whileai/kit/defaults.py the kit's recipe,
whileai/jobs/defaults.py a job's process and the Modal image. The shared names the
SDK reads are re-exported here, so ``wai.defaults.GPU_USD_PER_HOUR`` and
``wai.defaults.KIT_BASE_NAME`` still read.
"""

from __future__ import annotations

from whileai.core.defaults import (  # noqa: F401  (shared with the platform; re-exported)
    GPU_PRICE_READ_ON,
    GPU_PRICE_SOURCE,
    GPU_USD_PER_HOUR,
    HOME_ENV,
    PLATFORM_HOST,
    PLATFORM_PORT,
    SERVED_HUB_BASES,
    TRAIN_LORA_ALPHA,
    TRAIN_LORA_DROPOUT,
    TRAIN_LORA_R,
    TRAIN_LORA_TARGETS,
    TRAIN_METHODS,
    TRAIN_TARGET_DEFAULT,
    TRAIN_TARGET_ENV,
    TRAIN_TARGETS,
)
from whileai.kit.defaults import (  # noqa: F401  (the kit's recipe, which hosted SFT on the kit base uses)
    KIT_BASE_NAME,
    KIT_SFT_BATCH,
    KIT_SFT_LORA_ALPHA,
    KIT_SFT_LORA_R,
    KIT_SFT_LR,
    KIT_SFT_STEPS,
)

# ---------------------------------------------------------------------------
# Run tracking (client side: buffering, flushing, retries, spool)
# ---------------------------------------------------------------------------

#: Deadline of one ordinary request to the platform, in seconds (a dataset push,
#: a run record). Generous because a push of a large dataset is one request; a
#: healthy server on loopback answers in milliseconds.
CLIENT_TIMEOUT_S = 30.0

#: How often the background thread sends a run's buffered points, in seconds. A
#: person watching a curve sees it move within a couple of seconds, and a loop
#: logging every step at 10 steps/s sends about one 20-point request per
#: interval, which costs the server nothing. ``TrainingRun.log`` itself never
#: touches the network.
FLUSH_INTERVAL_S = 2.0

#: Points per request when a backlog is sent. 5,000 points with 10 metrics each
#: are about 1.9 MB of JSON, far below PLATFORM_MAX_BODY_BYTES; a 100,000-point
#: backlog is 20 requests, and a reply lost in transit resends one batch, not the
#: backlog. (benchmarks/tracking_ingest.py measures the throughput it gives.)
FLUSH_BATCH_POINTS = 5000

#: Deadline of one tracking send, in seconds. Only the flush thread waits on it,
#: never the training loop. A 5,000-point batch lands in well under a second on
#: a healthy server, so a send that takes 10 s means the platform is down or
#: wedged and the points wait for the next try.
TRACKING_TIMEOUT_S = 10.0

#: Backoff after failed sends: the background thread waits RETRY_BACKOFF_S,
#: doubling per consecutive failure up to RETRY_BACKOFF_MAX_S, each wait drawn
#: between half and all of that ("equal jitter" keeps many trainers that lost
#: the same server from retrying in lockstep; AWS Architecture Blog,
#: "Exponential Backoff And Jitter", 2015). The 30 s cap means a platform back from a restart
#: sees the backlog within half a minute.
RETRY_BACKOFF_S = 1.0
RETRY_BACKOFF_MAX_S = 30.0

#: At interpreter exit each run with unsent points gets one last send with this
#: deadline, in seconds; what is still unsent then goes to the spool. A script
#: that ends while the platform is down exits in seconds instead of waiting
#: TRACKING_TIMEOUT_S per batch.
EXIT_FLUSH_TIMEOUT_S = 3.0

#: Unsent points a run keeps in memory while the platform is unreachable. A
#: 10-metric point costs about 1 KB as Python objects, so this caps a long
#: outage near 100 MB; past it the oldest batches move to the spool on disk
#: (fsync'd) and are delivered from there, so nothing is dropped.
BUFFER_MAX_POINTS = 100_000

#: Server errors (5xx) one batch may meet before it is moved to the spool and the
#: run's later batches go on. A 5xx is usually a server restarting (retried with
#: backoff), but a batch that keeps failing while others would land must not
#: block the rest of the run: after this many tries it waits in the spool, where
#: the next good send or ``python -m whileai sync`` delivers it.
BATCH_SERVER_ERRORS_MAX = 3

#: Distinct metric names one run logs; the platform's RUN_METRIC_NAMES_MAX is the
#: same number. Values under names past it are skipped in ``log`` (counted in
#: ``run.skipped``, said once), so they are not sent to be refused.
RUN_METRIC_NAMES_MAX = 2000

#: Seconds between a run's heartbeats when it has sent nothing else: an empty
#: run update that tells the platform the writer is alive. The platform reads a
#: run silent for its RUN_STALE_S (300 s, ten heartbeats) as ``crashed``.
RUN_HEARTBEAT_S = 30.0

#: Size cap of the spool directory (``<data_root>/spool``), in bytes (1 GiB,
#: about 2.7 million 10-metric points as JSON). Past it, unsent points are
#: counted and reported instead of written: a full disk would break the
#: training run being logged (checkpoints, the store itself), which is worse
#: than a gap in its curve. ``python -m whileai sync`` empties the spool.
SPOOL_MAX_BYTES = 1024 * 1024 * 1024

#: How often a live process tries to deliver spool files left by processes that
#: have exited, in seconds (only after one of its own sends succeeded, so a
#: platform that is down is not asked twice).
SPOOL_RETRY_S = 60.0

#: Deadline of ``training_run``'s request that creates the run, in seconds. Past it
#: (or when the platform refuses the connection or answers 5xx) the run is made
#: offline instead: it names itself, logs into the spool, and is created under
#: the same id by a later flush or ``python -m whileai sync``. The create is
#: idempotent by id, so a platform that did make the run but answered too late
#: is not given a second one. As long as a tracking send (TRACKING_TIMEOUT_S):
#: a healthy server answers in milliseconds, and a script whose platform is
#: down starts training within this many seconds instead of CLIENT_TIMEOUT_S.
RUN_CREATE_TIMEOUT_S = 10.0

#: Environment variable that sets the tracking mode, and its values. "online"
#: (the default) sends as it goes and falls back to offline when the platform
#: cannot be reached; "offline" sends nothing at all (air-gapped machines): the
#: run names itself, everything it logs goes to the spool, and only
#: ``python -m whileai sync`` delivers it.
MODE_ENV = "WHILEAI_MODE"
MODES = ("online", "offline")

#: ``TrainingRun.wait``'s polling interval when none is given, in seconds. A
#: hosted fine-tune takes minutes; a read every 10 s shows the end promptly.
TRAINING_POLL_S = 10.0

#: The fastest ``wait`` ever polls, in seconds, whatever ``poll`` says. A run's
#: record changes at most once per FLUSH_INTERVAL_S (the trainer's own tracker
#: writes no faster), so a faster poll reads the same record again and only
#: loads the server (on Modal every read also asks Modal for the call's state).
TRAINING_POLL_MIN_S = 2.0

# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

#: Hex characters kept from the sha256 of a prompt (``rows.prompt_hash``). 16 hex
#: characters are 64 bits: the birthday bound puts the chance of any collision
#: among 100,000 distinct prompts near 3e-10, and the key stays short enough to
#: read in a report or a file name.
PROMPT_HASH_HEX_CHARS = 16

#: The privileged-leak check flags an assistant turn that repeats a run of the
#: privileged value at least this many words long (or the whole value, when the
#: value has fewer words). Words are letter/digit runs after Unicode NFKC and
#: case folding, so case, spacing and punctuation between words do not hide a
#: recital. Shorter shared runs are ordinary phrasing ("the answer is", "in
#: Paris") that a correct reply shares with a hidden note by necessity. (Runs
#: the policy was shown before the turn, or that are the row's gold answer, never
#: count: repeating a tool result or giving the right answer is not a leak.) Our
#: choice, pinned by the leak cases in tests/test_export_leaks.py.
LEAK_MIN_WORDS = 4

#: ...and that run must also be at least this many characters long (words joined
#: by single spaces). It keeps a short word value ("Paris", "18", "yes") from
#: counting as recited: a reply that merely names the same city or number is not
#: evidence that the policy saw the note. A long single-token secret (an API key,
#: a hidden passphrase) passes it and is caught. Our choice, pinned by the same
#: tests.
LEAK_MIN_CHARS = 16

#: Short secrets are caught by their shape instead of their length. A
#: simulator's privileged block mostly hides identifiers: a booking code
#: (QX7-4KP2), a discount code (SAVE20), a PIN with letters (7Q4Z). Letters and
#: digits mixed in one value are what ordinary words and numbers never are, so
#: such a value counts as recited when a reply holds it whole, at any case and
#: any spacing or joiners (q x 7 - 4 k p 2), at this many letters and digits or
#: more. Below it, mixed tokens are grid squares and seat letters (B12, A4), and
#: a number with a one- or two-letter unit or ordinal (10am, 5km, 2nd, 18c) and a
#: date never count. Four is the shortest code that is worth hiding (36**4 is 1.7
#: million values, a common PIN length); our choice, pinned by the table of
#: secrets and benign replies in tests/test_export_leaks.py.
LEAK_ID_MIN_CHARS = 4

#: ...and a run of digits alone counts from this many digits, spaces and hyphens
#: between groups ignored (an account number 4417 1234 5678 9113, a phone number
#: 555-0100, an order number 884213). Shorter digit runs are the small numbers a
#: correct reply shares with the note by necessity: temperatures, counts, prices,
#: years, five-digit postal codes. Six keeps every year and price under a
#: million out, and catches the shortest account and order numbers. Our
#: choice, pinned by the same table.
LEAK_ID_MIN_DIGITS = 6

#: How many offending rows an export error message spells out; the exception's
#: ``problems`` always lists every one. Ten lines fit a terminal; the rest is a
#: count and a pointer to ``problems``.
EXPORT_PROBLEMS_IN_MESSAGE = 10

#: Bytes of whole JSONL lines (rows) that ``export_dataset`` reads, checks,
#: converts, gates and writes at a time when its source is a file, so its memory
#: follows the chunk and not the file (at least one row per chunk). Measured on
#: benchmarks/export_throughput.py's 100,000 rows (1.47 KB each, 2 shared EPYC
#: cores, 1 MB of L2 each), CPU seconds of the export and peak RSS of the process:
#: 8-128 KiB all 2.3-2.7 s and 31-32 MB; 256 KiB 2.5-2.8 s; 1 MiB 4.8-6.0 s and
#: 47 MB; 1,000 rows (1.4 MiB) 6.1-7.2 s; the whole file at once 4.6-6.2 s and
#: 1.5 GB. Past ~128 KiB a chunk's objects (about ten times its bytes) outgrow the
#: core's cache and every step slows. 64 KiB is half the last flat point, room
#: for smaller caches. Counted in bytes, not rows: what costs is the size.
EXPORT_CHUNK_BYTES = 65536

# ---------------------------------------------------------------------------
# Datasets, judges, selection and the delta report
# ---------------------------------------------------------------------------

#: A judge's reward at or above this counts as a pass when the judge does not say
#: ``passed`` itself. Judges here return 0/1 (the first-action judge) or a score in
#: [0, 1] read as a probability (a reward model's sigmoid), for which the midpoint
#: is the cut that calls each row by its more likely outcome. ``reward_model`` runs
#: pick their own cut from held-out pairs and pass it as ``threshold=``.
JUDGE_PASS_THRESHOLD = 0.5

#: Two rewards closer than this are a tie in ``judge_pairs``: no preference, and the
#: exporters leave the pair out. 1e-6 is about eight float32 ulps at 1.0, so a reward
#: model served in float32 that scores two sides "the same" up to rounding is a tie,
#: while any difference a model actually expresses is not.
JUDGE_TIE_TOLERANCE = 1e-6

#: Preference pairs per task in ``select_for_preference`` / ``build_preference_pairs``
#: and in the dpo/rm selection report. One pair per prompt, as in the binarized
#: UltraFeedback set behind Zephyr (Tunstall et al. 2023, "Zephyr: Direct
#: Distillation of LM Alignment", one chosen and one rejected reply per prompt):
#: every prompt weighs the same, so a task sampled many times does not dominate
#: the preference loss.
PREFERENCE_PAIRS_PER_TASK = 1

#: How many of the examples too long for the base's context the selection report
#: names (``report["context"]["left_out"]``: task, row indices, tokens); the count
#: beside them is always whole. Five finds the rows to shorten and keeps the
#: report, which travels on the run's summary, and its warning to a few lines. Our choice.
SELECTION_CONTEXT_SHOWN = 5

#: Share of tasks ``datasets.cut`` holds out, and its default seed. 20% is the
#: usual 80/20 split; the cut is by task, so no prompt is on both sides.
CUT_HOLDOUT = 0.2
CUT_SEED = 0

#: Bootstrap resamples behind every interval of ``delta_report``. Efron & Tibshirani
#: (1993, "An Introduction to the Bootstrap", ch. 13 and 19) advise at least 1,000
#: for percentile intervals, whose tails need more draws than a standard error;
#: 2,000 keeps the Monte Carlo error of a 2.5% quantile near a tenth of the interval
#: width and runs in well under a second for thousands of tasks.
DELTA_BOOTSTRAP = 2000

#: Two-sided confidence level of the intervals ``delta_report`` shows and of the
#: "improved" / "regressed" calls (the interval of the gain excludes zero), and of
#: the proxy's "significantly positive" gain. 95%, the conventional level.
DELTA_CI_LEVEL = 0.95

#: Equivalence margin for the target pass rate, in absolute pass-rate points (0 to 1).
#: "Over-optimized" needs the target's gain shown to be below this margin, not merely
#: "not significant": the equivalence logic of Schuirmann's two one-sided tests
#: (TOST; Schuirmann 1987, J. Pharmacokinet. Biopharm. 15:657) as Lakens (2017,
#: "Equivalence Tests: A Practical Primer", Soc. Psychol. Personal. Sci. 8:355)
#: presents it, with the margin set to the smallest effect worth having. Five points
#: of pass rate is the smallest change we would call a training win; a gain that may
#: still be that large is reported as inconclusive, not over-optimized.
DELTA_EQUIVALENCE_MARGIN = 0.05

#: One-sided alpha of the equivalence bound: the target's gain counts as below the
#: margin when the upper bound of its one-sided (1 - alpha) interval, the 95th
#: bootstrap percentile, is below it. This is TOST's convention (Schuirmann 1987):
#: each one-sided test at alpha, i.e. the 90% two-sided interval, for an overall
#: 5% error rate.
DELTA_EQUIVALENCE_ALPHA = 0.05

#: Seed of ``delta_report``'s bootstrap: the same rows give the same report.
DELTA_SEED = 0

#: Fewest tasks on each side for ``delta_report`` to call a verdict; below it the
#: intervals are still shown but the verdict is "inconclusive". A bootstrap over
#: clusters is too narrow when the clusters are few: Cameron, Gelbach & Miller
#: (2008, "Bootstrap-Based Improvements for Inference with Clustered Errors",
#: Rev. Econ. Stat. 90:414) show inference over few clusters rejecting a true null
#: far more often than its nominal rate, in simulations with 5 to 30 clusters.
#: 20 keeps verdicts off the smallest of those settings; it is a floor, not a
#: guarantee that the interval has its nominal coverage.
DELTA_MIN_TASKS = 20

# ---------------------------------------------------------------------------
# Hosted training (knobs, gates, jobs, serving)
# ---------------------------------------------------------------------------

#: The values of ``train``'s closed-set arguments (TRAIN_METHODS, the methods,
#: is shared with the platform's launcher: whileai/core/defaults.py).
TRAIN_CHECKS = ("require", "warn", "off")
TRAIN_TRUNCATED = ("mask", "zero")
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

#: The run ``kind`` hosted training runs carry, so idempotency and the job
#: runner find them among hand-made ``training_run`` runs.
TRAIN_RUN_KIND = "hosted"

#: Bases the serving endpoint can put an adapter on: the kit's demo base (served
#: on CPU by the platform) and the hub models of SERVED_HUB_BASES (shared with the
#: platform, which serves nothing else an account names). ``train`` warns when
#: ``base_model`` is outside this list, because the run's adapter could not be
#: served afterwards.
SERVED_BASES: tuple[str, ...] = (KIT_BASE_NAME, *SERVED_HUB_BASES)

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
#: step's completions are sampled in one generation batch). Measured on the kit base
#: (issue 18): with 2 prompts a step the policy's tool and argument-key choices barely
#: depend on the prompt, so one update flipped a whole task kind (timer 9/9 -> 0/9 while
#: weather went 2 -> 10) and higher rates only lost ground; with 8 no run lost a kind.
TRAIN_GRPO_PROMPTS_PER_STEP = 8
TRAIN_GRPO_PROMPTS_PER_MICROBATCH = 2
#: A GRPO run whose share of mixed groups (a pass and a fail among one prompt's
#: completions: the only groups with an advantage) stays under this says so on the run
#: (summary note ``grpo_groups``): nearly every group is unanimous, so the updates carry
#: almost no signal (issue 18: a 60-step SFT start sampled 98% unanimous groups and
#: GRPO from it moved nothing). Start from a policy that sometimes passes when sampled.
TRAIN_GRPO_MIN_MIXED_SHARE = 0.1

#: Token cap of a training sequence (prompt + reply) for SFT, DPO and RM.
#: A rendered tool-use conversation of the sample task is under 200 tokens; real
#: agent traces are longer, and 2048 keeps a 1.5B model's batch on an A10G.
TRAIN_MAX_LENGTH = 2048

#: Held-out rows the before/after pass rate is measured on (at most; a holdout
#: bigger than this is subsampled with the run's seed). Greedy generation on a
#: CPU costs ~0.1 s a row with the kit's base; 200 rows keeps before+after
#: under a minute there while the rate's standard error stays under 0.04.
TRAIN_HOLDOUT_MAX_ROWS = 200

#: Token cap of a held-out greedy reply (the first action: one tool call or a
#: short answer). Also the default ``max_completion_length`` for GRPO/DPO.
TRAIN_EVAL_MAX_NEW_TOKENS = 96

#: DPO with ``pair_source="policy"`` (jobs/_policy_pairs.py): the pairs come from the
#: start policy's own replies, sampled ``policy_samples`` times per training prompt at
#: this temperature and judged by the first-action judge, so the rejected side is a
#: mistake this policy makes (on-policy preference data: Xu et al. 2024, "Is DPO
#: Superior to PPO for LLM Alignment?", arXiv:2404.10719, trace DPO's failures to the
#: shift between the pairs and the policy; Iterative RPO, Pang et al. 2024,
#: arXiv:2404.19733, samples its pairs from the model being trained). 0.7 is the
#: sample task's rollout temperature; measured on the kit (issue 18, seed 0, 73 held-out
#: prompts, 8 samples, NLL weight 1): 0.7 and 1.0 both went 33 -> 45.
DPO_POLICY_TEMPERATURE = 0.7
#: Distinct pass-vs-fail pairs per prompt from the policy's samples. Measured on the kit
#: (issue 18, seed 0): 1 pair of 4 samples went 33 -> 39 of 73 (p 0.29), 2 pairs of 8
#: samples 33 -> 45 (p 0.004).
DPO_POLICY_PAIRS_PER_PROMPT = 2
#: Prompts sampled together (each ``policy_samples`` times) in one generate call.
DPO_POLICY_BATCH_PROMPTS = 16
#: Token cap of one sampled reply (``max_completion_length`` lowers it): the held-out
#: reply's cap, since the pairs are first actions, as the held-out measurement judges them.
DPO_POLICY_MAX_NEW_TOKENS = TRAIN_EVAL_MAX_NEW_TOKENS


#: What a bare TRL 1.16 script would run with where our defaults differ, kept so
#: a run's config can be read against it: GRPO's beta=0.0 loads no reference
#: model (no KL at all), loss_type="dapo" normalises over the global batch, and
#: mask_truncated_completions=False trains on replies the token cap cut; DPO and
#: GRPO default to full fine-tuning learning rates, 10x too low for LoRA.
TRL_DEFAULTS: dict[str, dict] = {
    "grpo": {
        "beta": 0.0,
        "loss_type": "dapo",
        "mask_truncated_completions": False,
        "learning_rate": 1e-6,
        "num_generations": 8,
        "temperature": 1.0,
        "max_completion_length": 512,
        "epsilon_high": None,
        "scale_rewards": "group",
    },
    "dpo": {"beta": 0.1, "loss_type": ["sigmoid"], "learning_rate": 1e-6},
    "sft": {"learning_rate": 2e-5, "num_train_epochs": 3.0},
    "rm": {"learning_rate": 1e-4},
}

#: The losses DPOTrainer 1.16 accepts (trl/trainer/dpo_config.py, ``loss_type``).
TRL_DPO_LOSS_TYPES = (
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard",
    "aot", "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm",
)

#: The knobs a hosted run is reproduced and compared by. Per knob, per method it
#: applies to: ``range`` (inclusive; ``open_low`` excludes the low end) or
#: ``choices``, our ``default``, the ``paper`` value and its ``source``. A value
#: outside the range is refused with the paper value and the source quoted.
#: ``learning_rate`` defaults are for LoRA, which wants ~10x the full
#: fine-tuning rate ("LoRA Without Regret", Schulman et al. 2025; Lambert 2025,
#: "RLHF", chapter Instruction Tuning gives 1e-5..2e-5 for full SFT).
TRAINING_KNOBS: dict[str, dict[str, dict]] = {
    "learning_rate": {
        "sft": {"range": (1e-7, 1e-2), "default": 2e-4, "paper": 2e-4,
                "source": "QLoRA, arXiv:2305.14314 (LoRA on 7B-13B)"},
        "grpo": {"range": (1e-8, 1e-3), "default": 1e-5, "paper": 1e-6,
                 "source": "DeepSeekMath, arXiv:2402.03300 (full fine-tuning)"},
        # Measured here: LoRA DPO at 1e-3 collapsed the held-out rate 0.86 -> 0.55
        # where 1e-4 improved it 0.86 -> 0.92, so the range stops below 1e-3.
        "dpo": {"range": (1e-8, 5e-4), "default": 1e-4, "paper": 1e-6,
                "source": "DPO, arXiv:2305.18290 (full fine-tuning)"},
        "rm": {"range": (1e-8, 1e-3), "default": 1e-4, "paper": 9e-6,
               "source": "InstructGPT, arXiv:2203.02155 (6B reward model)"},
    },
    "beta": {
        # ProRL (arXiv:2505.24864) kept a KL penalty over long GRPO runs and hard-reset
        # the reference policy when KL grew; TRL 1.16 defaults to 0.0 (no KL, no reference).
        "grpo": {"range": (0.0, 1.0), "default": 0.04, "paper": 0.04,
                 "source": "DeepSeekMath, arXiv:2402.03300"},
        "dpo": {"range": (0.0, 1.0), "open_low": True, "default": 0.1, "paper": 0.1,
                "source": "DPO, arXiv:2305.18290"},
    },
    "generations": {
        "grpo": {"range": (2, 64), "default": 8, "paper": 64,
                 "source": "DeepSeekMath, arXiv:2402.03300"},
    },
    "loss_type": {
        # bnpo normalises over the tokens of the batch: DAPO's token-level loss
        # (arXiv:2503.14476) on one device; dr_grpo drops length normalisation
        # (Dr. GRPO, arXiv:2503.20783); grpo is the paper's per-sequence mean.
        "grpo": {"choices": ("bnpo", "grpo", "dr_grpo"), "default": "bnpo", "paper": "bnpo",
                 "source": "DAPO token-level loss, arXiv:2503.14476"},
        "dpo": {"choices": TRL_DPO_LOSS_TYPES, "default": "sigmoid", "paper": "sigmoid",
                "source": "DPO, arXiv:2305.18290"},
    },
    "temperature": {
        "grpo": {"range": (0.0, 2.0), "open_low": True, "default": 1.0, "paper": 1.0,
                 "source": "DAPO, arXiv:2503.14476 (ProRL, arXiv:2505.24864, used 1.2)"},
    },
    "max_completion_length": {
        "grpo": {"range": (1, 32768), "default": TRAIN_EVAL_MAX_NEW_TOKENS, "paper": 1024,
                 "source": "DeepSeekMath, arXiv:2402.03300"},
        "dpo": {"range": (1, 32768), "default": TRAIN_MAX_LENGTH, "paper": None,
                "source": "TRL DPOConfig max_length"},
    },
    "steps": {
        "sft": {"range": (1, 1_000_000), "default": None, "paper": None, "source": "epochs decide"},
        "grpo": {"range": (1, 1_000_000), "default": 200, "paper": None,
                 "source": "Lambert 2025, RLHF, chapter Reinforcement Learning"},
        "dpo": {"range": (1, 1_000_000), "default": 200, "paper": None,
                "source": "Lambert 2025, RLHF, chapter Direct Alignment"},
        "rm": {"range": (1, 1_000_000), "default": 200, "paper": None,
               "source": "Lambert 2025, RLHF, chapter Reward Modeling"},
    },
    "epochs": {
        "sft": {"range": (0.0, 100.0), "open_low": True, "default": 3.0, "paper": 2.0,
                "source": "Tulu 3, arXiv:2411.15124"},
    },
    "seed": {m: {"range": (0, 2**32 - 1), "default": 0, "paper": None, "source": ""}
             for m in TRAIN_METHODS},
    "min_mixed_tasks": {m: {"range": (1, 10_000_000), "default": TRAIN_MIN_MIXED_TASKS,
                            "paper": None, "source": "TRAIN_MIN_MIXED_TASKS"}
                        for m in TRAIN_METHODS},
    "truncated": {
        # A cut reply scored 0 teaches shorter replies before it teaches the task;
        # DAPO masks them out of the loss (overlong filtering).
        "grpo": {"choices": TRAIN_TRUNCATED, "default": "mask", "paper": "mask",
                 "source": "DAPO overlong filtering, arXiv:2503.14476"},
    },
    # The export settings the job's dataset builder applies (the same names and
    # meanings as export_dataset / training_rows; defaults are the exporter's own).
    # SFT reads all four; DPO's pairs read strip_think and max_tool_output_chars
    # (export_preference has no loss mask: the completion is the trained part);
    # GRPO and RM build their inputs from the rows without the exporter.
    "mask_mode": {
        "sft": {"choices": EXPORT_MASK_MODES, "default": "assistant", "paper": "assistant",
                "source": "Lambert 2025, RLHF, chapter Instruction Tuning (multi-turn masking)"},
    },
    "unroll": {
        "sft": {"choices": (False, True), "default": False, "paper": None,
                "source": "Lambert 2025, RLHF, chapter Instruction Tuning (multi-turn masking)"},
    },
    "strip_think": {
        m: {"choices": (True, False), "default": True, "paper": None,
            "source": "export.training_rows (an adapter trained on stripped turns answers at once)"}
        for m in ("sft", "dpo")
    },
    "max_tool_output_chars": {
        m: {"range": (1, 100_000_000), "default": None, "paper": None,
            "source": "Lambert 2025, RLHF, chapter Tool Use (context cost of tool output)"}
        for m in ("sft", "dpo")
    },
}

#: The TRAINING_KNOBS entries that are export settings: they travel on the job's
#: spec to its dataset builder (export.export_dataset / export_preference).
TRAIN_EXPORT_KNOBS = ("mask_mode", "unroll", "strip_think", "max_tool_output_chars")
#: The exporter's own values of those settings (export_dataset's signature). A
#: method that does not read a setting accepts it at this value, which changes
#: nothing, so one export configuration can be passed to every method.
TRAIN_EXPORT_DEFAULTS = {"mask_mode": "assistant", "unroll": False, "strip_think": True, "max_tool_output_chars": None}

#: Further keys ``train(config=...)`` reads (the rest of a config is kept on the
#: run as given and said to be unread). Same shape as TRAINING_KNOBS.
TRAINING_HOST_KEYS: dict[str, dict[str, dict]] = {
    "epsilon_high": {
        "grpo": {"range": (0.0, 10.0), "default": 0.28, "paper": 0.28,
                 "source": "DAPO clip-higher, arXiv:2503.14476"},
    },
    "scale_rewards": {
        # Dr. GRPO (arXiv:2503.20783) shows std scaling biases toward easy and hard
        # questions; "group" is the GRPO paper's and TRL's choice.
        "grpo": {"choices": ("group", "batch", "none"), "default": "group", "paper": "none",
                 "source": "Dr. GRPO, arXiv:2503.20783"},
    },
    "balance": {
        # True: every prompt contributes the same number of pairs/prompts, so a task
        # with many rollouts does not dominate the update.
        m: {"choices": (True, False), "default": True, "paper": None, "source": ""}
        for m in ("grpo", "dpo", "rm")
    },
    "lora_rank": {m: {"range": (1, 1024), "default": TRAIN_LORA_R, "paper": 64,
                     "source": "QLoRA, arXiv:2305.14314"} for m in TRAIN_METHODS},
    "lora_alpha": {m: {"range": (1, 4096), "default": TRAIN_LORA_ALPHA, "paper": 16,
                      "source": "QLoRA, arXiv:2305.14314"} for m in TRAIN_METHODS},
    "batch_size": {m: {"range": (1, 4096), "default": TRAIN_BATCH_SIZE, "paper": None,
                      "source": ""} for m in ("sft", "dpo", "rm")},
    "holdout_rows": {m: {"range": (1, 1_000_000), "default": TRAIN_HOLDOUT_MAX_ROWS,
                        "paper": None, "source": ""} for m in TRAIN_METHODS},
    # The learning-rate schedule after the warmup (transformers' lr_scheduler_type): constant by default
    # (TRAIN_LR_SCHEDULER); "cosine" and "linear" decay to zero at the last step. Measured on the kit
    # (issue 18, rm_tooluse with near misses, 69 held-out pairs and 854 pairs of fresh tasks): seed 0
    # constant 1.000 / 0.951, cosine 0.870 / 0.922; seed 1 constant 0.899 / 0.926, cosine 0.986 / 0.936.
    # No consistent difference there, so the default stays.
    "lr_scheduler_type": {m: {"choices": ("constant_with_warmup", "linear", "cosine"), "default": TRAIN_LR_SCHEDULER,
                              "paper": "cosine", "source": "InstructGPT, arXiv:2203.02155 (its SFT trained "
                                                           "with cosine decay)"} for m in TRAIN_METHODS},
    # Where DPO's pairs come from: the dataset's pass and fail rows ("rows", length
    # matched), or the start policy's own sampled replies judged against the rows' gold
    # ("policy", DPO_POLICY_*). Measured on the kit (issue 18): from a 60-step SFT start
    # "rows" never beat its start (33 -> 33, 35 -> 40 of 73) while "policy" did.
    # "policy_gold": the same, and a prompt whose every sample failed pairs the dataset's passing
    # reply against them (SPIN's gold-vs-own-generation pair, arXiv:2401.01335).
    "pair_source": {"dpo": {"choices": ("rows", "policy", "policy_gold"), "default": "rows", "paper": "policy",
                            "source": "Iterative RPO, arXiv:2404.19733 (pairs sampled from the model)"}},
    "policy_samples": {"dpo": {"range": (2, 64), "default": 8, "paper": 30,
                               "source": "Iterative RPO, arXiv:2404.19733 (N=30 samples per prompt)"}},
    # Weight of an NLL term on the chosen side beside the DPO loss (TRL's loss_type
    # [loss_type, "sft"] with loss_weights [1, nll_weight]): RPO's alpha. 0 is plain DPO.
    # Llama 3 (arXiv:2407.21783, section 4.1.4) used 0.2 to keep DPO from lowering the
    # chosen replies' likelihood along with the rejected ones'.
    "nll_weight": {"dpo": {"range": (0.0, 10.0), "default": 0.0, "paper": 1.0,
                           "source": "Iterative RPO, arXiv:2404.19733 (alpha = 1)"}},
    # What a reward model reads of a row: the whole conversation, or the prompt and the first
    # assistant turn (what the first-action judge decides on, and all a GRPO completion is, so a
    # gold judge for GRPO scores what it was trained on). Measured on the kit (issue 18, 69 held-out
    # pairs): with the whole conversation the head told a right tool with a wrong value at chance
    # (13/25); up to the first action 17-18/25.
    "reward_span": {"rm": {"choices": ("conversation", "first_action"), "default": "conversation",
                           "paper": None, "source": ""}},
    # Near-miss pairs per passing row added to a reward model's training pairs (judges.near_miss_pairs:
    # the first action with one argument value changed, a number moved, two arguments swapped, or
    # another prompt's answer; each judged to fail). Needs reward_span="first_action". Measured on the
    # kit (issue 18, recipes/rm_tooluse.yaml, 1200 steps): 3 per row took a right tool with a wrong
    # value from near chance to 22 and 25 of 25 held-out pairs (seeds 0, 1), and to 0.93-0.99 of the
    # 268 such pairs of 1,000 fresh tasks (swapped from/to units stay at chance). 0: the rows' own pairs.
    "near_misses": {"rm": {"range": (0, 64), "default": 0, "paper": None,
                           "source": "FC-RewardBench, arXiv:2509.11963 (wrong parameter values: the commonest "
                                     "tool-call error, 650 of 1,500 pairs)"}},

    # the held-out loss on the passing rows (lower is better).
    "metric": {"sft": {"choices": ("pass_rate", "loss"), "default": "pass_rate", "paper": None, "source": ""}},
    # issue 27: how the tools reach the model (whileai.kit.use_tool_format). "auto": the base's own chat template
    # where it renders tools, else whileai's "hermes" convention (<tools> in the system turn, <tool_call>{json}
    # </tool_call> replies); "native": the template's own, refused where it drops tools; "hermes": always ours.
    # Measured (issue 27): SmolLM2-135M-Instruct's template renders byte for byte the same text with tools= as
    # without, so "native" would train a model that never sees a tool schema.
    "tool_format": {m: {"choices": ("auto", "native", "hermes"), "default": "auto", "paper": None,
                        "source": "Hermes 2 Pro function-calling format (NousResearch), as Qwen2.5's template writes it"}
                    for m in TRAIN_METHODS},
}

#: Keys ``config`` may carry that are not knobs but are read: ``monitor`` (False,
#: or HackMonitor settings for GRPO), ``gold_judge`` (the independent judge the
#: monitor's divergence alarm compares against), ``gpu`` (Modal GPU type).
TRAINING_CONFIG_KEYS = ("monitor", "gold_judge", "gpu")

# ---------------------------------------------------------------------------
# Serving (OpenAI-compatible endpoint, model registry)
# ---------------------------------------------------------------------------

#: How far a near-miss number moves besides one either way (judges.near_miss_pairs, rule
#: "nearby"): a tenth of itself, so 120 becomes 108 or 132. Off-by-one and
#: order-of-magnitude-of-ten-percent slips are what the kit's simulated policies make.
NEAR_MISS_NUMBER_SHIFT = 0.1
#: Draws per near miss wanted before a row gives up (a draw can repeat an earlier
#: change, or be one the judge still passes).
NEAR_MISS_TRIES = 4

#: Rows per forward pass when a reward-model judge scores many rows at once
#: (``judge.score(rows)``). Rows are padded to the longest in the batch, so a
#: bigger batch wastes more on padding; 16 rows of a few hundred tokens each keep
#: a CPU busy without that waste dominating.
REWARD_MODEL_BATCH_SIZE = 16

# ---------------------------------------------------------------------------
# HackMonitor
# ---------------------------------------------------------------------------

#: How often the monitor looks, in optimizer steps (as a trainer callback). One
#: look samples MONITOR_N_PROMPTS x MONITOR_K completions, about what one or two
#: GRPO steps sample on a typical recipe, so looking every 10 steps keeps the
#: monitor's sampling to a small share of the run while a run of a few hundred
#: steps still gets tens of looks. The monitor also looks once at the start of
#: training, so the baseline includes the untrained policy.
MONITOR_EVERY = 10

#: Completions sampled per held-out prompt at each look. Two or more are needed
#: for any within-prompt comparison (length slope, feature scan); 4 is the
#: sample task's rollouts per task (KIT_SAMPLE_ROLLOUTS) and the setting
#: benchmarks/monitor_calibration.py calibrates the alarms at.
MONITOR_K = 4

#: Held-out prompts per look, the same prompts every look (the tests are paired
#: by prompt and resample prompts). The bootstrap over prompts needs tens of
#: them; 32 x MONITOR_K is the size the calibration benchmark holds the targets
#: at (detection of a 0.2 gap within two looks, under 1% false alarms per run).
MONITOR_N_PROMPTS = 32

#: Fewer held-out prompts than this and the monitor warns: intervals resampled
#: from a handful of prompts understate their own uncertainty.
MONITOR_MIN_PROMPTS = 8

#: Looks per window. The baseline is the first window; the current window is
#: the latest looks (at most this many, none of them in the baseline). Three
#: smooths one noisy look while an abrupt 0.2 gap already moves the window
#: mean past MONITOR_DELTA at its second look (2/3 x 0.2 = 0.13).
MONITOR_WINDOW = 3

#: The smallest change in the proxy-gold gap (or gold drop, or gap bought by
#: length) worth an alarm, in reward units: 10 points of pass rate on a 0-1
#: reward. Statistical significance alone is not enough: with many prompts a
#: trivial shift is significant. Gao, Schulman & Hilton 2023 ("Scaling Laws for
#: Reward Model Overoptimization") measure overoptimisation as this gap.
MONITOR_DELTA = 0.1

#: Relative length drift (either way) from the baseline window past which the
#: length alarm asks whether the proxy pays for the length. Length is the
#: best-documented proxy exploit (Singhal et al. 2023, "A Long Way to Go:
#: Investigating Length Correlations in RLHF"); 25% is a judgement call that
#: the calibration benchmark's benign length-growth class checks stays quiet.
MONITOR_LENGTH_PCT = 0.25

#: No KL budget unless one is given: how far a policy may move from its
#: reference is the trainer's choice, not a hack by itself. The KL is measured
#: and logged either way (TRL's GRPO logs none when beta is 0).
MONITOR_KL_BUDGET = None

#: Training completions the wrapped reward keeps for the feature scan (the
#: latest ones); 512 is a few GRPO steps of a typical recipe, enough for n-grams
#: to reach MONITOR_SCAN_MIN, and bounds the gold calls a look adds.
MONITOR_BUFFER = 512

#: Token cap per sampled held-out completion (the default sampler).
MONITOR_MAX_NEW_TOKENS = 256

#: Gold-judge calls in flight at once (threads): a judge behind an HTTP API is
#: latency-bound, and 8 matches the serving endpoint's batch of choices
#: (SERVING_MAX_N) without flooding a rate-limited API.
MONITOR_CONCURRENCY = 8

#: Seed of the held-out prompt choice, the default sampler and the resampling.
MONITOR_SEED = 0

#: Bootstrap resamples over prompts behind every interval. The intervals use the
#: bootstrap standard error with a t critical value, and a standard error is
#: estimated well by a few hundred resamples (Efron & Tibshirani 1993, "An
#: Introduction to the Bootstrap", section 6.4: 200 are usually enough).
MONITOR_N_BOOT = 500

#: Within-prompt permutations behind the feature scan's max-T null. The tail
#: past them is read from a Gumbel fit to the permutation maxima, so 50 suffice
#: for its mean and spread; benchmarks/monitor_calibration.py checks the
#: resulting false-flag rate.
MONITOR_N_PERM = 50

#: The feature scan runs once this many gold-scored completions are at hand,
#: and skips features seen in fewer completions than this: a feature seen a
#: handful of times cannot be told from chance.
MONITOR_SCAN_MIN = 8

#: The default sampler's settings. Temperature 1 with no top-p/top-k cut samples
#: the policy itself, which is what the KL estimate (log p_policy - log p_ref
#: over the policy's own samples) needs; ``batch`` is sequences per generate
#: call. Any key can be overridden through ``sampling=``.
MONITOR_SAMPLING: dict[str, float | int] = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "batch": 64}

#: Chance per run of any false alarm from the divergence, gold-decline and
#: length alarms together, split evenly between the three and spent across looks
#: (look m spends alpha / (m (m + 1)), which sums to alpha over any number of
#: looks: a Bonferroni split over an open-ended sequence of tests, the simplest
#: of the alpha-spending schemes of Lan & DeMets 1983). The KL bound spends the
#: same alpha on its own looks.
MONITOR_ALPHA = 0.01

#: Chance per run that the feature scan flags a feature the proxy does not pay
#: for, spent across scans like MONITOR_ALPHA; within one scan the max-T
#: procedure controls it over every feature (Westfall & Young 1993).
MONITOR_SCAN_ALPHA = 0.02

#: "The proxy holds": gold-decline fires only when the proxy fell by at most this
#: share of what gold lost (a run where both fall is getting worse, not hacked).
MONITOR_PROXY_HOLD = 0.5

#: Longest word n-gram the feature scan reads, and the most words per completion
#: it reads them from (longer completions are cut: the scan's cost is linear in
#: words, and a paid phrase is rarely only in a completion's tail).
MONITOR_NGRAM_MAX = 3
MONITOR_SCAN_MAX_WORDS = 400

#: Most features one scan tests (the most frequent), bounding its memory and time
#: to tens of milliseconds; and how many it lists in the summary.
MONITOR_SCAN_MAX_FEATURES = 2000
MONITOR_SCAN_TOP = 10

#: from_bfcl: at most this many concrete objects are listed for one argument whose BFCL answer nests
#: alternatives ({key: [values]}); BFCL's categories simple_python, multiple, live_simple and parallel
#: need at most 128 (live_simple_44-18-0's "body", bfcl-eval 2026.3.23), so the cap only guards
#: against a combinatorial answer.
BFCL_EXPANSION_CAP = 256
