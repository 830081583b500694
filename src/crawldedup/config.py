"""The Deduplicator's settings and the environment variables that set them (read once).

Every variable is named ``CRAWLDEDUP_<FIELD>``, as the Scrapy settings are. The names of the
design this project grew from are read too, as aliases, when the ``CRAWLDEDUP_`` name is unset:
``DEDUP_STRATEGY``, ``REDIS_URL``, ``VISITED_TTL_DAYS``, ``BLOOM_CAPACITY``, ``BLOOM_ERROR_RATE``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from ._checks import (
    ERROR_RATE_RULE,
    NAME_RULE,
    check_capacity,
    check_error_rate,
    check_name,
    check_path,
    complaint,
    integer_in,
    number_in,
)
from .canonical.policy import DEFAULT_POLICY_NAME, POLICIES, CanonicalPolicy, policy_named
from .canonical.policy_file import PolicyFileError, load_policy_file
from .stores.durability import LEVELS, MAX_REPLICAS, MAX_WAIT_SECONDS, Durability, check_level
from .stores.factory import EXACT, LOCAL, REDIS_STRATEGIES, STRATEGY_CHOICES, strategy_name
from .stores.service import check_service_url
from .stores.urls import (
    POSTGRES_URL_RULE,
    REDIS_URL_RULE,
    check_postgres_url,
    check_redis_url,
    redact_url,
    redis_url_refusal,
)
from .windows import DEFAULT_GENERATIONS, MAX_GENERATIONS, Window

#: The local tiers: ``exact``, the Bloom filter in front of the exact tier (a hit is confirmed,
#: no page lost), ``bloom``, the Bloom filter alone (a hit is taken as seen: its false positives
#: lose their pages, up to the error rate of the new pages).
EXACT_TIER = "exact"
BLOOM_TIER = "bloom"
LOCAL_TIERS = (EXACT_TIER, BLOOM_TIER)
#: Seconds in a day, for VISITED_TTL_DAYS.
DAY_SECONDS = 86_400


class Setting(NamedTuple):
    """One field of :class:`DedupConfig`: its environment variable, how its text is read, what
    it allows (for messages), the check of a value (raises TypeError or ValueError), and the
    older names of its variable, read when it is unset."""

    variable: str
    parse: Callable[[str], Any]
    allowed: str
    check: Callable[[Any], object]
    aliases: Tuple[str, ...] = ()

    def read(self, field: str, text: str, variable: Optional[str] = None) -> Any:
        """The value of ``text`` for ``field``, as read from the environment or a config file.

        :param variable: the variable it was read from (default: :attr:`variable`).
        :raises ValueError: naming the field and the variable when it cannot be parsed.
        """
        try:
            return self.parse(text)
        except ValueError:
            raise ValueError(self.complaint(field, text, variable)) from None

    def complaint(self, field: str, value: object, variable: Optional[str] = None) -> str:
        """``<field> (<VARIABLE>) must be <allowed>, got <value>``; a Redis URL with its password
        hidden and what is wrong with it."""
        variable = variable or self.variable
        refusal = redis_url_refusal(value) if field == "redis_url" else None
        if refusal:
            return f"{field} ({variable}) {refusal}"
        if field == "postgres_url" and isinstance(value, str):
            value = redact_url(value)
        return complaint(f"{field} ({variable})", self.allowed, value)

    def find(self, environ: Mapping[str, str]) -> Optional[Tuple[str, str]]:
        """``(variable, text)`` of the first of its names set in ``environ``, or None."""
        for name in (self.variable, *self.aliases):
            text = environ.get(name)
            if text is not None and text != "":
                return name, text
        return None


#: Field -> its setting, in the order of :class:`DedupConfig`.
def _readable_policy_file(path: str) -> bool:
    """A policy file setting names a file that reads as a policy (checked when the config is made)."""
    load_policy_file(path)
    return True


SETTINGS: Dict[str, Setting] = {
    "strategy": Setting(
        "CRAWLDEDUP_STRATEGY", str.strip, f"one of {STRATEGY_CHOICES}", strategy_name, ("DEDUP_STRATEGY",)
    ),
    "redis_url": Setting(
        "CRAWLDEDUP_REDIS_URL", str.strip, REDIS_URL_RULE, lambda v: check_redis_url("redis_url", v), ("REDIS_URL",)
    ),
    "ttl_days": Setting(
        "CRAWLDEDUP_TTL_DAYS",
        float,
        "a number of days in [0, 36500] (0 = claims never expire)",
        lambda v: number_in("ttl_days", v, 0, 36_500),
        ("VISITED_TTL_DAYS",),
    ),
    "capacity": Setting(
        "CRAWLDEDUP_CAPACITY",
        lambda text: int(text.strip()),
        "an integer in [1, 2**48]",
        check_capacity,
        ("BLOOM_CAPACITY",),
    ),
    "error_rate": Setting("CRAWLDEDUP_ERROR_RATE", float, ERROR_RATE_RULE, check_error_rate, ("BLOOM_ERROR_RATE",)),
    "state_path": Setting(
        "CRAWLDEDUP_STATE", str, "a file path or unset (memory)", lambda v: check_path("state_path", v)
    ),
    "namespace": Setting("CRAWLDEDUP_NAMESPACE", str.strip, NAME_RULE, lambda v: check_name("namespace", v)),
    "sqlite_path": Setting("CRAWLDEDUP_SQLITE", str, "a file path or unset", lambda v: check_path("sqlite_path", v)),
    "generations": Setting(
        "CRAWLDEDUP_GENERATIONS",
        lambda text: int(text.strip()),
        f"an integer in [1, {MAX_GENERATIONS}] (a page is won again at most W / generations late)",
        lambda v: integer_in("generations", v, 1, MAX_GENERATIONS),
    ),
    "postgres_url": Setting(
        "CRAWLDEDUP_POSTGRES_URL",
        str.strip,
        f"{POSTGRES_URL_RULE} or unset",
        lambda v: v is None or check_postgres_url("postgres_url", v),
    ),
    "service_url": Setting(
        "CRAWLDEDUP_SERVICE_URL",
        str.strip,
        "a URL starting with http:// or https:// or unset",
        lambda v: v is None or check_service_url(v),
    ),
    "durability": Setting("CRAWLDEDUP_DURABILITY", str.strip, f"one of {', '.join(LEVELS)}", check_level),
    "durable_replicas": Setting(
        "CRAWLDEDUP_DURABLE_REPLICAS",
        lambda text: int(text.strip()),
        f"an integer in [1, {MAX_REPLICAS}]",
        lambda v: integer_in("durable_replicas", v, 1, MAX_REPLICAS),
    ),
    "durable_timeout": Setting(
        "CRAWLDEDUP_DURABLE_TIMEOUT",
        float,
        f"a number of seconds in (0, {MAX_WAIT_SECONDS:g}]",
        lambda v: number_in("durable_timeout", v, 0, MAX_WAIT_SECONDS, low_open=True),
    ),
    "policy": Setting(
        "CRAWLDEDUP_POLICY",
        str.strip,
        f"one of {', '.join(POLICIES)} (the canonical policy; v1 and v2 continue crawls begun before policies 2 and 3)",
        policy_named,
    ),
    "policy_file": Setting(
        "CRAWLDEDUP_POLICY_FILE",
        str.strip,
        "the path of a policy file (TOML, or JSON named *.json), or unset",
        lambda v: v is None or _readable_policy_file(v),
    ),
    "local_tier": Setting(
        "CRAWLDEDUP_LOCAL_TIER",
        lambda text: text.strip().lower(),
        "exact or bloom (bloom loses a page to each false positive: up to error_rate of the new pages), or unset",
        lambda v: _check_tier(v),
    ),
}


def _check_tier(tier: Optional[str]) -> None:
    if tier is not None and tier not in LOCAL_TIERS:
        raise ValueError(tier)


@dataclass(frozen=True)
class DedupConfig:
    """Settings of a :class:`~crawldedup.Deduplicator`; each has an environment variable.

    Each field's variable is ``CRAWLDEDUP_<FIELD>`` (:data:`SETTINGS`; five also answer to an
    older name, an alias read when the ``CRAWLDEDUP_`` one is unset).

    :param strategy: ``CRAWLDEDUP_STRATEGY`` (``DEDUP_STRATEGY``): ``exact`` (the default: the
        local state alone, a Bloom filter in front of the exact tier), ``local`` (the Bloom filter
        alone), ``set``, ``sharded-set``, ``redisbloom`` (``bloom`` is the same), ``sqlite``,
        ``postgres`` or ``service``.
    :param redis_url: ``CRAWLDEDUP_REDIS_URL`` (``REDIS_URL``): the Redis of the ``set``,
        ``sharded-set`` and ``redisbloom`` stores.
    :param ttl_days: ``CRAWLDEDUP_TTL_DAYS`` (``VISITED_TTL_DAYS``): the recrawl window W, in every strategy: a page
        claimed at time t is seen until at least t + W and won again, by one worker, by
        t + W (1 + 1 / generations) at the latest; 0 = claims never expire.
    :param capacity: ``CRAWLDEDUP_CAPACITY`` (``BLOOM_CAPACITY``): URLs the local filter and the
        store are sized for.
    :param error_rate: ``CRAWLDEDUP_ERROR_RATE`` (``BLOOM_ERROR_RATE``): false-positive rate of
        the local filter (and RedisBloom).
    :param state_path: ``CRAWLDEDUP_STATE``: the local filter's file; None keeps it in memory.
    :param namespace: ``CRAWLDEDUP_NAMESPACE``: the crawl's key prefix in the store.
    :param sqlite_path: ``CRAWLDEDUP_SQLITE``: the database file of the ``sqlite`` store.
    :param generations: ``CRAWLDEDUP_GENERATIONS``: the generations G the window is cut into
        (default 4: at most 25% late).
    :param postgres_url: ``CRAWLDEDUP_POSTGRES_URL``: the database of the ``postgres`` store
        (``postgresql://user:password@host:port/database``).
    :param service_url: ``CRAWLDEDUP_SERVICE_URL``: the ``crawldedup serve`` of the ``service``
        store (its bearer token as the URL's password: ``http://:TOKEN@host:8707``).
    :param durability: ``CRAWLDEDUP_DURABILITY``: ``primary`` (a claim is answered once the
        Redis primary applied it) or ``replicated`` (once ``WAIT`` confirmed it on
        ``durable_replicas`` replicas; Redis strategies only). See docs/stores.md, "Failover".
    :param durable_replicas: ``CRAWLDEDUP_DURABLE_REPLICAS``: replicas that must confirm (default 1).
    :param durable_timeout: ``CRAWLDEDUP_DURABLE_TIMEOUT``: seconds ``WAIT`` waits for them
        (default 1); fewer in time is an error for the batch, retried.
    :param policy: ``CRAWLDEDUP_POLICY``: the canonical policy by name: ``v3`` (policy 3, the
        default), ``v2`` (:data:`~crawldedup.POLICY_V2`, for a crawl begun before policy 3) or
        ``v1`` (:data:`~crawldedup.POLICY_V1`, for a crawl begun before policy 2).
    :param policy_file: ``CRAWLDEDUP_POLICY_FILE``: a policy file (docs/canonical-policy.md,
        "Policy files"); when set, the policy is the file's and ``policy`` is not read.
    :param local_tier: ``CRAWLDEDUP_LOCAL_TIER``: what answers before a store: ``exact`` (a
        Bloom filter hit is confirmed in the exact tier on disk: no page lost) or ``bloom`` (the
        Bloom filter alone: a false positive loses its page, up to ``error_rate`` of the new
        pages; what every store had before). Unset: ``exact`` for a new state file, the tier
        an existing one was made with. The ``exact`` and ``local`` strategies are their tier.
    :raises ValueError: when a field is out of range (the message names its variable).
    """

    strategy: str = EXACT
    redis_url: str = "redis://localhost:6379/0"
    ttl_days: float = 30.0
    capacity: int = 10_000_000
    error_rate: float = 0.01
    state_path: Optional[str] = None
    namespace: str = "crawldedup"
    sqlite_path: Optional[str] = None
    generations: int = DEFAULT_GENERATIONS
    postgres_url: Optional[str] = None
    service_url: Optional[str] = None
    durability: str = "primary"
    durable_replicas: int = 1
    durable_timeout: float = 1.0
    policy: str = DEFAULT_POLICY_NAME
    policy_file: Optional[str] = None
    local_tier: Optional[str] = None

    def __post_init__(self) -> None:
        for field, value in vars(self).items():
            setting = SETTINGS[field]
            try:
                setting.check(value)
            except PolicyFileError as exc:  # the file's own problem, with its name
                raise ValueError(f"{field} ({setting.variable}): {exc}") from None
            except (TypeError, ValueError):
                raise ValueError(setting.complaint(field, value)) from None
        object.__setattr__(self, "strategy", strategy_name(self.strategy))  # an alias becomes its name
        object.__setattr__(self, "policy", self.policy.strip().lower())
        own = {EXACT: EXACT_TIER, LOCAL: BLOOM_TIER}.get(self.strategy)
        if own is not None and self.local_tier not in (None, own):
            raise ValueError(
                f"local_tier (CRAWLDEDUP_LOCAL_TIER) {self.local_tier!r} does not go with the {self.strategy} "
                f"strategy, whose tier is {own}: use strategy {EXACT if self.local_tier == EXACT_TIER else LOCAL}, "
                "or leave local_tier unset"
            )
        if self.store_durability.waits and self.strategy not in REDIS_STRATEGIES:
            raise ValueError(
                f"durability (CRAWLDEDUP_DURABILITY) {self.durability!r} needs a Redis strategy "
                f"({', '.join(REDIS_STRATEGIES)}), not {self.strategy}"
            )

    @property
    def tier(self) -> Optional[str]:
        """The local tier: the ``exact`` and ``local`` strategies' own, else ``local_tier`` (None:
        ``exact`` for a new state file, an existing one's own)."""
        return {EXACT: EXACT_TIER, LOCAL: BLOOM_TIER}.get(self.strategy, self.local_tier)

    @property
    def store_durability(self) -> Durability:
        """When the Redis store answers a batch that writes (:attr:`durability` and its terms)."""
        return Durability(self.durability, self.durable_replicas, self.durable_timeout)

    @property
    def canonical_policy(self) -> CanonicalPolicy:
        """The canonical policy of ``policy_file``, else the one ``policy`` names.

        :raises PolicyFileError: (a ``ValueError``) for a policy file that cannot be read.
        """
        if self.policy_file:
            return load_policy_file(self.policy_file)
        return policy_named(self.policy)

    @property
    def ttl_seconds(self) -> Optional[int]:
        """Claim lifetime in whole seconds (at least 1), or None for claims that never expire."""
        return max(1, round(self.ttl_days * DAY_SECONDS)) if self.ttl_days else None

    @property
    def window(self) -> Optional[Window]:
        """The recrawl window (``ttl_seconds`` in ``generations``), or None when claims never expire."""
        seconds = self.ttl_seconds
        return Window(float(seconds), self.generations) if seconds is not None else None

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> DedupConfig:
        """Read every variable once from ``environ`` (default ``os.environ``); unset ones keep their default.

        :raises TypeError: for an ``environ`` that is not a mapping.
        :raises ValueError: for a value that cannot be parsed or is out of range, naming the variable.
        """
        environ = os.environ if environ is None else environ
        if not isinstance(environ, Mapping):
            raise TypeError(f"environ must be a mapping of variables to values, got {type(environ).__name__}")
        values: Dict[str, object] = {}
        read: Dict[str, str] = {}
        for field, setting in SETTINGS.items():
            found = setting.find(environ)
            if found is not None:
                read[field], text = found
                values[field] = setting.read(field, text, read[field])
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValueError as exc:  # name the variable that was read, an alias too
            message = str(exc)
            for field, variable in read.items():
                message = message.replace(f"{field} ({SETTINGS[field].variable})", f"{field} ({variable})")
            raise ValueError(message) from None
