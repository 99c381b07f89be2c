"""MKL's code branch: a job pins it to its instruction set's class, the environment overrides the pin, a pin after
MKL has run is refused and recorded as such, and the branch goes on the job's record.

Each case runs in a fresh interpreter: MKL chooses its branch once per process, at its first product.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from whileai.jobs import defaults as job_defaults

_SCRIPT = """
import json, sys, torch
from whileai.jobs import _environment as e
if sys.argv[1] == "product first":
    torch.ones(8, 8) @ torch.ones(8, 8)
e.cpu_threads()
print(json.dumps({"blas": e.compute_path()["blas"], "lib": e._mkl() is not None}))
"""


def _run(case: str, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k != job_defaults.MKL_BRANCH_ENV}
    done = subprocess.run([sys.executable, "-c", _SCRIPT, case], capture_output=True, text=True, timeout=300,
                          env={**full, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pinned() -> dict:
    found = _run("pin")
    if not found["lib"]:
        pytest.skip("this torch has no MKL (an ARM wheel, another BLAS): nothing to pin")
    return found["blas"]


def test_the_pin_maps_each_processor_branch_to_its_instruction_sets_class():
    names = {v: k for k, v in job_defaults.MKL_BRANCH_NAMES.items()}
    pins = {job_defaults.MKL_BRANCH_NAMES[k]: job_defaults.MKL_BRANCH_NAMES[v]
            for k, v in job_defaults.MKL_PINNED_BRANCH.items()}
    assert pins == {"AVX512": "AVX512", "AVX512_E1": "AVX512", "AVX2": "AVX2"}
    assert names["off"] == 1 and names["AUTO"] == 2  # mkl_service.h: MKL_CBWR_BRANCH_OFF, MKL_CBWR_AUTO


def test_a_job_pins_mkl_to_its_class_and_records_it(pinned):
    want = job_defaults.MKL_PINNED_BRANCH.get(
        {v: k for k, v in job_defaults.MKL_BRANCH_NAMES.items()}.get(pinned["processor"], -1))
    if want is None:
        assert pinned == {"branch": "auto", "processor": pinned["processor"], "set_by": None}
    else:
        assert pinned == {"branch": job_defaults.MKL_BRANCH_NAMES[want], "processor": pinned["processor"],
                          "set_by": "whileai"}


def test_the_environment_overrides_the_pin(pinned):
    found = _run("pin", MKL_CBWR="COMPATIBLE")["blas"]
    assert found == {"branch": "COMPATIBLE", "processor": pinned["processor"], "set_by": "MKL_CBWR=COMPATIBLE"}


def test_a_pin_after_mkl_has_run_is_refused_and_the_record_says_none_was_set(pinned):
    if pinned["branch"] == "auto":
        pytest.skip("this processor's branch is not pinned")
    found = _run("product first")["blas"]
    assert found == {"branch": "auto", "processor": pinned["processor"], "set_by": None}
