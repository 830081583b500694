"""The Deduplicator's settings and the environment variables that set them (read once)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .stores.base import check_capacity, check_name
from .stores._redis import redact_url
from .stores.factory import STORE_STRATEGIES

#: Every strategy: ``local`` (the local filter alone) and the stores.
STRATEGIES: Tuple[str, ...] = ("local",) + STORE_STRATEGIES
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
#: Seconds in a day, for VISITED_TTL_DAYS.
DAY_SECONDS = 86_400


@dataclass(frozen=True)
class DedupConfig:
    """Settings of a :class:`~crawldedup.Deduplicator`; each has an environment variable.

    :param strategy: ``DEDUP_STRATEGY``: ``local``, ``set``, ``sharded-set``, ``bloom`` or ``sqlite``.
    :param redis_url: ``REDIS_URL``: the Redis of the ``set``, ``sharded-set`` and ``bloom`` stores.
    :param ttl_days: ``VISITED_TTL_DAYS``: how long a claim lasts in the ``set`` store; 0 = forever.
    :param capacity: ``BLOOM_CAPACITY``: URLs the local filter and the store are sized for.
    :param error_rate: ``BLOOM_ERROR_RATE``: false-positive rate of the local filter (and RedisBloom).
    :param state_path: ``CRAWLDEDUP_STATE``: the local filter's file; None keeps it in memory.
    :param namespace: ``CRAWLDEDUP_NAMESPACE``: the crawl's key prefix in the store.
    :param sqlite_path: ``CRAWLDEDUP_SQLITE``: the database file of the ``sqlite`` store.
    :raises ValueError: when a field is out of range (the message names its variable).
    """

    strategy: str = "local"
    redis_url: str = "redis://localhost:6379/0"
    ttl_days: float = 30.0
    capacity: int = 10_000_000
    error_rate: float = 0.01
    state_path: Optional[str] = None
    namespace: str = "crawldedup"
    sqlite_path: Optional[str] = None

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            _CHECKS[name](value)

    @property
    def ttl_seconds(self) -> Optional[int]:
        """Claim lifetime in whole seconds (at least 1), or None for claims that never expire."""
        return max(1, round(self.ttl_days * DAY_SECONDS)) if self.ttl_days else None

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "DedupConfig":
        """Read every variable once from ``environ`` (default ``os.environ``); unset ones keep their default.

        :raises ValueError: for a value that cannot be parsed or is out of range, naming the variable.
        """
        environ = os.environ if environ is None else environ
        values: Dict[str, object] = {}
        for field_name, (variable, parse) in ENVIRONMENT.items():
            raw = environ.get(variable)
            if raw is None or raw == "":
                continue
            try:
                values[field_name] = parse(raw)
            except ValueError:
                raise ValueError(_complaint(field_name, raw)) from None
        return cls(**values)  # type: ignore[arg-type]


def _checker(field: str, ok: Callable[[Any], object]) -> Callable[[object], None]:
    # ``ok`` takes Any: it receives whatever the caller passed, and a value of the wrong type
    # fails inside it (TypeError, caught below) rather than before it.
    def check(value: object) -> None:
        try:
            good = ok(value)
        except (TypeError, ValueError):
            good = False
        if not good:
            raise ValueError(_complaint(field, value))

    return check


def _complaint(field: str, value: object) -> str:
    """``<field> (<VARIABLE>) must be <expected>, got <value>``, with any password hidden."""
    shown = redact_url(value) if field == "redis_url" and isinstance(value, str) else value
    return f"{field} ({ENVIRONMENT[field][0]}) must be {_EXPECTED[field]}, got {shown!r}"


def _is_name(value: str) -> bool:
    check_name("namespace", value)
    return True


def _parse_int(raw: str) -> int:
    return int(raw.strip())


_EXPECTED: Dict[str, str] = {
    "strategy": f"one of {', '.join(STRATEGIES)}",
    "redis_url": f"a URL starting with {', '.join(_REDIS_SCHEMES)}",
    "ttl_days": "a number of days in [0, 36500] (0 = claims never expire)",
    "capacity": "an integer in [1, 2**48]",
    "error_rate": "a number in (0, 1)",
    "state_path": "a file path or unset (memory)",
    "namespace": "1 to 200 characters from [A-Za-z0-9_.:/@+=-]",
    "sqlite_path": "a file path or unset",
}

#: Field -> (environment variable, parser of its text).
ENVIRONMENT: Dict[str, Tuple[str, Callable[[str], object]]] = {
    "strategy": ("DEDUP_STRATEGY", str.strip),
    "redis_url": ("REDIS_URL", str.strip),
    "ttl_days": ("VISITED_TTL_DAYS", float),
    "capacity": ("BLOOM_CAPACITY", _parse_int),
    "error_rate": ("BLOOM_ERROR_RATE", float),
    "state_path": ("CRAWLDEDUP_STATE", str),
    "namespace": ("CRAWLDEDUP_NAMESPACE", str.strip),
    "sqlite_path": ("CRAWLDEDUP_SQLITE", str),
}

_CHECKS: Dict[str, Callable[[object], None]] = {
    "strategy": _checker("strategy", lambda v: v in STRATEGIES),
    "redis_url": _checker("redis_url", lambda v: isinstance(v, str) and v.startswith(_REDIS_SCHEMES)),
    "ttl_days": _checker("ttl_days", lambda v: not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 36_500),
    "capacity": _checker("capacity", check_capacity),
    "error_rate": _checker("error_rate", lambda v: isinstance(v, float) and 0 < v < 1),
    "state_path": _checker("state_path", lambda v: v is None or len(os.fspath(v)) > 0),
    "namespace": _checker("namespace", _is_name),
    "sqlite_path": _checker("sqlite_path", lambda v: v is None or len(os.fspath(v)) > 0),
}
