"""Several data roots on one PostgreSQL store: each keeps its own key, and runs from both land whole.

What failed on main: a second data root's first start found the local account made
by the first, rotated its key, and the first machine's run lost the rest of its points.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from whileai.platform.store import Store, ensure_local_account

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SCRIPT = textwrap.dedent(
    '''
    import sys, time
    from pathlib import Path
    import whileai.simulations as wai

    n, gate, name = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    wai.defaults.FLUSH_INTERVAL_S = 0.1
    run = wai.training_run(name=name, config={"points": n})
    print(run.id, flush=True)
    for i in range(n // 2):
        run.log(step=i, loss=1.0 / (i + 1))
    assert run.flush(), "the first half lands"
    (gate / f"{name}-half").touch()
    while not (gate / "go").exists():
        time.sleep(0.02)
    for i in range(n // 2, n):
        run.log(step=i, loss=1.0 / (i + 1))
        if i % 100 == 0:
            time.sleep(0.02)
    print("finished", run.finish(), "errors", run.errors, flush=True)
    '''
)


def _wait_for(path: Path, procs: list[subprocess.Popen], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for p in procs:
            assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.05)


def test_two_data_roots_on_one_postgres_store_both_write_through_a_run(tmp_path, pg_database, monkeypatch):
    url = pg_database()
    n = 4000
    gate = tmp_path / "gate"
    gate.mkdir()
    roots = {name: tmp_path / name for name in ("a", "b", "c")}

    def start(name: str) -> subprocess.Popen:
        env = {**os.environ, "WHILEAI_HOME": str(roots[name]), "WHILEAI_STORE_URL": url}
        return subprocess.Popen([sys.executable, "-c", SCRIPT, str(n), str(gate), name], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    a = start("a")
    _wait_for(gate / "a-half", [a])
    b = start("b")  # a second machine's first run on the same store, while a's run is half done
    _wait_for(gate / "b-half", [a, b])
    monkeypatch.setenv("WHILEAI_HOME", str(roots["c"]))  # a third data root opens the platform meanwhile
    store = Store(url)
    local, key_c = ensure_local_account(store)
    (gate / "go").touch()
    outs = {name: p.communicate(timeout=180) for name, p in (("a", a), ("b", b))}
    try:
        for name, (out, err) in outs.items():
            assert "finished True errors 0" in out, (name, out, err)
            run_id = out.split()[0]
            assert store.count_points(local, run_id) == n, f"{name}: every point stored"
            assert store.get_run(local, run_id, series=False)["status"] == "done"
        keys = {name: (roots[name] / "local_key").read_text().strip() for name in roots}
        assert len(set(keys.values())) == 3, "each data root has its own key"
        assert all(store.account_for_key(k) == local for k in keys.values()), "none was revoked"
        assert "made a key of the store's local account for this data root" in outs["b"][1]
        assert "made a key" not in outs["a"][1], "the first data root made the account and its key"
        names = [k["name"] for k in store.list_keys(local)]
        assert len(names) == 3 and all(str(roots[x]) in " ".join(names) for x in roots)
    finally:
        store.close()
