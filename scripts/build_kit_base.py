"""Pre-train the kit's demo base in code and write it into the package (``whileai/kit/data/base``).

    python scripts/build_kit_base.py            # rebuild; prints the new weights digest for kit/defaults.py
    python scripts/build_kit_base.py --check    # rebuild in a temporary folder; exit 1 unless it is the shipped bytes

The base ships because pre-training is not the same computation on every CPU: torch picks its
vectorised kernels by the CPU's capability, and 600 steps of float sums split differently by
the AVX2 and the scalar kernels end in other weights. This script runs the build under
``ATEN_CPU_CAPABILITY=default`` (the scalar kernels every machine has; it re-runs itself with
that set) and one torch thread (``KIT_BASE_THREADS``), so the closest any machine can come to
rebuilding the shipped bytes is this command. Run it after changing any ``KIT_BASE_*`` value,
then set ``BASE_WEIGHTS_SHA256`` in ``whileai/kit/defaults.py`` to the digest it prints: the
test suite checks that the packaged weights have that digest and that the packaged recipe is
the code's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: torch's CPU kernel path the shipped base is built on (see the module docstring)
BUILD_CPU_CAPABILITY = "default"


def _build(into: Path) -> dict[str, object]:
    from whileai.kit import defaults
    from whileai.kit._base import pretrained_base, weights_digest

    record = pretrained_base(into, defaults.KIT_BASE_SEED)
    record["weights_sha256"] = weights_digest(into)
    (into / "whileai_kit.json").write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="build in a temporary folder and compare with the shipped base")
    args = parser.parse_args(argv)
    if os.environ.get("ATEN_CPU_CAPABILITY") != BUILD_CPU_CAPABILITY:  # fixed at torch's first dispatch: set it first
        env = {**os.environ, "ATEN_CPU_CAPABILITY": BUILD_CPU_CAPABILITY}
        return subprocess.call([sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])], env=env)

    from whileai.kit import defaults
    from whileai.kit._base import PACKAGED_BASE

    with tempfile.TemporaryDirectory() as tmp:
        record = _build(Path(tmp))
        digest = str(record["weights_sha256"])
        print(f"built the kit base: weights SHA-256 {digest} "
              f"(torch {record['built_with']}, loss {record['pretraining']})")  # type: ignore[index]
        if args.check:
            same = digest == defaults.BASE_WEIGHTS_SHA256
            print("the shipped bytes" if same else f"differs from the shipped {defaults.BASE_WEIGHTS_SHA256}")
            return 0 if same else 1
        if PACKAGED_BASE.exists():
            shutil.rmtree(PACKAGED_BASE)
        shutil.copytree(tmp, PACKAGED_BASE)
    if digest != defaults.BASE_WEIGHTS_SHA256:
        print(f"now set BASE_WEIGHTS_SHA256 = {digest!r} in whileai/kit/defaults.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
