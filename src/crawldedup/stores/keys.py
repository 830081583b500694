"""The classic exact store: one Redis key per URL, ``SET key 1 NX EX ttl``.

Key layout (part of the documented format, see docs/stores.md)::

    <namespace>:meta                      hash: layout, store=keys, fingerprint, policy, groups
    {<namespace>:<group>}<fingerprint>    string "1", expiring after ttl_seconds

``<fingerprint>`` is the 16 raw bytes; ``<group>`` (decimal) is the multiply-shift of the
fingerprint's first 64 bits into ``groups``. A batch is one ``EVAL`` per group, all in one
pipeline: the script runs ``SET NX EX`` for each of its keys, which costs the Python client
one command per group instead of one per URL (figures in docs/stores.md).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ._redis import GroupedScriptStore

_CLAIM = """
local claims = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local answers = {}
for i = 1, #KEYS do
  if i > claims then
    answers[i] = redis.call('EXISTS', KEYS[i])
  elseif ttl > 0 then
    answers[i] = redis.call('SET', KEYS[i], 1, 'NX', 'EX', ttl) and 1 or 0
  else
    answers[i] = redis.call('SET', KEYS[i], 1, 'NX') and 1 or 0
  end
end
return answers
"""


class RedisKeyStore(GroupedScriptStore):
    """Exact claims, one key per URL with its own expiry (about 100 bytes per URL).

    :param url: Redis URL (see :class:`~crawldedup.stores._redis.RedisStore`).
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param ttl_seconds: how long a claim lasts; None keeps claims forever.
    :param groups: hash-tag groups for a new namespace (an existing one keeps its own).
    :param client: an existing redis-py client instead of ``url``.
    :param retry: retries for transient Redis errors.
    :raises ValueError: for a bad namespace, digest, ttl or group count.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached.
    """

    kind = "keys"
    _script = _CLAIM

    def __init__(self, url: Optional[str] = None, *, ttl_seconds: Optional[int] = None, **kwargs: Any) -> None:
        if ttl_seconds is not None and (
            not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool) or ttl_seconds < 1
        ):
            raise ValueError(f"ttl_seconds must be a positive integer or None, got {ttl_seconds!r}")
        self.ttl_seconds = ttl_seconds
        super().__init__(url, **kwargs)

    def _extra_args(self) -> Tuple[Any, ...]:
        return (self.ttl_seconds or 0,)

    def _locate(self, fingerprint: bytes) -> Tuple[int, bytes, Tuple[Any, ...]]:
        group = (int.from_bytes(fingerprint[:8], "little") * self.groups) >> 64
        return group, self._tags[group] + fingerprint, ()

    def bytes_per_url(self) -> Optional[float]:
        """None: a key's share of Redis's dictionaries cannot be read per namespace.

        bench/redis_memory.py measures it (docs/stores.md).
        """
        return None
