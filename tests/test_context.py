"""The context check before a run counts what the job leaves out, with the base's tokenizer alone.

The kit's real tokenizer renders the shipped sample's rows, some padded past the
kit base's context (KIT_MAX_POSITIONS tokens): in the ask, in a ``<think>``
block the exporter strips by default, in a tool output a cap shortens. The count
``check_context`` makes before the run is held to the one the job bodies make on
the rows they export (``_trainer_data.within_context``, GRPO's prompts), for each
export setting that changes the length. The GRPO job trains a step on the kit's
tiny random model with one prompt too long, and the runner prints the count.
"""

from __future__ import annotations

from whileai.core.spec import read_spec
import copy
import json
import warnings

import pytest

from whileai.kit import defaults as kit_defaults
from whileai.domain import defaults
from whileai.core import defaults as core_defaults
from whileai.domain.rows.context import base_tokenizer, check_context

LIMIT = kit_defaults.KIT_MAX_POSITIONS


def _padded(rows: list[dict]) -> list[dict]:
    """The first 50 sample tasks, a few of them padded: the ask of every row of tasks 0-3, a think block in the
    reply of some rows of tasks 4-9, a tool output of some rows of tasks 10-15."""
    rows = copy.deepcopy(rows)
    tasks = sorted({r["task_id"] for r in rows})
    for i, row in enumerate(rows):
        k = tasks.index(row["task_id"])
        if k < 4:
            row["messages"][1]["content"] += " please" * 300
        elif k < 10 and i % 2:
            reply = row["messages"][2]
            reply["content"] = (reply.get("content") or "") + "<think>" + "hmm " * 600 + "</think>"
        elif k < 16 and i % 2:
            for message in row["messages"]:
                if message["role"] == "tool":
                    message["content"] += " data" * 500
    return rows


@pytest.fixture(scope="module")
def padded() -> list[dict]:
    from whileai.kit import load_sample

    return _padded(load_sample()[: 50 * kit_defaults.KIT_SAMPLE_ROLLOUTS])


@pytest.fixture(scope="module")
def tokenizer():
    from whileai.kit import build_tokenizer

    return build_tokenizer(kit_defaults.KIT_BASE_SEED)


@pytest.mark.parametrize("options", [{}, {"strip_think": False}, {"max_tool_output_chars": 100}, {"mask_mode": "final"}])
def test_sft_and_dpo_count_what_their_jobs_leave_out(padded, tokenizer, options):
    from whileai.jobs import _trainer_data
    from whileai.jobs.dpo import preference_pairs

    sft = check_context(padded, "sft", kit_defaults.KIT_BASE_NAME, options)
    examples = _trainer_data.export_training([r for r in padded if r["passed"]], None,
                                             _trainer_data.export_options(read_spec({"method": "sft", **options}), "sft"))
    _, left_out = _trainer_data.within_context(tokenizer, examples, LIMIT)
    assert sft["checked"] and sft["limit"] == LIMIT and sft["too_long"] == left_out > 0
    dpo = check_context(padded, "dpo", kit_defaults.KIT_BASE_NAME, options)
    pairs = _trainer_data.export_pairs(preference_pairs(padded, True), None, _trainer_data.export_options(read_spec({"method": "dpo", **{k: v for k, v in options.items() if k != "mask_mode"}}), "dpo"))
    _, left_out = _trainer_data.within_context(tokenizer, pairs, LIMIT)
    assert dpo["too_long"] == left_out > 0 and dpo["unit"] == "pairs"
    shown = sft["left_out"][0]
    example = _trainer_data.export_training([padded[shown["rows"][0]]], None, _trainer_data.export_options(read_spec({"method": "sft", **options}), "sft"))
    assert shown["tokens"] == max(len(tokenizer.apply_chat_template(ex.get("messages") or ex["prompt"] + ex["completion"],
                                                                     tools=ex["tools"], tokenize=True,
                                                                     return_dict=True)["input_ids"]) for ex in example)


def test_the_export_settings_change_the_count_as_they_change_the_rows(padded):
    stripped = check_context(padded, "sft", kit_defaults.KIT_BASE_NAME)["too_long"]
    assert check_context(padded, "sft", kit_defaults.KIT_BASE_NAME, {"strip_think": False})["too_long"] > stripped
    assert check_context(padded, "sft", kit_defaults.KIT_BASE_NAME, {"max_tool_output_chars": 100})["too_long"] < stripped


def test_a_second_check_of_the_same_rows_and_knobs_is_answered_from_the_first(padded, monkeypatch):
    """The runner's selection report and wai.train's gate check the same rows one after the other: the second is
    not tokenized again; a knob the check reads, or other rows, are counted afresh; the answer is the caller's."""
    from whileai.domain.rows import context

    counted = []
    real = context._check_context
    monkeypatch.setattr(context, "_check_context", lambda *a: counted.append(a[1]) or real(*a))
    monkeypatch.setattr(context, "_CHECKED", {})
    first = check_context(padded, "grpo", kit_defaults.KIT_BASE_NAME, {"max_completion_length": 64, "seed": 0})
    first["left_out"].clear()  # the caller's copy: changing it changes nothing kept
    again = check_context(padded, "grpo", kit_defaults.KIT_BASE_NAME, {"max_completion_length": 64, "lora_rank": 4})
    assert counted == ["grpo"] and again["left_out"] and again["too_long"] > 0  # knobs it never reads: the same
    check_context(padded, "grpo", kit_defaults.KIT_BASE_NAME, {"max_completion_length": 32})
    check_context(padded[1:], "grpo", kit_defaults.KIT_BASE_NAME, {"max_completion_length": 64})
    assert counted == ["grpo"] * 3


def test_rm_and_grpo_count_what_their_jobs_leave_out(padded, tokenizer):
    from whileai.jobs import _trainer_data, grpo
    from whileai.jobs.rm import pair_examples

    rm = check_context(padded, "rm", kit_defaults.KIT_BASE_NAME)
    _, left_out = _trainer_data.within_context(tokenizer, pair_examples(padded, True), LIMIT)
    assert rm["too_long"] == left_out > 0
    cap = 64
    found = check_context(padded, "grpo", kit_defaults.KIT_BASE_NAME, {"max_completion_length": cap})
    prompts = grpo.mixed_prompts(padded, True)
    kept, left_out = grpo._within_context(tokenizer, prompts, grpo.shared_tools(padded), LIMIT, cap)
    assert found["too_long"] == left_out == len(prompts) - len(kept) > 0 and found["unit"] == "prompts"
    assert found["max_completion_length"] == cap and len(found["left_out"]) <= defaults.SELECTION_CONTEXT_SHOWN


def test_the_kit_base_is_read_without_pre_training_it_and_a_folder_base_reads_its_own_files(home, padded):
    from transformers import AutoTokenizer

    from whileai.kit import demo_base_built
    from whileai.kit._base import tiny_model_dir

    tokenizer, limit = base_tokenizer(kit_defaults.KIT_BASE_NAME)
    assert limit == LIMIT and not demo_base_built(), "counting tokens never pre-trains the demo base"
    folder = tiny_model_dir(kit_defaults.KIT_BASE_SEED)  # a saved kit tokenizer and a model config, built in seconds
    saved = AutoTokenizer.from_pretrained(folder)
    row = padded[0]
    ids = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True, return_dict=True)
    assert ids["input_ids"] == saved.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True,
                                                         return_dict=True)["input_ids"]
    by_name = check_context(padded, "sft", kit_defaults.KIT_BASE_NAME)
    by_folder = check_context(padded, "sft", str(folder))
    assert by_folder["checked"] and by_folder["limit"] == LIMIT
    assert {k: v for k, v in by_folder.items() if k != "base_model"} == {k: v for k, v in by_name.items()
                                                                          if k != "base_model"}


def test_a_folder_base_is_counted_without_torch_and_as_transformers_auto_classes_count(home, padded, tmp_path):
    """The runner's selection report reads a folder's tokenizer and context limit without the model registry and
    torch (~2-4 s of imports in the runner), and counts the same tokens and limit the Auto classes give."""
    import shutil
    import subprocess
    import sys

    from transformers import AutoTokenizer

    from whileai.kit import use_tool_format
    from whileai.kit._base import tiny_model_dir

    folder = tiny_model_dir(kit_defaults.KIT_BASE_SEED)
    code = ("import sys; from whileai.domain.rows.context import base_tokenizer; "
            f"t, limit = base_tokenizer({str(folder)!r}); print(limit, 'torch' in sys.modules)")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert said.returncode == 0, said.stderr
    assert said.stdout.split() == [str(LIMIT), "False"]
    ours, limit = base_tokenizer(str(folder))
    auto = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    use_tool_format(auto)
    assert type(ours) is type(auto) and limit == LIMIT
    for row in padded[:: kit_defaults.KIT_SAMPLE_ROLLOUTS * 5]:
        assert (ours.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True, return_dict=True)["input_ids"]
                == auto.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True,
                                            return_dict=True)["input_ids"])
    gpt2_shaped = tmp_path / "gpt2-shaped"  # GPT-2 names its context n_positions: read through AutoConfig's mapping
    shutil.copytree(folder, gpt2_shaped)
    config = json.loads((gpt2_shaped / "config.json").read_text())
    config = {"model_type": "gpt2", "n_positions": 256, "vocab_size": config["vocab_size"]}
    (gpt2_shaped / "config.json").write_text(json.dumps(config))
    assert base_tokenizer(str(gpt2_shaped))[1] == min(core_defaults.TRAIN_MAX_LENGTH, 256)


def test_a_hub_base_not_in_the_local_cache_is_left_to_the_job(padded, tmp_path):
    found = check_context(padded, "sft", "nobody/not-in-the-local-cache")
    assert found["checked"] is False and found["limit"] is None and found["too_long"] == 0 and not found["left_out"]
    assert "'nobody/not-in-the-local-cache' is neither a local folder nor in the local Hugging Face cache" in found["why"]
    assert "the job counts what is too long" in found["why"]
    json.dumps(found)
    empty = check_context(padded, "sft", str(tmp_path))
    assert empty["checked"] is False and f"the folder {tmp_path} holds no loadable tokenizer and config" in empty["why"]


@pytest.mark.slow
def test_the_grpo_job_leaves_out_a_prompt_too_long_and_counts_it(session_home, tmp_path):
    from whileai.jobs import grpo
    from whileai.kit._base import tiny_model_dir

    def row(task: str, passed: bool, ask: str) -> dict:
        return {"messages": [{"role": "user", "content": ask},
                             {"role": "assistant", "content": "yes" if passed else "no"}],
                "gold": {"name": "f", "arguments": {}}, "task_id": task, "passed": passed,
                "reward": float(passed)}

    rows = [row(t, i % 2 == 0, f"question {t}") for t in ("a", "b") for i in range(2)]
    rows += [row("long", i % 2 == 0, "question" + " please" * 300) for i in range(2)]
    spec = {"base_model": str(tiny_model_dir()), "method": "grpo", "learning_rate": 1e-4, "steps": 1, "seed": 0,
            "beta": 0.0, "loss_type": "bnpo", "max_completion_length": 8, "temperature": 1.0, "generations": 2,
            "monitor": False}
    model, tokenizer = grpo.load(read_spec(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, extra = grpo.fit(read_spec(spec), model, tokenizer, rows, tmp_path / "grpo", [])
    assert extra["left_out_too_long"] == 1 and extra["prompts"] == 2 and extra["trainer_received"] == 2
    assert check_context(rows, "grpo", spec["base_model"], spec)["too_long"] == 1
    with pytest.raises(ValueError, match=f"each of the 2 prompts plus max_completion_length=8 is longer than the "
                                         f"model's context of {LIMIT} tokens"):
        grpo.fit(read_spec(spec), model, tokenizer, rows[4:] + [{**r, "task_id": "long2"} for r in rows[4:]], tmp_path / "g2", [])


def test_the_runner_prints_the_count_and_stops_at_the_gate(tmp_path):
    """Every passing row too long: the selection step says how many and of what limit, and nothing trains."""
    from _runner_helpers import whileai

    from whileai.kit import load_sample

    path = tmp_path / "long.jsonl"
    rows = load_sample()[: 12 * kit_defaults.KIT_SAMPLE_ROLLOUTS]
    for row in rows:
        row["messages"][1]["content"] += " please" * 300
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = whileai("run", "recipe=sft_tooluse", "dataset=jsonl", f"dataset.path={path}", "steps=1", token="ctx-long")
    err = done.stderr
    assert done.returncode == 4, err[-3000:]
    assert f"rows longer than the context of {LIMIT} tokens" in err and "Traceback" not in err
    assert f"the selection gate refused the data; nothing was trained:\nevery row sft would train on is longer " \
           f"than the context of {LIMIT} tokens" in err


def test_rows_with_their_own_tools_are_each_rendered_with_their_own_in_the_job_and_the_check(session_home, tmp_path):
    """A benchmark's questions each offer their own functions (BFCL): the GRPO job renders each prompt with its own
    row's tools, not the union, and the check before the run counts the same. One question's function carries a
    description past the context: only that question is left out (under a union every prompt would be)."""
    from whileai.jobs import grpo
    from whileai.kit._base import tiny_model_dir
    from whileai.domain.rows.context import shared_tools

    def tool(name: str, words: int = 3) -> dict:
        return {"type": "function", "function": {"name": name, "description": "does it " * words,
                                                 "parameters": {"type": "object", "properties": {}}}}

    def question(task: str, fn: dict) -> dict:  # one reference call a question, no rollouts: all pass
        return {"messages": [{"role": "user", "content": f"question {task}"},
                             {"role": "assistant", "content": None, "tool_calls": [
                                 {"id": "c0", "type": "function",
                                  "function": {"name": fn["function"]["name"], "arguments": "{}"}}]}],
                "tools": [fn], "gold": {"name": fn["function"]["name"], "arguments": {}}, "task_id": task,
                "passed": True}

    rows = [question(t, tool(f"f_{t}")) for t in ("a", "b", "c")] + [question("long", tool("f_long", 400))]
    assert shared_tools(rows) is None and shared_tools(rows[:1] * 2) == rows[0]["tools"]
    spec = {"base_model": str(tiny_model_dir()), "method": "grpo", "learning_rate": 1e-4, "steps": 1, "seed": 0,
            "beta": 0.0, "max_completion_length": 8, "generations": 2, "monitor": False, "prompt_source": "gold"}
    model, tokenizer = grpo.load(read_spec(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, extra = grpo.fit(read_spec(spec), model, tokenizer, rows, tmp_path / "grpo", [])
    assert extra["tools_per_prompt"] is True and extra["left_out_too_long"] == 1
    assert extra["prompts"] == 3 and extra["trainer_received"] == 3
    assert extra["tools"] == ["f_a", "f_b", "f_c", "f_long"]
    checked = check_context(rows, "grpo", spec["base_model"], spec)
    assert checked["too_long"] == 1 and checked["by_task"] == {"long": 1}
    # the default prompt source wants mixed tasks: these rows give the job nothing, and its error names the knob
    with pytest.raises(ValueError, match="prompt_source='gold'"):
        grpo.fit(read_spec({**spec, "prompt_source": "mixed"}), model, tokenizer, rows, tmp_path / "g2", [])
