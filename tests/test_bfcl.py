"""Real tool-use data: BFCL rows convert, pass the gates, train, and are judged as BFCL's own checker judges them.

The data and BFCL's ``ast_checker`` come from the ``bfcl-eval`` wheel when it
is installed, else from the committed sample (benchmarks/_bfcl_single_turn.py says how). The
agreement test scores every kind of candidate reply with both judges.
"""

from __future__ import annotations

import collections
import json
import sys
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.domain.judges.judging import judge_reply
from whileai.domain.rows.rollouts import RolloutRow, check_rows, row_problems

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import _bfcl_single_turn as _bfcl  # noqa: E402

KINDS = ("reference", "other acceptable value", "optional omitted", "optional given", "numeric spelling",
         "string variant", "wrong value", "wrong function", "extra argument", "missing argument")
PARALLEL_KINDS = ("parallel reordered", "parallel partial")


@pytest.fixture(scope="module")
def converted() -> dict[str, list]:
    return {c: wai.datasets.from_bfcl(*_bfcl.files(c)) for c in _bfcl.CATEGORIES}


def test_from_bfcl_converts_each_category(converted):
    for category, rows in converted.items():
        questions = _bfcl.read(_bfcl.files(category)[0])
        left_out = rows.report["left_out"]
        assert len(rows) + len(left_out) == len(questions) == rows.report["questions"], category
        assert all("no acceptable value" in x["why"] for x in left_out), left_out
        print(f"\n{category}: {len(rows)} rows of {len(questions)} questions; left out {[x['id'] for x in left_out]}")
        check_rows(rows)
        ids = [q["id"] for q in questions]
        for row in rows:
            RolloutRow.model_validate(row)
            assert row["gold"]["match"] == "bfcl" and row["task_id"] in ids and row["category"] == category
            assert all(t["function"]["parameters"]["type"] == "object" for t in row["tools"])
            # the reference (the assistant turn) passes its own gold
            assert wai.first_action_judge(row)["passed"], row["task_id"]
    assert all("parallel" in r["gold"] for r in converted["parallel"])
    assert any("parallel" in r["gold"] for r in converted["parallel_multiple"])
    assert all(len({c["name"] for c in r["gold"]["parallel"]}) > 1 or len(r["tools"]) > 1
               for r in converted["parallel_multiple"] if "parallel" in r["gold"])
    # irrelevance: BFCL has no answer file; the reference reply calls nothing and the gold says no call
    for row in converted["irrelevance"]:
        assert row["gold"] == {"no_call": True, "match": "bfcl"}
        assert not row["messages"][-1].get("tool_calls") and row["messages"][-1]["content"]
    assert all("name" in r["gold"] for c in ("simple_python", "multiple", "live_simple") for r in converted[c])
    # names and types mapped as BFCL's OpenAI handler maps them, and counted
    report = converted["simple_python"].report
    assert report["tool_names_mapped"] > 0 and report["types_mapped"].get("float", 0) > 0
    names = [t["function"]["name"] for rows in converted.values() for r in rows for t in r["tools"]]
    assert all("." not in n for n in names)


def test_from_bfcl_refuses_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        wai.datasets.from_bfcl(tmp_path / "nope.json", tmp_path / "nope2.json")
    with pytest.raises(ValueError, match="needs its possible-answer file"):
        wai.datasets.from_bfcl(_bfcl.files("multiple")[0])
    with pytest.raises(FileNotFoundError) as err:  # every missing file named at once
        wai.datasets.from_bfcl_folder(tmp_path, ["multiple", "irrelevance"])
    assert str(err.value).count(str(tmp_path)) == 4 and "possible_answer/BFCL_v4_irrelevance" not in str(err.value)


#: The categories bfcl-eval ships (its data/BFCL_v4_<category>.json, 2026.3.23), read from the wheel when installed
SHIPPED = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
           "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
           "live_relevance", "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
           "multi_turn_long_context", "web_search", "memory", "format_sensitivity")


def _multi_turn_files(folder):
    """A multi-turn question and answer as BFCL writes them: turns of user messages, calls as Python strings."""
    (folder / "possible_answer").mkdir(parents=True, exist_ok=True)
    question = {"id": "multi_turn_base_0", "question": [[{"role": "user", "content": "Go to the docs folder."}],
                                                        [{"role": "user", "content": "List its files."}]],
                "initial_config": {"GorillaFileSystem": {}}, "path": [], "involved_classes": ["GorillaFileSystem"]}
    answer = {"id": "multi_turn_base_0", "ground_truth": [["cd(folder='docs')"], ["ls()"]]}
    (folder / "BFCL_v4_multi_turn_base.json").write_text(json.dumps(question) + "\n")
    (folder / "possible_answer" / "BFCL_v4_multi_turn_base.json").write_text(json.dumps(answer) + "\n")
    return folder / "BFCL_v4_multi_turn_base.json", folder / "possible_answer" / "BFCL_v4_multi_turn_base.json"


def test_every_category_bfcl_eval_ships_is_converted_or_refused_by_name(tmp_path):
    from whileai.domain.rows.bfcl import bfcl_category

    installed = wai.datasets.bfcl_data_folder()
    shipped = set(SHIPPED) if installed is None else {
        bfcl_category(p) for p in installed.glob("BFCL_v*_*.json")}
    converted, refused = set(wai.datasets.BFCL_AST_CATEGORIES), set(wai.datasets.BFCL_REFUSED_CATEGORIES)
    assert shipped <= converted | refused and not converted & refused, shipped - converted - refused
    questions, answers = _multi_turn_files(tmp_path)
    with pytest.raises(ValueError, match="not converted: multi-turn") as err:  # not an AttributeError
        wai.datasets.from_bfcl(questions, answers)
    assert "simple_python, multiple" in str(err.value), "the refusal lists what is converted"
    for category in ("web_search", "memory", "live_relevance", "format_sensitivity", "simple_java"):
        with pytest.raises(ValueError, match=f"BFCL category '{category}' is not converted: .*simple_python"):
            wai.datasets.from_bfcl_folder(_bfcl.SAMPLE, [category])


def test_a_misspelt_category_gets_the_nearest_name_and_the_list():
    with pytest.raises(ValueError, match="'simple_pyton' is not a BFCL category \\(did you mean 'simple_python'\\?\\)"
                                         ".*the categories converted: simple_python"):
        wai.datasets.from_bfcl_folder(_bfcl.SAMPLE, ["simple_pyton", "multiple"])
    said = wai.datasets.bfcl_categories_problem(["live_relevence", "multi_turn_base", "irrelevance"])
    assert "did you mean 'live_relevance'" in said and "'multi_turn_base' is not converted: multi-turn" in said
    assert said.count("the categories converted") == 1 and "irrelevance'" not in said.split("; the categories")[0]


def test_validate_refuses_an_unconverted_category_by_name(tmp_path):
    from _runner_helpers import whileai

    done = whileai("validate", "recipe=sft_tooluse", "dataset=bfcl", f"dataset.folder={_bfcl.SAMPLE}",
                   "dataset.categories=[multi_turn_base,live_relevence,simple_python]")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "'multi_turn_base' is not converted: multi-turn" in done.stderr
    assert "did you mean 'live_relevance'" in done.stderr and "is this the question file" not in done.stderr
    questions, answers = _multi_turn_files(tmp_path)
    done = whileai("validate", "recipe=sft_tooluse", "dataset=bfcl", f"dataset.questions={questions}",
                   f"dataset.answers={answers}")
    assert done.returncode == 2 and "not converted: multi-turn" in done.stderr, done.stderr
    assert "is this the question file" not in done.stderr


def test_from_bfcl_folder_reads_a_mix_with_each_rows_category():
    rows = wai.datasets.from_bfcl_folder(_bfcl.SAMPLE, ["multiple", "irrelevance", "parallel_multiple"])
    counts = collections.Counter(r["category"] for r in rows)
    sample = {c: len(_bfcl.read(_bfcl.SAMPLE / f"BFCL_v4_{c}.json")) for c in counts}
    assert counts == sample and list(counts) == ["multiple", "irrelevance", "parallel_multiple"]
    assert set(rows.report["categories"]) == set(counts) and rows.report["rows"] == len(rows)
    check_rows(rows)


def test_the_judge_agrees_with_bfcls_checker_for_every_kind_of_reply():
    """Per category, every candidate reply gets BFCL's verdict from our judge (ast_checker; irrelevance: no call)."""
    checker = _bfcl.load_checker()
    no_call_rule = _bfcl.load_no_call_rule()
    table: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    disagreements = []
    for category in _bfcl.CATEGORIES:
        for case in _bfcl.cases(category):
            theirs = _bfcl.bfcl_verdict(checker, case["entry"], case["answer"], category, case["text"], no_call_rule)
            ours = judge_reply(case["text"], case["row"])["passed"]
            cell = table[(case["kind"], category)]
            cell[0] += theirs == ours
            cell[1] += 1
            if theirs != ours:
                disagreements.append((case["kind"], case["row"]["task_id"], theirs, case["text"][:200]))
    print(f"\nagreement with BFCL's ast_checker ({_bfcl.data_source()}):")
    for (kind, category), (agree, n) in sorted(table.items()):
        print(f"  {kind:24s} {category:14s} {agree:5d}/{n:<5d} {agree / n:.4f}")
    total = sum(n for _, n in table.values())
    print(f"  all kinds and categories: {total - len(disagreements)}/{total}")
    # docs/rows.md: the same verdict as ast_checker on every reply, not a rate close to it
    assert not disagreements, (len(disagreements), disagreements[:5])
    for kind in KINDS:  # every kind is scored on every category (an optional argument is not in every sample)
        for category in _bfcl.CATEGORIES:
            if "irrelevance" not in category:
                assert (kind, category) in table or kind.startswith("optional"), (kind, category)
    for kind in PARALLEL_KINDS:
        assert (kind, "parallel") in table and (kind, "parallel_multiple") in table
    for kind in _bfcl.NO_CALL_KINDS:
        assert (kind, "irrelevance") in table, kind
    by_category = collections.Counter(category for (_, category) in table)
    assert set(by_category) == set(_bfcl.CATEGORIES)
    # both verdicts occur in each category, so agreement is not one answer given to everything
    for category in _bfcl.CATEGORIES:
        verdicts = {_bfcl.bfcl_verdict(checker, c["entry"], c["answer"], category, c["text"], no_call_rule)
                    for c in _bfcl.cases(category)[:60]}
        assert verdicts == {True, False}, category


def test_grpo_reward_and_the_held_out_judge_decide_through_one_parser():
    """Constructed replies (an integer as "5", as 5.0, calls with text around) get one verdict from both."""
    from whileai.jobs.grpo import first_action_reward
    from whileai.kit import build_tokenizer

    tokenizer = build_tokenizer()
    tools = [{"type": "function", "function": {"name": "set_timer", "parameters": {
        "type": "object", "properties": {"minutes": {"type": "integer"}}, "required": ["minutes"]}}}]
    gold = {"name": "set_timer", "arguments": {"minutes": 5}}
    prompt = [{"role": "user", "content": "five minutes"}]
    texts = ['<tool_call>{"name": "set_timer", "arguments": {"minutes": 5}}</tool_call>',
             '<tool_call>{"name": "set_timer", "arguments": {"minutes": "5"}}</tool_call>',
             '<tool_call>{"name": "set_timer", "arguments": {"minutes": 5.0}}</tool_call>',
             'Sure. <tool_call>{"name": "set_timer", "arguments": {"minutes": 5}}</tool_call>',
             '<tool_call>{"name": "set_timer", "arguments": "{\\"minutes\\": 5}"}</tool_call>',
             '<tool_call>{"name": "set_timer", "parameters": {"minutes": 5}}</tool_call><|im_end|>']
    reward = first_action_reward("mask", set(), tokenizer, tools)
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    got = reward([prompt] * len(texts), [[{"role": "assistant", "content": t}] for t in texts], completion_ids=ids,
                 gold=[json.dumps(gold)] * len(texts))
    held = [float(judge_reply(t, {"messages": prompt, "gold": gold, "tools": tools})["passed"]) for t in texts]
    assert got == held and held[:3] == [1.0, 0.0, 0.0]


def test_gold_forms_are_validated_by_the_row_schema():
    base = {"messages": [{"role": "user", "content": "x"}]}
    good = [
        {"name": "f", "arguments": {"a": 1}, "values": {"a": [1, 2]}, "optional": ["b"], "match": "bfcl"},
        {"parallel": [{"name": "f", "arguments": {"a": 1}}, {"name": "g"}], "match": "exact"},
        {"one_of": [{"name": "f", "arguments": {}}, {"parallel": [{"name": "g", "arguments": {}}]}]},
    ]
    for gold in good:
        assert row_problems({**base, "gold": gold}) == []
        RolloutRow.model_validate({**base, "gold": gold})
    bad = [{"name": "f", "values": {"a": 1}}, {"name": "f", "optional": "b"}, {"name": "f", "match": "loose"},
           {"parallel": []}, {"one_of": [{"arguments": {}}]}]
    for gold in bad:
        assert row_problems({**base, "gold": gold}), gold
        with pytest.raises(Exception):
            RolloutRow.model_validate({**base, "gold": gold})


def test_the_schema_decides_numbers_and_a_plain_gold_keeps_its_verdicts():
    def row(args, gold, kind="integer"):
        tools = [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"type": kind}}}}}]
        return {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": args}}]}], "gold": gold, "tools": tools}

    plain = {"name": "f", "arguments": {"x": 5}}
    assert wai.first_action_judge(row({"x": 5}, plain))["passed"]
    assert not wai.first_action_judge(row({"x": 5.0}, plain))["passed"]  # integer: 5.0 is not one
    assert wai.first_action_judge(row({"x": 5}, {"name": "f", "arguments": {"x": 5.0}}, "number"))["passed"]
    no_tools = {k: v for k, v in row({"x": 5.0}, plain).items() if k != "tools"}
    assert wai.first_action_judge(no_tools)["passed"]  # without a schema: today's JSON equality
    exact = {"name": "f", "arguments": {"x": "Paris"}, "values": {"x": ["Paris"]}}
    assert not wai.first_action_judge(row({"x": "paris"}, exact, "string"))["passed"]
    assert wai.first_action_judge(row({"x": "paris"}, {**exact, "match": "bfcl"}, "string"))["passed"]


def test_the_data_gates_map_or_refuse_with_their_report():
    from whileai.domain.rows.datagate import gate_rows

    def row(name, params, gold):
        return {"messages": [{"role": "user", "content": "q"}], "task_id": "t",
                "tools": [{"type": "function", "function": {"name": name, "parameters": params}}], "gold": gold}

    params = {"type": "dict", "properties": {"x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "any"}}},
              "required": ["x"]}
    rows, report = gate_rows([row("math.hypot", params, {"name": "math.hypot", "arguments": {"x": 1.5}})])
    assert report["tool_names_mapped"] == 1 and report["refused_rows"] == 0
    assert report["types_mapped"] == {"any": 1, "dict": 1, "float": 1, "tuple": 1}
    assert rows[0]["tools"][0]["function"]["name"] == "math_hypot" and rows[0]["gold"]["name"] == "math_hypot"
    props = rows[0]["tools"][0]["function"]["parameters"]
    assert props["type"] == "object" and props["properties"]["x"] == {"type": "number", "format": "float"}
    assert props["properties"]["t"] == {"type": "array", "items": {"type": "string"}}
    cases = {
        "no free mapping": row("a b" * 40, {"type": "object"}, None),
        "unknown type": row("f", {"type": "object", "properties": {"x": {"type": "matrix"}}}, None),
        "absent tool": row("f", {"type": "object"}, {"name": "g", "arguments": {}}),
        "missing required": row("f", {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                                {"name": "f", "arguments": {}}),
        "wrong type": row("f", {"type": "object", "properties": {"x": {"type": "integer"}}},
                          {"name": "f", "arguments": {"x": "5"}}),
    }
    for what, bad in cases.items():
        _, report = gate_rows([bad])
        assert report["refused_rows"] == 1, what
        assert report["refused"][0]["problems"], what
    profile = wai.datasets.profile([cases["absent tool"], cases["wrong type"]])
    assert profile["data_gates"]["refused_rows"] == 2
    from whileai.core.errors import TrainingSelectionError
    from whileai.simulations._hosting import selection_gate

    with pytest.raises(TrainingSelectionError, match="fail the data gates"):
        selection_gate(profile, "sft", "require", 1)


def test_bfcl_gates_counts(converted):
    """What the gates find on the four categories (all mapped, none refused); printed for the report."""
    from whileai.domain.rows.datagate import gate_rows

    for category, rows in converted.items():
        _, report = gate_rows(rows)
        print(f"\n{category}: {rows.report['tool_names_mapped']} names and {rows.report['types_mapped']} types "
              f"mapped by from_bfcl; gates refuse {report['refused_rows']}")
        assert report["refused_rows"] == 0


def test_validate_refuses_a_missing_file(tmp_path):
    from _runner_helpers import whileai

    done = whileai("validate", "recipe=sft_tooluse", "dataset=jsonl", f"dataset.path={tmp_path / 'nope.jsonl'}")
    assert done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr
    done = whileai("validate", "recipe=sft_tooluse", "dataset=bfcl", f"dataset.questions={tmp_path / 'q.json'}",
                   f"dataset.answers={_bfcl.files('simple_python')[1]}")
    assert done.returncode == 2 and "dataset.questions" in done.stderr
    questions, answers = _bfcl.files("simple_python")
    done = whileai("validate", "recipe=sft_tooluse", "dataset=bfcl", f"dataset.questions={questions}",
                   f"dataset.answers={answers}")
    assert done.returncode == 0, done.stderr


def test_a_data_error_at_run_time_prints_one_message(tmp_path):
    from _runner_helpers import whileai

    from whileai.kit import load_sample

    path = tmp_path / "late.jsonl"
    rows = load_sample()[:260]
    lines = [json.dumps(r) for r in rows]
    lines[250] = '{"messages": 5}'  # past validate's sample: found when the run reads the file
    path.write_text("\n".join(lines) + "\n")
    done = whileai("run", "recipe=sft_tooluse", "dataset=jsonl", f"dataset.path={path}", "steps=1")
    assert done.returncode == 2, done.stderr
    # a run reads the whole file before anything loads (validate only a sample): named as FILE:LINE
    assert "Traceback" not in done.stderr and f"{path}:251" in done.stderr and "nothing was loaded" in done.stderr


@pytest.mark.slow
def test_two_step_sft_on_bfcl_rows_measures_the_held_out_set_from_the_sdk(converted):
    from _runner_helpers import tiny_base

    rows = converted["simple_python"][:24]
    data = wai.push(rows, name="bfcl-simple")
    train, held = wai.datasets.cut(data, holdout=0.25, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(train, method="sft", steps=2, base_model=tiny_base(), holdout=held, wait=True,
                        config={"holdoutRows": 4})
    assert run.status == "done", run.error
    training = run.training
    assert training["steps"] == 2 and training["after"] is not None and training["holdout_prompts"] == 4
    assert "left_out_too_long" in training and training["data_gates"]["refused_rows"] == 0


@pytest.mark.slow
def test_two_step_sft_from_python_m_whileai_run_dataset_bfcl():
    from _runner_helpers import record, runs_file, tiny_base, whileai

    questions, answers = _bfcl.files("simple_python")
    done = whileai("run", "recipe=sft_tooluse", "dataset=bfcl", f"dataset.questions={questions}",
                   f"dataset.answers={answers}", "dataset.tasks=24", "holdoutRows=4", "steps=2",
                   f"base_model={tiny_base()}", "expect.holdout_after_min=null", "expect.holdout_gain_min=null",
                   "expect.holdout_gain_significant=null",
                   token="bfcl-sft")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "held-out pass_rate" in done.stdout + done.stderr
    run = record(runs_file("bfcl-sft")["runs"][-1]["id"])
    training = run.get("training") or run["summary"]["training"]
    assert training["steps"] == 2 and training["after"] is not None and training["holdout_prompts"] == 4


def test_rows_longer_than_the_context_are_counted_and_left_out(converted):
    """Parallel BFCL rows against the kit's 512-token context: the long ones are left out, counted, never cut."""
    from whileai.jobs import _evaluation, _trainer_data
    from whileai.kit import build_tokenizer
    from whileai.core import defaults as core_defaults

    tokenizer = build_tokenizer()
    rows = converted["parallel"]
    examples = _trainer_data.export_training(rows, None)
    kept, too_long = _trainer_data.within_context(tokenizer, examples, 512)
    assert too_long > 0 and len(kept) + too_long == len(examples)
    for example in kept:
        ids = tokenizer.apply_chat_template(example["messages"], tools=example["tools"], tokenize=True,
                                            return_dict=True)["input_ids"]
        assert len(ids) <= 512
    over = sum(_evaluation.gold_reply_tokens(tokenizer, r["gold"]) > core_defaults.TRAIN_EVAL_MAX_NEW_TOKENS for r in rows)
    print(f"\nparallel: {too_long} of {len(examples)} rows longer than 512 tokens; {over} golds over the reply cap")
    assert over > 0


def test_the_held_out_reply_cap_is_a_knob_and_its_warning_names_the_cap_that_fits(converted, session_home):
    """BFCL's parallel golds run past the 96-token default: the job warns naming ``eval_max_new_tokens`` and the
    value that fits every prompt; at that value nothing is over the cap and the replies may run that long."""
    from transformers import AutoModelForCausalLM

    from whileai.core.spec import read_spec
    from whileai.jobs import _evaluation
    from whileai.kit import build_tokenizer, use_tool_format
    from whileai.kit._base import tiny_model_dir

    rows = list(converted["parallel_multiple"])[:6]
    tokenizer = build_tokenizer()
    use_tool_format(tokenizer, "hermes")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir(), local_files_only=True)
    longest = max(_evaluation.gold_reply_tokens(tokenizer, r["gold"]) for r in rows)
    assert longest > 96, longest  # a parallel_multiple gold is longer than the default cap
    spec = read_spec({"method": "sft", "holdout_rows": 6, "eval_max_new_tokens": 96})
    with pytest.warns(wai.TrainingWarning, match=rf"\(eval_max_new_tokens=96\): they cannot pass; "
                                                 rf"eval_max_new_tokens={longest} fits every one"):
        capped = _evaluation.policy_pass_rate(model, tokenizer, rows, spec)
    assert capped.gold_over_cap > 0 and capped.prompts == 6
    spec = read_spec({"method": "sft", "holdout_rows": 6, "eval_max_new_tokens": longest})
    with warnings.catch_warnings():
        warnings.simplefilter("error", wai.TrainingWarning)
        fitting = _evaluation.policy_pass_rate(model, tokenizer, rows, spec)
    assert fitting.gold_over_cap == 0
    assert read_spec({"method": "grpo"}).eval_max_new_tokens == 96  # the default: one call or a short answer
    with pytest.raises(ValueError, match="eval_max_new_tokens"):
        read_spec({"method": "sft", "eval_max_new_tokens": 0})
