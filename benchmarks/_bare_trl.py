"""Running the bare TRL baseline (``_bare_sft.py``) from a benchmark: one process, or several under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).with_name("_bare_sft.py")


def run_bare_sft(settings: dict, processes: int = 1) -> dict:
    """Train the bare baseline with ``settings`` (see ``_bare_sft.py``; ``out`` is filled in); its JSON result."""
    with tempfile.TemporaryDirectory() as out:
        path = Path(out) / "settings.json"
        path.write_text(json.dumps({**settings, "out": out}))
        launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
                  if processes > 1 else [sys.executable])
        done = subprocess.run([*launch, str(SCRIPT), str(path)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise RuntimeError(f"the bare TRL script failed:\n{done.stderr[-3000:]}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
