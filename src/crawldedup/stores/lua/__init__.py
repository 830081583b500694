"""The Lua the Redis stores run, one file per script or shared part (package data).

A store's script is the parts it needs, joined in order (see each store module); a part's
comments say what its ``KEYS`` and ``ARGV`` hold.
"""

from __future__ import annotations

import functools
from importlib.resources import files


@functools.cache
def lua(name: str) -> str:
    """The text of ``<name>.lua`` in this folder.

    :raises FileNotFoundError: when no such script is shipped.
    """
    return files(__name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")
