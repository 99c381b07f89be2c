"""The platform's settings: request limits, the store, keys, pages, the job launcher, Modal names and serving.

Each beside its reason and its source, as in every defaults module. The address
(PLATFORM_HOST, PLATFORM_PORT) and the GPU price table are shared with the SDK
and live in whileai/core/defaults.py.
"""

from __future__ import annotations

from whileai.core.defaults import SERVED_HUB_BASES
from whileai.kit.defaults import KIT_BASE_NAME


#: What the registry serves by name: the kit's demo base and SERVED_HUB_BASES (the SDK's list is the same).
SERVED_BASES: tuple[str, ...] = (KIT_BASE_NAME, *SERVED_HUB_BASES)

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

#: Seconds a connection has to send a whole request head (request line and
#: headers), counted from its first byte or from the connection's start;
#: then it is closed (whileai/platform/_http.py). uvicorn has no such deadline,
#: so 1,000 connections trickling partial headers were held open for good. A
#: real client sends its head in one write, within milliseconds even on a slow
#: link; 10 s leaves room for a congested network. Node's http server has the
#: same kind of deadline (headersTimeout, 60 s); ours is shorter because our
#: clients are scripts and browsers on a short path, not arbitrary proxies.
PLATFORM_HEADER_TIMEOUT_S = 10.0

#: Seconds a whole request (its head and its body) has to arrive, counted from
#: its first byte; then it is answered 408 and the connection closed
#: (whileai/platform/_http.py). Without a deadline on the body, 1,100
#: connections posting /signin at a byte a second hold their sockets for as long
#: as they like (each up to ~16 h). A sign-in form or an
#: API call arrives in milliseconds; 30 s is room for a congested link. A body
#: larger than PLATFORM_UNAUTH_BODY_BYTES (only a caller with a valid key may
#: send one) gets more time, at PLATFORM_BODY_MIN_BYTES_PER_S, so a 37 MB point
#: batch on a slow uplink still fits. Node's requestTimeout (300 s) bounds the
#: same thing for arbitrary clients; ours are scripts and browsers.
PLATFORM_REQUEST_TIMEOUT_S = 30.0

#: Slowest upload rate a large body is given time for, in bytes per second
#: (256 KiB/s, about 2 Mbit/s): a PLATFORM_MAX_BODY_BYTES body gets ~4 more minutes.
PLATFORM_BODY_MIN_BYTES_PER_S = 256 * 1024

#: Connections the server holds open at once. Past it, a new connection first
#: ends the connection whose request has been arriving longest (answered 503,
#: Retry-After), so a flood of slow requests cannot keep a prompt client out;
#: when no connection is mid-request the new one is answered 503 itself. The
#: cap is also kept PLATFORM_FD_RESERVE + PLATFORM_ACCEPT_BATCHES * PLATFORM_LISTEN_BACKLOG under the
#: process's open-file limit (RLIMIT_NOFILE), so accepting never runs out of
#: descriptors: at the limit
#: asyncio logged "Too many open files" 121,893 times (49 MB) in 60 s and
#: answered none of 9 normal requests. 1,000 is far past what a team
#: server sees (a browser opens ~6 per page, an SDK process 1-2).
PLATFORM_MAX_CONNECTIONS = 1000

#: Open files the connection cap leaves free for everything else the server
#: opens: the store's connections, SQLite's files, job logs, model files.
PLATFORM_FD_RESERVE = 64

#: The listening socket's queue, and so the most connections asyncio accepts in
#: one go before any of them is counted against the cap (it accepts up to the
#: backlog per wake-up); the cap leaves PLATFORM_ACCEPT_BATCHES times this many
#: descriptors free. uvicorn's default is 2,048, more than a lowered
#: ``ulimit -n`` of 1,024 holds at all; 64 is plenty for bursts of a team's
#: clients (a browser opens ~6 per page), and keeps the reserve small.
PLATFORM_LISTEN_BACKLOG = 64

#: Accept batches that can arrive before the first is counted against the cap:
#: a connection is counted in connection_made, which asyncio runs two loop
#: iterations after the accept, and each iteration's select can accept another
#: batch. Two are not always enough: a 600-connection flood at ``ulimit -n`` 512 on a
#: loaded 2-core machine had a third batch arrive and run out of descriptors in 1 of 3
#: runs (cap 192 + 3 x 128 + the process's 12 open files > 512), so four are reserved.
PLATFORM_ACCEPT_BATCHES = 4

#: Set to 1 to serve the API's /docs, /redoc and /openapi.json (or pass
#: ``--api-docs``). Off by default: those pages take no key and load their
#: scripts and fonts from a CDN, outside the pages' Content-Security-Policy.
#: The route table is in docs/architecture.md.
PLATFORM_API_DOCS_ENV = "WHILEAI_API_DOCS"

#: Largest body read from a caller without a valid key or page session, in bytes
#: (64 KiB). Anything bigger is read only after its key was checked (the request
#: guard, _guard.py), so unauthenticated posts cost the server no memory: the
#: sign-in form is under 1 KB, and every route that takes more needs a key anyway.
PLATFORM_UNAUTH_BODY_BYTES = 64 * 1024

#: Deepest nesting of objects and arrays a JSON body may have. Hydra configs
#: and summaries are well under 20 levels; Python's own encoder and decoder
#: recurse, and their limit (1,000) must never be reached by a request, so a
#: 100,000-level body is refused with 400 naming the level instead of a 500.
PLATFORM_MAX_JSON_DEPTH = 64

#: Largest magnitude a number in a request's query string may have (2**53, the
#: largest integer a JSON number, and so a browser's page, keeps exact). Pages,
#: steps, counts and times are all far below it; a page number past it made
#: SQLite's OFFSET overflow (a 500) before. Refused with 422 naming the parameter.
PLATFORM_QUERY_NUMBER_MAX = 2**53

#: Largest run config and run summary the store keeps, in bytes of JSON text
#: (1 MiB each). A Hydra config with every knob is a few KB; a summary holds
#: final metrics and held-out results. Without a cap eight 60 MB configs made a
#: 480 MB list response; with it a list of PLATFORM_LIST_LIMIT_MAX runs is bounded.
RUN_CONFIG_MAX_BYTES = 1024 * 1024
RUN_SUMMARY_MAX_BYTES = 1024 * 1024

#: Longest run error text (the "notes" a run carries: a traceback's tail), in characters.
RUN_ERROR_MAX_CHARS = 100_000

#: Longest refusal of a launch or resume, in characters, as answered and as its run's error: every problem at once
#: fits (a spec has a few dozen fields and each problem echoes at most SPEC_SHOWN_CHARS of its value), while a body
#: that names thousands of bad keys cannot make a message the run's error (RUN_ERROR_MAX_CHARS) refuses to hold.
LAUNCH_REFUSAL_MAX_CHARS = 20_000

#: Distinct metric names one run may log. Each name is a chart on the run's page
#: and a column in its series; TRL's trainers log 10 to 40, a monitor adds a few
#: dozen. Past this cap points with new names are refused (422 naming the cap),
#: the SDK counts them in ``run.skipped`` and says so once. Memory does not grow
#: with names (pages/_series.py keeps only values that were logged).
RUN_METRIC_NAMES_MAX = 2000

#: Largest list answer (runs, jobs, datasets), in bytes of JSON. A list stops
#: early (``truncated: true`` and how to page on) rather than building a larger
#: response: a list is a menu, and each run's config and summary are capped above.
PLATFORM_LIST_MAX_BYTES = 32 * 1024 * 1024

#: A ``running`` run whose writer has sent nothing (points, updates or its
#: heartbeat, the SDK's RUN_HEARTBEAT_S) for this many seconds reads ``crashed``
#: (W&B marks the same state). Ten missed heartbeats: far past a GC pause or a
#: store lock wait. Any later send from the run revives it. Set RUN_STALE_ENV.
RUN_STALE_S = 300.0
RUN_STALE_ENV = "WHILEAI_RUN_STALE_S"

#: A run's record can be read as a long poll (``GET /runs/{id}?since=<updated_at>&wait=<s>``): the answer comes
#: as soon as the record changes from the ``updated_at`` the reader last saw, or after ``wait`` seconds at most
#: RUN_WAIT_MAX_S (a third of the client's 30 s request deadline, CLIENT_TIMEOUT_S, so a long poll never reads as
#: a timeout). The server reads the record every RUN_WAIT_POLL_S meanwhile: a store read of one row, a few
#: milliseconds, so a waiting reader sees a run end within 0.1 s where a 2 s poll saw it up to 2 s late (the
#: runner's PROGRESS_POLL_S) and ``run.wait()`` up to 10 s late (TRAINING_POLL_S). Each waiting reader holds one
#: of the server's worker threads (anyio's 40 by default) while it waits.
RUN_WAIT_MAX_S = 10.0
RUN_WAIT_POLL_S = 0.1

#: How long a resume's request to run a run again waits for the run's new job
#: (store ``reopen_run`` -> ``create_job``). The two happen within one request,
#: a fraction of a second apart (two store lock waits at most, SQLITE_BUSY_TIMEOUT_S);
#: a request older than this was left by a process that ended between them, and
#: is dropped so that no later job revives the run. While one is fresh and its
#: process lives, a second resume of the run is refused, so two resumes never
#: start two jobs.
RUN_REOPEN_TTL_S = 60.0

#: A server registers on its store and beats this often (a ``server:`` row of
#: ``settings``), so that an upgrade can tell a live server of an older revision
#: from one long gone; it counts as live for SERVER_LIVE_S after its last beat
#: (six missed beats: past a busy store's lock waits).
SERVER_HEARTBEAT_S = 10.0
SERVER_LIVE_S = 60.0

#: How often a server checks, before it writes, that the store is still at its
#: own schema revision (one query): a store upgraded under it by a newer whileai
#: stops taking its writes within this many seconds.
STORE_SCHEMA_CHECK_S = 5.0

#: Tests of crashes name a fault point here (e.g. ``after_reopen``): the process
#: is killed with SIGKILL when it reaches it. Unset, nothing happens.
FAULT_AT_ENV = "WHILEAI_TEST_FAULT_AT"

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

#: After a deletion, the SQLite write-ahead log is checkpointed and cut to nothing (store/_erase.py), so the
#: deleted rows' old pages leave the -wal file. The checkpoint waits for readers at most STORE_ERASE_WAIT_S
#: (the deleting request waits that long at worst: readers hold the log for milliseconds), then is retried on a
#: thread every STORE_ERASE_RETRY_S for STORE_ERASE_RETRY_FOR_S (past a run page's live reads) before it is
#: said in the server's log.
STORE_ERASE_WAIT_S = 2.0
STORE_ERASE_RETRY_S = 1.0
STORE_ERASE_RETRY_FOR_S = 120.0

# Page sessions and one-time sign-in links (store/sessions.py: the run pages' sign-in).

#: Name of the cookie that carries a page session's random token (never the API key).
SESSION_COOKIE = "whileai_session"

#: Random bytes in a page session token and in a one-time sign-in link token
#: (256 bits, as API_KEY_BYTES): tokens are random, so one SHA-256 at rest is a
#: safe hash without a slow password KDF.
SESSION_TOKEN_BYTES = 32

#: How long a page session lasts after sign-in, in seconds (14 days). Long
#: enough that a person reading runs every day signs in about twice a month;
#: short enough that a cookie left on a shared machine stops working on its
#: own. The session ends earlier on sign-out or when its account's sessions are
#: revoked (``accounts sessions --revoke``), or any key of its account is rotated or
#: revoked. Django's default session age is two weeks too.
SESSION_TTL_S = 14 * 24 * 3600

#: How long a one-time sign-in link stays valid, in seconds (10 minutes). The
#: platform prints one at every start and ``python -m whileai open`` makes one
#: and opens it at once; either is used within seconds, and a link that leaked
#: into a scrollback or a log is dead soon after and usable only once.
SIGNIN_LINK_TTL_S = 10 * 60

#: Longest string accepted as a key or token on the sign-in routes; a real key
#: is about 47 characters. Anything longer is refused before it is hashed.
SIGNIN_MAX_CHARS = 200

#: Failed sign-ins (a wrong key on POST /signin, a spent or unknown one-time
#: link) one client address, or one key prefix, may make within
#: SIGNIN_FAILURE_WINDOW_S before backoff: past it each further wrong key is
#: answered 429 with Retry-After (platform/_throttle.py). A correct key or a valid
#: link is always accepted, so ten wrong keys from the owner's own address cannot
#: lock the owner out for 300 s. Keys are 256-bit random, so guessing
#: one is hopeless either way; the limit answers a guesser 429 instead of a
#: verdict (each try still costs the server one indexed lookup, which is what
#: lets a correct key through), and a person who mistypes a key pasted by hand
#: fails far fewer than 10 times in 5 minutes. Counted per peer address; behind a
#: reverse proxy, name it with ``--forwarded-allow-ips`` so X-Forwarded-For
#: counts (from anyone else that header is ignored: it is the sender's to forge).
SIGNIN_MAX_FAILURES = 10
SIGNIN_FAILURE_WINDOW_S = 300.0

#: Wrong bearer keys on the API (and the serving endpoint) one address or key
#: prefix may send within SIGNIN_FAILURE_WINDOW_S before backoff (429). Higher
#: than the sign-in form's: a script with a stale key retries a few times a
#: minute before its owner notices, and should see 401 saying why. Without a
#: limit the API answers 180 wrong keys a second.
API_KEY_MAX_FAILURES = 30

#: Backoff past the limits above: the first extra failure waits this long, each
#: further one twice as long, up to SIGNIN_BACKOFF_MAX_S (the window itself),
#: after SIGNIN_BACKOFF_STEPS doublings at most. The usual shape (RFC 6238's
#: advice on throttling guesses; exponential backoff as in AWS's SDKs).
SIGNIN_BACKOFF_S = 1.0
SIGNIN_BACKOFF_MAX_S = SIGNIN_FAILURE_WINDOW_S
SIGNIN_BACKOFF_STEPS = 10

#: Client addresses the sign-in limit remembers at once; past it the address
#: with the oldest failure is forgotten first, so the table stays a few MB at most
#: however many addresses try.
SIGNIN_THROTTLE_MAX_CLIENTS = 10_000

# ---------------------------------------------------------------------------
# Hosted training (knobs, gates, jobs, serving)
# ---------------------------------------------------------------------------

#: Seconds between a job's heartbeats, and how old the last one may be before a
#: job whose process cannot be checked (another host, Modal) counts as dead. The
#: heartbeat runs on its own thread, so a long trainer step does not delay it;
#: 20 missed beats is far past any GC pause or store lock wait.
JOB_HEARTBEAT_S = 5.0
JOB_STALE_S = 100.0

#: How long the reconciler waits for a dead job's exit note (launcher/_pids.py). Its reaper (the warm process or
#: the launcher) writes the note right after its waitpid returns, but the reconciler can see the process gone (a
#: zombie, or reaped) a moment before: a short wait lets the error say "killed by SIGKILL" instead of guessing.
#: Paid once per dead job, never by a running one; the note is one small file written and renamed.
EXIT_NOTE_WAIT_S = 2.0

#: A silent job whose process on this host is still computing (its processes' CPU time rises over
#: JOB_BUSY_SAMPLE_S) is not stopped as hung until it has been silent JOB_BUSY_GRACE_S past JOB_STALE_S.
#: A machine that stalls under memory pressure silences every job at once (a 2-core machine was seen silent for
#: 284 s), and live jobs must not be stopped as hung when it recovers. A rank spinning in a hung collective also
#: computes, so the grace ends: 10 minutes is NCCL's own collective timeout.
JOB_BUSY_GRACE_S = 600.0
JOB_BUSY_SAMPLE_S = 0.25

#: Environment every job's worker gets unless the user's own environment sets the variable.
#: TOKENIZERS_PARALLELISM: the Rust tokenizer's thread pool warns and deadlocks after a fork.
#: OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep instead of spinning, which on a loaded machine
#: made a tiny model's forward pass about six times faster and on an idle one changed nothing
#: measurable (benchmarks/MEASURED.md#omp-passive).
JOB_ENV_DEFAULTS: dict[str, str] = {"TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": "PASSIVE"}

#: A local job that has not sent its first heartbeat within this many seconds of
#: launch, and whose process is gone, failed to start (import error, bad env).
JOB_START_GRACE_S = 120.0

#: Seconds ``stop`` waits for a local worker's process group to be gone after
#: SIGKILL before it answers anyway (the kernel ends a killed process at once; the
#: wait covers a loaded machine's scheduling, and the reaper's ``wait``).
JOB_STOP_WAIT_S = 10.0

# ---------------------------------------------------------------------------
# The warm worker (whileai/platform/launcher/_warm.py, the process itself in _warm_process.py)
# ---------------------------------------------------------------------------

#: Set to 0 (or ``warm_worker: false`` in the data root's config.json) to start every
#: local job as a fresh interpreter instead of a fork of the warm worker: the way to rule it out
#: when a job behaves differently forked than started cold.
WARM_WORKER_ENV = "WHILEAI_WARM_WORKER"

#: The folder whose warm process starts this data root's jobs; unset, the data root
#: itself. Several data roots of one user may name one folder and share one warm
#: process: a forked job takes its whole environment, data root included, from its own
#: launch, and the preloaded libraries read nothing of the data root. The test suite
#: does this, so that each test's fresh data root does not pay the imports again.
WARM_HOME_ENV = "WHILEAI_WARM_HOME"

#: The commands a ``python -m whileai`` command line hands to a fork of the warm process
#: (whileai/platform/launcher/warm_cli.py) when one of this install is ready: the ones
#: that import Hydra, the platform and a tokenizer, imports the warm process already holds.
#: What the hand-off saves: benchmarks/job_start.py's ratio_quick_handoff_over_in_process
#: (docs/architecture.md, "The warm command line").
WARM_CLI_COMMANDS = ("run", "validate", "reproduce", "resume")

#: Set to 0 to run every command in its own interpreter, never a fork of the warm process.
WARM_CLI_ENV = "WHILEAI_WARM_CLI"

#: What the warm worker imports before it forks a job (``module`` or ``module:name``): the
#: imports a job pays first, TRL's trainer classes (lazy attributes of ``trl``) included
#: (benchmarks/job_start.py times ``import trl, peft`` and a job started with and without
#: them). Import only: no tensor op runs in the warm process, so torch's intra-op pool is
#: never started before a fork. whileai's own modules are not kept: a forked job imports
#: them afresh from disk, so an edited source file is always what runs.
WARM_PRELOAD = ("torch", "transformers", "peft", "trl", "trl:SFTTrainer", "trl:DPOTrainer", "trl:GRPOTrainer",
                "trl:RewardTrainer", "transformers:AutoModelForCausalLM",
                "transformers:AutoModelForSequenceClassification", "transformers:AutoTokenizer",
                "transformers:PreTrainedTokenizerFast")

#: The platform's own modules the warm worker imports after WARM_PRELOAD, for what they
#: import in turn (SQLAlchemy, Alembic, Mako, FastAPI's models: the embedded platform a job
#: reports through), so that a forked job's client starts without loading them. Each forked
#: job still drops whileai's modules and imports them afresh from disk; the libraries they
#: pulled in stay. The modules of the layers above (the jobs', the runner's) are named by
#: the process that starts the warm worker (``_warm.preload``; whileai/__main__.py).
WARM_PRELOAD_OWN = ("whileai.platform.embedded", "whileai.platform.store", "whileai.platform.store.migrate")

#: The variable that hands a starting warm process those modules of the layers above, comma-separated (not its
#: command line, which readers of /proc match against module names).
WARM_PRELOAD_ENV = "WHILEAI_WARM_PRELOAD"

#: Environment variables read when those modules are imported (the hub's offline switch,
#: cache folders, OpenMP/BLAS thread counts fixed when the library loads, and torch's CPU kernel path,
#: ATEN_CPU_CAPABILITY, fixed at its first dispatch): a launch whose values differ from the warm process's
#: gets a fresh one. Matched by prefix.
WARM_IMPORT_ENV_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "DATASETS_", "OMP_", "MKL_",
                            "ATEN_", "OPENBLAS_", "KMP_", "CUDA_", "PYTORCH_", "TORCH", "NCCL_", "PYTHON", "TRACKIO_",
                            "WANDB_", "ACCELERATE_", "TRL_", "LD_")

#: Variables of those prefixes that the libraries set themselves as they import, so a process that has imported
#: torch (a runner that loaded a tokenizer) and one that has not (a bare command line) would disagree on them
#: and take each other's warm process for another install's: torch 2.13 sets TORCHINDUCTOR_CACHE_DIR on import.
WARM_IMPORT_ENV_IGNORED = ("TORCHINDUCTOR_CACHE_DIR",)

#: Seconds a warm process with no job of its own running waits for the next launch
#: before it exits and frees its memory (the libraries above, resident). A recipe's next
#: stage, a sweep's next run and the next test start within seconds to minutes of the last
#: job's end; on a loaded machine a quick recipe's data steps and its runner's own start
#: between two jobs can take minutes, so five.
WARM_IDLE_S = 300.0

#: Seconds a launch waits for the warm process to answer with the job's pid. A fork copies
#: only page tables, so the answer is quick; 30 s is the platform client's own request
#: deadline (CLIENT_TIMEOUT_S), far past a loaded machine's scheduling delay.
WARM_REPLY_S = 30.0

#: Characters of a dead job's log quoted in its run's error (the log's tail is
#: where Python prints a traceback and the OOM killer's victim stops).
JOB_LOG_TAIL_CHARS = 2000

#: Seconds one reader of a Modal job holds its lease while it pulls the job's
#: recorded progress and replays it into the store; other readers skip the pull
#: meanwhile, so each entry is replayed once. A reader that died holding it is
#: taken over after this long. A pull is a few Modal Dict reads and store writes
#: (well under a second here); two minutes leaves room for a slow network
#: without leaving a job unsettled for long. Our choice.
MODAL_PULL_LEASE_S = 120.0

#: Directories (separated by the OS path separator) the platform's operator lets
#: it load base models and adapters from, besides its own ``models`` and
#: ``adapters`` folders under the data root; also ``serve_dirs`` in config.json.
#: An account names models, it never hands the server a path: a path outside
#: these is refused (whileai/platform/_loadable.py).
SERVE_DIRS_ENV = "WHILEAI_SERVE_DIRS"

#: Modal: the training app and function the launcher calls by name, where adapters and
#: progress live, and the GPU (the app itself is whileai/jobs/modal_app.py).
#: A10G (24 GB) fits LoRA on a 1.5B model with TRAIN_MAX_LENGTH and is the
#: cheapest GPU that does (GPU_USD_PER_HOUR); pass config={"gpu": "H100"} or set
#: MODAL_GPU_ENV for bigger bases.
MODAL_APP_NAME = "whileai-train"
MODAL_FUNCTION_NAME = "run_job"
#: The clustered function a Modal job past one node runs (``@modal.experimental.clustered``), and its size: Modal
#: fixes a cluster's container count when the app is deployed, so a job's ``nodes`` must equal it. 2 nodes of 8
#: GPUs is the smallest cluster past one machine; redeploy with another size for bigger jobs.
MODAL_CLUSTERED_FUNCTION_NAME = "run_job_clustered"
MODAL_CLUSTER_NODES = 2
MODAL_GPU = "A10G"
MODAL_GPU_ENV = "WHILEAI_MODAL_GPU"
MODAL_VOLUME_NAME = "whileai-adapters"
MODAL_VOLUME_MOUNT = "/adapters"
MODAL_PROGRESS_DICT = "whileai-progress"
MODAL_SECRET_NAME = "whileai"
#: The Python of both Modal images (the training app's and the serving app's).
MODAL_PYTHON_VERSION = "3.11"

# ---------------------------------------------------------------------------
# Serving (OpenAI-compatible endpoint, model registry)
# ---------------------------------------------------------------------------

#: Where the endpoint's generation runs: "platform" (the platform's own process,
#: CPU or local GPU) or "modal" (forwarded to the whileai-serve vLLM app,
#: platform/serving/modal.py). The registry, keys and 404s stay on the platform
#: either way. Set SERVE_TARGET_ENV, or {"serve_target": ...} in config.json.
SERVE_TARGETS: tuple[str, ...] = ("platform", "modal")
SERVE_TARGET_DEFAULT = "platform"
SERVE_TARGET_ENV = "WHILEAI_SERVE_TARGET"

#: The Modal serving app. One deployment serves one base (vLLM loads one base per
#: server); the default is the smallest Qwen3 in SERVED_BASES, which fits an L4.
MODAL_SERVE_APP_NAME = "whileai-serve"
MODAL_SERVE_FUNCTION = "serve"
MODAL_SERVE_BASE = "Qwen/Qwen3-0.6B"
MODAL_SERVE_BASE_ENV = "WHILEAI_MODAL_SERVE_BASE"
#: The deployment's web URL; when unset the platform asks Modal for it
#: (Function.get_web_url of the deployed app).
MODAL_SERVE_URL_ENV = "WHILEAI_MODAL_SERVE_URL"
#: The bearer vLLM accepts: the same value in the Modal Secret (MODAL_SECRET_NAME)
#: and where the platform runs. Callers never see it; they use account keys.
MODAL_SERVE_KEY_ENV = "WHILEAI_SERVE_KEY"
#: L4 (24 GB): a 0.6B-1.7B base in bf16 with a few LoRA slots and a KV cache fits,
#: and it is cheaper per hour than an A10G on Modal's list (GPU_USD_PER_HOUR).
MODAL_SERVE_GPU = "L4"
MODAL_SERVE_PORT = 8000
#: Seconds without a request before the container stops (idle to zero): the same
#: five minutes as SERVING_IDLE_UNLOAD_S on the platform. A cold start (image
#: pull, base load, CUDA graphs) costs one to three minutes, so the window is not
#: shorter than a pause in an evaluation loop.
MODAL_SERVE_SCALEDOWN_S = 300.0
#: vLLM's first start downloads the base and captures CUDA graphs: allow 15 minutes.
MODAL_SERVE_STARTUP_S = 900
#: A container's life cap (24 h); Modal starts a fresh one after it.
MODAL_SERVE_TIMEOUT_S = 24 * 3600
#: Requests one container takes at once; vLLM batches them (continuous batching),
#: so the limit is about queueing, not memory.
MODAL_SERVE_MAX_INPUTS = 32
#: LoRA slots on the GPU per batch (vLLM --max-loras) and adapters kept in host
#: memory (--max-cpu-loras); more served names than slots swap in per batch.
MODAL_SERVE_MAX_LORAS = 4
MODAL_SERVE_MAX_CPU_LORAS = 16
#: Context vLLM reserves KV cache for: TRAIN_MAX_LENGTH-sized conversations plus a reply.
MODAL_SERVE_MAX_MODEL_LEN = 8192
#: vLLM's parser for <tool_call>{"name", "arguments"}</tool_call> blocks, the format of
#: the Qwen bases and the kit's template (vLLM docs, tool calling: "hermes").
MODAL_SERVE_TOOL_PARSER = "hermes"
#: How often the container re-reads the adapters Volume, so an adapter the platform
#: just uploaded can be loaded; the platform retries a refused load this often.
MODAL_SERVE_VOLUME_RELOAD_S = 5.0
MODAL_SERVE_LOAD_RETRIES = 3
#: The platform's wait for one forwarded request: a cold container answers only
#: after it has started (MODAL_SERVE_STARTUP_S at worst on the very first start).
MODAL_SERVE_REQUEST_TIMEOUT_S = 900.0
#: The serving image: vLLM 0.26.0 (released 2026-09) brings its own torch and
#: transformers. Not run by this repository's tests (it needs a GPU); bump it
#: together with a check on a GPU.
MODAL_SERVE_PIP_PINS: tuple[str, ...] = ("vllm==0.26.0",)

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

#: Smallest temperature that is sampled; anything above 0 and below it decodes
#: greedily. vLLM does the same below its _SAMPLING_EPS (1e-5, sampling_params.py):
#: at 1e-5 a logit gap of 1e-3 is already e**100 odds, so only exact ties differ,
#: while logits divided by a temperature near 1e-300 overflow float32 to inf and
#: sampling fails ("probability tensor contains inf, nan").
SERVING_MIN_TEMPERATURE = 1e-5

#: Largest ``seed`` a chat request may send (from 0): torch.manual_seed takes
#: unsigned 64-bit seeds; OpenAI documents the seed as an integer.
SERVING_MAX_SEED = 2**64 - 1

#: Most choices one request may ask for (``n``). All choices share the model's
#: lock, so a large n starves other callers; 8 covers GRPO-style group sizes
#: (DeepSeekMath sampled 64 per prompt, but as many requests, not one).
SERVING_MAX_N = 8

#: Most stop sequences per request: OpenAI's documented limit (API reference,
#: chat completions, ``stop``: up to 4 sequences).
SERVING_MAX_STOP = 4


# ===========================================================================
# The run pages (whileai/platform/pages/)
# ===========================================================================

# --------------------------------------------------------------------------- charts

#: Buckets a chart's series is cut into when it has more points than
#: CHART_MAX_POINTS. Each bucket sends its minimum and its maximum (in step
#: order), so a one-step spike survives downsampling and a chart carries at most
#: twice this many points: about the pixel width of a wide chart (1,000 px),
#: which is all a line can show (trackio and W&B keep min/max per bucket too).
CHART_BUCKETS = 1000

#: A series with at most this many points is sent at full resolution
#: (2 x CHART_BUCKETS: downsampling it would not make it smaller).
CHART_MAX_POINTS = 2 * CHART_BUCKETS

#: Runs whose decoded series the server keeps in memory, newest use first. A
#: 100,000-point run with 10 metrics is about 9 MB of float arrays; a zoom, a
#: comparison or a live poll then reads only the points stored since, instead of
#: decoding the whole run again, over twenty times the work for a long run
#: (benchmarks/MEASURED.md#series-cache).
SERIES_CACHE_RUNS = 8

#: Bytes of decoded series the server keeps across those runs (128 MiB). Values
#: cost 12 bytes each (pages/_series.py), so this holds about ten million; a run
#: bigger than this is decoded for each read rather than kept, so the server's
#: memory does not grow with the runs people open.
SERIES_CACHE_BYTES = 128 * 1024 * 1024

#: How often a running run's page asks for new points and status, in
#: milliseconds (trackio polls once a second locally; a person watching a loss
#: curve sees nothing faster). The page stops polling when the run ends.
LIVE_POLL_MS = 1000

#: Most new points per metric one live poll answers at full resolution; a
#: backlog bigger than this (a page left open while a fast run logged) is
#: downsampled like a full chart.
LIVE_MAX_POINTS = CHART_MAX_POINTS

# --------------------------------------------------------------------------- lists

#: Runs per page of the runs list (and the most a page may ask for). A page is
#: read at a glance; thousands of runs are paged on the server, not sent at once.
RUNS_PER_PAGE = 50
RUNS_PER_PAGE_MAX = 200

#: Most distinct values a runs-list filter offers (statuses, methods, recipes,
#: datasets, sweeps); past this a person types the value into the URL instead.
FILTER_CHOICES_MAX = 200

#: Runs a comparison overlays: two is the least that compares, ten colours are
#: as many as a person tells apart on one chart.
COMPARE_MIN_RUNS = 2
COMPARE_MAX_RUNS = 10

#: Runs a sweep page reads (the sweep's newest first). A Hydra multirun of
#: 4 knobs x 5 values is 625 runs; past this the table is a query, not a page.
SWEEP_MAX_RUNS = 1000

#: Sections of a run page's charts that start collapsed (a <details> a click
#: opens): series a person reads when something looks wrong, not on every visit.
#: Training, rewards, policy and the HackMonitor stay open.
CHART_SECTIONS_COLLAPSED = ("completions", "system", "other")

# --------------------------------------------------------------------------- the worker's log

#: Most bytes of a job's worker log one page-data answer carries (the end of
#: the log: its tail). 64 KiB is about 800 lines of the worker's phase and
#: trainer lines, more than a screen; a page tailing a live run asks for the
#: bytes past the offset it has, so a long log is never sent twice.
WORKER_LOG_MAX_BYTES = 64 * 1024

# --------------------------------------------------------------------------- runs list columns

#: Most columns a runs list may add (config keys and final metrics, from the
#: address's ``cols``): each final metric is one indexed read per run shown.
LIST_EXTRA_COLUMNS_MAX = 8

#: A sweep knob whose values are all integers with at most this many distinct
#: ones (seeds, a few step counts) is drawn on a categorical axis: one tick per
#: value, not a continuous axis with ticks at 0.2, 0.4, ...
SWEEP_CATEGORICAL_MAX = 12
