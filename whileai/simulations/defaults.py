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

# ---------------------------------------------------------------------------
# Platform server (request limits, store)
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Model kit (tiny tokenizer, model and base, built in code)
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Datasets, judges, selection and the delta report
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Hosted training (knobs, gates, jobs, serving)
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Serving (OpenAI-compatible endpoint, model registry)
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# HackMonitor
# ---------------------------------------------------------------------------
