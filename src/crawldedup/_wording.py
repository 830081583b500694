"""How messages write a count: ``1 filter``, ``2 filters``, ``12,000 lines``; and a size: ``46.0 MiB``."""

from __future__ import annotations

from typing import Optional


def counted(count: int, noun: str, plural: Optional[str] = None) -> str:
    """Return ``count`` (with thousands separators) and ``noun`` in the number it needs.

    :param noun: the singular, e.g. ``"round trip"``; the plural adds ``s`` unless given.
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def sized(size: float) -> str:
    """Return ``size`` bytes in the largest binary unit that keeps the number at or above 1: ``46.0 MiB``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size:,.0f} bytes"
