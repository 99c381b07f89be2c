"""``python -m whileai export RUN_ID --merged DIR [--gguf FILE]``: a finished run's model, ready to travel.

``--merged DIR`` writes the base with the run's adapter merged into it: a plain transformers
folder (``model.safetensors``, ``config.json``, the tokenizer, ``chat_template.jinja``) that
``AutoModelForCausalLM.from_pretrained(DIR)``, vLLM or the hub take as they take any model.
``--gguf FILE`` also writes a GGUF file (llama.cpp, Ollama) when the ``gguf`` package is
installed (``pip install 'whileai[gguf]'``); without it the export is refused, naming the
package. The file is read back as ``base_model=FILE.gguf`` reads it and kept only when it is the
same model (``_export_check``: the run's token ids on the committed texts, the same greedy
held-out replies); a tokenizer GGUF cannot keep is refused, naming what would be lost. Nothing is
ever written into a folder that holds something, or over a file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from whileai.kit.quiet import quiet_libraries

from whileai.runner._parts import json_object

__all__ = ["export_main"]

#: vLLM's ``--tool-call-parser`` name for each ``whileai.core.toolcalls`` format.
VLLM_TOOL_PARSERS = {"hermes": "hermes", "llama3": "llama3_json", "mistral": "mistral"}


def _record(run_id: str) -> dict[str, Any]:
    from urllib.parse import quote

    from whileai.domain.client import get_client

    found = get_client().request("GET", f"/runs/{quote(run_id, safe='')}", params={"series": "false"})
    return found if isinstance(found, dict) else {}


def _problems(args: argparse.Namespace) -> list[str]:
    from whileai.runner._merged import occupied

    out = []
    if not args.merged and not args.gguf:
        out.append("nothing to write: pass --merged DIR (a transformers folder) and/or --gguf FILE (llama.cpp, Ollama)")
    if args.merged and occupied(Path(args.merged).expanduser()):
        out.append(f"--merged {args.merged!r} exists and is not empty; export never writes into it: pass a new "
                   "folder, or an empty one")
    if args.gguf:
        target = Path(args.gguf).expanduser()
        if target.exists():
            out.append(f"--gguf {args.gguf!r} exists; export never overwrites a file: pass a new file name")
        elif not target.parent.is_dir():
            out.append(f"--gguf {args.gguf!r}: its folder {str(target.parent)!r} does not exist; create it first")
        from whileai.runner._gguf import gguf_missing

        missing = gguf_missing()
        if missing:
            out.append(missing)
    return out


def _adapter_and_base(record: dict[str, Any]) -> tuple[Path, str]:
    """(the adapter folder, the base model) of a finished policy run; ValueError saying why not."""
    summary: dict[str, Any] = json_object(record.get("summary"))
    config: dict[str, Any] = json_object(record.get("config"))
    training: dict[str, Any] = json_object(summary.get("training"))
    run_id = record.get("id")
    if record.get("status") != "done":
        raise ValueError(f"run {run_id} is {record.get('status')!r}, not 'done': only a finished run has weights to "
                         "export (python -m whileai show RUN_ID says what happened)")
    if (config.get("method") or training.get("method")) == "rm":
        raise ValueError(f"run {run_id} is a reward model (method rm): it scores rows and generates nothing, so it has "
                         "no merged causal LM; export a policy run (sft, grpo, dpo)")
    from whileai.domain.client import get_client
    from whileai.simulations.serving import platform_adapter

    # the folder the platform resolves for this run of the caller's account, never the path its summary names
    adapter, base = platform_adapter(get_client(), record, "it has no weights to export")
    if not isinstance(base, str) or not base:
        from whileai.kit.defaults import KIT_BASE_NAME

        base = KIT_BASE_NAME
    return Path(adapter), base


def export_main(argv: list[str] | None = None) -> int:
    """``python -m whileai export RUN_ID --merged DIR [--gguf FILE]``."""
    from whileai.core.errors import NotFoundError, PlatformError

    p = argparse.ArgumentParser(prog="python -m whileai export",
                                description="Write a finished run's model: merged transformers folder, GGUF file.")
    p.add_argument("run_id", help="a finished run, e.g. run_0123abcd... (python -m whileai runs lists them)")
    p.add_argument("--merged", metavar="DIR", help="write the base with the adapter merged into it here (new or empty)")
    p.add_argument("--gguf", metavar="FILE", help="also write a GGUF file here (needs the gguf package)")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    problems = _problems(args)
    try:
        record = _record(args.run_id)
        adapter, base = _adapter_and_base(record)
    except NotFoundError:
        problems.append(f"no run {args.run_id!r} here; python -m whileai runs lists the runs")
    except (PlatformError, ValueError) as exc:
        problems.append(str(exc))
    if problems:
        print(f"python -m whileai export: {len(problems)} problem(s); nothing was written:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    from whileai.runner._merged import write_merged

    print(f"merging the adapter of {args.run_id} into {base} ...", file=sys.stderr)
    folder = Path(args.merged).expanduser().resolve() if args.merged else None
    if folder is None:  # GGUF alone: the merged folder is a step on the way, kept beside the file
        gguf_path = Path(args.gguf).expanduser().resolve()
        folder = gguf_path.with_name(gguf_path.stem + "-merged")
        if folder.exists():
            print(f"python -m whileai export: {folder} (the merged folder the GGUF file is made from) exists; pass "
                  "--merged DIR to name another", file=sys.stderr)
            return 2
    try:
        with quiet_libraries():
            written = write_merged(base, adapter, folder)
    except (FileNotFoundError, FileExistsError, OSError) as exc:
        print(f"python -m whileai export: {exc}; nothing was written", file=sys.stderr)
        return 2
    print(f"merged     {written.folder}  ({', '.join(written.files)})")
    parser = VLLM_TOOL_PARSERS.get(written.tool_format, written.tool_format)
    print(f"load it    AutoModelForCausalLM.from_pretrained({written.folder!r}); vllm serve {written.folder} "
          f"--enable-auto-tool-choice --tool-call-parser {parser}")
    print(f"tool calls {written.tool_format} format (the chat template it trained with travels in the folder)")
    if args.gguf:
        return _write_checked_gguf(folder, Path(args.gguf).expanduser().resolve(), record, written.tool_format)
    return 0


def _write_checked_gguf(folder: Path, target: Path, record: dict[str, Any], tool_format: str) -> int:
    """Write the GGUF file, read it back as ``base_model=FILE.gguf`` does and keep it only if it is the same model."""
    from whileai.kit import KIT_PRE_TOKENIZER

    from whileai.runner._export_check import check_gguf
    from whileai.runner._gguf import write_gguf

    try:
        with quiet_libraries():
            out = write_gguf(folder, target)
    except ValueError as exc:
        print(f"python -m whileai export: the merged folder is written, the GGUF file is not: {exc}", file=sys.stderr)
        return 2
    print(f"checking   {target} read back as base_model=FILE.gguf reads it ...", file=sys.stderr)
    with quiet_libraries():
        checked = check_gguf(folder, target, record, tool_format)
    if checked.differences:
        target.unlink(missing_ok=True)
        print("python -m whileai export: the merged folder is written, the GGUF file is not (removed): read back, it "
              "is a different model:", file=sys.stderr)
        for line in checked.differences[:5]:
            print(f"  - {line}", file=sys.stderr)
        return 2
    print(f"gguf       {out.file}  ({out.tensors} tensors, {out.architecture}, float32, pre-tokenizer "
          f"{out.pre_tokenizer})")
    held = (f"held-out: the same greedy replies on {checked.prompts} prompts ({checked.passed}/"
            f"{checked.prompts} pass in both)" if checked.prompts else "held-out: the run has no held-out set "
            "here to compare replies on")
    print(f"checked    tokenizer round-trips on {checked.texts} texts (the run's ids); {held}")
    if out.pre_tokenizer == KIT_PRE_TOKENIZER:
        print(f"note       llama.cpp and Ollama do not know the kit's pre-tokenizer ({KIT_PRE_TOKENIZER}) and refuse "
              "the file rather than split text another way; whileai reads it: base_model=FILE.gguf")
    return 0
