"""The job bodies' own settings: a job's CPU threads and the Modal training image.

The training knobs a job reads (TRAIN_*, TRAINING_KNOBS) are the SDK's
(whileai/domain/defaults.py); the names the launcher calls the Modal app by
are the platform's (whileai/platform/defaults.py).
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# A job's process
# ---------------------------------------------------------------------------

#: Torch threads of a job on a CPU (WHILEAI_JOB_THREADS overrides). One: on a shared
#: 2-core machine the kit base's greedy reply was several times faster on one thread
#: than on two (benchmarks/MEASURED.md#job-threads), because a tiny model's ops are
#: too small to split and the threads fight the other processes for cores. Bigger
#: bases on bigger CPUs want more: set the variable.
JOB_CPU_THREADS = 1
JOB_CPU_THREADS_ENV = "WHILEAI_JOB_THREADS"

#: MKL's code branches by their conditional-numerical-reproducibility codes (oneMKL's mkl_service.h, MKL_CBWR_*;
#: torch's x86 CPU wheels link MKL as their BLAS). With no branch set, MKL picks kernels for the exact processor
#: (its generation, its caches), so two processors on one torch kernel path can sum a matrix product apart; with a
#: branch set, every Intel processor that supports it runs that branch's code and gets the same bits at one thread
#: count on aligned arrays (oneMKL's "Obtaining Numerically Reproducible Results"; its STRICT mode, which drops the
#: alignment condition, runs other code: on the machine below it changed the products).
MKL_BRANCH_NAMES: dict[int, str] = {1: "off", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1",
                                    8: "SSE4_2", 9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512",
                                    13: "AVX512_MIC_E1", 14: "AVX512_E1"}
#: The branch a job pins MKL to, by the processor's own branch (``mkl_cbwr_get_auto_branch``): the instruction set's
#: class, not the generation within it. On an Intel Xeon (family 6 model 207, AVX512_E1) products under AVX512 and
#: under no branch had the same bits (2026-12-07), so the pin keeps that machine's recorded results; AVX2 instead
#: changed them. A processor below AVX2 is left to MKL. MKL_CBWR in the environment (e.g. ``MKL_CBWR=AUTO``, the
#: processor's own fastest kernels) overrides the pin.
MKL_PINNED_BRANCH: dict[int, int] = {12: 12, 14: 12, 10: 10}
MKL_BRANCH_ENV = "MKL_CBWR"

# ---------------------------------------------------------------------------
# The Modal training app (whileai/jobs/modal_app.py)
# ---------------------------------------------------------------------------

#: One job's wall-clock limit on Modal (6 h): a GRPO run on a 1.5B base with
#: the default steps ends well inside it; a stuck job stops costing after it.
MODAL_TIMEOUT_S = 6 * 3600

#: Times Modal runs a job's call again when its container is lost (a preempted GPU, a
#: crashed host): each retry finds the run's checkpoints on the Volume and continues from
#: the newest (``execute``), so a retry costs at most ``save_steps`` steps. Three covers
#: the preemptions of a long day on Modal's preemptible GPUs and still stops a job that
#: dies the same way each time.
MODAL_RETRIES = 3

#: The image installs the whileai distribution's own requirements (pyproject.toml,
#: read back with importlib.metadata), each pinned to the version installed where
#: ``modal deploy`` runs: the versions this package was tested with there. There is
#: no second list of versions to keep in step with pyproject.toml.
MODAL_IMAGE_DISTRIBUTION = "whileai"

# ---------------------------------------------------------------------------
# System metrics a job logs into its run (whileai/jobs/system.py)
# ---------------------------------------------------------------------------

#: Seconds between two system samples (CPU, RSS, GPU utilisation and memory),
#: taken at a trainer step once this much time has passed. A CPU job of the kit
#: runs a few minutes, so 5 s draws a curve of dozens of points; a six-hour GPU
#: job logs ~4,300 rows, a few per cent of its trainer's own points (W&B samples
#: system metrics every 15 s, trackio every 10 s: same order). Reading them costs
#: microseconds (psutil's /proc reads, torch's allocator counters).
JOB_SYSTEM_METRICS_EVERY_S = 5.0

#: Episodes the start filter (``prompt_filter_pool``) plays at once: one batch of generation per reply round. The
#: held-out measure plays a recipe's 222-447 kit episodes at once; 256 keeps a real base's batch of sequences (up to
#: its context each) within one device's memory while a pool of hundreds of prompts x generations still takes a few
#: batches.
START_FILTER_BATCH = 256

#: ``num_train_epochs`` handed to TRL when a step count decides an SFT run's length (the spec's
#: ``epochs`` is then None): TRL's ``max_steps`` wins over it, so the value is never read; 1.0 keeps
#: TRL's own validation content.
SFT_EPOCHS_UNREAD = 1.0

#: ``label_smoothing`` for DPO's ``exo_pair`` loss: EXO's recommended epsilon (Ji et al. 2024,
#: arXiv:2402.00856); TRL refuses 0 for that loss.
DPO_EXO_EPSILON = 1e-3

# ---------------------------------------------------------------------------
# Past one process (whileai/jobs/distributed.py)
# ---------------------------------------------------------------------------

#: A rank that is asked to end (SIGTERM from the launcher, after another rank failed) has this long to
#: flush its points before torchrun SIGKILLs it (torchrun's own close waits 30 s).
RANK_TERM_GRACE_S = 30

#: A rank sent SIGTERM (by torchrun, or by the kernel when its launcher dies: ``PR_SET_PDEATHSIG``)
#: has this long to flush its points and save before it SIGKILLs itself: after a launcher's death
#: nobody else is left to end it. A flush of the points buffered since the last background send (every
#: second) takes well under a second on loopback; 20 s covers a loaded machine and a collective that
#: must first fail on the peer that left, and is under torchrun's own 30 s (RANK_TERM_GRACE_S).
RANK_ORPHAN_GRACE_S = 20.0

#: Seconds a rank sent SIGTERM watches its launcher to tell its death from its request: a dying
#: launcher's first thread to end sends the kernel's signal while the process is still the rank's
#: parent, and its other threads end within milliseconds (a quarter second covers a loaded machine).
RANK_LAUNCHER_CHECK_S = 0.25

#: The prefix other ranks' lines carry in the worker log (rank 0 writes bare lines, as one process does).
RANK_LOG_PREFIX = "[rank {rank}] "

#: The port of a GRPO job's vLLM server (``vllm_mode=server``) on node 0: TRL's own default
#: (GRPOConfig.vllm_server_port, ``trl vllm-serve --port``), so a server started by hand for the same job fits.
VLLM_SERVER_PORT = 8000
#: Seconds a rank 0 gives its vLLM server to end after SIGTERM before SIGKILL (vLLM frees its GPU memory on a
#: clean exit; the same grace as a rank's, RANK_TERM_GRACE_S).
VLLM_SERVER_END_S = 30

# ---------------------------------------------------------------------------
# Held-out episodes (whileai/jobs/_episode_play.py)
# ---------------------------------------------------------------------------

#: Conversations generated together in one greedy batch while held-out episodes are played. Every episode waiting
#: on a reply is answered in the same round, sorted by length so a batch pads little; 32 keeps a batch's padded
#: prompts of the kit (about 500 tokens at most) small on a CPU while a few hundred episodes take a handful of
#: batches a turn. Our choice.
EPISODE_EVAL_BATCH = 32
