"""A user's own base: a model folder or a ``.gguf`` file named by ``base_model=``.

On the embedded platform (no server configured) the local user owns the machine, so a folder
of theirs trains with no operator setting; a missing path, a relative one, or a folder without
a model is refused before any run exists (``validate`` and ``run`` exit 2, ``wai.train`` raises).
A shared server keeps its operator's rule (``WHILEAI_SERVE_DIRS``). A merged export training as a
base, and served on it, is in tests/test_dropping_template.py, beside the template it carries.
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _runner_helpers import TINY, tiny_base, whileai  # noqa: E402

from test_hosting import launches  # noqa: E402,F401  the fixture that records launches instead of starting jobs

from whileai.core.basefolder import base_folder_problem  # noqa: E402


def _own_copy(tmp_path: Path) -> Path:
    """The kit's tiny base copied to a folder of the user's, outside every folder the platform knows."""
    folder = tmp_path / "my-base"
    shutil.copytree(tiny_base(), folder)
    return folder


def test_a_path_that_is_not_a_model_is_named_with_what_it_lacks(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    said = base_folder_problem(str(empty))
    assert said is not None and "without a model in it" in said
    assert "config.json" in said and "weights" in said and "tokenizer" in said and "--merged DIR" in said
    (empty / "config.json").write_text("{}")
    said = base_folder_problem(str(empty))
    assert said is not None and "config.json" not in said.split("lacks")[1].split(";")[0] and "weights" in said
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    said = base_folder_problem(str(adapter))
    assert said is not None and "LoRA adapter folder, not a base" in said and "init_from" in said
    missing = base_folder_problem(str(tmp_path / "nope"))
    assert missing is not None and "does not exist on this machine" in missing
    assert base_folder_problem(str(tmp_path / "nope.gguf")) == missing.replace("nope", "nope.gguf")
    text = tmp_path / "notes.txt"
    text.write_text("x")
    assert "not a .gguf file" in str(base_folder_problem(str(text)))
    assert base_folder_problem(tiny_base()) is None
    for name in ("Qwen/Qwen3-0.6B", "kit", "smollm2-135m"):  # hub ids and packaged names are not paths
        assert base_folder_problem(name) is None


@pytest.mark.slow
def test_validate_and_run_refuse_a_missing_or_empty_base_before_any_run_exists(tmp_path):
    home = tmp_path / "home"
    env = {"WHILEAI_HOME": str(home)}
    missing = tmp_path / "no-such-model"
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    for command in ("validate", "run"):
        done = whileai(command, "recipe=sft_tooluse", *TINY, f"base_model={missing}", env=env, timeout=300)
        assert done.returncode == 2, done.stderr[-2000:]
        assert f"base_model='{missing}' does not exist on this machine" in done.stderr
        assert "Traceback" not in done.stderr
    done = whileai("validate", "recipe=sft_tooluse", *TINY, f"base_model={empty}", env=env, timeout=300)
    assert done.returncode == 2 and "without a model in it: it lacks config.json" in done.stderr, done.stderr[-2000:]
    done = whileai("validate", "recipe=sft_tooluse", *TINY, "base_model=empty-folder", env=env, cwd=tmp_path,
                   timeout=300)
    assert done.returncode == 2 and f"pass it absolute, base_model={empty}" in done.stderr, done.stderr[-2000:]
    assert not (home / "platform.db").exists(), "no store, so no run, dataset or job: nothing was made"


def test_wai_train_refuses_a_missing_base_before_any_run_exists(home, tmp_path):
    import whileai.simulations as wai
    from whileai.core.errors import TrainingConfigError
    from whileai.kit import load_sample

    data = wai.push([row for row in load_sample() if row["passed"]][:8], name="own-base")
    with pytest.raises(TrainingConfigError, match="does not exist on this machine"):
        wai.train(data, method="sft", steps=2, base_model=str(tmp_path / "gone"), check="off")
    assert wai.list_runs() == [], "no failed run is left in the list"


@pytest.mark.slow
def test_a_shared_server_still_refuses_a_folder_outside_its_allowed_dirs(home, tmp_path, monkeypatch):
    import whileai.simulations as wai
    from whileai.core.errors import PlatformError
    from whileai.kit import load_sample
    from whileai.platform.server import serve_in_thread
    from whileai.platform.store import ensure_local_account, store_url

    folder = _own_copy(tmp_path)
    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        _account, key = ensure_local_account(handle.store)
        monkeypatch.delenv("WHILEAI_SERVE_DIRS", raising=False)
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key)
        data = wai.push(load_sample()[:8], name="shared")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(PlatformError, match="is not a base this platform trains on") as err:
                wai.train(data, method="sft", steps=2, base_model=str(folder), check="off")
        assert err.value.status == 422 and "WHILEAI_SERVE_DIRS" in str(err.value)
    finally:
        handle.stop()


def test_a_gguf_file_of_the_users_is_launched_on_the_embedded_platform(launches, tmp_path):  # noqa: F811
    """The launch rule alone (no job starts): a ``.gguf`` file outside every platform folder is the user's to train
    on, and trains without the warning that its adapter cannot be served."""
    import whileai.simulations as wai
    from whileai.kit import load_sample

    gguf_file = tmp_path / "mine.gguf"
    gguf_file.write_bytes(b"GGUF")  # the job imports it; the launch only checks that it is there
    data = wai.push([row for row in load_sample() if row["passed"]][:8], name="own-gguf")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        run = wai.train(data, method="sft", steps=2, base_model=str(gguf_file), check="off")
    assert run.status == "running" and [job["run_id"] for job in launches] == [run.id]
    assert launches[0]["spec"]["base_model"] == str(gguf_file)
    assert not [w for w in said if "SERVED_BASES" in str(w.message)]
