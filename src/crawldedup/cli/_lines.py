"""Lines to canonical URLs, as ``filter`` and ``canonicalize`` read them, and how an invalid one
is shown."""

from __future__ import annotations

import sys
from typing import IO, List, Optional

import numpy as np

from ..canonical import Canonicalized, CanonicalPolicy, InvalidURL, canonicalize_each, canonicalize_many
from ._io import MAX_LINE_BYTES, Lines, as_read

#: A tab separates a base from a relative link on one line (``BASE<TAB>LINK``). A tab can never
#: be part of a URL (browsers and the canonical policy remove it), so the form is unambiguous.
BASE_SEPARATOR = "\t"


def canonicalize_lines(block: Lines, base: Optional[str], policy: CanonicalPolicy) -> Canonicalized:
    """Canonicalize lines as read: a ``BASE<TAB>LINK`` line against its own base, any other
    line against ``base``; a line too long to keep (``block.too_long``) is invalid.

    The lines without a tab (nearly all of a frontier) go to one :func:`canonicalize_many` call
    that is all compiled; only the lines with one are split, and grouped by base
    (:func:`canonicalize_each`), in Python. Lines holding bytes that are not UTF-8
    (``block.undecodable``) are handed over as bytes, so the canonicalizer's reason names the
    byte and its offset as it does for a caller of the API.
    """
    found = _canonicalize_text(block.lines, base, policy, block.undecodable)
    for row, (_, length) in block.too_long.items():
        found.urls[row] = None
        found.errors[row] = InvalidURL(f"line too long: {length:,} bytes, the most read is {MAX_LINE_BYTES:,}")
    return found


def _canonicalize_text(
    lines: List[str], base: Optional[str], policy: CanonicalPolicy, undecodable: bool
) -> Canonicalized:
    relative = [i for i, line in enumerate(lines) if BASE_SEPARATOR in line]
    if not relative:
        return canonicalize_many(as_read(lines) if undecodable else lines, base=base, policy=policy)
    table = np.array(lines, dtype=object)
    absolute = np.ones(len(lines), dtype=bool)
    absolute[relative] = False
    pairs = [lines[i].partition(BASE_SEPARATOR) for i in relative]
    links, bases = [link for _, _, link in pairs], [page for page, _, _ in pairs]
    plain: List[str] = table[absolute].tolist()
    if undecodable:
        found = canonicalize_many(as_read(plain), base=base, policy=policy)
        joined = canonicalize_each(as_read(links), as_read(bases), policy=policy)
    else:
        found = canonicalize_many(plain, base=base, policy=policy)
        joined = canonicalize_each(links, bases, policy=policy)
    rows = np.flatnonzero(absolute)
    table[rows] = found.urls
    table[relative] = joined.urls
    errors = {int(rows[i]): error for i, error in found.errors.items()}
    errors.update((relative[i], error) for i, error in joined.errors.items())
    return Canonicalized(table.tolist(), dict(sorted(errors.items())))


def display(name: str) -> str:
    return "<stdin>" if name == "-" else name


def reason(error: Exception) -> str:
    """An error's message on one line without tabs (the rejects file is tab-separated)."""
    return " ".join(str(error).split())


def stdout() -> IO[bytes]:
    return sys.stdout.buffer
