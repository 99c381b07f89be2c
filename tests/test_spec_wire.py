"""The resolved spec is the wire format: one frozen model from ``resolve_spec`` to the job row.

It becomes JSON only at the JSON edge (:func:`whileai.core.spec.spec_json`: the HTTP request, the run's
config, the job row) and is read back into the model at each trust boundary: the launch route reads what a
client sends (a bad spec sent raw over HTTP is one 422 naming every problem), the worker reads the job row.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import httpx
import pytest

from whileai.core.spec import GRPOSpec, SFTSpec, read_job_spec, spec_json
from whileai.platform.server import serve_in_thread
from whileai.domain import defaults
from whileai.simulations.training import train_spec
from test_hosting import launches, rows  # noqa: F401  (launches: the fixture that records launches instead of starting them)

API = "/api/v1"
PACKAGE = Path(__file__).resolve().parent.parent / "whileai"

#: (module, function) -> why it may turn a pydantic model into a dict: the JSON edges, and models that are not a spec
EDGES = {
    ("core/_spec_io.py", "spec_json"): "the JSON edge: the HTTP request, the run's config and the job row are its output",
    ("core/jobrow.py", "platform_json"): "the JSON edge of a job row's platform fields (the store, a Modal payload)",
    ("jobs/body.py", "_mirror"): "the config handed to outside trackers (report_to), an edge out of the platform",
    ("platform/api/_datasets.py", "update_dataset"): "a dataset PATCH body, not a spec",
    ("platform/api/runs.py", "create_run"): "a run POST body, not a spec",
    ("platform/api/runs.py", "update_run"): "a run PATCH body, not a spec",
    ("domain/rows/rollouts.py", "as_row"): "a row model a user pushes, not a spec",
    ("domain/rows/bfcl.py", "bfcl_tool"): "a BFCL tool's JSON schema, not a run spec",
    ("runner/schema.py", "given"): "the recipe's knobs as wai.train's keyword arguments: the input a resolution starts from",
    ("runner/schema.py", "plain"): "the recipe as given, for the run's record (JSON) that reproduce reads back",
    ("runner/stages.py", "_monitor_config"): "the monitor group's settings as wai.train's monitor config (its input)",
    ("runner/pipeline.py", "_finish"): "the expect group as the lines settle() reads, a recipe's assertions, not a spec",
}


def _conversions(path: Path) -> list[tuple[str, int, str]]:
    """``(function, line, what)`` for each place in ``path`` that turns a model, or a resolution's values, into a
    dict: ``.model_dump(...)``, ``dict(<...>.values)``, ``dict(<spec>)`` / ``vars(<spec>)``."""
    found: list[tuple[str, int, str]] = []
    stack: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            stack.append(node.name)
            self.generic_visit(node)
            stack.pop()

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Call(self, node: ast.Call) -> None:
            where = stack[-1] if stack else "<module>"
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("model_dump", "model_dump_json", "dict"):
                found.append((where, node.lineno, f".{func.attr}(...)"))
            if isinstance(func, ast.Name) and func.id in ("dict", "vars") and node.args:
                arg = node.args[0]
                name = arg.attr if isinstance(arg, ast.Attribute) else arg.id if isinstance(arg, ast.Name) else ""
                if name == "values" or any(word in name.lower() for word in ("spec", "resol")):
                    found.append((where, node.lineno, f"{func.id}({ast.unparse(arg)})"))
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text()))
    return found


def test_no_module_turns_a_resolved_spec_back_into_a_dict_but_at_the_json_edge():
    seen, unlisted = set(), []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for function, line, what in _conversions(path):
            seen.add((module, function))
            if (module, function) not in EDGES:
                unlisted.append(f"whileai/{module}:{line} {function}: {what}")
    assert not unlisted, ("a spec is carried as its model and dumped only at the JSON edge (spec_json); "
                          "use the model's attributes, or add the place to EDGES with why: " + "; ".join(unlisted))
    assert not set(EDGES) - seen, f"EDGES names places that convert nothing any more: {sorted(set(EDGES) - seen)}"


def test_the_scan_sees_the_conversion_it_forbids(tmp_path):
    """The scan is not blind: ``dict(resolution.values)``, the form ``wai.train`` once used, is found."""
    sample = tmp_path / "sample.py"
    sample.write_text("def train(resolution, spec):\n    a = dict(resolution.values)\n    return spec.model_dump(), a\n")
    assert [(f, w) for f, _, w in _conversions(sample)] == [("train", "dict(resolution.values)"),
                                                           ("train", ".model_dump(...)")]


def _resolved(method: str, **knobs) -> SFTSpec | GRPOSpec:
    result = train_spec(method, knobs, None, base_model=None, target="local", holdout=None)
    assert result.spec is not None, result.problems
    return result.spec


def test_a_spec_reads_back_from_its_json_as_the_same_model():
    for spec in (_resolved("sft", steps=5, learning_rate=1e-4), _resolved("grpo", beta=0.02)):
        assert read_job_spec(spec_json(spec)) == spec


@pytest.fixture
def server(launches, home):  # noqa: F811  (the fixture imported above)
    """A real server on loopback whose local launches are recorded instead of started (``launches``)."""
    handle = serve_in_thread(store_url=f"sqlite:///{home / 'wire.db'}")
    key = handle.store.create_account("wire")[1]
    with httpx.Client(base_url=handle.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        yield client, launches
    handle.stop()


def _run_and_dataset(client: httpx.Client) -> tuple[str, str]:
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
             "passed": True}]
    dataset = client.post(f"{API}/datasets", json={"name": "wire", "rows": rows}).json()["id"]
    run = client.post(f"{API}/runs", json={"name": "wire", "kind": defaults.TRAIN_RUN_KIND}).json()["id"]
    return run, dataset


def test_a_bad_spec_sent_raw_over_http_is_one_422_naming_every_problem(server):
    client, started = server
    run_id, dataset = _run_and_dataset(client)
    spec = {**spec_json(_resolved("sft", steps=5)), "run_id": run_id, "dataset": dataset}
    spec.update(lora_rank="wide", generations=4)  # a wrong type, another method's knob
    del spec["seed"]  # not resolved
    answer = client.post(f"{API}/jobs/launch", json={"run_id": run_id, "kind": "sft", "spec": spec})
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    for problem in ("does not name seed", "lora_rank='wide'", "generations is not a sft setting"):
        assert problem in message, (problem, message)
    assert not started
    assert client.get(f"{API}/runs/{run_id}").json()["status"] == "failed"  # refused for that reason, not left running


def test_the_server_reads_what_a_client_sends_into_the_model_and_writes_the_row_from_it(server):
    """A client's JSON is re-validated into the method's model: a whole number where the model holds a float is
    written to the job row as the model holds it, and the worker reads the row back as the same spec."""
    client, started = server
    run_id, dataset = _run_and_dataset(client)
    spec = {**spec_json(_resolved("sft", epochs=1.5)), "run_id": run_id, "dataset": dataset, "epochs": 2}
    answer = client.post(f"{API}/jobs/launch", json={"run_id": run_id, "kind": "sft", "spec": spec})
    assert answer.status_code == 201, answer.text
    row = started[0]["spec"]
    assert isinstance(row["epochs"], float) and row["epochs"] == 2.0
    assert row["target"] == "local"  # the platform's default, written on the model before the row
    typed = read_job_spec(row)
    assert isinstance(typed, SFTSpec) and typed.epochs == 2.0 and typed.run_id == run_id and typed.dataset == dataset


def test_grpo_is_resolved_once_with_the_datasets_facts(launches, monkeypatch):  # noqa: F811
    """train() resolves a GRPO spec once: the dataset's group size and temperature are read before, not by a second
    resolution after the selection gate."""
    import whileai.simulations as wai
    from whileai.simulations import _hosting

    calls = []
    real = _hosting.resolve_spec
    monkeypatch.setattr(_hosting, "resolve_spec", lambda *a, **k: calls.append(k.get("data")) or real(*a, **k))
    ds = wai.push(rows(tag="wire"), name="wire")  # a mixed dataset: 4 rollouts per task, sampled at 0.7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(ds, method="grpo", steps=3)
    assert len(calls) == 1 and len(launches) == 1
    assert run.config["generations"] == 4 and run.config["temperature"] == 0.7
    assert run.config["provenance"]["generations"].startswith("the dataset's rollouts per task")
