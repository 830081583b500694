"""The classic exact store: one Redis key per URL, ``SET key 1 NX EX ttl``.

Key layout (part of the documented format, see docs/stores.md)::

    <namespace>:meta                      hash: layout, store=keys, fingerprint, policy, groups
    {<namespace>:<group>}<fingerprint>    string "1", expiring after ttl_seconds (no expiry while leased)
    {<namespace>:<group>}:leases          sorted set: fingerprint -> lease deadline (ms)
    {<namespace>:<group>}:lease-urls      hash: fingerprint -> "<owner> <canonical URL>"
    {<namespace>:<group>}:receipt:<token> a call's answers, for a few minutes (optional)

``<fingerprint>`` is the 16 raw bytes (also the claim id of the lease records); ``<group>``
(decimal) is the multiply-shift of the fingerprint's first 64 bits into ``groups``. A batch is
one ``EVAL`` per group, all in one pipeline: the script runs ``SET NX EX`` for each of its keys,
which costs the Python client one command per group instead of one per URL (figures in
docs/stores.md).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from .._checks import complaint, is_integer
from ..fingerprints import Fingerprints, multiply_shift
from ._redis import GroupedScriptStore

# A leased key has no expiry until its lease is done; the claim id is the key's 16 fingerprint bytes.
# With a window (GEN >= 0) a lasting claim's value is "g<generation>" and the key expires (EXAT)
# when that generation is forgotten; a key whose generation is older than OLDEST is forgotten
# already (by the client's clock, which may run ahead of Redis's) and is claimed again. A leased
# key holds "L" and no generation: its lease decides. "1" (claims without a window) never ages
# here; its own EX, if any, ends it.
_PRIMITIVES = """
local PER_KEY = 0
local function live(v)
  return v and (string.sub(v, 1, 1) ~= 'g' or tonumber(string.sub(v, 2)) >= OLDEST)
end
local function claim_key(k, m, ttl)
  if GEN >= 0 then
    if live(redis.call('GET', k)) then return 0 end
    if ttl > 0 then redis.call('SET', k, 'g' .. GEN, 'EXAT', FORGET_AT) else redis.call('SET', k, 'L') end
    return 1
  end
  if ttl > 0 then return redis.call('SET', k, 1, 'NX', 'EX', ttl) and 1 or 0 end
  return redis.call('SET', k, 1, 'NX') and 1 or 0
end
local function claimed(k, m)
  if GEN >= 0 then return live(redis.call('GET', k)) and 1 or 0 end
  return redis.call('EXISTS', k)
end
local function visit(k, m, ttl)
  if GEN >= 0 then redis.call('SET', k, 'g' .. GEN, 'EXAT', FORGET_AT)
  elseif ttl > 0 then redis.call('EXPIRE', k, ttl) else redis.call('PERSIST', k) end
end
local function unclaim(k, m) redis.call('DEL', k) end
local function claim_id(k, m) return string.sub(k, -16) end
"""


class RedisKeyStore(GroupedScriptStore):
    """Exact claims, one key per URL with its own expiry (about 100 bytes per URL).

    :param url: Redis URL (see :class:`~crawldedup.stores._redis.RedisStore`).
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param ttl_seconds: how long a claim lasts without a window; None keeps claims forever.
    :param window: the recrawl window (it takes the place of ``ttl_seconds``): a claim expires
        when its generation is forgotten.
    :param groups: hash-tag groups for a new namespace (an existing one keeps its own).
    :param client: an existing redis-py client instead of ``url``.
    :param retry: retries for transient Redis errors.
    :raises ValueError: for a bad namespace, digest, ttl or group count.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached.
    """

    strategy = "set"
    kind = "keys"
    commands = (*GroupedScriptStore.commands, "EXPIRE", "PERSIST", "DEL")
    _primitives = _PRIMITIVES

    def __init__(self, url: Optional[str] = None, *, ttl_seconds: Optional[int] = None, **kwargs: Any) -> None:
        if ttl_seconds is not None and (not is_integer(ttl_seconds) or ttl_seconds < 1):
            raise ValueError(complaint("ttl_seconds", "a positive integer or None", ttl_seconds))
        self.ttl_seconds = ttl_seconds
        super().__init__(url, **kwargs)

    def _ttl(self) -> int:
        return super()._ttl() if self.window is not None else self.ttl_seconds or 0

    def _locate_many(self, fingerprints: Fingerprints) -> Tuple[np.ndarray, List[bytes], Optional[List[int]]]:
        groups = multiply_shift(fingerprints.first_halves, self.groups)
        tags = self._tags
        return groups, [tags[g] + fp for g, fp in zip(groups.tolist(), fingerprints.as_bytes())], None

    def _measure(self) -> Optional[float]:
        """None: a key's share of Redis's dictionaries cannot be read per namespace.

        bench/scripts/redis_memory.py measures it (docs/stores.md).
        """
        return None
