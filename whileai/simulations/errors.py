"""The named exceptions, under the SDK's name: they are defined in :mod:`whileai.core.errors` (the platform raises them too).

``wai.WhileaiError`` and the rest resolve there; this module keeps
``from whileai.simulations.errors import PlatformError`` working.
"""

from whileai.core.errors import (  # noqa: F401
    ExportValidationError,
    NotFoundError,
    PlatformError,
    RowFormatError,
    TrainingConfigError,
    TrainingSelectionError,
    TrainingWarning,
    WhileaiError,
)
from whileai.core.errors import __all__  # noqa: F401
