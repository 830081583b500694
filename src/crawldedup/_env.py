"""Decides once whether the compiled extensions may be used."""

import os
import platform

#: True when only the pure-Python twins may be used: asked for with
#: ``CRAWLDEDUP_NO_EXTENSIONS=1``, or forced on interpreters other than CPython.
NO_EXTENSIONS: bool = bool(os.environ.get("CRAWLDEDUP_NO_EXTENSIONS")) or (
    platform.python_implementation() != "CPython"
)
