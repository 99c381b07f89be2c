"""The named exceptions and warnings, under the SDK's name: defined in :mod:`whileai.core.errors` (the platform raises them too).

``wai.WhileaiError``, ``wai.TrainingWarning`` and the rest resolve there; this module keeps
``from whileai.simulations.errors import PlatformError`` working.
"""

from whileai.core.errors import *  # noqa: F403
from whileai.core.errors import __all__  # noqa: F401
