"""Rows whose values differ in JSON type between rows train under every method (issue: Arrow cannot mix types).

Real tool-use data carries an argument that is an object in one row and a list
in another, an id that is a number here and a string there, a schema key
``default`` that is ``false`` in one tool and ``"false"`` in the next. Arrow
refuses such a column when a trainer's ``map`` writes it back. Hypothesis
generates such rows; each method's job body trains a step on them (the kit's
randomly initialised tiny model), and the SFT rendering is checked token for
token against the chat template over the row's own JSON.
"""

from __future__ import annotations

from whileai.core.spec import read_spec
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

_scalar = st.one_of(st.booleans(), st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), st.text("abc", max_size=3))
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("pq"), inner,
                                                                                             max_size=2), max_leaves=4)


@pytest.fixture(scope="module")
def base(session_home):
    from whileai.kit._base import tiny_model_dir

    return str(tiny_model_dir())


def _rows(values: list, defaults: list) -> list[dict]:
    rows = []
    for i, (value, default) in enumerate(zip(values, defaults)):
        tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
            "type": "object", "properties": {"x": {"description": "any JSON value", "default": default}},
            "required": ["x"]}}}
        call = {"type": "function", "function": {"name": "f", "arguments": {"x": value}}}
        good = {"messages": [{"role": "user", "content": f"q{i // 2}"},
                             {"role": "assistant", "content": None, "tool_calls": [call]}],
                "tools": [tool], "gold": {"name": "f", "arguments": {"x": value}}, "task_id": f"t{i // 2}",
                "passed": i % 2 == 0, "reward": float(i % 2 == 0)}
        rows.append(good)
    return rows


def _spec(base: str, method: str, **extra) -> dict:
    spec = {"base_model": base, "method": method, "learning_rate": 1e-4, "steps": 1, "batchSize": 2, "seed": 0,
            "beta": 0.1, "loss_type": "sigmoid", "max_completion_length": 8, "temperature": 1.0, "generations": 2,
            "monitor": False, "holdoutRows": 2}
    if method == "grpo":
        spec["loss_type"] = "bnpo"
    from whileai.core.spec import SPEC_MODELS, canonical

    return {k: v for k, v in canonical({**spec, **extra}).items() if k in SPEC_MODELS[method].model_fields}


_hetero = st.lists(_value, min_size=4, max_size=4).filter(lambda vs: len({type(v) for v in vs}) > 1)
_defaults = st.lists(st.one_of(st.booleans(), st.text("ab", max_size=2), st.integers(0, 3)), min_size=4, max_size=4)


@pytest.mark.parametrize("method,extra", [("sft", {}), ("sft", {"mask_mode": "final"}), ("dpo", {}), ("rm", {}),
                                          ("grpo", {})])
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(values=_hetero, defaults=_defaults)
def test_heterogeneous_rows_train_under_every_method(base, tmp_path, method, extra, values, defaults):
    import importlib

    body = importlib.import_module(f"whileai.jobs.{method}")
    spec = _spec(base, method, **extra)
    rows = _rows(values, defaults)
    if method == "sft":
        rows = [r for r in rows if r["passed"]]
    model, tokenizer = body.load(read_spec(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, summary = body.fit(read_spec(spec), model, tokenizer, rows, tmp_path / method, [])
    assert summary["steps"] == 1


def test_the_trainer_renders_each_row_as_its_own_json(base, tmp_path):
    """SFT over rows with {"x": 1} and {"x": "v0"}: each tokenized row is the template over the row's own objects."""
    import trl

    from whileai.jobs import _loading, _trainer_data, _trainer_setup
    from whileai.domain.export import decoding_chat_template, to_hf_dataset

    spec = _spec(base, "sft")
    rows = [r for r in _rows([1, "v0", {"p": [1, "a"]}, ["a", 2]] * 2, [False, "false", 0, "x"] * 2)]
    examples = _trainer_data.export_training(rows, None)
    model, tokenizer = _loading.load_policy(read_spec(spec))
    args = trl.SFTConfig(**_trainer_setup.trainer_settings(read_spec(spec), tmp_path),
                         assistant_only_loss=True, max_length=512)
    with decoding_chat_template(tokenizer):
        dataset = to_hf_dataset(examples)
        assert isinstance(dataset[1]["messages"][1]["tool_calls"][0]["function"]["arguments"], str)
        trainer = trl.SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                                 peft_config=_loading.lora_config(read_spec(spec)))
    for k, example in enumerate(examples):
        want = tokenizer.apply_chat_template(example["messages"], tools=example["tools"], tokenize=True,
                                             return_dict=True)["input_ids"]
        assert list(trainer.train_dataset[k]["input_ids"]) == list(want)
    assert '"arguments": {"x": "v0"}' in tokenizer.decode(trainer.train_dataset[1]["input_ids"])


def test_the_eight_row_repro_trains_through_wai_train(base):
    """Eight rows with {"x": 1} and {"x": "v0"}: pushed, trained by wai.train (a real worker), two SFT steps."""
    import whileai.simulations as wai

    rows = [{**r, "passed": True, "reward": 1.0, "task_id": f"t{i}"}
            for i, r in enumerate(_rows([1 if i % 2 else "v0" for i in range(8)], [False, "false"] * 4))]
    assert len(rows) == 8 and {type(r["gold"]["arguments"]["x"]) for r in rows} == {int, str}
    data = wai.push(rows, name="mixed-types")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(data, method="sft", steps=2, base_model=base, wait=True)
    assert run.status == "done", run.error
    assert run.training["steps"] == 2
