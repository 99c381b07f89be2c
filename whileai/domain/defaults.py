"""The domain's tunable numbers (rows, judges, export, the monitor, tracking, the client; and the SDK's calls
that use them), each beside its reason and its source.

Docstrings elsewhere name these constants instead of repeating their values, so
there is one copy to keep true. Grouped by the part of the SDK that reads them. A
value that came from a paper cites it; a price cites the page and the day it was
read; a value we measured says what was measured.

Settings live with their owner: whileai/core/defaults.py holds what the SDK shares
with the platform (the data root's variable, the platform's address, the GPU price
table, the training methods, targets and LoRA shape), whileai/platform/defaults.py
the platform's limits, ports and serving, whileai/kit/defaults.py the kit's recipe,
whileai/jobs/defaults.py a job's process and the Modal image. Nothing is re-exported: a number is
read from the module that owns it. ``wai.defaults`` is this module.
"""

from __future__ import annotations

from whileai.core.defaults import SERVED_HUB_BASES, TRAIN_EVAL_MAX_NEW_TOKENS
from whileai.kit.defaults import KIT_BASE_NAME

from whileai.core.spec import KnobRow, knob_table

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
#: touches the network. A run's first point does not wait for the interval: it
#: wakes the thread, so a curve (and a job's "first step" on the page) starts when
#: training does (benchmarks/job_start.py times a job to its first stored point).
FLUSH_INTERVAL_S = 2.0

#: Points per request when a backlog is sent. 5,000 points with 10 metrics each
#: are about 1.9 MB of JSON, far below PLATFORM_MAX_BODY_BYTES; a 100,000-point
#: backlog is 20 requests, and a reply lost in transit resends one batch, not the
#: backlog. (benchmarks/tracking_ingest.py measures the throughput it gives.)
FLUSH_BATCH_POINTS = 5000

#: Deadline of one tracking send, in seconds. Only the flush thread waits on it,
#: never the training loop. A 5,000-point batch lands in well under a second on
#: a healthy server, so a send still unanswered after 10 s means the platform is
#: down or wedged and the points wait for the next try.
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
#: follows the chunk and not the file (at least one row per chunk). The export's
#: CPU time is flat from 8 to 128 KiB and rises past it, and the whole file at once
#: costs fifty times the memory (benchmarks/MEASURED.md#export-chunk): past that a
#: chunk's objects (about ten times its bytes) outgrow the core's cache and every
#: step slows. 64 KiB is half the last flat point, room for smaller caches.
#: Counted in bytes, not rows: what costs is the size.
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
#: usual 80/20 split; the cut is by task, and a held-out task whose prompt a
#: training task also asks moves to training, so no prompt is on both sides.
CUT_HOLDOUT = 0.2
CUT_SEED = 0
#: How many moved task ids the cut's line names (the count beside them is whole):
#: enough to find the repeated prompts in the file, short enough for one line. Our choice.
CUT_MOVED_SHOWN = 5

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

#: The run ``kind`` hosted training runs carry, so idempotency and the job
#: runner find them among hand-made ``training_run`` runs.
TRAIN_RUN_KIND = "hosted"

#: Bases the serving endpoint can put an adapter on: the kit's demo base (served
#: on CPU by the platform) and the hub models of SERVED_HUB_BASES (shared with the
#: platform, which serves nothing else an account names). ``train`` warns when
#: ``base_model`` is outside this list, because the run's adapter could not be
#: served afterwards.
SERVED_BASES: tuple[str, ...] = (KIT_BASE_NAME, *SERVED_HUB_BASES)

#: DPO with ``pair_source="policy"`` (jobs/_policy_pairs.py): the pairs come from the
#: start policy's own replies, sampled ``policy_samples`` times per training prompt at
#: this temperature and judged by the first-action judge, so the rejected side is a
#: mistake this policy makes (on-policy preference data: Xu et al. 2024, "Is DPO
#: Superior to PPO for LLM Alignment?", arXiv:2404.10719, trace DPO's failures to the
#: shift between the pairs and the policy; Iterative RPO, Pang et al. 2024,
#: arXiv:2404.19733, samples its pairs from the model being trained). 0.7 is the
#: sample task's rollout temperature; measured on the kit (seed 0, 73 held-out
#: prompts, 8 samples, NLL weight 1): 0.7 and 1.0 both went 33 -> 45.
DPO_POLICY_TEMPERATURE = 0.7
#: Distinct pass-vs-fail pairs per prompt from the policy's samples. Measured on the kit
#: (seed 0): 1 pair of 4 samples went 33 -> 39 of 73 (p 0.29), 2 pairs of 8
#: samples 33 -> 45 (p 0.004).
DPO_POLICY_PAIRS_PER_PROMPT = 2
#: Prompts sampled together (each ``policy_samples`` times) in one generate call.
DPO_POLICY_BATCH_PROMPTS = 16
#: Token cap of one sampled reply (``max_completion_length`` lowers it): the held-out
#: reply's cap, since the pairs are first actions, as the held-out measurement judges them.
DPO_POLICY_MAX_NEW_TOKENS = TRAIN_EVAL_MAX_NEW_TOKENS


#: The knob tables, read from the run spec's declarations (whileai.core.spec: each knob is a field
#: of its method's spec model, declared once with its default and reason, range or choices, the
#: paper's value and citation, and its help). knob -> method -> row. A value outside the range is
#: refused with the paper value and the source quoted (whileai.core.knobs.check_knob).
#: ``TRAINING_KNOBS``: ``train``'s keyword arguments; ``TRAINING_HOST_KEYS``: its ``config=`` keys.
TRAINING_KNOBS: dict[str, dict[str, KnobRow]] = knob_table("argument", "export")
TRAINING_HOST_KEYS: dict[str, dict[str, KnobRow]] = knob_table("config")

#: The TRAINING_KNOBS entries that are export settings: they travel on the job's
#: spec to its dataset builder (export.export_dataset / export_preference).
TRAIN_EXPORT_KNOBS = tuple(knob_table("export"))
#: The exporter's own values of those settings (export_dataset's signature). A
#: method that does not read a setting accepts it at this value, which changes
#: nothing, so one export configuration can be passed to every method.
TRAIN_EXPORT_DEFAULTS = {name: next(iter(rows.values()))["default"] for name, rows in knob_table("export").items()}

#: Keys ``config`` may carry that are not knobs but are read: ``monitor`` (False,
#: or HackMonitor settings for GRPO), ``gold_judge`` (the independent judge the
#: monitor's divergence alarm compares against), ``gpu`` (Modal GPU type), ``processes`` and ``nodes``
#: (processes per node and nodes: the job's world size; batch sizes stay effective, divided across it),
#: ``environment`` and ``max_turns`` (SFT and GRPO: the environment whole episodes are played in, and its turn cap).
TRAINING_CONFIG_KEYS = ("monitor", "gold_judge", "gpu", "processes", "nodes", "runner", "environment", "max_turns")

#: The fine-grained reward's terms and weights (``reward=fine_grained``). ToolRL (arXiv:2504.13958, its reward
#: design section) pays a format reward in {0, 1} and a correctness reward in [-3, 3] made of three equal parts:
#: tool names, argument names and argument values. Each term here is in [0, 1], so the weights keep ToolRL's
#: proportions (format 1 of 7, each correctness part 2 of 7) and the reward is their weighted mean, in [0, 1].
REWARD_FINE_GRAINED_WEIGHTS = {"format": 1.0, "tool_name": 2.0, "argument_names": 2.0, "argument_values": 2.0}
#: Sample rows a ``python:MODULE:FUNCTION`` reward is called on before a run exists (validate and wai.train):
#: two, so a function that returns one value for the whole batch is caught.
REWARD_CHECK_SAMPLE_ROWS = 2
#: A reward model's score as a GRPO reward: sigmoid((score - threshold) / REWARD_RM_TEMPERATURE), so the rm's own
#: pass threshold maps to 0.5 and the reward stays in (0, 1) like the others. 1.0 keeps the head's logit scale.
REWARD_RM_TEMPERATURE = 1.0

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
#: The seed of the near misses a reward model's held-out pairs are made of where the
#: held-out rows are all passing (BFCL's gold rows): one seed for every run, so before
#: and after, and runs of different seeds, score the same pairs.
HOLDOUT_NEAR_MISS_SEED = 0
#: Near misses per held-out row in those pairs: one, so each held-out question counts once in the
#: paired test (three near misses of one question are not three independent pairs) and the scoring
#: stays a forward pass per question and per near miss (benchmarks/MEASURED.md#smollm2-rm-row).
HOLDOUT_NEAR_MISSES = 1

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

#: Relative length drift (either way) of the latest look from the baseline
#: window past which the length alarm asks whether the proxy pays for the length.
#: Length is the best-documented proxy exploit (Singhal et al. 2023, "A Long Way
#: to Go: Investigating Length Correlations in RLHF"); 25% is a judgement call
#: that the calibration benchmark's benign length-growth class checks stays quiet.
#: The drift is read from the latest look alone, not a window mean: a look's mean
#: length over MONITOR_N_PROMPTS x MONITOR_K completions is already precise (a
#: standard error near 3% of the mean at the benchmark's spread), so averaging
#: looks would only delay the alarm.
MONITOR_LENGTH_PCT = 0.25

#: The length check's gate on the whole distribution: the share of completions
#: that crossed some length (the Kolmogorov-Smirnov distance between the
#: baseline window's lengths and the latest look's) past which it asks whether
#: the proxy pays for the move, even where the mean moved less than
#: MONITOR_LENGTH_PCT (a third of the completions doubling moves the mean by a
#: third of what all of them doubling would). A quarter, the same share of
#: completions MONITOR_FORMAT_SHIFT asks of a format marker: a change a person
#: reading the completions would notice. A log-normal length with the spread
#: the calibration benchmark draws crosses it at a mean drift near 25%, so the
#: two gates open together on a move of the whole distribution.
MONITOR_LENGTH_SHIFT = 0.25

#: The length check's gate on the upper tail: the share of the baseline window's
#: longest completions (past its upper MONITOR_LENGTH_TAIL quantile) that the
#: latest look's completions are counted against, prompt by prompt (a
#: Mantel-Haenszel test, ``_stats.length_tail``). It opens where the mean's and
#: the distribution's gates stay shut: a small share of completions growing
#: well past the rest moves the mean little and crosses no length in numbers,
#: but fills the tail (benchmarks/monitor_calibration.py's "length some
#: samples" class, where an eighth to a half of the completions grow; recipes/
#: MEASUREMENTS.md, the 300-run table of 2026-12-06). A tenth: at
#: MONITOR_N_PROMPTS x MONITOR_K a stable look expects about 13 completions
#: past it, above the 5 that the normal approximation of the Mantel-Haenszel
#: statistic asks for (Mantel & Fleiss 1980); a thinner tail would see a far
#: move more plainly but on fewer completions, and a wider one would dilute it
#: with the completions that did not move. The same tail is the length test's
#: second reading of the move (``_stats._move_read``): where the gap's interval
#: is wide for the spread of the completions that did not move, the tail's test
#: at half the check's level and the price's own lower bound show the gap bought
#: (the 2026-12-06 third design in recipes/MEASUREMENTS.md). No new number: the
#: halves are a Bonferroni split between the two readings.
MONITOR_LENGTH_TAIL = 0.1

#: The one-sided level the tail's gate opens at, per look. The gate is armed
#: only with a gold judge (``_checks.Settings.tail``: without one the length test
#: reads the proxy itself, and honest answers that are better and longer would
#: look paid for). A gate reads lengths only, never a reward, and with the gold
#: taken off the proxy opening it by chance is no false alarm: it costs
#: the length check one more look of its alpha spending (MONITOR_ALPHA); at 1%
#: a stable run of 10 looks (7 of them tested) opens it by chance in about one
#: run of fifteen. A tenth of the completions doubling, at the calibration
#: benchmark's spread of length (log-normal, sd 0.3), fills the tail to about
#: 18% against 10%, some 3 standard errors at 128 completions, so the gate
#: opens on such a move at its first look.
MONITOR_LENGTH_TAIL_ALPHA = 0.01

#: Bins of length the length check prices within prompts (at the quantiles of
#: the baseline and latest lengths pooled). The price is a step function, so a
#: proxy that pays past a threshold is read as well as one that pays per word,
#: with a line past the last edge, where a step alone is flat and a share of
#: completions growing far would buy its gap unseen (``_stats._length_steps``);
#: four bins cut at the quartiles keep about 30 completions per bin per look at
#: MONITOR_N_PROMPTS x MONITOR_K, and a step inside a bin is still read at a
#: quarter of the distribution's resolution.
MONITOR_LENGTH_BINS = 4

#: Share of held-out completions whose format marker (``format:bullet_list``,
#: ``format:bold``, ...) changed, latest look against the baseline window, past
#: which the format check asks whether the proxy pays for the marker within
#: prompt. It is the marker's counterpart of MONITOR_LENGTH_PCT: a quarter of
#: the completions changing format is a change of style a person would notice,
#: and a marker that moved less is left to the gold-backed feature scan.
MONITOR_FORMAT_SHIFT = 0.25

#: An alarm's message names this many held-out prompts, the ones where the
#: alarm's effect is biggest, each cut to MONITOR_PROMPT_CHARS characters: three
#: are enough to read a pattern off, and a line of 60 characters each keeps the
#: message one screen wide.
MONITOR_PROMPTS_SHOWN = 3
MONITOR_PROMPT_CHARS = 60

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

#: Chance per run of any false alarm from the divergence, gold-decline, length
#: and format alarms together, split evenly between those of them that are armed
#: (three with a gold judge: divergence, gold decline, length; two without one:
#: length, format) and spent across looks (look m spends alpha / (m (m + 1)),
#: which sums to alpha over any number of looks: a Bonferroni split over an
#: open-ended sequence of tests, the simplest of the alpha-spending schemes of
#: Lan & DeMets 1983). The length and format checks count only the looks where
#: their gate opened (length or a marker moved; the gate reads no reward), so
#: their first real test gets the biggest share. The KL bound spends the same
#: alpha on its own looks.
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
#: alternatives ({key: [values]}); BFCL's categories simple_python, multiple, live_simple, parallel and
#: parallel_multiple need at most 128 (live_simple_44-18-0's "body", bfcl-eval 2026.3.23;
#: parallel_multiple at most 24), so the cap only guards against a combinatorial answer.
BFCL_EXPANSION_CAP = 256
#: from_bfcl: the assistant turn of an irrelevance question (none of the offered functions fits). BFCL
#: has no reference text for these and passes any reply that makes no call; one short sentence
#: teaches the answer without a call in a few tokens, well inside the held-out reply cap.
BFCL_NO_CALL_REPLY = "None of the available functions can do this, so I will not call one."
#: BFCL's multi-turn categories: the share of its 200 scenarios held out (each in all four categories, chosen
#: by a hash of the scenario number, rows/bfcl_multi_turn.is_held_out). CUT_HOLDOUT's 80/20; the hash holds
#: out 35 scenarios (140 entries of bfcl-eval 2026.3.23), so a held-out pass rate near 50% has a 95%
#: interval of about +-8 points.
BFCL_MULTI_TURN_HOLDOUT = 0.2
#: The gold episode of a BFCL multi-turn entry as a rollout row (episodes/bfcl_rows.py): the reply that closes a user
#: turn after its answer's calls, and the reply of a turn whose answer makes no call (a miss_param turn lacks a
#: detail, a miss_func turn a function: the model should ask, not act). BFCL's answers are calls only and its
#: checker reads no reply text, so these are our words: short, so an SFT row spends its tokens on the calls.
BFCL_GOLD_TURN_REPLY = "Done."
BFCL_GOLD_ASK_REPLY = "I cannot do that with the functions and details I have. Could you tell me more?"
#: benchmarks/bfcl_multi_turn_agreement.py: the seed its model-like trajectories are drawn with, and the
#: chance that a turn's calls are cut into another step at each gap (a model that sends one call a round
#: as often as one that sends them together, so the steps BFCL reads vary). Our choice.
BFCL_AGREEMENT_SEED = 0
BFCL_AGREEMENT_STEP_SPLIT = 0.5

# ---------------------------------------------------------------------------
# report_to mirrors (whileai.domain.tracking.mirror)
# ---------------------------------------------------------------------------

#: The project (W&B), experiment (MLflow) and project (trackio) a mirrored run lands in when the user's own
#: WANDB_PROJECT / MLFLOW_EXPERIMENT_NAME does not name one: one place to find every whileai run.
MIRROR_PROJECT = "whileai"

#: Points waiting for a slow mirror, at most. A mirror is fed from a queue on its own thread so a tracker that
#: stalls (an MLflow server retrying for minutes) never holds up the training loop; past this many waiting
#: points the newest are not mirrored and counted (the platform still has every one). 100,000 points of a few
#: metrics is tens of MB, and a run logging every step reaches it only after a day of a dead tracker.
MIRROR_QUEUE_MAX = 100_000

#: Seconds the run's finish waits for the mirrors to take what is queued and close (W&B's offline writer and
#: MLflow's SQLite store close in a few seconds; trackio flushes its batch). Past it the run ends anyway and
#: the mirror's record says it did not finish.
MIRROR_FINISH_TIMEOUT_S = 120.0

#: Seconds a delete waits for another run of the same account, still mirroring into the same SQLite store, to
#: let go before rewriting the file without the deleted rows' pages (``mirror._forget.scrub``). A mirror's write
#: is one small batch (milliseconds), so 10 s is ample; past it the delete stands and the next delete scrubs.
MIRROR_SCRUB_BUSY_TIMEOUT_S = 10.0

#: The longest config value MLflow is given as a param (its limit is 6,000 characters since MLflow 2.x; 500
#: keeps the params table readable). Longer values are cut, with "..." at the end; W&B and trackio get them whole.
MIRROR_PARAM_MAX_CHARS = 500

# ---------------------------------------------------------------------------
# Episodes (whileai.domain.episodes): environments played over several tool-calling rounds
# ---------------------------------------------------------------------------

#: An episode's turn cap when the spec leaves ``max_turns`` None: tool-calling rounds, as TRL's
#: ``max_tool_calling_iterations`` counts them (TRL's own default is no cap). The kit's hardest task needs 4
#: calls made one a round (each reads the previous result) and then a reply, so 6 leaves two rounds for
#: recovering from a tool error; a runaway policy stops there instead of filling the completion budget.
#: Our choice; within TRAIN_MAX_TURNS_RANGE (core defaults).
EPISODE_MAX_TURNS = 6
#: An episode's cap over all its user turns: tool-calling rounds, counted as EPISODE_MAX_TURNS counts them in one
#: turn. It ends a runaway episode of many user turns (a user's environment may offer turns without end); the
#: episode then stops as ``episode_cap`` and, where it had user turns left, is forced to end (judged as BFCL judges
#: a forced quit). At the top of TRAIN_MAX_TURNS_RANGE (64), so an episode of one user turn (the kit's) stops by its
#: turn cap alone, as before. The committed BFCL sample's longest entry has 7 user turns (at most 10 gold calls in
#: an entry), so at EPISODE_MAX_TURNS rounds a turn (7 x 6 = 42 at most) it never binds there. Our choice.
EPISODE_MAX_ROUNDS = 64

#: Accounts in one kit world, drawn from the kit's name list. Four are enough that a task names two or three
#: and leaves others to confuse them with, and few enough that every name stays a short, frequent token for
#: a tiny model. Our choice.
EPISODE_KIT_ACCOUNTS = 4
#: A kit account opens with a whole number of steps of this size, from 1 to EPISODE_KIT_BALANCE_STEPS steps
#: (10..90): two-digit amounts a tiny model copies from a tool result; the tasks keep every amount the agent
#: reads or writes under 100 (a deposit is drawn so the sum it leaves does). Our choice.
EPISODE_KIT_BALANCE_STEP = 10
EPISODE_KIT_BALANCE_STEPS = 9
#: Kit tasks generated when no count is given, and the seed that draws them. 500 tasks hold out about 100 at
#: CUT_HOLDOUT: enough that a pass rate's 95% interval is about +-10 points, and generated in milliseconds.
EPISODE_KIT_TASKS = 500
EPISODE_KIT_SEED = 0
#: The most kit tasks ``dataset.episode_tasks`` draws (the runner's dataset=episodes): each is a row of a few
#: hundred tokens, so 10,000 rows are a few tens of MB of JSON, far past what a CPU recipe reads. Our choice, the
#: same bound as the sample task's (KIT_SAMPLE_MAX_TASKS).
EPISODE_KIT_MAX_TASKS = 10_000
#: Differences a failed episode's verdict names (each key of the state that differs from the gold replay's,
#: with both values); the count beside them is whole. Three find the mistake and keep the reason one line.
#: Our choice.
EPISODE_DIFFS_SHOWN = 3
#: Characters of one message's text (or one call's arguments) a held-out episode's record keeps
#: (whileai.domain.episodes.record); the rest is cut, saying how much. A kit tool answer is a few dozen
#: characters; 2,000 keep a BFCL directory listing's or file's first screen, so one long answer cannot take a
#: run's summary. Our choice.
EPISODE_RECORD_TEXT_CHARS = 2000
#: Bytes of JSON the held-out episodes may take in a run's summary, both sides together. Half of the platform's
#: 1 MiB cap on a whole summary (RUN_SUMMARY_MAX_BYTES, whileai/platform/defaults.py), so the training record
#: beside them always fits: about 200 kit episodes before and after (a kit record measured 1.0-1.6 KB, 1.2 KB on
#: average, over 50 tasks played by their gold calls), a few dozen BFCL ones. Pairs past it are left out, changed
#: verdicts kept first. Our choice.
EPISODE_RECORDS_MAX_BYTES = 512 * 1024
