"""How messages write a count: ``1 filter``, ``2 filters``, ``12,000 lines``."""

from __future__ import annotations

from typing import Optional


def counted(count: int, noun: str, plural: Optional[str] = None) -> str:
    """Return ``count`` (with thousands separators) and ``noun`` in the number it needs.

    :param noun: the singular, e.g. ``"round trip"``; the plural adds ``s`` unless given.
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
