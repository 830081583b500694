"""Checks of arguments and settings, shared by every layer, in one message style.

Every refusal reads ``<name> must be <what is allowed>, got <value received>``. A value out
of range is a ``ValueError``; a value of the wrong type a :class:`WrongType`, which is both a
``TypeError`` and a ``ValueError`` (settings were always refused with ValueError, and code that
catches it keeps working). ``bool`` is never taken for a number, although Python makes
``True`` an ``int``.
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING, Sequence, Union

if TYPE_CHECKING:
    import numpy as np

#: A file path argument, as ``open`` takes it.
PathArg = Union[str, "os.PathLike[str]"]
#: Largest capacity of a filter or store: 2**48 URLs (block and shard counts stay far below
#: 2**64, and a filter of it would be ~350 TB, so nothing real comes near).
MAX_CAPACITY = 1 << 48
#: Namespaces, rounds and worker ids end up inside Redis hash tags and SQLite rows: keep them
#: plain (no braces, which delimit hash tags).
_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:/@+=-]{1,200}")
NAME_RULE = "1 to 200 characters from [A-Za-z0-9_.:/@+=-]"


class WrongType(TypeError, ValueError):
    """A setting or argument of the wrong type."""


def complaint(name: str, allowed: str, value: object) -> str:
    """The one phrasing of a refused value."""
    return f"{name} must be {allowed}, got {value!r}"


def is_integer(value: object) -> bool:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """True for an ``int`` or ``float`` that is not a ``bool`` (NaN and infinities included)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def integer_in(name: str, value: int, low: int, high: int, high_text: str = "") -> int:
    """``value`` when it is an integer in ``[low, high]``.

    :param high_text: how to print ``high`` (``"2**48"``), when not as digits.
    :raises WrongType: for anything but an integer.
    :raises ValueError: for an integer out of range.
    """
    allowed = f"an integer in [{low}, {high_text or high}]"
    if not is_integer(value):
        raise WrongType(complaint(name, allowed, value))
    if not low <= value <= high:
        raise ValueError(complaint(name, allowed, value))
    return value


def number_in(
    name: str,
    value: float,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
    unit: str = "a number",
) -> float:
    """``value`` as a float when it is a finite number between ``low`` and ``high``.

    :param low_open: ``low`` itself is refused; ``high_open`` likewise.
    :param unit: what the number is (``"a number of seconds"``), for the message.
    :raises WrongType: for anything but a number.
    :raises ValueError: for NaN, an infinity or a number out of range.
    """
    allowed = f"{unit} in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if not is_number(value):
        raise WrongType(complaint(name, allowed, value))
    above = low < value if low_open else low <= value
    below = value < high if high_open else value <= high
    if not (math.isfinite(value) and above and below):
        raise ValueError(complaint(name, allowed, value))
    return float(value)


def check_capacity(capacity: int) -> int:
    """A filter's or store's capacity: an integer in [1, 2**48].

    :raises WrongType: for anything but an integer.
    :raises ValueError: out of range.
    """
    return integer_in("capacity", capacity, 1, MAX_CAPACITY, "2**48")


def check_error_rate(error_rate: float) -> float:
    """A false-positive rate: a number in (0, 1).

    :raises WrongType: for anything but a number.
    :raises ValueError: out of range (or NaN).
    """
    return number_in("error_rate", error_rate, 0, 1, low_open=True, high_open=True)


def check_name(kind: str, value: str) -> str:
    """A namespace, round or worker id (it becomes part of keys).

    :raises ValueError: when it is empty, too long or has characters outside ``[A-Za-z0-9_.:/@+=-]``.
    """
    if not isinstance(value, str) or not _NAME_PATTERN.fullmatch(value):
        raise ValueError(complaint(kind, f"{NAME_RULE} (no braces: they delimit Redis hash tags)", value))
    return value


def check_batch(name: str, items: object, what: str) -> None:
    """Refuse a single string where a batch is expected (a ``str`` iterates by characters).

    :raises TypeError: for a ``str``, ``bytes``, ``bytearray`` or ``memoryview``.
    """
    if isinstance(items, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be an iterable of {what}, not a single {type(items).__name__}")


#: A column's ``n + 1`` offsets (Arrow's layout): a numpy array or a sequence of ints.
Offsets = Union[Sequence[int], "np.ndarray"]
#: A column's bytes: any buffer.
ColumnBytes = Union[bytes, bytearray, memoryview, "np.ndarray"]

#: What a column's offsets must be: the one message both twins of each Arrow kernel give.
OFFSETS_RULE = "offsets must ascend from 0 or more to at most the data's length"


def check_offsets(offsets: Offsets, size: int) -> None:
    """Check the ``n + 1`` offsets of a column in Arrow's layout against its ``size`` data bytes.

    :raises ValueError: when they are empty, descend or leave the data.
    """
    if len(offsets) == 0:
        raise ValueError(f"{OFFSETS_RULE}: got no offsets")
    previous = 0
    for offset in offsets:
        if offset < previous or offset > size:
            raise ValueError(f"{OFFSETS_RULE} ({size} bytes), got {offset} after {previous}")
        previous = offset


def check_path(name: str, path: object) -> None:
    """A file path, or None.

    :raises ValueError: for an empty path.
    :raises TypeError: for anything that is not a path.
    """
    if path is not None and not os.fspath(path):  # type: ignore[call-overload]
        raise ValueError(complaint(name, "a file path or unset", path))
