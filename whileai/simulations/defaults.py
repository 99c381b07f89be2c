"""Every tunable number in whileai, each beside its reason and its source.

Docstrings elsewhere name these constants instead of repeating their values, so
there is one copy to keep true. Grouped by the part of the product that reads
them. A value that came from a paper cites it; a price cites the page and the
day it was read; a value we measured says what was measured.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# Data root and platform connection
# ---------------------------------------------------------------------------

#: Environment variable naming the data root (store, spool, model cache, adapters).
HOME_ENV = "WHILEAI_HOME"

#: Loopback by default: a platform server is reachable from other hosts only when
#: its operator says so (``--host 0.0.0.0``).
PLATFORM_HOST = "127.0.0.1"

#: Port of ``python -m whileai platform``. 8470 is unassigned by IANA and clear of
#: the ports notebooks and dev servers usually take (8000, 8080, 8888).
PLATFORM_PORT = 8470

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

#: ``TrainingRun.wait``'s polling interval when none is given, in seconds. A
#: hosted fine-tune takes minutes; a read every 10 s shows the end promptly.
TRAINING_POLL_S = 10.0

#: The fastest ``wait`` ever polls, in seconds, whatever ``poll`` says. A run's
#: record changes at most once per FLUSH_INTERVAL_S (the trainer's own tracker
#: writes no faster), so a faster poll reads the same record again and only
#: loads the server (on Modal every read also asks Modal for the call's state).
TRAINING_POLL_MIN_S = 2.0

# ---------------------------------------------------------------------------
# Platform server (request limits, store)
# ---------------------------------------------------------------------------

#: Environment variable naming the store (any SQLAlchemy URL); unset means the
#: SQLite file ``platform.db`` under the data root.
STORE_URL_ENV = "WHILEAI_STORE_URL"

#: Largest request body the HTTP API reads, in bytes (64 MiB). A 100,000-point
#: batch with 10 metrics per point (a Trainer's usual log) is about 37 MB as
#: JSON, so the benchmark's batch fits with room to spare; anything bigger is
#: answered 413 before it is read, so one request cannot exhaust the server's
#: memory. Clients send bigger backlogs as several batches.
PLATFORM_MAX_BODY_BYTES = 64 * 1024 * 1024

#: Runs, datasets and jobs a list answers when no ``limit`` is given, and the
#: most it answers at all. A list is a menu, not an export; the run page and
#: ``get_run`` read one run in full.
PLATFORM_LIST_LIMIT = 100
PLATFORM_LIST_LIMIT_MAX = 1000

#: Longest client-chosen string id the API stores: a point batch id, a metric
#: name, a model name. Generous for uuid4 hex (32) and TRL's longest metric
#: names (``rewards/<func>/mean`` is well under 100), short enough to index.
PLATFORM_MAX_KEY_CHARS = 200

#: Random bytes in an API key (256 bits). Keys are random, not chosen by people,
#: so one SHA-256 of the key is a safe hash at rest without a slow password KDF.
API_KEY_BYTES = 32

#: Leading characters of a key kept in clear to find it and to show which key is
#: which ("wai_" plus 8 random characters: 48 bits, not enough to guess the rest).
API_KEY_PREFIX_CHARS = 12

#: How long a SQLite writer waits for the file's write lock before giving up, in
#: seconds. Writers hold it for milliseconds (a 100,000-point batch holds it
#: well under a second on a laptop disk), so waiting is always better than
#: failing: a trainer, the server and a notebook share one file.
SQLITE_BUSY_TIMEOUT_S = 30.0

#: Retries of a whole store transaction after SQLite still answers "database is
#: locked" (the busy handler does not cover every case, e.g. a WAL checkpoint or
#: recovery), with a backoff doubling from STORE_LOCK_BACKOFF_S up to
#: STORE_LOCK_BACKOFF_MAX_S. Bounded so a wedged file ends in a clear 503.
STORE_LOCK_RETRIES = 8
STORE_LOCK_BACKOFF_S = 0.05
STORE_LOCK_BACKOFF_MAX_S = 2.0

#: Points drawn per curve on a run page. A curve of 100,000 points is thinned to
#: this many (evenly by index) so the page stays small; the API keeps them all.
PAGE_CURVE_MAX_POINTS = 1000

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
#: by single spaces). It keeps a short value ("Paris", "18", "yes") from ever
#: counting as recited: a reply that merely names the same city or number is not
#: evidence that the policy saw the note. A long single-token secret (an API key,
#: a hidden passphrase) passes it and is caught. Our choice, pinned by the same
#: tests.
LEAK_MIN_CHARS = 16

#: How many offending rows an export error message spells out; the exception's
#: ``problems`` always lists every one. Ten lines fit a terminal; the rest is a
#: count and a pointer to ``problems``.
EXPORT_PROBLEMS_IN_MESSAGE = 10

# ---------------------------------------------------------------------------
# Model kit (tiny tokenizer, model and base, built in code)
# ---------------------------------------------------------------------------

#: Tokenizer vocabulary size. Room for the 256 byte symbols, the special tokens,
#: every number up to KIT_TOKENIZER_MAX_NUMBER, and the sample task's words whole.
#: Kept small because the tied embedding is most of the tiny model's parameters.
KIT_VOCAB_SIZE = 1536

#: Numbers 0..this are single tokens (the sample task's amounts and minutes stay under it).
KIT_TOKENIZER_MAX_NUMBER = 300

#: Generic sentences in the tokenizer's training text.
KIT_TOKENIZER_SENTENCES = 2000

#: Times each task word and number appears in the tokenizer's training text: enough that
#: BPE merges every one of them whole before the vocabulary fills.
KIT_TOKENIZER_TASK_REPEATS = 40

#: Context length of the tiny model and the tokenizer's model_max_length. A rendered
#: sample-task conversation (system prompt, compact tool list, ask, call, response,
#: reply) is under 200 tokens.
KIT_MAX_POSITIONS = 512

#: The tiny model's shape (a Llama config; see whileai.kit.tiny_model). Measured on a
#: 2-core CPU with torch 2.13 / TRL 1.16: a ~473k-parameter model (hidden 128,
#: 2 layers) learned the sample task reliably (0 -> 0.93 / 1.00 / 1.00 held-out
#: first-action pass rate over three seeds of full SFT in ~3-4 minutes); a 154k model
#: was seed-sensitive (0 -> 1.0 with one seed, 0 -> 0.40 with another); a 2.9M model
#: was slower and did not learn in 5 minutes.
KIT_HIDDEN_SIZE = 128
KIT_LAYERS = 2
KIT_HEADS = 4
#: Key/value heads: full multi-head attention (grouped-query saves nothing at this size).
KIT_KV_HEADS = 4
#: MLP width, 2x hidden: with the tied embedding (vocab x hidden) the model has ~525k parameters.
KIT_INTERMEDIATE_SIZE = 256
#: Input and output embeddings share one matrix: it is most of the parameters.
KIT_TIE_EMBEDDINGS = True

#: Tasks in the shipped sample dataset: enough distinct cities, units and numbers for a
#: held-out split to test copying arguments, small enough to keep the file ~2 MB.
KIT_SAMPLE_TASKS = 400
#: Rollouts per task (the group size GRPO sees).
KIT_SAMPLE_ROLLOUTS = 4
#: The sampling temperature the simulated rollouts record.
KIT_SAMPLE_TEMPERATURE = 0.7
#: Held-out share of tasks in kit.sample_task.split_tasks (the same share datasets.cut uses).
KIT_SAMPLE_HOLDOUT = 0.2

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

# ---------------------------------------------------------------------------
# Serving (OpenAI-compatible endpoint, model registry)
# ---------------------------------------------------------------------------

#: Models the platform's endpoint keeps in memory at once; past it the least
#: recently used is dropped. Each entry is its own copy of the base with its LoRA
#: beside it, so this bounds memory at about this many base models: four 0.5B
#: bases in bf16 are ~4 GB, which fits a laptop, and a sweep comparing a few
#: adapters side by side does not reload on every request.
SERVING_MAX_LOADED_MODELS = 4

#: A loaded model nobody has called for this many seconds is dropped, and an idle
#: server holds no weights at all (idle to zero). An evaluation or rollout loop
#: calls every few seconds and keeps its model warm; five minutes of silence means
#: the loop is over. Reloading costs little by comparison: the kit's base loads in
#: well under a second, a 0.5B base from local disk in a few seconds.
SERVING_IDLE_UNLOAD_S = 300.0

#: Environment variables a platform operator sets to change the two above
#: without code (read when the server's model pool is created).
SERVING_MAX_LOADED_ENV = "WHILEAI_SERVING_MAX_LOADED"
SERVING_IDLE_UNLOAD_ENV = "WHILEAI_SERVING_IDLE_S"

#: Longest wait of the idle check, in seconds: an idle model goes at most this
#: long after SERVING_IDLE_UNLOAD_S (the check also runs at a quarter of the idle
#: period when that is shorter). The check thread ends when nothing is loaded.
SERVING_IDLE_CHECK_S = 30.0

#: Reply length cap when a request sets neither max_tokens nor
#: max_completion_tokens, in tokens; the model's context caps it further. OpenAI
#: has no such cap, but one request holds its model for the whole reply, and a
#: model that never emits its end token would hold it until the context is full.
#: A tool call or a short answer is well under this.
SERVING_DEFAULT_MAX_TOKENS = 1024

#: Sampling temperature when a request does not set one: OpenAI's documented
#: default (API reference, chat completions, ``temperature``), so a client that
#: omits it gets what it would get from OpenAI. Pass 0 for greedy decoding.
SERVING_DEFAULT_TEMPERATURE = 1.0

#: Most choices one request may ask for (``n``). All choices share the model's
#: lock, so a large n starves other callers; 8 covers GRPO-style group sizes
#: (DeepSeekMath sampled 64 per prompt, but as many requests, not one).
SERVING_MAX_N = 8

#: Most stop sequences per request: OpenAI's documented limit (API reference,
#: chat completions, ``stop``: up to 4 sequences).
SERVING_MAX_STOP = 4

#: Rows per forward pass when a reward-model judge scores many rows at once
#: (``judge.score(rows)``). Rows are padded to the longest in the batch, so a
#: bigger batch wastes more on padding; 16 rows of a few hundred tokens each keep
#: a CPU busy without that waste dominating.
REWARD_MODEL_BATCH_SIZE = 16

# ---------------------------------------------------------------------------
# HackMonitor
# ---------------------------------------------------------------------------
