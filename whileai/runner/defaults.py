"""Every tunable number of the experiment runner, each beside its reason and its source.

The training knobs themselves (ranges, defaults, the papers' values) are not
here: they live once in ``whileai.domain.defaults.TRAINING_KNOBS`` and the
runner's schema reads them from there.
"""

from __future__ import annotations


#: Environment variable naming a folder of the user's own recipes, searched before the committed
#: ones (a recipe there with a committed recipe's name wins). ``--recipes DIR`` does the same.
RECIPES_ENV = "WHILEAI_RECIPES"

#: The config groups of conf/ (each a folder of options) and the recipe group (recipes/).
GROUPS: tuple[str, ...] = ("dataset", "method", "export", "monitor", "serve", "target")
RECIPE_GROUP = "recipe"

#: Where the runner keeps Hydra's output folders under the data root: one folder per run
#: (``runner/runs/<token>``) and one per multirun (``runner/multirun/<token>/<job>``).
RUNNER_DIR = "runner"

#: Environment variable carrying one invocation's token to Hydra's output paths and to the jobs
#: of a sweep (each job of a joblib sweep is another process; the token is how they share a sweep id).
TOKEN_ENV = "WHILEAI_RUNNER_TOKEN"

#: Random hex characters after the timestamp in a token: 16 bits keep two invocations started
#: in the same second apart (a one-in-65,536 chance of a clash, which only shares a folder name).
TOKEN_RANDOM_HEX = 4

#: The file each job writes into its Hydra output folder naming the runs it made; ``wait`` reads it.
RUN_FILE = "whileai_runs.json"

#: Suggestions a typo gets (difflib.get_close_matches): the nearest three, and only those at least
#: this similar. 0.6 is difflib's own default cut-off (Python docs, difflib.get_close_matches),
#: close enough that "bta" finds "beta" and "lerning_rate" finds "learning_rate".
TYPO_SUGGESTIONS = 3
TYPO_CUTOFF = 0.6

#: The longest the runner waits on one read of a hosted run's progress while it trains, in seconds.
#: Each read is a long poll (TrainingRun.refresh(wait=...)): the platform answers as soon as the run's
#: record changes, which the SDK's tracker does at most once per FLUSH_INTERVAL_S (2 s), and at its end.
#: When a read fails, the runner waits this long before the next.
PROGRESS_POLL_S = 2.0

#: Off a terminal (a CI log, a pipe), training progress is one plain line at most this often, in
#: seconds, plus one at each phase change and at the end: a 5-minute run writes about 20 lines.
PLAIN_LINE_EVERY_S = 15.0

#: Seconds after Ctrl-C that the runner waits for the stopped run's record to say so before it
#: exits anyway (the stop itself is synchronous; this only covers the record catching up).
STOP_CONFIRM_S = 10.0

#: Tokens the one chat completion that proves a served endpoint answers may generate: a first
#: action (one tool call) of the sample task fits (TRAIN_EVAL_MAX_NEW_TOKENS is 96).
SERVE_CHECK_MAX_TOKENS = 96

#: Seconds the chat completion through a served endpoint may take: the platform loads the model
#: on first use (the kit's base in well under a second, a 0.5B base from disk in a few seconds; a
#: cold Modal container up to MODAL_SERVE_STARTUP_S, which this does not wait for).
SERVE_CHECK_TIMEOUT_S = 120.0

#: Characters of the served model's reply shown in the run's output (the proof that it answers,
#: not the transcript), and of a dataset's content hash in a step line (64 bits, as DIFF_HASH_HEX).
SERVE_CHECK_REPLY_CHARS = 200
HASH_SHOWN_CHARS = 16

#: Hex characters kept of the sha256 of an uncommitted diff in a run's record (64 bits: enough to
#: tell two diffs apart, short enough to read in a table).
DIFF_HASH_HEX = 16

#: Packages whose versions a run records: what decides what a run computes.
VERSIONED_PACKAGES: tuple[str, ...] = ("whileai", "torch", "transformers", "trl", "peft")


#: ``wait``'s deadline per run when none is given, in seconds (6 h: MODAL_TIMEOUT_S, a hosted
#: job's own wall-clock limit on Modal; a run cannot outlive it).
WAIT_TIMEOUT_S = 6 * 3600.0

#: Width a value is cut to in ``diff`` and ``wait`` tables, in characters: room for a held-out
#: result with its verdict, count, interval and paired p (``0.000 -> 0.975, no significant change
#: (39/40; 95% CI 0.87-1.00; paired p < 0.001)``, 82 characters) without letting one long spec value
#: push the table off screen.
TABLE_CELL_CHARS = 88

#: ``validate`` reads at most this many lines of each data file: enough to catch a wrong file or a
#: broken format at once, bounded so that validating a million-row file stays instant.
RUNNER_VALIDATE_SAMPLE_ROWS = 200
#: and lists at most this many problems per file (the first ones show what is wrong).
RUNNER_VALIDATE_MAX_PROBLEMS = 5

#: Runs ``python -m whileai runs`` lists when no ``--limit`` is given: a screenful (the runs page
#: shows RUNS_PER_PAGE, 50, because a page scrolls; a terminal reads best under ~25 lines).
RUNS_LIST_LIMIT = 20
#: Runs asked for per request while ``runs --limit N`` pages through the list: the pages' own
#: RUNS_PER_PAGE_MAX (whileai/platform/defaults.py), the most one request may ask for.
RUNS_PER_REQUEST = 200

#: The held-out share ``python -m whileai init`` writes into a new recipe: CUT_HOLDOUT's 0.2 (the
#: sample recipes' share), the common 80/20 split; the run then says how many prompts that gives and
#: whether a result on them can be significant (whileai/runner/_power.py).
INIT_HOLDOUT = 0.2

#: ``quick=true`` (whileai/runner/quick.py): steps each stage trains at most, and held-out prompts
#: measured at most. Four optimizer steps prove that data, gates, the trainer, the adapter and the
#: held-out measure all work; the held-out measure (generation, before and after) is most of a short
#: CPU run, so eight prompts instead of the recipes' 40. A quick run of the main recipe is then a few
#: minutes against the better part of an hour for the full checks (benchmarks/MEASURED.md#quick-run).
QUICK_STEPS = 4
QUICK_HOLDOUT_ROWS = 8

#: Moved task ids a run's record keeps under ``cut`` (the counts beside them are whole): enough to find the
#: repeated prompts in the data, few enough that the record stays small on a large set. Our choice.
CUT_MOVED_RECORDED = 50

#: Held-out prompts ``export --gguf`` asks both the merged folder and the GGUF file read back (greedy),
#: to show they are the same model: QUICK_HOLDOUT_ROWS' reasoning (a few prompts prove the path; the
#: generation is most of the check's time on a CPU).
EXPORT_CHECK_PROMPTS = 8

#: The file in the data root where each stage that ended done leaves its times (runner/_estimate.py): one JSON
#: line a stage, read back for the next stage's estimate on this machine.
TIMINGS_FILE = "runner/timings.jsonl"

#: A stage's estimate is said before it starts only when it is at least this long, in seconds: a one-minute
#: stage needs no warning, a ten-minute one does (a quick SmolLM2 run once ran for minutes unannounced:
#: benchmarks/MEASURED.md#quick-run).
ESTIMATE_SAY_S = 60.0

#: The latest stages of the same method, base and target an estimate takes the median rates of: a few, so one
#: run on a busy machine does not set it, and recent, so a changed machine or install shows within a few runs.
ESTIMATE_RUNS = 5

#: A stage that has run this many times its estimate (or ESTIMATE_SAY_S, whichever is longer) is said to be over
#: it, once: twice is past the run-to-run spread of a shared 2-core machine (the suite's timings vary by up to
#: about 1.6x under load), so the line means something changed.
ESTIMATE_OVER_FACTOR = 2.0
