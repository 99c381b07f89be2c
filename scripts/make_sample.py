"""Write the shipped sample tool-use dataset: whileai/kit/data/sample_tooluse.jsonl.

    python scripts/make_sample.py            # regenerate (deterministic: same bytes each time)
    python scripts/make_sample.py --check    # exit 1 if the committed file is out of date
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from whileai.kit import sample_task

OUT = Path(__file__).resolve().parent.parent / "whileai" / "kit" / sample_task.SAMPLE_FILE


def render(seed: int = 0) -> str:
    """The dataset file's text: one compact JSON row per line."""
    rows = sample_task.generate(seed=seed)
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (default: the shipped file)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    text = render(args.seed)
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'OUT OF DATE: run scripts/make_sample.py'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=".sample-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, args.out)
    n = text.count("\n")
    print(f"wrote {n} rows ({len(text.encode()) / 1e6:.2f} MB) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
