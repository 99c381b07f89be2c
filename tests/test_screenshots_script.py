"""scripts/screenshots.py, the README's pictures: every seeded picture carries the banner that says it is seeded.

The real pictures come from ``--run DATA_ROOT`` (it runs the recipes the README names, then shoots them) or
``--real DATA_ROOT``; running the recipes takes minutes, so this checks the seeded half and what --run would run.
"""

from __future__ import annotations

import importlib.util


from _chromium import needs_chromium, require_chromium
from _runner_helpers import ROOT

pytestmark = needs_chromium


def _script():
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_seeded_picture_says_it_is_seeded(home, tmp_path, monkeypatch):
    chromium = require_chromium()
    shots = _script()
    stamped = []
    real_stamp = shots._stamp_seeded

    def stamp(page):
        real_stamp(page)
        stamped.append(page.locator("body > div").first.text_content())

    monkeypatch.setattr(shots, "_stamp_seeded", stamp)
    assert shots.main(["--out", str(tmp_path), "--chromium", chromium]) == 0
    written = sorted(p.name for p in tmp_path.glob("*.png"))
    assert written == sorted([f"{name}-{tag}.png" for name in ("runs", "run-grpo", "compare", "sweep")
                              for tag in ("1280", "390")] + ["run-grpo-1280-dark.png"]), written
    assert len(stamped) == len(written) and set(stamped) == {shots.SEEDED_BANNER}


def test_run_runs_the_recipes_the_readme_names_for_its_real_pictures():
    shots = _script()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for args in shots.REAL_RECIPES:
        assert f"`{' '.join(args)}`" in readme or f"`recipe={args[0].split('=')[1]}`" in readme, args
