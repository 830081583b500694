"""SimHash of a text, the typed reference (docs/content.md, "The format"); the test oracle.

Charikar's SimHash over word shingles, as Manku, Jain and Das Sarma use it for web pages: each
shingle's 64-bit hash votes +1 for the bits it sets and -1 for the others, and the
fingerprint keeps the bits with a positive total. Texts that share most shingles share most
bits, so near-duplicates lie within a small Hamming distance of each other.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from typing import Iterable, List, Optional, Pattern, Tuple

import mmh3
import numpy as np

from .policy import DEFAULT_CONTENT_POLICY, ContentPolicy


@functools.cache
def mark_ranges() -> Tuple[Tuple[int, int], ...]:
    """The ``(first, last)`` code point ranges of Unicode category M (combining marks), which
    belong to the word around them: Devanagari vowel signs, the dot that ``"İ".casefold()``
    leaves. From this Python's Unicode database; computed once (about 0.3 s)."""
    ranges: List[Tuple[int, int]] = []
    for code, category in enumerate(map(unicodedata.category, map(chr, range(sys.maxunicode + 1)))):
        if category[0] == "M":
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return tuple(ranges)


@functools.cache
def _word_pattern() -> Pattern[str]:
    # [^\W_] is exactly str.isalnum() (\w is isalnum() or "_"); marks are added as ranges.
    marks = "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in mark_ranges())
    return re.compile(f"(?:[^\\W_]|[{marks}])+")


def words(text: str) -> List[str]:
    """Return the words of ``text``: case-folded, then split into maximal runs of characters
    that are alphanumeric (``str.isalnum()``) or combining marks, leaving out the runs of
    decimal digits only (``str.isdecimal()``: dates, times and counters change between two
    fetches of one page)."""
    return [word for word in _word_pattern().findall(text.casefold()) if not word.isdecimal()]


def simhash(text: str, policy: Optional[ContentPolicy] = None) -> int:
    """Return the 64-bit SimHash of ``text`` as an unsigned int; 0 for a text without words.

    :raises TypeError: when ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    size = (policy or DEFAULT_CONTENT_POLICY).shingle_words
    found = words(text)
    if not found:
        return 0
    count = max(len(found) - size + 1, 1)
    digests = b"".join([mmh3.hash_bytes(" ".join(found[i : i + size]).encode("utf-8")) for i in range(count)])
    halves = np.ascontiguousarray(np.frombuffer(digests, dtype="<u8")[0::2])  # h1 of each MurmurHash3 x64-128
    # Little-endian bytes, each unpacked low bit first: column j is bit j of the 64-bit hash.
    bits = np.unpackbits(halves.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    ones = bits.sum(axis=0, dtype=np.int64)
    return sum(1 << j for j in range(64) if 2 * int(ones[j]) > count)


def simhash_many(texts: Iterable[str], policy: Optional[ContentPolicy] = None) -> np.ndarray:
    """Return the uint64 array of :func:`simhash` of each text.

    :raises TypeError: when ``texts`` is a single string or holds something other than ``str``.
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a sequence of str, got a single " + type(texts).__name__)
    return np.array([simhash(text, policy) for text in texts], dtype=np.uint64)
