"""How far a Redis store's writes must travel before a claim is answered.

``primary`` (the default) answers once the primary has applied a batch: Redis replicates
asynchronously, so a primary that dies before its replicas received a batch takes that batch's
claims with it, and the replica promoted in its place lets another worker win them again.
``replicated`` answers only after ``WAIT replicas timeout`` confirms the batch on at least
``replicas`` replicas of every node that ran it; fewer in time is an error for that batch
(retried, then :class:`~crawldedup.stores.base.StoreUnavailable`), never a guess. See
docs/stores.md, "Failover".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from .._checks import complaint, integer_in, number_in

PRIMARY = "primary"
REPLICATED = "replicated"
#: The durability levels, in the order documentation lists them.
LEVELS: Tuple[str, ...] = (PRIMARY, REPLICATED)
#: Longest WAIT: it must end well before the store's socket timeout (10 s).
MAX_WAIT_SECONDS = 5.0
#: Most replicas a WAIT can ask for.
MAX_REPLICAS = 16


def check_level(level: object) -> str:
    """A durability level, one of :data:`LEVELS`.

    :raises ValueError: for anything else.
    """
    if not isinstance(level, str) or level not in LEVELS:
        raise ValueError(complaint("durability", f"one of {', '.join(LEVELS)}", level))
    return level


@dataclass(frozen=True)
class Durability:
    """When a Redis store answers a batch that wrote something.

    :param level: ``"primary"`` (once the primary applied it) or ``"replicated"`` (once ``WAIT``
        confirmed it on ``replicas`` replicas of each node that ran it).
    :param replicas: ``replicated`` only: how many replicas must confirm, in [1, 16].
    :param timeout: ``replicated`` only: seconds ``WAIT`` waits for them, in (0, 5].
    :raises ValueError: for a value out of range.
    """

    level: str = PRIMARY
    replicas: int = 1
    timeout: float = 1.0

    def __post_init__(self) -> None:
        check_level(self.level)
        integer_in("durable_replicas", self.replicas, 1, MAX_REPLICAS)
        number_in("durable_timeout", self.timeout, 0, MAX_WAIT_SECONDS, low_open=True, unit="a number of seconds")

    @property
    def waits(self) -> bool:
        """Whether a batch that writes waits for replicas."""
        return self.level == REPLICATED

    @property
    def timeout_ms(self) -> int:
        """``WAIT``'s timeout: whole milliseconds, at least 1 (0 would wait forever)."""
        return max(1, round(self.timeout * 1000))

    def __str__(self) -> str:
        return self.level if not self.waits else f"{self.level} ({self.replicas} in {self.timeout:g} s)"
