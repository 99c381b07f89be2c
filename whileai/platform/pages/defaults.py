"""Every tunable number of the run pages, each beside its reason.

Docstrings elsewhere name these constants instead of repeating their values.
The sign-in numbers (SESSION_TTL_S, SIGNIN_LINK_TTL_S, ...) live with the
store's other key settings in ``whileai/platform/defaults.py``.
"""

from __future__ import annotations

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
