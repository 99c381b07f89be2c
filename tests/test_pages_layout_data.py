"""What the run page's layout and the runs list's added columns compute, without a browser.

The charts' sections and the once-logged totals from real columns; a list column's final
metric read in SQL on SQLite and PostgreSQL; the setup beside the result; and the job's
system sample (a real psutil reading of this process).
"""

from __future__ import annotations


import pytest

from whileai.platform.pages import _charts, _columns, _series, _setup
from _stores import postgres_store, sqlite_store

from whileai.platform.store import InvalidError


@pytest.fixture
def store(tmp_path):
    yield from sqlite_store(tmp_path)


def _run(s, acct, name, config, points, summary=None):
    r = s.create_run(acct, name=name, config=config, kind="hosted")
    if points:
        s.add_points(acct, r["id"], "b", points)
    s.update_run(acct, r["id"], {"status": "done", "summary": summary or {}})
    return s.get_run(acct, r["id"], series=False)


def test_layout_groups_sections_folds_repeats_and_tables_what_was_logged_once(store):
    acct, _ = store.create_account("a")
    pts = [{"step": s, "metrics": {"loss": 1 / s, "reward": s * .1, "rewards/f/mean": s * .1, "kl": .0,
                                   "clip_ratio/low_mean": 0.0, "clip_ratio/high_max": 0.0, "system/rss_mb": 900.0 + s,
                                   "epoch": s / 9}} for s in range(1, 10)]
    pts.append({"step": 9, "metrics": {"train_runtime": 12.5, "total_flos": 3e12, "once_only": 4.0}})
    run = _run(store, acct, "g", {"method": "grpo"}, pts)
    layout = _charts.layout(_series.columns(store, run["id"]))
    assert [s["id"] for s in layout["sections"]] == ["training", "rewards", "policy", "system", "other"]
    assert [s["collapsed"] for s in layout["sections"]] == [False, False, False, True, True]
    charts = {c["id"]: c for s in layout["sections"] for c in s["charts"]}
    assert charts["loss"]["title"] == "Loss (train)"  # no eval series: titled by what it has
    assert charts["reward"]["metrics"] == ["reward"] and charts["reward"]["also"] == {"rewards/f/mean": "reward"}
    assert charts["clip_ratio"]["metrics"] == ["clip_ratio/high_max", "clip_ratio/low_mean"]  # flat twins stay
    assert layout["scalars"] == {"train_runtime": 12.5, "total_flos": 3e12, "once_only": 4.0}
    assert not {"train_runtime", "total_flos", "once_only"} & {m for c in charts.values() for m in c["metrics"]}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_added_columns_read_config_keys_and_the_last_logged_value_in_sql(store, backend):
    s = store if backend == "sqlite" else postgres_store()
    acct, _ = s.create_account("cols")
    other, _ = s.create_account("other")
    spec = {"method": "grpo", "beta": 0.04, "loraRank": None, "dataset": {"holdout": 0.2}}
    a = _run(s, acct, "a", {"loraRank": 16, "extra": {"runner": {"spec": spec}}},
             [{"step": i, "metrics": {"loss": 2.0 - i / 10, **({"eval_loss": 9.0 - i} if i < 3 else {})}}
              for i in range(5)])
    b = _run(s, acct, "b", {"spec": {"method": "sft"}, "init_from": a["id"]}, [{"step": 1, "metrics": {'we"ird': 1.5}}])
    cols = _columns.parse("config.beta,config.loraRank,config.dataset.holdout,metric.loss,metric.eval_loss,"
                          'metric.we"ird')
    got = _columns.values(s, [a, b], cols)
    assert got[a["id"]] == {"config.beta": 0.04, "config.loraRank": 16, "config.dataset.holdout": 0.2,
                            "metric.loss": pytest.approx(1.6), "metric.eval_loss": 7.0, 'metric.we"ird': None}
    assert got[b["id"]]["metric.loss"] is None and got[b["id"]]['metric.we"ird'] == 1.5
    offered = _columns.choices(s, [a, b])
    assert {"config.beta", "config.dataset.holdout", "metric.loss", "metric.eval_loss"} <= set(offered)
    assert _columns.parent(b) == a["id"] and _columns.parent(a) is None
    for bad in ("beta", "summary.x", "config.", "metric.a\nb"):
        with pytest.raises(InvalidError, match="config.<key>"):
            _columns.parse(bad)
    with pytest.raises(InvalidError, match="LIST_EXTRA_COLUMNS_MAX"):
        _columns.parse(",".join(f"config.k{i}" for i in range(20)))
    assert s.list_runs(other) == []
    if backend == "postgres":
        s.close()


def test_setup_prefers_what_the_trainer_ran_then_the_config_then_the_jobs_default():
    runner = {"method": "sft", "base_model": "kit", "loraRank": 16, "batchSize": 8,
              "extra": {"runner": {"spec": {"method": "sft", "base_model": None, "loraRank": 4, "batchSize": None}}}}
    got = _setup.setup({"kind": "hosted", "config": runner, "summary": {"setup": {"batch_size": 32}}})
    assert got == {"base_model": {"value": "kit", "source": "default"},
                   "lora_rank": {"value": 4, "source": "config"},
                   "batch_size": {"value": 32, "source": "default"}}
    bare = _setup.setup({"kind": "hosted", "config": {"method": "sft"}, "summary": {}})
    assert bare["lora_rank"] == {"value": 16, "source": "default"} and "batch_size" not in bare
    assert _setup.setup({"kind": None, "config": {"lr": 1}, "summary": {}}) is None  # a script's run: nothing to say


def test_a_system_sample_reads_this_process():
    from whileai.jobs.system import sample

    got = sample()
    assert got["system/rss_mb"] > 10 and got["system/cpu_percent"] >= 0
