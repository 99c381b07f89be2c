"""Build step: the wheel carries copies of the top-level conf/ and recipes/ under whileai/_configs/.

The top-level folders stay the single source; an editable install reads them in place
(whileai/runner/_locate.py), so nothing is copied for it.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONFIG_DIRS = ("conf", "recipes")


class BuildPyWithConfigs(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        here = Path(__file__).resolve().parent
        for name in CONFIG_DIRS:
            target = Path(self.build_lib) / "whileai" / "_configs" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(here / name, target, ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))


setup(cmdclass={"build_py": BuildPyWithConfigs})
