"""Where a BFCL dataset of several categories is read from, and whether that makes the run a smoke run; and
``dataset=bfcl_episodes``, BFCL's multi-turn entries as gold episode rows (:func:`load_bfcl_episodes`).

``dataset.categories`` names BFCL categories; their files are read from
``dataset.folder`` when set (the real recipes set it from ``BFCL_DATA``), else
from the installed ``bfcl-eval`` package's data (``pip install --no-deps
bfcl-eval``), else from the sample committed under tests/data/bfcl in a source
checkout. The sample has a few questions per category: a run on it shows the
plumbing works and measures nothing, so ``smoke_note`` says so on the run's
first line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from whileai.runner.schema import Dataset, Environment

__all__ = ["bfcl_folder", "smoke_note", "SAMPLE", "episode_categories", "episode_folder", "load_bfcl_episodes"]

#: the committed sample of a source checkout (not in an installed wheel)
SAMPLE = Path(__file__).resolve().parents[2] / "tests" / "data" / "bfcl"


def bfcl_folder(data: Dataset) -> tuple[Path, bool]:
    """``(folder, is the committed sample)`` for a dataset naming ``categories``.

    Raises FileNotFoundError naming the three places looked at when none has BFCL's data.
    """
    from whileai.simulations.datasets import bfcl_data_folder

    if data.folder:
        return Path(str(data.folder)).expanduser(), False
    installed = bfcl_data_folder()
    if installed is not None:
        return installed, False
    if SAMPLE.is_dir():
        return SAMPLE, True
    raise FileNotFoundError("dataset.categories needs BFCL's data: dataset.folder (or BFCL_DATA in the real recipes) "
                            "is not set, bfcl-eval is not installed and there is no committed sample here; "
                            "`pip install --no-deps bfcl-eval`, or pass dataset.folder=.../bfcl_eval/data")


def smoke_note(data: Dataset) -> str | None:
    """The line a run on the committed sample starts with (None for any other data)."""
    categories = data.categories
    if data.source != "bfcl" or not categories:
        return None
    try:
        folder, sample = bfcl_folder(data)
    except FileNotFoundError:
        return None  # validate has said what is missing
    if not sample:
        return None
    files = [folder / f"BFCL_v4_{c}.json" for c in categories]
    questions = sum(sum(1 for line in f.open(encoding="utf-8") if line.strip()) for f in files if f.is_file())
    return (f"smoke run on the committed BFCL sample ({questions} questions of {', '.join(categories)}, {folder}): "
            "it checks the plumbing and measures nothing; for BFCL's full data `pip install --no-deps bfcl-eval` "
            "(read by default) or set BFCL_DATA / dataset.folder")


def episode_categories(data: Dataset, environment: Environment | None) -> list[str]:
    """The multi-turn categories ``dataset=bfcl_episodes`` reads: ``dataset.categories``, else the environment's
    category (``environment.category``, else BFCL_DEFAULT_CATEGORY)."""
    from whileai.domain.episodes.registry import BFCL_DEFAULT_CATEGORY

    if data.categories:
        return [str(c) for c in data.categories]
    return [environment.category if environment is not None and environment.category else BFCL_DEFAULT_CATEGORY]


def episode_folder(data: Dataset) -> Path:
    """The BFCL data folder ``dataset=bfcl_episodes`` reads: ``dataset.folder``, else the installed bfcl-eval's data
    (whose backends play the episodes either way). Raises FileNotFoundError saying how to get it."""
    from whileai.domain.judges.bfcl_multi_turn import INSTALL_HINT
    from whileai.simulations.datasets import bfcl_data_folder

    if data.folder:
        return Path(str(data.folder)).expanduser()
    installed = bfcl_data_folder()
    if installed is None:
        raise FileNotFoundError(f"dataset=bfcl_episodes reads BFCL's multi-turn entries, and bfcl-eval is not installed "
                                f"here: {INSTALL_HINT}; or pass dataset.folder=... (laid out as bfcl_eval/data)")
    return installed


def load_bfcl_episodes(data: Dataset, environment: Environment | None) -> tuple[list[dict[str, Any]], str]:
    """``(rows, what they are)``: every entry of the categories (:func:`episode_categories`) as a gold episode row
    (``whileai.domain.episodes.bfcl_rows``), both sides of BFCL's split; the runner's cut keeps the held-out side
    out of training."""
    from whileai.domain.episodes.bfcl_rows import bfcl_episode_rows
    from whileai.domain.rows.bfcl_multi_turn import read_multi_turn

    folder, categories = episode_folder(data), episode_categories(data, environment)
    entries = read_multi_turn(folder, categories)
    return bfcl_episode_rows(entries, folder), (f"BFCL {', '.join(categories)} as gold episodes, {len(entries)} "
                                                f"entries ({folder})")
