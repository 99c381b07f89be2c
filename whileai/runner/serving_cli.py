"""``python -m whileai serve RUN|FOLDER --name NAME``, ``unserve NAME`` and ``models``: the serving endpoint from the
command line, on the embedded platform or the server the credentials name (``wai.serve``, ``wai.unserve``,
``wai.models``).

A run id serves that run's adapter on its base; a folder (a merged export, ``export RUN --merged DIR``) serves as a
base of its own. Errors are said in the command line's words (``_said``), exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["serve_main", "unserve_main", "models_main"]


def _parse(prog: str, description: str, argv: list[str] | None, add: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m whileai {prog}", description=description)
    add(parser)
    parser.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    return parser.parse_args(list(sys.argv[1:] if argv is None else argv))


def _refused(command: str, exc: Exception) -> int:
    from whileai.runner._said import said

    print(f"python -m whileai {command}: {said(exc)}", file=sys.stderr)
    return 2


def _row_lines(row: dict[str, Any]) -> list[str]:
    what = (f"run {row.get('adapterRunId')}'s adapter on {row.get('baseModel')}" if row.get("adapter")
            else f"the base {row.get('baseModel')}")
    return [f"{row.get('name')} v{row.get('version')}: {what}",
            f"  endpoint {row.get('endpoint')} (OpenAI-compatible; model {row.get('name')!r}, the account's key as bearer)"]


def serve_main(argv: list[str] | None = None) -> int:
    """``python -m whileai serve RUN|FOLDER --name NAME [--base MODEL]``."""
    import whileai.simulations as wai
    from whileai.core.errors import PlatformError

    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("what", metavar="RUN|FOLDER", help="a finished run's id (run_...), or a merged export's folder")
        p.add_argument("--name", required=True, help="the model name clients ask for")
        p.add_argument("--base", help="serve a run's adapter on this base instead of the run's own")

    args = _parse("serve", "Serve a finished run's adapter, or a merged export as a base.", argv, add)
    folder = Path(args.what).expanduser()
    try:
        if args.what.startswith("run_") and not folder.exists():
            row = wai.serve(args.what, args.name, base_model=args.base)
        elif folder.is_dir():
            if args.base:
                print("python -m whileai serve: --base is for a run's adapter; a folder is served as the base itself",
                      file=sys.stderr)
                return 2
            row = wai.serve(None, args.name, base_model=str(folder.resolve()))
        else:
            print(f"python -m whileai serve: {args.what!r} is neither a run id (run_..., python -m whileai runs lists "
                  "them) nor a folder (python -m whileai export RUN --merged DIR writes one)", file=sys.stderr)
            return 2
    except (PlatformError, ValueError, FileNotFoundError) as exc:
        return _refused("serve", exc)
    print(json.dumps(row, default=str) if args.json else "\n".join(_row_lines(row)))
    return 0


def unserve_main(argv: list[str] | None = None) -> int:
    """``python -m whileai unserve NAME``."""
    import whileai.simulations as wai
    from whileai.core.errors import PlatformError

    args = _parse("unserve", "Stop serving a model name (its run and adapter stay).", argv,
                  lambda p: p.add_argument("name", help="the served model's name (python -m whileai models lists them)"))
    try:
        answer = wai.unserve(args.name)
    except (PlatformError, ValueError) as exc:
        return _refused("unserve", exc)
    print(json.dumps(answer) if args.json else f"{args.name}: no longer served")
    return 0


def models_main(argv: list[str] | None = None) -> int:
    """``python -m whileai models``."""
    import whileai.simulations as wai
    from whileai.core.errors import PlatformError

    args = _parse("models", "The account's served models.", argv, lambda p: None)
    try:
        rows = wai.models()
    except PlatformError as exc:
        return _refused("models", exc)
    if args.json:
        print(json.dumps({"models": rows}, default=str))
    elif not rows:
        print("no served models: python -m whileai serve RUN --name NAME serves a finished run")
    else:
        print("\n".join(line for row in rows for line in _row_lines(row)))
    return 0
