"""Score a finished BFCL run's exported model with BFCL's own checker, outside whileai's judge and job.

    python -m whileai export RUN_ID --merged out/merged        # the base with the run's adapter merged in
    python scripts/bfcl_score.py RUN_ID --merged out/merged     # plain transformers + BFCL's ast_checker

It takes the run's held-out questions (the same ones its "after" figure was measured on: the run's
held-out set, ``holdout_rows`` of them drawn with the run's seed), asks the merged folder with plain
``transformers`` (its own chat template with each question's tools, greedy, the job's reply cap), and
scores each reply with BFCL's ``ast_checker`` against the question's possible answer (irrelevance
questions: BFCL's no-call rule). It prints both figures side by side and one line per question where they
disagree; it exits 1 when the two pass counts differ by more than ``--tolerance`` questions (default 1:
a merged float32 model generating one prompt at a time can flip a near-tie token that the job's batched,
adapter-on-base generation did not).

BFCL's questions and checker come from the installed ``bfcl-eval`` wheel (``pip install --no-deps bfcl-eval``),
else from the committed sample in tests/data/bfcl (the checker's modules copied unmodified); benchmarks/_bfcl_single_turn.py
loads them. The kit's parser reads the reply's calls for both verdicts, as in the agreement test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _bfcl() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _bfcl_single_turn as _bfcl

    return _bfcl


def held_out_questions(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows the run's held-out figure was measured on, in the job's order."""
    import whileai.simulations as wai
    from whileai.jobs._evaluation import distinct_prompts
    from whileai.domain.rows.datagate import gate_rows

    config = record.get("config") or {}
    if not config.get("holdout"):
        raise SystemExit(f"run {record.get('id')} has no held-out set: nothing to score")
    rows, _ = gate_rows(wai.datasets.load_rows(config["holdout"]))  # the job's gates first, as in its measurement
    return list(distinct_prompts(rows, config.get("holdout_rows"), int(config.get("seed") or 0)))


def generate(merged: Path, rows: list[dict[str, Any]], max_new_tokens: int) -> list[str]:
    """Greedy replies from the merged folder with plain transformers, one prompt at a time, control tokens kept."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from whileai.domain.rows.rollouts import prompt_messages

    tokenizer = AutoTokenizer.from_pretrained(str(merged), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(merged), local_files_only=True, torch_dtype=torch.float32)
    model.eval()
    replies = []
    for row in rows:
        enc = tokenizer.apply_chat_template(prompt_messages(row), tools=row.get("tools") or None,
                                            add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
        seq = out[0, enc["input_ids"].shape[1]:].tolist()
        if tokenizer.eos_token_id in seq:
            seq = seq[: seq.index(tokenizer.eos_token_id)]
        replies.append(tokenizer.decode(seq, skip_special_tokens=False))
    return replies


def score(run_id: str, merged: Path) -> dict[str, Any]:
    """``{"bfcl": [0/1 per question], "run": [the run's after outcomes], "questions": [...], "replies": [...]}``."""
    import whileai.simulations as wai
    from whileai.core import defaults as core_defaults

    bfcl = _bfcl()
    record = wai.get_run(run_id)
    training = (record.get("summary") or {}).get("training") or {}
    after = (training.get("outcomes") or {}).get("after")
    if not after:
        raise SystemExit(f"run {run_id} has no held-out 'after' outcomes to compare with (a finished policy run "
                         "with a held-out set has them)")
    rows = held_out_questions(record)
    replies = generate(merged, rows, core_defaults.TRAIN_EVAL_MAX_NEW_TOKENS)
    checker, no_call_rule = bfcl.load_checker(), bfcl.load_no_call_rule()
    files: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    verdicts = []
    for row, text in zip(rows, replies, strict=True):
        category = row["category"]
        if category not in files:
            questions, answers = bfcl.files(category)
            files[category] = ({e["id"]: e for e in bfcl.read(questions)},
                               {a["id"]: a for a in bfcl.read(answers)} if answers.exists() else {})
        entries, truth = files[category]
        verdicts.append(int(bfcl.bfcl_verdict(checker, entries[row["task_id"]], truth.get(row["task_id"]), category,
                                              text, no_call_rule)))
    return {"bfcl": verdicts, "run": list(after), "questions": [r["task_id"] for r in rows],
            "replies": replies, "source": bfcl.data_source()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_id")
    p.add_argument("--merged", required=True, type=Path,
                   help="the run's merged folder (python -m whileai export RUN_ID --merged DIR)")
    p.add_argument("--tolerance", type=int, default=1, help="questions the two pass counts may differ by (default 1)")
    args = p.parse_args(argv)
    if not (args.merged / "config.json").exists():
        print(f"--merged {str(args.merged)!r} holds no model (no config.json): run "
              f"`python -m whileai export {args.run_id} --merged {args.merged}` first", file=sys.stderr)
        return 2
    result = score(args.run_id, args.merged)
    ours, theirs, n = sum(result["run"]), sum(result["bfcl"]), len(result["bfcl"])
    print(f"held-out questions: {n} ({result['source']})")
    print(f"  the run's judge (job, adapter on base): {ours}/{n} = {ours / n:.3f}")
    print(f"  BFCL's ast_checker (merged, plain transformers): {theirs}/{n} = {theirs / n:.3f}")
    for qid, a, b, text in zip(result["questions"], result["run"], result["bfcl"], result["replies"], strict=True):
        if a != b:
            print(f"  differs on {qid}: run {a}, BFCL {b}: {json.dumps(text[:160])}")
    return 0 if abs(ours - theirs) <= args.tolerance else 1


if __name__ == "__main__":
    raise SystemExit(main())
