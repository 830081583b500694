"""Decides once, for the whole package, whether the compiled twins are used.

Every layer with a compiled twin asks :func:`compiled` for it in its selector module, so the
choice follows one rule everywhere: ``CRAWLDEDUP_NO_EXTENSIONS=1`` (or an interpreter other than
CPython) gives the pure-Python twins; ``CRAWLDEDUP_REQUIRE_EXTENSIONS=1`` turns a twin that
failed to load into an ImportError instead of a silent fallback.
"""

import importlib
import os
import platform
from types import ModuleType
from typing import Optional

#: True when only the pure-Python twins may be used: asked for with
#: ``CRAWLDEDUP_NO_EXTENSIONS=1``, or forced on interpreters other than CPython.
NO_EXTENSIONS: bool = bool(os.environ.get("CRAWLDEDUP_NO_EXTENSIONS")) or (
    platform.python_implementation() != "CPython"
)
#: True when a compiled twin that cannot be loaded must fail the import (wheel tests set it).
REQUIRE_EXTENSIONS: bool = bool(os.environ.get("CRAWLDEDUP_REQUIRE_EXTENSIONS")) and not NO_EXTENSIONS


def compiled(module: str) -> Optional[ModuleType]:
    """The compiled twin ``module`` (a full dotted name), or None when the Python twin serves.

    :raises ImportError: when it cannot be loaded and ``CRAWLDEDUP_REQUIRE_EXTENSIONS`` is set.
    """
    if NO_EXTENSIONS:
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        if REQUIRE_EXTENSIONS:
            raise
        return None  # installed without a compiler: the Python twin serves
