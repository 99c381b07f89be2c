"""The run spec: one typed, frozen description of a hosted training run, and the one place each knob is declared.

Every knob is a field of its method's spec model, declared with :func:`knob`: its type (the
annotation), our default and the reason for it, its accepted range or choices, the value the
paper it comes from used and the citation, and a line of help. Everything else that names a
knob is read from these fields:

- ``TRAINING_KNOBS`` / ``TRAINING_HOST_KEYS`` (``whileai.domain.defaults``), the tables the
  one knob checker (:func:`whileai.core.knobs.check_knob`) reads, are :func:`knob_table`;
- the runner's schema, ``conf/method/*.yaml``'s ``${wai.knob:...}`` values, ``run --help`` and
  ``docs/knobs.md`` (``whileai/runner/knobs_doc.py``) read the same table;
- whether a knob takes a whole number is its annotation (:func:`is_whole`).

A spec object is frozen and, once resolved (``whileai.simulations.resolve_spec``), fully filled:
every knob the method reads holds the value that runs. ``wai.train`` records it as the run's
``config``; the launch route refuses a spec that is missing any of them (:func:`missing_keys`);
the job bodies read its typed attributes.

Keys are snake_case. The camelCase host keys of earlier records and of the reference
(``loraRank``, ``epsilonHigh``, ...) are accepted as aliases and recorded in canonical form. A
record without ``spec_version`` is version 1; keys that later versions stopped writing
(:data:`RETIRED`) are dropped when an old record is read.

The parts live in private modules, each with one job, and this module is their public surface (import from here):

- ``_knob``: declaring a knob (:func:`knob`, :class:`Knob`, :class:`KnobRow`) and reading declarations back off a
  model (:func:`knob_of`, :func:`knob_fields`, :func:`is_whole`);
- ``_spec_versions``: a record of any version (:data:`SPEC_VERSION`, :data:`ALIASES`, :data:`RETIRED`,
  :func:`canonical`);
- ``_spec_checks``: the checks of plain values the models' rules and the layers above call (:func:`split_problem`,
  :func:`micro_batches`, :func:`micro_problem`, :func:`continues_runs`, :func:`is_python_ref`);
- ``_spec_models``: the models (:class:`RunSpec`, :class:`SFTSpec`, :class:`GRPOSpec`, :class:`DPOSpec`,
  :class:`RMSpec`) and the rules their validation applies across knobs (:func:`step_problem`,
  :func:`environment_reward_problems`);
- ``_spec_io``: reading and writing specs (:func:`parse_spec`, :func:`read_spec`, :func:`spec_json`,
  :func:`same_run`, :func:`updated`, :func:`knob_table`, ...).
"""

from __future__ import annotations

from whileai.core._knob import Knob, KnobRow, is_whole, knob, knob_fields, knob_of
from whileai.core._spec_checks import (PYTHON_PREFIX, continues_runs, is_python_ref, micro_batches, micro_problem,
                                       split_problem)
from whileai.core._spec_io import (BESIDE, BOOKKEEPING, JOB_ROW_KEYS, NOT_KNOBS, job_json, knob_table, missing_keys,
                                   parse_spec, read_job_spec, read_spec, same_run, spec_json, spec_problems, updated)
from whileai.core._spec_models import (SPEC_MODELS, DPOSpec, GRPOSpec, RMSpec, RunSpec, SFTSpec,
                                       environment_reward_problems, step_memory, step_problem)
from whileai.core._spec_versions import ALIASES, RETIRED, SPEC_VERSION, canonical

__all__ = [
    "SPEC_VERSION",
    "PYTHON_PREFIX",
    "is_python_ref",
    "ALIASES",
    "RETIRED",
    "Knob",
    "KnobRow",
    "knob",
    "RunSpec",
    "continues_runs",
    "SFTSpec",
    "GRPOSpec",
    "DPOSpec",
    "RMSpec",
    "micro_batches",
    "micro_problem",
    "environment_reward_problems",
    "step_memory",
    "step_problem",
    "SPEC_MODELS",
    "canonical",
    "read_spec",
    "parse_spec",
    "spec_problems",
    "missing_keys",
    "same_run",
    "knob_table",
    "knob_fields",
    "knob_of",
    "is_whole",
    "NOT_KNOBS",
    "BOOKKEEPING",
    "BESIDE",
    "JOB_ROW_KEYS",
    "split_problem",
    "spec_json",
    "job_json",
    "read_job_spec",
    "updated",
]
