"""A deleted run leaves no copy: not in the store's files (the SQLite file, its -wal and -shm), not in its
tombstone, not in W&B's own logs.

The first test deletes a run through a real ``python -m whileai platform`` on loopback and reads every byte of
the data root back for the run's id, name, metric, values and mirror ids, in UTF-8 and UTF-16.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from _platform_server import platform_process
from whileai.platform.store import Store, migrate

API = "/api/v1"
ENCODINGS = ("utf-8", "utf-16-le", "utf-16-be")


def _found(root: Path, needles: list[str]) -> list[str]:
    """``path: needle`` for each file under ``root`` (hidden ones, -wal and -shm included) holding a needle."""
    wanted = [(n, n.encode(e)) for n in needles for e in ENCODINGS]
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            out += [f"{path.relative_to(root)}: {n!r}" for n, b in wanted if b in data]
    return out


def _make_run(c: httpx.Client, facts: dict) -> str:
    run = c.post(f"{API}/runs", json={"name": facts["name"], "config": {"note": facts["config"]}})
    assert run.status_code == 201, run.text
    run_id = run.json()["id"]
    points = [{"step": i, "metrics": {facts["metric"]: facts["value"] + i}} for i in range(50)]
    assert c.post(f"{API}/runs/{run_id}/points", json={"batch_id": "b0", "points": points}).status_code == 200
    summary = {"distinct_summary": facts["summary"], "mirrored_to": {"mlflow": f"sqlite:///x (run {facts['mlflow']})"}}
    patched = c.patch(f"{API}/runs/{run_id}", json={"status": "done", "summary": summary})
    assert patched.status_code == 200, patched.text
    return str(run_id)


@pytest.mark.slow
def test_a_run_deleted_through_the_server_leaves_no_byte_of_it_in_the_data_root(tmp_path):
    home = tmp_path / "home"
    facts = {"name": "zebra-quokka-7d1f", "config": "okapi-narwhal-c3b9", "metric": "quirk/axolotl_ratio",
             "value": 271828.182845, "summary": 314159.265358, "mlflow": "9f8e7d6c5b4a39281706f5e4d3c2b1a0"}
    with platform_process(home, tmp_path / "server.out") as (_, base):
        key = (home / "local_key").read_text().strip()
        with httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {key}"}) as c:
            run_id = _make_run(c, facts)
            needles = [run_id, facts["name"], facts["config"], facts["metric"], repr(facts["value"] + 7),
                       repr(facts["summary"]), facts["mlflow"]]
            assert _found(home, needles), "the run is in the data root before it is deleted"
            deleted = c.delete(f"{API}/runs/{run_id}")
            assert deleted.status_code == 200, deleted.text
            assert _found(home, needles) == []  # while the server that deleted it still runs
            again = c.post(f"{API}/runs", json={"id": run_id})
            assert again.status_code == 409, again.text  # its id stays retired, by its hash alone


def test_tombstones_naming_run_ids_are_hashed_by_the_upgrade_and_still_retire_them(tmp_path):
    from alembic import command

    from whileai.platform.store import RetiredIdError

    url = f"sqlite:///{tmp_path / 'p.db'}"
    engine = sa.create_engine(url)
    config = migrate.alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0003_run_metric_names")
        conn.execute(sa.text("INSERT INTO settings (key, value) VALUES ('run_tombstone:run_0123456789abcdef', '1.0')"))
    engine.dispose()
    store = Store(url)
    try:
        acct = store.create_account("a")[0]
        with store.engine.connect() as conn:
            keys = [k for (k,) in conn.execute(sa.text("SELECT key FROM settings WHERE key LIKE 'run_tombstone:%'"))]
        assert keys == ["run_tombstone:" + hashlib.sha256(b"run_0123456789abcdef").hexdigest()]
        with pytest.raises(RetiredIdError):
            store.create_run(acct, id="run_0123456789abcdef")
    finally:
        store.close()
    store_files = [tmp_path / f"p.db{end}" for end in ("", "-wal", "-shm")]  # the copy made before the upgrade
    assert b"run_0123456789abcdef" not in b"".join(p.read_bytes() for p in store_files if p.exists())  # keeps it


@pytest.mark.slow
def test_the_wandb_services_log_is_in_the_accounts_folder_and_goes_with_the_run(home, tmp_path, monkeypatch):
    """A real W&B (offline): its service's debug log, which names the run, is written under the data root and not
    in the user's cache, and deleting the run deletes it with the run's folder."""
    pytest.importorskip("wandb")
    from whileai.domain.tracking.mirror import forget_mirrors
    from whileai.domain.tracking.mirror._offline import keep_local
    from whileai.domain.tracking.mirror._place import account_folder
    from whileai.domain.tracking.mirror._wandb import SERVICE_FOLDER, open_wandb

    user_home = tmp_path / "user-home"  # where W&B writes by default (~/.cache/wandb, ~/.local/share, ~/.config)
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    for name in ("WANDB_DISABLED", "WANDB_MODE", "WANDB_API_KEY", "WANDB_CACHE_DIR", "WANDB_DATA_DIR",
                 "WANDB_CONFIG_DIR", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)  # conftest disables W&B for every other test
    monkeypatch.setenv("WANDB_SILENT", "true")
    keep_local()
    for name in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR"):  # set by open_wandb: undone after
        monkeypatch.setenv(name, "unset-by-the-test")
        monkeypatch.delenv(name)
    folder = account_folder("acct_deletion")
    run_id, name, value = "run_51ab7e0c9d2f4e68", "wombat-dingo-5e2a", 161803.398875
    sink = open_wandb(run_id=run_id, name=name, url="http://127.0.0.1/runs/x", config={"lr": 1e-3}, folder=folder)
    sink.log(1, {"loss": value})
    sink.finish("done", {"whileai/status": "done"})
    logs = list((folder / SERVICE_FOLDER).rglob("core-debug-*.log"))
    assert logs and any(run_id.encode() in p.read_bytes() for p in logs), "the service's log is the account's"
    assert _found(user_home, [run_id, name]) == [], "nothing of the run in the user's own folders"
    assert _found(home, [run_id]), "the run is mirrored under the data root"
    forget_mirrors("acct_deletion", [run_id], then=None)
    assert _found(home, [run_id, name, repr(value)]) == []
    assert _found(user_home, [run_id, name]) == []
    assert not os.environ.get("WANDB_CACHE_DIR", "").startswith(str(user_home))
