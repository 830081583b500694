"""The one time source of everything that ages: a callable returning seconds since the epoch.

Windowed filters and stores read the time only through a :data:`Clock` they were given, so a
test can run a 30-day window in milliseconds with a :class:`ManualClock`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from .._checks import number_in

#: Seconds since the Unix epoch, as ``time.time`` returns them.
Clock = Callable[[], float]


def system_clock() -> float:
    """The wall clock (``time.time``): generations are aligned on it, so every worker of a
    crawl, on every machine, puts a claim made at the same moment in the same generation."""
    return time.time()


class ManualClock:
    """A clock that moves only when told to: ``clock()`` is the time, ``advance`` moves it.

    :param now: the starting time, in seconds since the epoch.
    """

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self._now = number_in("now", now, 0, 1e12)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` (>= 0) and return the new time.

        :raises ValueError: for a negative or non-finite number.
        """
        step = number_in("seconds", seconds, 0, 1e12)
        with self._lock:
            self._now += step
            return self._now

    def __repr__(self) -> str:
        return f"<ManualClock now={self._now!r}>"
