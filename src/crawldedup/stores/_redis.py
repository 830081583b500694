"""What the Redis stores share: the connection, the namespace record, hash tags, one pipeline per batch."""

from __future__ import annotations

import abc
import bisect
import itertools
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .base import FINGERPRINT_ID, LAYOUT_VERSION, ClaimAnswers, ClaimStore, NamespaceConflict, RetryPolicy, check_name, check_policy_digest

#: Default number of hash-tag groups a namespace's keys are spread over. Each group is one
#: Redis Cluster slot and gets one script call per batch; 16 keeps a single node's batch at
#: 16 calls while letting a namespace spread over a cluster later.
DEFAULT_GROUPS = 16
#: Default socket timeouts (seconds): a hung server becomes an error, then a retry.
SOCKET_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0

# Creates the namespace record when absent, then returns it (one atomic step, one key).
_OPEN_NAMESPACE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
end
return redis.call('HGETALL', KEYS[1])
"""


def redact_url(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connect(url: str, socket_timeout: float = SOCKET_TIMEOUT_SECONDS) -> "redis.Redis":
    """A client for ``url`` whose only retries are the store's own (redis-py's are turned off).

    redis-py picks the hiredis parser by itself when hiredis is installed.
    """
    return redis.Redis.from_url(
        url,
        retry=Retry(NoBackoff(), 0),
        socket_timeout=socket_timeout,
        socket_connect_timeout=min(socket_timeout, CONNECT_TIMEOUT_SECONDS),
    )


def hash_tag(namespace: str, group: int) -> bytes:
    """The key prefix of one group: ``{<namespace>:<group>}`` (a Redis Cluster hash tag)."""
    return b"{%s:%d}" % (namespace.encode("ascii"), group)


class RedisStore(ClaimStore):
    """A store in Redis: records its namespace once, then one pipeline per batch.

    Subclasses say which commands answer a batch (:meth:`_commands`) and how to read the
    replies (:meth:`_answers`).

    :param url: ``redis://[[user]:password@]host[:port][/db]`` (or ``rediss://``, ``unix://``).
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy the fingerprints were made with.
    :param client: an existing redis-py client to use instead of ``url``.
    :param retry: retries for transient Redis errors.
    :raises ValueError: for a bad namespace or digest.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached while opening the namespace.
    """

    transient_errors = (redis.RedisError,)
    #: Fields of the namespace record that must equal ours; the others are adopted.
    _must_match: ClassVar[Tuple[str, ...]] = ("layout", "store", "fingerprint", "policy")

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        namespace: str,
        policy_digest: str,
        client: Optional["redis.Redis"] = None,
        retry: Optional[RetryPolicy] = None,
        layout: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(retry)
        if (url is None) == (client is None):
            raise ValueError("give exactly one of url and client")
        self.namespace = check_name("namespace", namespace)
        self.policy_digest = check_policy_digest(policy_digest)
        self._password = urlsplit(url).password if url is not None else None
        self._description = redact_url(url) if url is not None else repr(client)
        self.client = connect(url) if url is not None else client
        self.meta_key = f"{self.namespace}:meta".encode("ascii")
        wanted = {
            "layout": str(LAYOUT_VERSION),
            "store": self.kind,
            "fingerprint": FINGERPRINT_ID,
            "policy": self.policy_digest,
            **(layout or {}),
        }
        self.meta = self._open_namespace(wanted)

    @property
    def description(self) -> str:
        return f"{self.kind} store {self._description} namespace {self.namespace!r}"

    def _redact(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def _open_namespace(self, wanted: Dict[str, str]) -> Dict[str, str]:
        """Create the namespace record or check ours against it; returns the record."""
        flat = [item for pair in wanted.items() for item in pair]
        reply = self._with_retries(lambda: self.client.eval(_OPEN_NAMESPACE, 1, self.meta_key, *flat))
        stored = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
        for field in self._must_match:
            if stored.get(field) != wanted[field]:
                raise NamespaceConflict(
                    f"namespace {self.namespace!r} holds {field}={stored.get(field)!r}, "
                    f"this store uses {field}={wanted[field]!r}: pick another namespace (or round)"
                )
        return stored

    def _exchange(self, claims: Sequence[bytes], reads: Sequence[bytes]) -> ClaimAnswers:
        commands, decode = self._request(claims, reads)
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return decode(pipe.execute())

    @abc.abstractmethod
    def _request(
        self, claims: Sequence[bytes], reads: Sequence[bytes]
    ) -> Tuple[List[Tuple[Any, ...]], Callable[[List[Any]], ClaimAnswers]]:
        """The commands of one batch (sent in one pipeline) and how to decode their replies."""

    def close(self) -> None:
        self.client.close()


class GroupedScriptStore(RedisStore):
    """A Redis store answered by one script call per hash-tag group per batch.

    The script gets the claimed keys then the read keys, ``ARGV[1]`` = number of claims,
    then :meth:`_extra_args`, then the arguments of each key (:meth:`_locate`), and returns
    one integer per key (1 = won or present).
    """

    _script: ClassVar[str] = ""

    def __init__(self, url: Optional[str] = None, *, groups: int = DEFAULT_GROUPS, **kwargs: Any) -> None:
        if not isinstance(groups, int) or isinstance(groups, bool) or not 1 <= groups <= 16384:
            raise ValueError(f"groups must be an integer in [1, 16384], got {groups!r}")
        layout = {"groups": str(groups), **kwargs.pop("layout", {})}
        super().__init__(url, layout=layout, **kwargs)
        #: Adopted from the namespace record: every worker must split keys the same way.
        self.groups = int(self.meta["groups"])
        self._tags = [hash_tag(self.namespace, g) for g in range(self.groups)]

    @abc.abstractmethod
    def _locate(self, fingerprint: bytes) -> Tuple[int, bytes, Tuple[Any, ...]]:
        """The group of a fingerprint, its key (prefixed by the group's tag) and its script arguments."""

    def _extra_args(self) -> Tuple[Any, ...]:
        """Arguments after the claim count, before the per-fingerprint ones."""
        return ()

    def _request(
        self, claims: Sequence[bytes], reads: Sequence[bytes]
    ) -> Tuple[List[Tuple[Any, ...]], Callable[[List[Any]], ClaimAnswers]]:
        # Per group: positions (claims first, reads numbered after all claims), keys, arguments.
        by_group: Dict[int, Tuple[List[int], List[bytes], List[Any]]] = {}
        for position, fp in enumerate(itertools.chain(claims, reads)):
            group, key, key_args = self._locate(fp)
            entry = by_group.get(group)
            if entry is None:
                entry = by_group[group] = ([], [], [])
            entry[0].append(position)
            entry[1].append(key)
            entry[2].extend(key_args)
        n_claims = len(claims)
        extra = self._extra_args()
        commands = [
            ("EVAL", self._script, len(keys), *keys, bisect.bisect_left(positions, n_claims), *extra, *args)
            for positions, keys, args in by_group.values()
        ]

        def decode(replies: List[Any]) -> ClaimAnswers:
            flags = [False] * (n_claims + len(reads))
            for (positions, _, _), reply in zip(by_group.values(), replies):
                for position, value in zip(positions, reply):
                    flags[position] = value == 1
            return ClaimAnswers(flags[:n_claims], flags[n_claims:])

        return commands, decode
