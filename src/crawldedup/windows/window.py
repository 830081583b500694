"""The recrawl window: which generation a claim belongs to and when it is forgotten.

Time is cut into generations of ``span = seconds / generations`` seconds, aligned on the
epoch (generation ``g`` covers ``[g span, (g + 1) span)``), so every worker and every store
agrees on them without talking. A claim made at time ``t`` joins generation
``g = floor(t / span)`` and is forgotten when that generation ends plus the window, at
``(g + 1 + generations) span``. That moment is at least ``t + W`` and at most
``t + W (1 + 1 / generations)``: the two bounds of the guarantee (docs/stores.md). At any time
``generations + 1`` generations are live.
"""

from __future__ import annotations

import dataclasses
import math

from .._checks import integer_in, number_in

#: Generations of a window by default: a page is won again at most 1/4 = 25% after the window.
DEFAULT_GENERATIONS = 4
#: More generations cut the overshoot (1/G) but cost one more block probed per lookup each.
MAX_GENERATIONS = 32
#: The longest window: 100 years, in seconds (VISITED_TTL_DAYS allows 36,500 days).
MAX_WINDOW_SECONDS = 36_500 * 86_400.0


@dataclasses.dataclass(frozen=True)
class Window:
    """A recrawl window of ``seconds`` cut into ``generations`` generations.

    :param seconds: the window W: a claim is seen for at least this long.
    :param generations: G; a claim is forgotten at most W / G after the window.
    :raises ValueError: for a value out of range.
    """

    seconds: float
    generations: int = DEFAULT_GENERATIONS

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "seconds",
            number_in("window seconds", self.seconds, 0, MAX_WINDOW_SECONDS, low_open=True, unit="a number of seconds"),
        )
        integer_in("generations", self.generations, 1, MAX_GENERATIONS)

    @property
    def span(self) -> float:
        """Seconds one generation covers."""
        return self.seconds / self.generations

    @property
    def live_count(self) -> int:
        """How many generations are live at any time: the current one and ``generations`` before it."""
        return self.generations + 1

    def generation(self, now: float) -> int:
        """The generation a claim made at ``now`` joins."""
        return math.floor(now / self.span)

    def oldest_live(self, now: float) -> int:
        """The oldest generation still live at ``now``."""
        return self.generation(now) - self.generations

    def forgotten_at(self, generation: int) -> float:
        """When the claims of ``generation`` are forgotten: its end plus the window."""
        return (generation + 1 + self.generations) * self.span

    def live_since(self, now: float) -> float:
        """The start of the oldest live generation: a claim made before it is forgotten at ``now``."""
        return self.oldest_live(now) * self.span

    def describe(self) -> str:
        """``30 days in 4 generations of 7.5 days`` (for messages and ``info``)."""
        return f"{_duration(self.seconds)} in {self.generations} generations of {_duration(self.span)}"


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86_400.0), ("hours", 3_600.0), ("minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} seconds"
