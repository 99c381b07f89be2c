"""Datasets: profile and selection against hand-counted fixtures; push, cut and delete on a real platform."""

from __future__ import annotations

import json

import pytest

import whileai.simulations as wai
from whileai.kit.defaults import KIT_BASE_NAME
from whileai.simulations import datasets

# ---------------------------------------------------------------------------
# A hand-counted fixture
# ---------------------------------------------------------------------------
#
# task  rows  outcomes (P pass, F fail, ? no label)   temperature   markers
# A     4     P P F F            mixed                0.7           proxy_reward on each
# B     3     P P P              all pass             0.7
# C     2     F F                all fail             1.0
# D     1     P                  all pass, one row    -
# E     2     ? ?                unlabelled           -
# F     3     P F ?              mixed                0.7
# G     1     F                  all fail, one row    -
#
# 16 rows, 7 tasks; 7 passed, 6 failed, 3 unlabelled.

PLAN = [("A", "PPFF", 0.7, True), ("B", "PPP", 0.7, False), ("C", "FF", 1.0, False), ("D", "P", None, False),
        ("E", "??", None, False), ("F", "PF?", 0.7, False), ("G", "F", None, False)]


def make_row(task, outcome, temperature=None, proxy=False, index=0):
    row = {"messages": [{"role": "user", "content": f"task {task}"},
                        {"role": "assistant", "content": f"reply {index}" + "!" * index}],
           "task_id": task, "rollout_index": index}
    if outcome != "?":
        row["passed"] = outcome == "P"
    if temperature is not None:
        row["sampling"] = {"temperature": temperature}
    if proxy:
        row["markers"] = {"proxy_reward": 1.0 if outcome == "P" else 0.2}
    return row


def fixture_rows():
    return [make_row(task, o, temp, proxy, i) for task, outcomes, temp, proxy in PLAN for i, o in enumerate(outcomes)]


def test_profile_counts_by_hand():
    prof = wai.profile(fixture_rows())
    assert prof["rows"] == 16 and prof["tasks"] == 7
    assert (prof["passed"], prof["failed"], prof["unlabelled"]) == (7, 6, 3)
    assert prof["pass_rate"] == pytest.approx(7 / 13)
    assert prof["repeats"] == {"common": 3, "min": 1, "max": 4, "sizes": {"1": 2, "2": 2, "3": 2, "4": 1}}
    assert (prof["all_pass_tasks"], prof["all_fail_tasks"], prof["mixed_tasks"], prof["unlabelled_tasks"]) == (2, 2, 2, 1)
    assert prof["single_row_tasks"] == 2
    assert prof["temperatures"] == [0.7, 1.0]
    assert prof["temperature_rows"] == {"0.7": 10, "1.0": 2} and prof["no_temperature_rows"] == 4
    assert prof["markers"] == {"proxy_reward": 4}
    by_task = {t["task"]: t for t in prof["per_task"]}
    assert by_task["F"] == {"task": "F", "rows": 3, "passed": 1, "failed": 1, "unlabelled": 1, "outcome": "mixed",
                            "gold": 0}
    json.dumps(prof)


def dropped(report):
    return {d["class"]: (d["rows"], d["tasks"]) for d in report["dropped"]}


def test_selection_sft_by_hand():
    rep = wai.selection_report(wai.profile(fixture_rows()), "sft")
    assert (rep["rows"], rep["tasks"]) == (7, 4)            # the passing rows of A, B, D, F
    assert dropped(rep) == {"failing": (6, 2), "unlabelled": (3, 1)}   # C, G lose every row; E too
    assert rep["mixed_tasks"] == 2 and rep["rows_given"] == 16 and rep["tasks_given"] == 7
    assert all(d["reason"] for d in rep["dropped"])


def test_selection_grpo_by_hand():
    rep = wai.selection_report(wai.profile(fixture_rows()), "grpo")
    assert (rep["rows"], rep["tasks"], rep["groups"]) == (7, 2, 2)    # A and F, every row
    assert dropped(rep) == {"single_row": (2, 2), "unanimous_pass": (3, 1), "unanimous_fail": (2, 1),
                            "unlabelled_tasks": (2, 1)}
    assert "advantage" in next(d for d in rep["dropped"] if d["class"] == "unanimous_pass")["reason"]


def _with_gold(tasks: str) -> list[dict]:
    """The fixture, with a gold first action on every row of ``tasks``."""
    rows = fixture_rows()
    for row in rows:
        if row["task_id"] in tasks:
            row["gold"] = {"name": "answer", "arguments": {}}
    return rows


@pytest.mark.parametrize(("method", "config"), [("grpo", {"prompt_source": "gold"}),
                                                 ("dpo", {"pair_source": "policy"}),
                                                 ("dpo", {"pair_source": "policy_gold"})])
def test_sampling_the_policy_keeps_every_task_with_a_gold(method, config):
    """The policy's own samples are judged against each task's gold: mixed or not, single row or not, a task with
    a gold serves (B all pass, C all fail, D one row), and only the tasks without one are dropped."""
    rows = _with_gold("ABCD")
    rep = wai.selection_report(rows, method, config=config)
    assert (rep["rows"], rep["tasks"], rep["prompts"]) == (10, 4, 4)
    assert dropped(rep) == {"no_gold": (6, 3)}
    assert rep["rows"] + sum(d["rows"] for d in rep["dropped"]) == rep["rows_given"]
    knob = "policy_samples" if method == "dpo" else "generations"
    assert f"as 4 prompts, one per task, each sampled `{knob}` times and judged against its gold" in rep["summary"]
    assert wai.selection_report(wai.profile(rows), method, config=config) == rep  # the profile alone says the same
    # rows' own groups (the defaults) still need mixed tasks
    plain = wai.selection_report(rows, method)
    assert plain["tasks"] == 2


def test_the_gate_on_a_benchmark_of_gold_calls_names_the_knob_that_samples_the_policy():
    """A benchmark's rows all pass (one reference call a question): GRPO on the rows' groups is refused, and the
    refusal names prompt_source='gold'; with it the gate passes, and without any gold it is refused for that."""
    from whileai.core.errors import TrainingSelectionError
    from whileai.simulations._hosting import selection_gate

    gold_only = [make_row(t, "P") | {"gold": {"name": "f", "arguments": {}}} for t in "ABCDEF"]
    prof = wai.profile(gold_only)
    with pytest.raises(TrainingSelectionError, match="prompt_source='gold'"):
        selection_gate(prof, "grpo", "require", 1)
    with pytest.raises(TrainingSelectionError, match="pair_source='policy_gold'"):
        selection_gate(prof, "dpo", "require", 1)
    assert selection_gate(prof, "grpo", "require", 32, policy_samples=True)["prompts"] == 6  # no mixed-task warning
    bare = wai.profile([make_row(t, "P") for t in "ABC"])
    with pytest.raises(TrainingSelectionError, match="none of the 3 tasks carries a gold"):
        selection_gate(bare, "grpo", "require", 1, policy_samples=True)


@pytest.mark.parametrize("method", ["dpo", "rm"])
def test_selection_pairs_by_hand(method):
    rep = wai.selection_report(wai.profile(fixture_rows()), method)
    assert (rep["rows"], rep["tasks"], rep["pairs"]) == (4, 2, 2)     # one pair from A, one from F
    assert dropped(rep) == {"no_pass": (3, 2), "no_fail": (4, 2), "unlabelled_tasks": (2, 1), "unpaired": (3, 0)}
    two = wai.selection_report(wai.profile(fixture_rows()), method, per_task=2)
    assert (two["rows"], two["pairs"]) == (6, 3) and dropped(two)["unpaired"] == (1, 0)
    assert rep["pairs"] == len(wai.build_preference_pairs(fixture_rows()))
    assert two["pairs"] == len(wai.build_preference_pairs(fixture_rows(), per_task=2))


@pytest.mark.parametrize("method", ["sft", "grpo", "dpo", "rm"])
def test_selection_adds_up(method):
    rep = wai.selection_report(fixture_rows(), method)  # a dataset is profiled first
    assert rep["rows"] + sum(d["rows"] for d in rep["dropped"]) == rep["rows_given"] == 16
    assert rep["tasks"] + sum(d["tasks"] for d in rep["dropped"]) == rep["tasks_given"] == 7
    assert rep["summary"].startswith(f"{method}: uses {rep['rows']} of 16 rows")


def test_selection_summary_names_what_the_trainer_gets_and_each_left_out_count():
    grpo = wai.selection_report(wai.profile(fixture_rows()), "grpo")
    assert grpo["prompts"] == 2 and "uses 7 of 16 rows (2 of 7 tasks) as 2 prompts, one per task" in grpo["summary"]
    assert "3 rows of 1 tasks where every row passed" in grpo["summary"]
    dpo = wai.selection_report(wai.profile(fixture_rows()), "dpo")
    assert "as 2 pass-vs-fail pairs (1 per task at most)" in dpo["summary"]
    assert "3 rows of the used tasks beyond their 1 pair(s) each" in dpo["summary"]
    assert "/ 0 tasks" not in dpo["summary"] and "0 tasks" not in dpo["summary"]
    sft = wai.selection_report(wai.profile(fixture_rows()), "sft")
    assert "6 failing rows (2 tasks lose every row)" in sft["summary"]


def _long_asks(rows, task, words=300):
    """``rows`` with every ask of ``task`` padded past the kit base's context (KIT_MAX_POSITIONS tokens)."""
    return [{**r, "messages": [{**r["messages"][0], "content": r["messages"][0]["content"] + " please" * words},
                               *r["messages"][1:]]} if r["task_id"] == task else r for r in rows]


#: by method: (rows, tasks) used, the too_long class (rows, tasks), the row indices the report names
_TOO_LONG_BY_HAND = {
    "sft": ((5, 3), (2, 1), [[0], [1]]),      # A's two passes; A loses every passing row
    "grpo": ((3, 1), (4, 1), [[0]]),          # A's prompt, so its whole group
    "dpo": ((2, 1), (2, 1), None),            # A's one pair; A's other two rows stay unpaired
    "rm": ((2, 1), (2, 1), None),
}


@pytest.mark.parametrize("method", ["sft", "grpo", "dpo", "rm"])
def test_rows_longer_than_the_context_are_counted_by_hand(method):
    from whileai.kit import defaults as kit_defaults

    rows = _long_asks(fixture_rows(), "A")
    rep = wai.selection_report(rows, method, base_model=KIT_BASE_NAME)
    used, too_long, named = _TOO_LONG_BY_HAND[method]
    assert (rep["rows"], rep["tasks"]) == used and dropped(rep)["too_long"] == too_long
    assert rep["rows"] + sum(d["rows"] for d in rep["dropped"]) == rep["rows_given"] == 16
    assert rep["tasks"] + sum(d["tasks"] for d in rep["dropped"]) == rep["tasks_given"] == 7
    context = rep["context"]
    assert context["checked"] and context["limit"] == kit_defaults.KIT_MAX_POSITIONS and "by_task" not in context
    assert all(u["task"] == "A" and u["tokens"] > context["limit"] for u in context["left_out"])
    if named is not None:
        assert [u["rows"] for u in context["left_out"]] == named
    else:
        assert [sorted(u["rows"]) for u in context["left_out"]] in ([[0, 2]], [[0, 3]], [[1, 2]], [[1, 3]])
    assert f"longer than the context of {context['limit']} tokens" in rep["summary"] or (
        f"exceeds the context of {context['limit']} tokens" in rep["summary"])
    if method == "dpo":
        assert rep["pairs"] == 1 and dropped(rep)["unpaired"] == (3, 0)
    fits = wai.selection_report(fixture_rows(), method, base_model=KIT_BASE_NAME)
    assert "too_long" not in dropped(fits) and fits["context"]["too_long"] == 0


def test_the_context_check_needs_the_rows_not_a_profile():
    with pytest.raises(ValueError, match="pass the dataset itself"):
        wai.selection_report(wai.profile(fixture_rows()), "sft", base_model=KIT_BASE_NAME)


def test_all_rows_failing():
    rows = [make_row(t, "F", index=i) for t in "XY" for i in range(3)]
    prof = wai.profile(rows)
    assert prof["pass_rate"] == 0.0 and prof["all_fail_tasks"] == 2 and prof["mixed_tasks"] == 0
    sft = wai.selection_report(prof, "sft")
    assert (sft["rows"], sft["tasks"]) == (0, 0) and dropped(sft) == {"failing": (6, 2)}
    grpo = wai.selection_report(prof, "grpo")
    assert grpo["rows"] == 0 and dropped(grpo) == {"unanimous_fail": (6, 2)}
    assert wai.selection_report(prof, "dpo")["pairs"] == 0


def test_no_labels_at_all_and_empty():
    prof = wai.profile([make_row("X", "?", index=i) for i in range(2)])
    assert prof["pass_rate"] is None and prof["unlabelled"] == 2 and prof["unlabelled_tasks"] == 1
    empty = wai.profile([])
    assert empty["rows"] == 0 and empty["repeats"]["common"] is None
    assert wai.selection_report(empty, "grpo")["rows"] == 0


def test_task_key_falls_back_to_prompt_hash():
    a = {"messages": [{"role": "user", "content": "same ask"}, {"role": "assistant", "content": "one"}], "passed": True}
    b = {"messages": [{"role": "user", "content": "same ask"}, {"role": "assistant", "content": "two"}], "passed": False}
    c = {**a, "prompt_hash": "stored"}
    prof = wai.profile([a, b, c])
    assert prof["tasks"] == 2 and prof["mixed_tasks"] == 1


def test_selection_report_errors():
    prof = wai.profile(fixture_rows())
    with pytest.raises(ValueError, match=r"'ppo'.*sft, grpo, dpo, rm"):
        wai.selection_report(prof, "ppo")
    with pytest.raises(ValueError, match="per_task"):
        wai.selection_report(prof, "dpo", per_task=0)
    with pytest.raises(TypeError, match="single rollout row"):
        wai.profile(fixture_rows()[0])


def test_profile_reads_jsonl_and_names_bad_lines(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in fixture_rows()))
    prof = wai.profile(path)
    assert prof["rows"] == 16 and prof["dataset"] == str(path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(fixture_rows()[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"(?s)bad.jsonl.*line 2"):
        wai.profile(bad)
    with pytest.raises(FileNotFoundError):
        wai.profile(tmp_path / "missing.jsonl")


def test_split_tasks_by_task_never_by_row():
    rows = [make_row(f"T{t}", "P" if i % 2 else "F", index=i) for t in range(20) for i in range(3)]
    train, held = datasets.split_tasks(rows, 0.2, seed=0)
    train_tasks = {rows[i]["task_id"] for i in train}
    held_tasks = {rows[i]["task_id"] for i in held}
    assert not train_tasks & held_tasks and len(held_tasks) == 4 and len(train) + len(held) == 60
    assert datasets.split_tasks(rows, 0.2, seed=0) == (train, held)
    assert datasets.split_tasks(list(reversed(rows)), 0.2, seed=0)[1] != []  # order-free: same tasks held
    held_rev = {list(reversed(rows))[i]["task_id"] for i in datasets.split_tasks(list(reversed(rows)), 0.2, seed=0)[1]}
    assert held_rev == held_tasks
    assert {rows[i]["task_id"] for i in datasets.split_tasks(rows, 0.2, seed=1)[1]} != held_tasks
    with pytest.raises(ValueError, match="holdout"):
        datasets.split_tasks(rows, 1.0)
    with pytest.raises(ValueError, match="at least 2 tasks"):
        datasets.split_tasks(rows[:3], 0.5)


def _asked(task, prompt, tools=None):
    row = make_row(task, "P")
    row["messages"][0]["content"] = prompt
    if tools is not None:
        row["tools"] = tools
    return row


def test_split_moves_a_held_out_prompt_that_training_also_asks():
    """The same prompt under two task ids lands on one side: the held-out copy moves to training, counted."""
    rows = [_asked(f"T{t}", f"question {t}") for t in range(20)]
    plain = datasets.split(rows, 0.2, seed=0)
    assert plain.moved == {"tasks": 0, "rows": 0, "task_ids": []}
    held_task = rows[plain.holdout[0]]["task_id"]
    asked = rows[plain.holdout[0]]["messages"][0]["content"]
    # the same question (whitespace aside) asked again under a new id, and again with other tools
    rows += [_asked("copy", "  " + asked.replace(" ", "   ") + "\n"), _asked("other_tools", asked, tools=[1])]
    original = rows[plain.holdout[0]]
    assert datasets._prompt_text(rows[-2]) == datasets._prompt_text(original) != datasets._prompt_text(rows[-1])
    cut = datasets.split(rows, 0.2, seed=0)
    train_prompts = {datasets._prompt_text(rows[i]) for i in cut.train}
    held_prompts = {datasets._prompt_text(rows[i]) for i in cut.holdout}
    assert not train_prompts & held_prompts
    if rows[-2]["task_id"] in {rows[i]["task_id"] for i in cut.train}:  # the copy drew training: the original moved
        assert held_task in cut.moved["task_ids"]
    assert cut.moved["tasks"] == len(cut.moved["task_ids"]) >= 1 and cut.moved["rows"] >= 1
    assert datasets.split_tasks(rows, 0.2, seed=0) == (cut.train, cut.holdout)
    assert "moved to training" in datasets.moved_text(cut.moved)


def test_split_refuses_when_every_held_out_prompt_is_also_trained():
    rows = [_asked(f"T{t}", "the one question") for t in range(5)]
    with pytest.raises(ValueError, match="no held-out prompt is unseen"):
        datasets.split(rows, 0.2, seed=0)


# ---------------------------------------------------------------------------
# On a real platform: a uvicorn server on a loopback port, a real SQLite file
# ---------------------------------------------------------------------------

@pytest.fixture
def platform(home, monkeypatch):
    """A real server over a SQLite file, the SDK pointed at it through the environment."""
    from whileai.platform.server import serve_in_thread

    url = f"sqlite:///{home / 'platform.db'}"
    server = serve_in_thread(store_url=url)
    _acct, key = server.store.create_account("owner")
    monkeypatch.setenv("WHILEAI_BASE_URL", server.base_url)
    monkeypatch.setenv("WHILEAI_API_KEY", key)
    state = {"server": server, "url": url, "key": key}
    yield state
    state["server"].stop()


def raw_rows(base_url, key, dataset_id):
    import httpx

    response = httpx.get(f"{base_url}/api/v1/datasets/{dataset_id}/rows", headers={"Authorization": f"Bearer {key}"})
    return response.status_code, response.content


def awkward_rows():
    """Rows whose bytes are easy to disturb: key order, 1.0 vs 1, unicode, nested arguments, odd keys."""
    rows = fixture_rows()
    rows[0] = {"task_id": "A", "zeta": 1, "alpha": 1.0, "passed": True, "reward": 1.0, "note": "18 °C — ok ✓",
               "messages": [{"role": "user", "content": "Wetter in Köln?"},
                            {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function",
                             "function": {"name": "get_weather", "arguments": {"z": [1, 2.5, {"b": 0, "a": None}], "city": "Köln"}}}]}],
               "markers": {"proxy_reward": 0.30000000000000004, "big": 12345678901234567}}
    return rows


def test_push_survives_a_restart_byte_for_byte_and_stays_in_its_account(platform):
    from whileai.platform.server import serve_in_thread

    rows = awkward_rows()
    ds = wai.push(rows, name="weather")
    assert ds.id.startswith("ds_") and ds.rows == len(rows) and ds.name == "weather"
    assert str(ds).startswith(ds.id) and "16 rows" in str(ds)
    assert wai.push(awkward_rows(), name="again").id == ds.id, "identical content answers the same id"
    status, before = raw_rows(platform["server"].base_url, platform["key"], ds.id)
    assert status == 200

    port = platform["server"].port
    platform["server"].stop()
    platform["server"] = serve_in_thread(port=port, store_url=platform["url"])

    status, after = raw_rows(platform["server"].base_url, platform["key"], ds.id)
    assert status == 200 and after == before
    back = datasets.load_rows(ds.id)
    assert json.dumps(back, ensure_ascii=False) == json.dumps(rows, ensure_ascii=False)
    assert list(back[0]) == list(rows[0]) and isinstance(back[0]["alpha"], float) and isinstance(back[0]["zeta"], int)
    assert wai.profile(ds)["rows"] == 16 and wai.profile(ds.id)["dataset"] == ds.id

    _other, other_key = platform["server"].store.create_account("someone else")
    assert raw_rows(platform["server"].base_url, other_key, ds.id)[0] == 404
    from whileai.domain.client import get_client
    from whileai.core.errors import NotFoundError

    other = get_client(api_key=other_key, base_url=platform["server"].base_url)
    assert other.request("GET", "/datasets")["datasets"] == []
    with pytest.raises(NotFoundError):
        other.request("GET", f"/datasets/{ds.id}")


def test_push_forms_and_refusals(platform, tmp_path):
    path = tmp_path / "weather.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in fixture_rows()))
    from_file = wai.push(path)
    assert from_file.name == "weather" and from_file.rows == 16
    assert wai.push(fixture_rows()).id == from_file.id
    data = wai.SimulationData(fixture_rows()[:4], name="sim")
    assert wai.push(data).name == "sim"
    scored = wai.evaluate(fixture_rows(), lambda r: 1.0)
    assert wai.push(scored.passes(), name="passes").rows == 16
    with pytest.raises(ValueError, match="nothing to push"):
        wai.push([])
    with pytest.raises(ValueError, match="already pushed"):
        wai.push(from_file)
    bad = fixture_rows()
    bad[2]["passed"] = "yes"
    from whileai.core.errors import RowFormatError

    before = {d.id for d in datasets.list_datasets()}
    with pytest.raises(RowFormatError, match="row 2"):
        wai.push(bad)
    assert {d.id for d in datasets.list_datasets()} == before, "a refused push stores nothing"


def test_cut_splits_by_task_and_links_siblings(platform):
    rows = [make_row(f"T{t:02d}", "P" if (t + i) % 3 else "F", 0.7, index=i) for t in range(20) for i in range(3)]
    src = wai.push(rows, name="tool")
    train, held = wai.datasets.cut(src, holdout=0.25, seed=3)
    assert (train.name, held.name) == ("tool:train", "tool:holdout")
    assert (train.split, train.sibling, held.split, held.sibling) == ("train", held.id, "holdout", train.id)
    assert datasets.get_dataset(train.id).sibling == held.id
    train_rows, held_rows = datasets.load_rows(train), datasets.load_rows(held)
    train_tasks, held_tasks = {r["task_id"] for r in train_rows}, {r["task_id"] for r in held_rows}
    assert not train_tasks & held_tasks and len(held_tasks) == 5 and len(train_tasks) == 15
    assert len(train_rows) + len(held_rows) == 60
    # rows keep their order and their bytes on each side
    assert train_rows == [r for r in rows if r["task_id"] in train_tasks]
    again = wai.datasets.cut(src.id, holdout=0.25, seed=3)
    assert [h.id for h in again] == [train.id, held.id], "same seed, same sides"
    other = wai.datasets.cut(rows, holdout=0.25, seed=4, name="local")
    assert other[0].name == "local:train" and {r["task_id"] for r in datasets.load_rows(other[1])} != held_tasks


def test_delete_dataset(platform):
    ds = wai.push(fixture_rows(), name="gone")
    assert wai.delete_dataset(ds) == {"id": ds.id, "deleted": True}
    from whileai.core.errors import NotFoundError

    with pytest.raises(NotFoundError):
        datasets.load_rows(ds.id)
    with pytest.raises(NotFoundError):
        wai.delete_dataset(ds.id)
    with pytest.raises(ValueError, match="not a pushed dataset"):
        wai.delete_dataset("weather.jsonl")


def test_embedded_platform_push(home):
    ds = wai.push(fixture_rows(), name="local")
    assert datasets.load_rows(ds) == fixture_rows()
    assert wai.selection_report(ds.id, "grpo")["rows"] == 7


def test_balance_false_counts_every_length_matched_pair_as_the_job_uses_them():
    from whileai.jobs.dpo import preference_pairs
    from whileai.domain.rows.selection import pairs_per_task, profile_rows, selection_report

    rows = []
    for t, (passes, fails) in enumerate([(2, 2), (3, 1), (1, 3), (4, 0)]):
        rows += [{"task_id": f"t{t}", "passed": True, "messages": []} for _ in range(passes)]
        rows += [{"task_id": f"t{t}", "passed": False, "messages": []} for _ in range(fails)]
    prof = profile_rows(rows)
    assert pairs_per_task("dpo", {"balance": True}, len(rows)) is None
    assert pairs_per_task("grpo", {"balance": False}, len(rows)) is None
    for method in ("dpo", "rm"):
        balanced = selection_report(prof, method)
        every = selection_report(prof, method, per_task=pairs_per_task(method, {"balance": False}, len(rows)))
        assert balanced["pairs"] == 3 == len(preference_pairs(rows, True))
        assert every["pairs"] == 2 + 1 + 1 == len(preference_pairs(rows, False))
        assert every["rows"] + sum(d["rows"] for d in every["dropped"]) == len(rows)
