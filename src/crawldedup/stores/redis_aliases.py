"""The alias map of the Redis stores (``set``, ``sharded-set``, ``redisbloom``), one layout for all three.

Key layout (part of the documented format, see docs/stores.md, "Aliases")::

    {<namespace>:aliases:<group>}   hash: requested fingerprint (16 raw bytes)
                                          -> final fingerprint (16 raw bytes) + stamp (decimal ASCII)

``<group>`` (decimal, 0 to 15) is the multiply-shift of the requested fingerprint's first 64 bits
into :data:`ALIAS_GROUPS`; each group is one hash tag, so one Redis Cluster slot. The stamp is the
recrawl window's generation when the alias was recorded (-1 without a window); an alias whose
generation is forgotten reads as absent, and with a window the hash expires (``EXPIREAT``) when
its newest alias is forgotten. A group holds at most ``ceil(capacity / 16)`` aliases: recording a
new one into a full group first deletes a random one (``HRANDFIELD``).

Recording is one ``EVAL`` per group, reading one ``HMGET`` per group, in the pipeline of the
batch (the claims of :meth:`~crawldedup.stores.base.ClaimStore.claim_and_read` included), so a
batch stays one round trip. Recording is idempotent: a call repeated after a lost reply writes
the same aliases again.
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import numpy as np

from .._plans import Plan
from ..fingerprints import Fingerprints, multiply_shift
from ..windows import Clock, Window
from .aliases import Aliases, live_finals, oldest_live, stamp
from .lua import lua

#: Hash tags a namespace's aliases are spread over (a fixed part of the layout).
ALIAS_GROUPS = 16
#: The commands the alias map sends (checked with the store's own when it opens).
ALIAS_COMMANDS = ("HLEN", "HEXISTS", "HRANDFIELD", "HDEL", "HSET", "HMGET", "EXPIREAT")

# KEYS[1]: one group's alias hash. ARGV: the most aliases it holds, the stamp, when the hash
# expires (Unix seconds; 0: never), then (requested, final) pairs.
_RECORD = lua("aliases_record")


def alias_key(namespace: str, group: int) -> bytes:
    """The hash of one group of a namespace's aliases."""
    return b"{%s:aliases:%d}" % (namespace.encode("ascii"), group)


def _by_group(fingerprints: Fingerprints) -> List[Tuple[int, List[int]]]:
    """The groups the fingerprints fall in, each with its positions (ascending)."""
    groups = multiply_shift(fingerprints.first_halves, ALIAS_GROUPS)
    return [(int(g), np.flatnonzero(groups == g).tolist()) for g in np.unique(groups)]


def record_commands(namespace: str, aliases: Aliases, window: Optional[Window], clock: Clock) -> List[Tuple[Any, ...]]:
    """The commands that record a batch of aliases: one ``EVAL`` per group (one pipeline)."""
    requested, finals = aliases.requested.as_bytes(), aliases.finals.as_bytes()
    generation = stamp(window, clock)
    expire_at = math.ceil(window.forgotten_at(generation)) if window is not None else 0
    per_group = math.ceil(aliases.capacity / ALIAS_GROUPS)
    commands: List[Tuple[Any, ...]] = []
    for group, positions in _by_group(aliases.requested):
        pairs = [item for p in positions for item in (requested[p], finals[p])]
        commands.append(("EVAL", _RECORD, 1, alias_key(namespace, group), per_group, generation, expire_at, *pairs))
    return commands


def read_aliases(
    namespace: str, fingerprints: Fingerprints, window: Optional[Window], clock: Clock
) -> Plan[List[Optional[bytes]]]:
    """The live final fingerprint of each requested one (None: no alias): one ``HMGET`` per group."""
    raw = fingerprints.as_bytes()
    groups = _by_group(fingerprints)
    replies = yield [
        ("HMGET", alias_key(namespace, group), *[raw[p] for p in positions]) for group, positions in groups
    ]
    values: List[Optional[bytes]] = [None] * len(raw)
    for (_, positions), reply in zip(groups, replies):
        for position, value in zip(positions, reply):
            values[position] = value
    return live_finals(values, oldest_live(window, clock))
