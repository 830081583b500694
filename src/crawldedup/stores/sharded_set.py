"""The compact exact store: 32-bit integer members in many small Redis sets (about 5 bytes per URL).

Key layout (part of the documented format, see docs/stores.md)::

    <namespace>:meta                       hash: layout, store=sharded-set, fingerprint, policy,
                                           groups, shards
    {<namespace>:<group>}:<shard>          set of signed 32-bit integers
    {<namespace>:<group>}:leases           sorted set: "<shard>:<member>" -> lease deadline (ms)
    {<namespace>:<group>}:lease-urls       hash: "<shard>:<member>" -> "<owner> <canonical URL>"
    {<namespace>:<group>}:receipt:<token>  a call's answers, for a few minutes (optional)

For a fingerprint whose first 64 bits (little-endian) are ``a``: ``shard = (a * shards) >> 64``,
``group = (a * groups) >> 64`` (= ``shard // (shards // groups)``), and the member is bytes
8-11 read as a little-endian signed 32-bit integer.

Why it is small: Redis keeps a set of integers as an *intset* (a sorted array, 4 bytes per
member while every member fits in 32 bits) as long as it holds at most
``set-max-intset-entries`` members (512 by default). Shards are sized so that at capacity
they average :data:`MEMBERS_PER_SHARD` members; the fullest of 2.5 million shards (a billion
URLs) then stays under 512 (expected number of shards over: 0.09, Poisson tail).

Past capacity, shards grow beyond 512 members and Redis converts each one to a hash table
(tens of bytes per member): answers stay right, memory per URL climbs gradually. Size
``capacity`` for the whole crawl; the namespace records the shard count, so it cannot change.

The price of 32-bit members: a new URL is taken for a seen one when its member is already in
its shard, with probability ``load / 2**32`` (load = members in that shard): 9.3e-8 at
capacity (one in 10.7 million), whatever the capacity, since the load per shard is fixed.
"""

from __future__ import annotations

import math
import random
import struct
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .._checks import check_capacity, complaint, integer_in
from .._plans import Plan
from ..fingerprints import Fingerprints, multiply_shift
from ..windows import Window
from ._redis import DEFAULT_GROUPS, DICT_ENTRY_BYTES, ONE_BY_ONE, GroupedScriptStore, allocated_bytes
from .base import NamespaceConflict, StoreCall, StoreOptions
from .lua import lua

#: Average members per shard at capacity. 400 keeps the fullest shard of a billion URLs
#: under Redis's 512-entry intset limit (P(Poisson(400) > 512) = 3.4e-8 per shard).
MEMBERS_PER_SHARD = 400
_LOW32 = np.uint64(0xFFFFFFFF)
#: What a script gets per fingerprint (12 bytes, packed): its shard and its member.
_RECORD = np.dtype([("shard", "<u8"), ("member", "<i4")])
#: Shards sampled by :meth:`RedisShardedSetStore.bytes_per_url`.
SAMPLE_SHARDS = 64
#: Shards counted per pipeline by :meth:`RedisShardedSetStore.count_claims`.
COUNT_BATCH = 10_000
#: An intset's header (encoding and length, 4 bytes each) before its members.
INTSET_HEADER_BYTES = 8

# A record is the shard (little-endian uint64) and the member (little-endian int32). The claim id
# of the lease records is "<shard>:<member>": what identifies a claim in this store.
# With a window (GEN >= 0) a shard is one set per generation, "<shard key>:<generation>", expiring
# (EXPIREAT) when its generation is forgotten; a claim checks the live generations' sets and
# adds to the current one. A leased claim waits in "<shard key>:L" (no expiry) until done moves
# it to the current generation: its lease, not its age, decides until then. SETS are the
# suffixes of the sets a claim is looked up in (the shard key itself without a window).
# With a window, claim_all answers the claims of one shard together when it has several in the
# call: one SMISMEMBER per set looked up and one SADD, not G + 2 commands per claim. Without
# one, a claim is one SADD, which batching would not make cheaper.
_PRIMITIVES = lua("sharded_set_primitives") + ONE_BY_ONE + lua("sharded_set_batched")

#: How a windowed namespace keeps its claims (its record's ``window_layout``). ``generations``:
#: a set per shard and generation, a claim looked up in each live one (G + 2 lookups), the
#: layout of namespaces made before ``ticks``. ``ticks``: strings of 5-byte records (member,
#: tick of its claim), one lookup per claim, the window exact to a tick; see
#: ``lua/ticks_primitives.lua`` and docs/stores.md.
GENERATIONS, TICKS = "generations", "ticks"
WINDOW_LAYOUTS = (GENERATIONS, TICKS)
#: The most ticks a window is cut into: the ticks a string holds between sweeps (a window and
#: a quarter) stay fewer than 255, the values of a tick's byte (mod 255; 255 marks a lease).
MAX_TICKS = 64
#: Strings per shard of the ticks layout: 200 claims per string at capacity (400 / 2), 5 bytes
#: each. A member's string is its shard's number ``member mod SPLIT``: the members of a string
#: are half its shard's, so a 32-bit member collides with the same chance as in a set.
SPLIT = 2
#: Claims of a call per string the call sweeps in each group it claims in (the sweep's slices:
#: at steady state a window's claims sweep every string of the namespace once or more).
CLAIMS_PER_SWEPT_HASH = 64
_TICKS_PRIMITIVES = lua("ticks_primitives")


def ticks_per_window(window: Window) -> int:
    """The ticks of a window of G generations: the largest multiple of G up to :data:`MAX_TICKS`,
    so that a tick never straddles a generation and the store forgets a claim no later than the
    local filter does."""
    return window.generations * (MAX_TICKS // window.generations)


def shards_for(capacity: int, groups: int) -> int:
    """Shard count for ``capacity`` URLs: a multiple of ``groups`` near ``capacity / 400``."""
    return groups * max(1, math.ceil(capacity / (MEMBERS_PER_SHARD * groups)))


class RedisShardedSetStore(GroupedScriptStore):
    """Exact claims (up to 32-bit member collisions) in hash-tagged intset shards, no per-URL TTL.

    :param url: Redis URL (see :class:`~crawldedup.stores._redis.RedisStore`).
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param capacity: URLs the namespace is sized for (a new namespace only).
    :param groups: hash-tag groups for a new namespace (an existing one keeps its own).
    :param client: an existing redis-py client instead of ``url``.
    :param retry: retries for transient Redis errors.
    :raises ValueError: for a bad namespace, digest, capacity or group count.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached.
    """

    strategy = "sharded-set"
    kind = "sharded-set"
    commands = (
        *GroupedScriptStore.commands,
        "SADD",
        "SISMEMBER",
        "SMISMEMBER",
        "SREM",
        "EXPIREAT",
        "DEL",
        "GETRANGE",
        "SMEMBERS",
    )
    _primitives = _PRIMITIVES

    def __init__(
        self, url: Optional[str] = None, *, capacity: int, window_layout: Optional[str] = None, **kwargs: Any
    ) -> None:
        check_capacity(capacity)
        if window_layout is not None and window_layout not in WINDOW_LAYOUTS:
            raise ValueError(complaint("window_layout", f"one of {', '.join(WINDOW_LAYOUTS)} or None", window_layout))
        windowed = kwargs.get("window") is not None
        groups = kwargs.get("groups", DEFAULT_GROUPS)
        #: The layout asked for; a namespace that exists keeps its own (see _adopt_namespace).
        self._asked_layout = window_layout
        ticks = windowed and window_layout != GENERATIONS
        layout = {"shards": str(shards_for(capacity, groups)), "capacity": str(capacity)}
        if windowed:
            layout["window_layout"] = TICKS if ticks else GENERATIONS
        if ticks:
            layout["split"] = str(SPLIT)
        super().__init__(url, layout=layout, **kwargs)

    @classmethod
    def from_options(cls, options: StoreOptions) -> RedisShardedSetStore:
        options = StoreOptions.given(options)
        return cls(capacity=options.capacity, window_layout=options.window_layout, **cls._redis_options(options))

    def _adopt_namespace(self) -> Plan[None]:
        #: How the namespace keeps a windowed claim, from its record: a namespace made before
        #: the ticks layout has none and keeps generations, so workers never mix layouts.
        self.window_layout = self.meta.get("window_layout", GENERATIONS) if self.window is not None else None
        if self._asked_layout is not None and self.window_layout not in (None, self._asked_layout):
            raise NamespaceConflict(
                f"namespace {self.namespace!r} keeps its windowed claims in the {self.window_layout} layout, "
                f"this store asks for {self._asked_layout}: leave window_layout unset to join it, or migrate it"
            )
        if self.window_layout == TICKS:
            self._sweep_script = lua("age") + _TICKS_PRIMITIVES + lua("ticks_sweep")
            self._merge_script = lua("age") + _TICKS_PRIMITIVES + lua("ticks_merge")
        yield from super()._adopt_namespace()
        #: Adopted from the namespace record, like the groups.
        self.shards = int(self.meta["shards"])
        #: Hashes per shard of the ticks layout (1 otherwise).
        self.split = int(self.meta.get("split", 1))
        self.capacity = int(self.meta["capacity"])
        self._shards_per_group = self.shards // self.groups

    def count_claims(self) -> int:
        """Members of every shard (without a window, or in the ticks layout: the claims its strings
        hold, those forgotten and not yet swept included)."""
        return self.with_retries(self._count_members)

    def _count_members(self) -> int:
        ticks = self.window_layout == TICKS
        total = 0
        for start in range(0, self.shards, COUNT_BATCH):
            pipe = self.client.pipeline(transaction=False)
            for shard in range(start, min(start + COUNT_BATCH, self.shards)):
                if ticks:
                    for sub in range(self.split):
                        pipe.strlen(self._shard_key(shard) + b":t%d" % sub)
                else:
                    pipe.scard(self._shard_key(shard))
            # A string's 5-byte header is no claim; each claim is 5 bytes.
            total += sum(max(0, count - 5) // 5 if ticks else count for count in pipe.execute())
        return total

    def _namespace_primitives(self) -> str:
        return _TICKS_PRIMITIVES if self.window_layout == TICKS else self._primitives

    def _age(self) -> Tuple[int, ...]:
        """The ticks layout's window arguments: the strings per shard, the current tick, the
        oldest live one, and when a string stamped now may expire (its claims until its next
        sweep forgotten by then)."""
        if self.window_layout != TICKS:
            return super()._age()
        assert self.window is not None
        span = ticks_per_window(self.window)
        tick = self.window.seconds / span
        now = math.floor(self.clock() / tick)
        return self.split, now, now - span, math.ceil((now + span // 4 + span + 1) * tick)

    def _group_extras(self, group: int, claims: int) -> List[Tuple[Any, ...]]:
        if self.window_layout != TICKS or not claims:
            return []
        return [self._sweep_command(group, -(-claims // CLAIMS_PER_SWEPT_HASH))]

    def _sweep_command(self, group: int, strings: int) -> Tuple[Any, ...]:
        first = group * self._shards_per_group
        cursor = self._tags[group] + b":cursor"
        return ("EVAL", self._sweep_script, 1, cursor, first, self._shards_per_group, strings, *self._age())

    def generation_members(self, first: int, count: int) -> List[Tuple[int, int, int]]:
        """The lasting claims of shards ``first`` to ``first + count - 1`` of a namespace in the
        generations layout: ``(shard, member, generation)`` for each member of a live
        generation's set (leased members left out: their lease decides), one pipeline.

        :raises TypeError: for a ``first`` or ``count`` that is not an integer.
        :raises ValueError: for a namespace in another layout.
        :raises StoreUnavailable: when Redis cannot be reached.
        """
        integer_in("first", first, 0, self.shards)
        integer_in("count", count, 1, self.shards)
        if self.window is None or self.window_layout != GENERATIONS:
            raise ValueError(f"{self.description} keeps no generations of claims")
        current = self.window.generation(self.clock())
        sets = [
            (shard, generation)
            for shard in range(first, min(first + count, self.shards))
            for generation in range(current - self.window.generations, current + 1)
        ]

        def plan(_token: bytes) -> Plan[List[Tuple[int, int, int]]]:
            replies = yield [("SMEMBERS", self._shard_key(shard) + b":%d" % generation) for shard, generation in sets]
            return [(shard, int(m), generation) for (shard, generation), ms in zip(sets, replies) for m in ms]

        call: StoreCall[List[Tuple[int, int, int]]] = StoreCall(plan)
        return self.perform(call)

    def merge_generations(self, rows: List[Tuple[int, int, int]]) -> int:
        """Copy ``(shard, member, generation)`` claims of a generations namespace with the same
        window, groups and shards into this ticks namespace, each at the last tick of its
        generation: seen as long as the generations layout would have it seen, at most, and at
        least W after it was claimed. A claim this namespace holds at a later tick (or leased) is
        kept; one already forgotten is left out. One pipeline.

        :returns: the claims new to this namespace or moved to a later tick.
        :raises TypeError: for ``rows`` that are not a list of ``(shard, member, generation)``.
        :raises ValueError: for a namespace in another layout.
        :raises StoreUnavailable: when Redis cannot be reached.
        """
        if not isinstance(rows, list) or not all(isinstance(row, tuple) and len(row) == 3 for row in rows):
            raise TypeError(f"rows must be a list of (shard, member, generation), got {type(rows).__name__}")
        if self.window is None or self.window_layout != TICKS:
            raise ValueError(f"{self.description} is no namespace of the ticks layout")
        per_generation = ticks_per_window(self.window) // self.window.generations
        latest: Dict[Tuple[int, int], int] = {}
        for shard, member, generation in rows:
            tick = (generation + 1) * per_generation - 1
            latest[shard, member] = max(tick, latest.get((shard, member), tick))
        by_string: Dict[Tuple[int, int], List[Any]] = {}
        for (shard, member), tick in latest.items():
            by_string.setdefault((shard, member % self.split), []).extend((struct.pack("<i", member), tick))
        age = self._age()
        commands = [
            (
                "EVAL",
                self._merge_script,
                1,
                self._lease_keys[shard // self._shards_per_group][0],
                self._shard_key(shard) + b":t%d" % sub,
                *pairs,
                *age,
            )
            for (shard, sub), pairs in by_string.items()
        ]

        def plan(_token: bytes) -> Plan[int]:
            replies = yield from self._write(commands)
            return sum(int(reply) for reply in replies)

        call: StoreCall[int] = StoreCall(plan)
        return self.perform(call) if commands else 0

    def sweep(self, strings_per_group: int = 1_000) -> int:
        """Sweep the next ``strings_per_group`` strings of every group (the ticks layout): their
        forgotten claims are dropped, and a string left empty with them. Claims sweep as they go
        (a string per 64 claims of a call, and a string when a claim touches it a quarter of a
        window after its last sweep); this is for a namespace that rests, or a measurement.

        :returns: the strings swept (those due); 0 for another layout.
        :raises TypeError: for a ``strings_per_group`` that is not an integer.
        :raises StoreUnavailable: when Redis cannot be reached.
        """
        integer_in("strings_per_group", strings_per_group, 1, 1 << 30)
        if self.window_layout != TICKS:
            return 0
        commands = [self._sweep_command(group, strings_per_group) for group in range(self.groups)]

        def plan(_token: bytes) -> Plan[int]:
            replies = yield from self._write(commands)
            return sum(int(reply) for reply in replies)

        call: StoreCall[int] = StoreCall(plan)
        return self.perform(call)

    def _shard_key(self, shard: int) -> bytes:
        """``{<namespace>:<group>}:<shard>``; ``shard // (shards // groups)`` is ``(a * groups) >> 64``."""
        return b"%s:%d" % (self._tags[shard // self._shards_per_group], shard)

    def _records(self, fingerprints: Fingerprints) -> Tuple[np.ndarray, np.ndarray]:
        shards = multiply_shift(fingerprints.first_halves, self.shards)
        records = np.empty(len(fingerprints), dtype=_RECORD)
        records["shard"] = shards
        # The member: bytes 8-11 of each fingerprint (the low half of h2), a signed little-endian int32.
        records["member"] = (fingerprints.hashes[:, 1] & _LOW32).astype(np.uint32).view(np.int32)
        return shards // np.uint64(self._shards_per_group), records

    def _runs(self, records: np.ndarray) -> Optional[np.ndarray]:
        """The ticks layout answers a group's claims string by string: a record's run is its
        string, ``shard * SPLIT + member mod SPLIT`` (the member's floored modulo, as Lua's)."""
        if self.window_layout != TICKS:
            return None
        subs = records["member"].astype(np.int64) % self.split
        return records["shard"] * np.uint64(self.split) + subs.astype(np.uint64)

    def _measure(self) -> StoreCall[Optional[float]]:
        """Redis memory per member over a random sample of shards (of the current generation with a
        window): ``MEMORY USAGE`` / ``SCARD``, with each intset and dict entry counted at the size
        jemalloc allocates for it (``MEMORY USAGE`` counts an intset at its length; 1,608 bytes take
        1,792); None while the sampled shards are all empty."""
        keys = [self._shard_key(random.randrange(self.shards)) for _ in range(SAMPLE_SHARDS)]
        if self.window_layout == TICKS:  # strings of 5-byte records
            keys = [key + b":t%d" % random.randrange(self.split) for key in keys]
            return StoreCall(lambda _token: self._sample_strings(keys))
        if self.window is not None:  # the current generation's sets
            generation = self.window.generation(self.clock())
            keys = [key + b":%d" % generation for key in keys]
        return StoreCall(lambda _token: self._sample(keys))

    def _sample_strings(self, keys: List[bytes]) -> Plan[Optional[float]]:
        """Memory per claim of the ticks layout's sampled strings: ``MEMORY USAGE`` (the key, its
        value at the allocator's size, its dict entry) plus jemalloc's rounding of the dict entry,
        over the records they hold."""
        replies = yield [
            command for key in keys for command in (("MEMORY", "USAGE", key, "SAMPLES", "0"), ("STRLEN", key))
        ]
        used = claims = 0
        for usage, length in zip(replies[0::2], replies[1::2]):
            if usage is None or length <= 5:
                continue
            used += usage + allocated_bytes(DICT_ENTRY_BYTES) - DICT_ENTRY_BYTES
            claims += (length - 5) // 5
        return used / claims if claims else None

    def _sample(self, keys: List[bytes]) -> Plan[Optional[float]]:
        replies = yield [
            command
            for key in keys
            for command in (("MEMORY", "USAGE", key, "SAMPLES", "0"), ("SCARD", key), ("OBJECT", "ENCODING", key))
        ]
        used = members = 0
        for usage, count, encoding in zip(replies[0::3], replies[1::3], replies[2::3]):
            if not count:
                continue
            used += usage + allocated_bytes(DICT_ENTRY_BYTES) - DICT_ENTRY_BYTES
            if encoding in (b"intset", "intset"):  # a header of 8 bytes, then 32-bit members
                blob = INTSET_HEADER_BYTES + 4 * count
                used += allocated_bytes(blob) - blob
            members += count
        return used / members if members else None
