"""What the Redis stores share: the connection (one node or a Redis Cluster, blocking or asyncio),
the namespace record, hash tags, one pipeline per batch, and the lease scripts of the grouped stores.

Every step is a plan (:mod:`crawldedup._plans`) whose requests are pipelines of commands: the
sync store sends them with ``redis.Redis`` / ``redis.cluster.RedisCluster``, the async one with
``redis.asyncio.Redis`` / ``redis.asyncio.cluster.RedisCluster``. Scripts, key layouts,
receipts, replies and error classification exist once, here and in the store modules.
"""

from __future__ import annotations

import abc
import functools
import math
import random
import re
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    FrozenSet,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
    cast,
)
from urllib.parse import unquote, urlsplit

import numpy as np
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.sentinel
from redis.asyncio.cluster import PipelineCommand
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterDownError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
    TryAgainError,
)
from redis.retry import Retry

from .._checks import check_name, integer_in
from .._plans import Plan, adrive, drive
from ..fingerprints import FINGERPRINT_ID, Fingerprints
from ..windows import Clock, Window, system_clock
from . import redis_aliases
from .aliases import Aliases
from .base import (
    LAYOUT_VERSION,
    ClaimAnswers,
    ClaimStore,
    Lease,
    RetryPolicy,
    ServerFacts,
    StoreOptions,
    StoreRefused,
    StoreUnavailable,
    check_lease_seconds,
    check_namespace_fields,
    check_policy_digest,
    check_window_stamp,
    required,
    window_stamp,
)
from .durability import Durability
from .lua import lua
from .redis_scripts import by_sha, learn_held, not_held, raise_first_error
from .urls import SENTINEL_SCHEME, check_redis_url, parse_sentinel_url, redact_text, redact_url

#: A client of one Redis node or of a Redis Cluster (same commands, same pipelines).
Client = Union["redis.Redis", RedisCluster]
#: The same for asyncio.
AsyncClient = Union["redis.asyncio.Redis", "redis.asyncio.cluster.RedisCluster"]
#: One request of a Redis plan: the commands of one pipeline (its reply: one reply per command),
#: or one command without keys sent :class:`Alone`.
Commands = Sequence[Tuple[Any, ...]]


class Alone(NamedTuple):
    """A request of one command without keys, sent by itself (to one node of a cluster, as all
    of a cluster's nodes run one server version); its reply is the command's."""

    command: Tuple[Any, ...]


class Replicated(NamedTuple):
    """A request that writes, under ``durability="replicated"``: the commands of one pipeline,
    then ``WAIT replicas timeout_ms`` on the same connection of every node that ran some of
    them. Its reply: one reply per command, and the replicas each ``WAIT`` counted."""

    commands: Commands
    replicas: int
    timeout_ms: int


class NotReplicated(redis.RedisError):
    """``WAIT`` counted fewer replicas than a replicated store asks for: the batch is not
    answered (its claims may be lost in a failover). Transient: the attempt is repeated, and
    its receipt gives the answers the primary recorded, now waited for again."""


#: Default number of hash-tag groups a namespace's keys are spread over. Each group is one
#: Redis Cluster slot and gets one script call per batch; 16 keeps a single node's batch at
#: 16 calls while letting a namespace spread over a cluster later.
DEFAULT_GROUPS = 16
#: Keys deleted per ``UNLINK`` when a namespace is deleted.
DELETE_BATCH = 1_000
#: Default socket timeouts (seconds): a hung server becomes an error, then a retry.
SOCKET_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0
#: Shortest life of a receipt. It must outlast every attempt of its call: with the default
#: retry policy that is 4 attempts of at most 15 s (connect and socket timeouts) plus 0.35 s of
#: waits, 61 s; 5 minutes also covers a caller that retries the same batch after
#: StoreUnavailable, as long as Redis is back within them.
MIN_RECEIPT_SECONDS = 300

# Receipts: what a call's claims were answered, kept a few minutes under a key named by the
# call's token, so that an attempt repeated after its reply was lost gets the same answers.
# A receipt is one character per claim ('0' + answer), written only when some claim was won
# (answer 1): a call that won nothing gets the same answers again anyway. A script answers
# in the same form, one bulk string of one character per key: a client reads 10,000 answers
# as one string, not as 10,000 integers.
RECEIPTS_LUA = lua("receipts")

# Creates the namespace record when absent, then returns it (one atomic step, one key).
_OPEN_NAMESPACE = lua("open_namespace")

#: Error replies that mean "not now": a server loading its data set, busy in a script, or a
#: cluster moving or electing a slot's master. Any other error reply is permanent.
_TRANSIENT_REPLIES = ("LOADING", "BUSY", "TRYAGAIN", "MOVED", "ASK", "CLUSTERDOWN", "MASTERDOWN")
#: redis-py's classes for some of them (it strips the reply's first word from their text).
_TRANSIENT_REPLY_ERRORS = (TryAgainError, AskError, ClusterDownError)
#: What redis-py puts before the error of a pipeline's command (the whole command, a script included).
_PIPELINE_PREFIX = re.compile(r"^Command # \d+ \(.*?\) of pipeline caused error: ", re.DOTALL)
#: What Redis appends to an error raised inside a script.
_SCRIPT_SUFFIX = re.compile(r"\s*script: [0-9a-f]+, on @user_script:\d+\.?$")
#: What to do about a server without RedisBloom's commands.
_NO_REDISBLOOM = (
    "the server lacks the RedisBloom module: load it (redis-server --loadmodule "
    "/path/to/redisbloom.so, or loadmodule in redis.conf), or use Redis Stack"
)


@functools.cache
def _driver_options() -> Dict[str, Any]:
    """redis-py's ``driver_info``, made once: without it, redis-py 7.2 and later look up their
    own version in the package metadata for every new connection (17 ms here, on the event
    loop for an asyncio client: 16 tasks opening 16 connections stalled it that long each).
    Older versions look it up once, at import, and take no such option."""
    try:
        from redis import DriverInfo  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return {}
    return {"driver_info": DriverInfo()}


def _client_options(socket_timeout: float, retry: Any) -> Dict[str, Any]:
    return {
        "retry": retry,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": min(socket_timeout, CONNECT_TIMEOUT_SECONDS),
        **_driver_options(),
    }


class _OneWrite:
    """A redis-py connection that sends a pipeline in one write. redis-py writes each command
    longer than 6,000 bytes (each script call: its text is one argument) in a write of its
    own: a system call, and with Nagle's algorithm off a TCP segment and a wake-up of the
    server, per group of a batch. Joined, a batch of 16 groups costs the client and the server
    less CPU (docs/performance.md); the copy is the size of the batch's commands."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if isinstance(command, list) and len(command) > 1:
            command = [b"".join(command)]
        super().send_packed_command(command, check_health)  # type: ignore[misc]


@functools.cache
def _one_write(connection_class: type) -> type:
    return type(connection_class.__name__, (_OneWrite, connection_class), {})


def _write_pipelines_at_once(client: Any) -> None:
    """Make the connections ``client`` (blocking, one node or a Sentinel's primary) opens from
    now on send each pipeline in one write (:class:`_OneWrite`), of the class its pool had
    (TLS, Unix socket, Sentinel-managed)."""
    pool = client.connection_pool
    pool.connection_class = _one_write(pool.connection_class)


def _sentinel_master(url: str, sentinel_class: Any, redis_class: Any, options: Dict[str, Any]) -> Any:
    """A client of the primary that the Sentinels of a ``redis+sentinel://`` URL name: each
    connection it opens asks them where the primary is, so after a failover the next attempt
    reaches the promoted replica."""
    where = parse_sentinel_url(url)
    # The Sentinels get the store's timeouts and its no-retry policy too: redis-py's own retries
    # with backoff would make one lookup against a closed port take seconds.
    sentinel_options = {name: value for name, value in options.items() if name.startswith("socket_") or name == "retry"}
    sentinel_options.update(username=where.sentinel_username, password=where.sentinel_password)
    manager = sentinel_class(where.sentinels, sentinel_kwargs=sentinel_options, **options)
    return manager.master_for(
        where.service, redis_class=redis_class, db=where.db, username=where.username, password=where.password
    )


def connect(url: str, socket_timeout: float = SOCKET_TIMEOUT_SECONDS) -> Client:
    """A client for ``url`` whose only retries are the store's own (redis-py's are turned off).

    When the node at ``url`` runs in cluster mode (``INFO cluster``), the client is a
    :class:`redis.cluster.RedisCluster` that discovers the other nodes from it, so one
    ``REDIS_URL`` names either a single Redis or any node of a cluster. A ``redis+sentinel://``
    URL (:func:`~crawldedup.stores.urls.parse_sentinel_url`) gives a client of the primary its
    Sentinels name, which follows a failover. redis-py picks the
    hiredis parser by itself when hiredis is installed.

    :raises redis.RedisError: when the node cannot be asked.
    :raises RedisClusterException: when the cluster's slots cannot be mapped.
    """
    options = _client_options(socket_timeout, Retry(NoBackoff(), 0))
    if url.startswith(SENTINEL_SCHEME):
        primary = _sentinel_master(url, redis.sentinel.Sentinel, redis.Redis, options)
        _write_pipelines_at_once(primary)
        return cast(Client, primary)
    single = redis.Redis.from_url(url, **options)
    _write_pipelines_at_once(single)
    try:
        in_cluster = single.info("cluster").get("cluster_enabled") == 1
    except redis.ResponseError:  # INFO refused (ACL): not a node we can treat as a cluster
        in_cluster = False
    except BaseException:
        single.close()
        raise
    if not in_cluster:
        return single
    single.close()
    # The nodes' connections: the class the URL asks for (TLS or not), writing pipelines at once.
    return RedisCluster.from_url(url, connection_class=single.connection_pool.connection_class, **options)


async def aconnect(url: str, socket_timeout: float = SOCKET_TIMEOUT_SECONDS) -> AsyncClient:
    """:func:`connect` for asyncio: a ``redis.asyncio`` client of one node or of a cluster.

    :raises redis.RedisError: when the node cannot be asked.
    :raises RedisClusterException: when the cluster's slots cannot be mapped.
    """
    options = _client_options(socket_timeout, redis.asyncio.retry.Retry(NoBackoff(), 0))
    if url.startswith(SENTINEL_SCHEME):
        return cast(AsyncClient, _sentinel_master(url, redis.asyncio.sentinel.Sentinel, redis.asyncio.Redis, options))
    single = redis.asyncio.Redis.from_url(url, **options)
    try:
        in_cluster = (await single.info("cluster")).get("cluster_enabled") == 1
    except redis.ResponseError:  # as connect()
        in_cluster = False
    except BaseException:
        await single.aclose()
        raise
    if not in_cluster:
        return single
    await single.aclose()
    cluster = redis.asyncio.cluster.RedisCluster.from_url(url, **options)
    try:
        await cluster.initialize()
    except BaseException:
        await cluster.aclose()
        raise
    return cluster


def read_answers(replies: Sequence[Any]) -> np.ndarray:
    """The answers of scripts that answer one character per key ('0' + answer), joined (uint8)."""
    text = b"".join(r if isinstance(r, bytes) else r.encode("ascii") for r in replies)  # str: decode_responses
    return np.frombuffer(text, dtype=np.uint8) - 48


def group_order(groups: np.ndarray, claims: int, runs: Optional[np.ndarray] = None) -> np.ndarray:
    """Positions by group, a group's claims (positions below ``claims``) first, then its reads,
    each in the order given or, with ``runs``, ordered by run (stable sorts throughout)."""
    if runs is None:
        # Positions are ascending within each group, so its claims come first. Groups fit 16
        # bits (at most 16,384), for which numpy's stable sort is a radix sort.
        return np.argsort(groups.astype(np.uint16), kind="stable")
    order = np.arange(len(groups))
    for shift in range(0, int(runs.max(initial=0)).bit_length(), 16):  # by run, 16 bits a pass
        digits = (runs[order] >> np.uint64(shift)).astype(np.uint16)  # the low 16 bits
        order = order[np.argsort(digits, kind="stable")]
    key = groups[order].astype(np.uint16) * np.uint16(2) + (order >= claims).astype(np.uint16)
    return order[np.argsort(key, kind="stable")]  # at most 2 * 16,384 keys: 16 bits


def run_lengths(runs: Optional[np.ndarray], segments: Sequence[Tuple[int, int]]) -> List[bytes]:
    """Per segment ``(start, count)`` of ``runs`` (ascending, apart), the lengths of its runs
    (little-endian uint32); b"" each without runs. Found for all segments at once: a batch has
    a segment per group, and a few array operations each cost more than the lengths."""
    if runs is None:
        return [b""] * len(segments)
    starts = np.array([start for start, _ in segments], dtype=np.intp)
    ends = starts + np.array([count for _, count in segments], dtype=np.intp)
    first = np.zeros(len(runs) + 1, dtype=np.int8)  # +1 opens a segment, -1 closes one
    np.add.at(first, starts, 1)
    np.add.at(first, ends, -1)
    inside = np.cumsum(first[:-1]) > 0
    breaks = np.ones(len(runs), dtype=bool)
    breaks[1:] = runs[1:] != runs[:-1]
    breaks[starts[starts < len(runs)]] = True
    marks = np.flatnonzero(breaks & inside)  # where a run of a segment starts
    segment = np.searchsorted(starts, marks, side="right") - 1
    following = np.append(marks[1:], len(runs))
    lengths = (np.minimum(following, ends[segment]) - marks).astype("<u4").tobytes()
    offsets = np.concatenate(([0], np.cumsum(np.bincount(segment, minlength=len(segments))))) * 4
    return [lengths[offsets[i] : offsets[i + 1]] for i in range(len(segments))]


def server_text(error: BaseException) -> str:
    """The server's answer in an error, on one line: a pipeline's error also quotes its whole
    command (a Lua script of a hundred lines), and a script's error where in the script it was."""
    return _SCRIPT_SUFFIX.sub("", _PIPELINE_PREFIX.sub("", " ".join(str(error).split())))


def hash_tag(namespace: str, group: int) -> bytes:
    """The key prefix of one group: ``{<namespace>:<group>}`` (a Redis Cluster hash tag)."""
    return b"{%s:%d}" % (namespace.encode("ascii"), group)


#: Redis 7's dict entry (dict.h): what ``MEMORY USAGE`` counts for a key's place in the keyspace.
DICT_ENTRY_BYTES = 24


def allocated_bytes(size: int) -> int:
    """What jemalloc (Redis's allocator) takes for ``size`` bytes: its size class, 8 or a multiple
    of 16 up to 128 bytes, then four classes per power of two (1,608 bytes take 1,792)."""
    if size <= 8:
        return 8
    if size <= 128:
        return (size + 15) // 16 * 16
    spacing = 1 << ((size - 1).bit_length() - 3)
    return (size + spacing - 1) // spacing * spacing


def receipt_seconds(retry: RetryPolicy) -> int:
    """Seconds a receipt lives: twice the longest time the attempts of one call can take, and
    at least :data:`MIN_RECEIPT_SECONDS`."""
    bound = retry.attempts * (SOCKET_TIMEOUT_SECONDS + CONNECT_TIMEOUT_SECONDS) + retry.max_total_delay()
    return max(MIN_RECEIPT_SECONDS, math.ceil(2 * bound))


class RedisStore(ClaimStore):
    """A store in Redis: records its namespace once, then one pipeline per batch.

    Subclasses write the plans of a batch (:meth:`_exchange`...), whose requests are the
    commands of one pipeline, and what the namespace record decides (:meth:`_adopt_namespace`).

    :param url: ``redis://[[user]:password@]host[:port][/db]`` (or ``rediss://``, ``unix://``), or
        ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]``.
    :param namespace: key prefix of this crawl (and round).
    :param policy_digest: digest of the canonical policy the fingerprints were made with.
    :param client: an existing redis-py client to use instead of ``url`` (a ``redis.asyncio``
        one when ``asynchronous``).
    :param retry: retries for transient Redis errors.
    :param asynchronous: connect nothing now; the store is opened and used through
        :class:`~crawldedup.stores.aio.AsyncClaimStore`.
    :param durability: when a batch that writes is answered (default: once the primary applied
        it; see :class:`~crawldedup.stores.durability.Durability`).
    :raises ValueError: for a bad namespace or digest.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when Redis cannot be reached while opening the namespace.
    """

    #: A cluster client raises RedisClusterException when no node answers while it maps the slots.
    store_errors = (redis.RedisError, RedisClusterException)
    #: Fields of the namespace record that must equal ours; the others are adopted.
    _must_match: ClassVar[Tuple[str, ...]] = ("layout", "store", "fingerprint", "policy")
    #: Every command the store's claims and leases send, itself or from its scripts (receipts
    #: and the namespace record here; subclasses add theirs). The store asks the server for all of them when it
    #: opens (``COMMAND INFO``), so that a server without one (renamed or disabled by
    #: ``rename-command``, or a server that does not implement it) is refused there, naming it.
    commands: ClassVar[Tuple[str, ...]] = (
        "EVAL",
        "EXISTS",
        "HSET",
        "HGETALL",
        "GET",
        "SET",
        *redis_aliases.ALIAS_COMMANDS,
    )
    #: Commands the store's scripts use when the server has them and do without otherwise (asked
    #: with :attr:`commands`; :attr:`server_has` holds those the server knows).
    optional_commands: ClassVar[Tuple[str, ...]] = ()
    #: Every Redis store keeps the alias map of redirects (layout: :mod:`crawldedup.stores.redis_aliases`).
    supports_aliases = True

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        namespace: str,
        policy_digest: str,
        client: Optional[Client] = None,
        retry: Optional[RetryPolicy] = None,
        layout: Optional[Mapping[str, str]] = None,
        window: Optional[Window] = None,
        clock: Clock = system_clock,
        asynchronous: bool = False,
        durability: Optional[Durability] = None,
    ) -> None:
        super().__init__(retry, window, clock, asynchronous=asynchronous)
        #: When a batch that writes is answered (see :mod:`crawldedup.stores.durability`).
        self.durability = durability if durability is not None else Durability()
        # A replicated request to a cluster failed: the slots may have moved (see _nodes_of).
        self._slots_stale = False
        #: Digests of the scripts the server answered a call of by text: sent by digest from then on.
        self._scripts_held: Set[str] = set()
        if (url is None) == (client is None):
            raise ValueError("give exactly one of url and client")
        #: Seconds the receipt of a call that won something is kept (see docs/stores.md, "Faults").
        self.receipt_seconds = receipt_seconds(self.retry)
        self.namespace = check_name("namespace", namespace)
        self.policy_digest = check_policy_digest(policy_digest)
        if url is not None:
            check_redis_url("url", url)
        self._password = urlsplit(url).password if url is not None else None
        #: The :attr:`optional_commands` the server knew when the store opened.
        self.server_has: FrozenSet[str] = frozenset()
        #: What an error text must not show: the URL's password, and its Sentinels' own.
        self._secrets = [
            secret
            for secret in (
                self._password,
                unquote(self._password) if self._password else None,
                parse_sentinel_url(url).sentinel_password
                if url is not None and url.startswith(SENTINEL_SCHEME)
                else None,
            )
            if secret
        ]
        self._username = urlsplit(url).username if url is not None else None
        self._description = redact_url(url) if url is not None else repr(client)
        self._url = url
        self.meta_key = f"{self.namespace}:meta".encode("ascii")
        self._wanted = {
            "layout": str(LAYOUT_VERSION),
            "store": self.kind,
            "fingerprint": FINGERPRINT_ID,
            "policy": self.policy_digest,
            "window": window_stamp(window),
            **(layout or {}),
        }
        #: The redis-py client (a ``redis.asyncio`` one for an asynchronous store, once opened).
        self.client: Any = client
        if asynchronous:
            return
        # Exactly one of url and client was given (checked above), so client is set without url.
        if url is not None:
            self.client = self.with_retries(lambda: connect(url))
        try:
            self.with_retries(lambda: drive(self._open(), self._send))
        except BaseException:  # no store, so no open connection (a client given to us stays open)
            if url is not None:
                self.client.close()
            raise

    @classmethod
    def _redis_options(cls, options: StoreOptions) -> Dict[str, Any]:
        """The arguments every Redis store takes from ``options``."""
        url = required(options.redis_url, cls.strategy, "redis_url", "CRAWLDEDUP_REDIS_URL")
        return {"url": url, "durability": options.durability, **options.common()}

    async def _aconnect(self) -> None:
        if self.client is None:
            self.client = await aconnect(cast(str, self._url))

    def _pipe(self, commands: Commands) -> Any:
        """A pipeline holding ``commands`` (a cluster client sends one per node)."""
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe

    def _one_node(self) -> Dict[str, Any]:
        """The options that send an :class:`Alone` command to one node of a cluster."""
        return {"target_nodes": self.client.get_default_node()} if self.in_cluster else {}

    def _write(self, commands: Commands, writes: bool = True) -> Plan[List[Any]]:
        """Send ``commands`` (one pipeline); their replies. When they write (``writes``) and the
        store's durability is ``replicated``, the replies come only once ``WAIT`` confirmed them
        on enough replicas of every node that ran them.

        :raises NotReplicated: when a ``WAIT`` counted fewer replicas within its timeout.
        """
        replies: List[Any]
        if not (writes and self.durability.waits):
            replies = yield commands
            return replies
        wanted, timeout_ms = self.durability.replicas, self.durability.timeout_ms
        replies, counted = yield Replicated(commands, wanted, timeout_ms)
        if min(counted) < wanted:
            raise NotReplicated(
                f"WAIT confirmed the batch on {min(counted)} of the {wanted} replicas asked within {timeout_ms} ms"
            )
        return replies

    def _nodes_of(self, commands: Commands) -> List[Tuple[Any, List[int]]]:
        """The cluster nodes that serve ``commands`` (by their first key), each with the
        positions of its commands, in order."""
        nodes: Dict[str, Tuple[Any, List[int]]] = {}
        for position, command in enumerate(commands):
            key = command[3] if str(command[0]).upper() in ("EVAL", "EVALSHA") else command[1]
            node = self.client.nodes_manager.get_node_from_slot(
                key_slot(key if isinstance(key, bytes) else str(key).encode())
            )
            nodes.setdefault(node.name, (node, []))[1].append(position)
        return list(nodes.values())

    @staticmethod
    def _reply_of(request: Replicated, parts: Sequence[Tuple[List[int], Sequence[Any]]]) -> Tuple[List[Any], List[int]]:
        """The reply of a :class:`Replicated` request from each node's positions and replies
        (its commands', errors among them, then its ``WAIT``'s).

        :raises redis.exceptions.RedisError: when a ``WAIT`` failed.
        """
        replies: List[Any] = [None] * len(request.commands)
        counted = []
        for positions, node_replies in parts:
            for position, reply in zip(positions, node_replies):
                replies[position] = reply
            raise_first_error(node_replies[-1:])
            counted.append(int(node_replies[-1]))
        return replies, counted

    def _by_sha(self, request: Union[Commands, Replicated]) -> Plan[Any]:
        """Send ``request`` with the scripts the server holds named by digest
        (:mod:`.redis_scripts`), then again those of its commands the server answered
        ``NOSCRIPT`` (they ran nothing), with their text; then raise the first error, as a
        pipeline does. The reply is ``request``'s."""
        replicated = isinstance(request, Replicated)
        commands = request.commands if isinstance(request, Replicated) else request

        def sent(part: Commands) -> Union[Commands, Replicated]:
            return request._replace(commands=part) if isinstance(request, Replicated) else part

        first = by_sha(commands, self._scripts_held)
        replies, counted = (yield sent(first)) if replicated else ((yield sent(first)), [])
        learn_held(self._scripts_held, first, replies)
        missing = not_held(replies)
        if missing:
            again = [commands[position] for position in missing]
            second, more = (yield sent(again)) if replicated else ((yield sent(again)), [])
            learn_held(self._scripts_held, again, second)
            replies = list(replies)
            for position, reply in zip(missing, second):
                replies[position] = reply
            counted = [*counted, *more]  # each WAIT counted what its own connection wrote
        raise_first_error(replies)
        return (replies, counted) if replicated else replies

    def _send(self, request: Union[Commands, Alone, Replicated]) -> Any:
        if isinstance(request, Alone):
            return self.client.execute_command(*request.command, **self._one_node())
        return drive(self._by_sha(request), self._send_pipeline)

    def _send_pipeline(self, request: Union[Commands, Replicated]) -> Any:
        """Send ``request`` in one pipeline (one a node); its replies, errors among them."""
        if isinstance(request, Replicated):
            return self._send_replicated(request)
        return self._pipe(request).execute(raise_on_error=False)

    def _send_replicated(self, request: Replicated) -> Tuple[List[Any], List[int]]:
        """Each node's commands and its ``WAIT`` in one pipeline, on one of its connections
        (``WAIT`` counts the replicas that have what its connection wrote). A cluster's
        pipelines go to the nodes that own the slots, never redirected: a moved slot is an
        error, and the next attempt maps the slots again."""
        wait = ("WAIT", request.replicas, request.timeout_ms)
        if not self.in_cluster:
            pipe = self._pipe([*request.commands, wait])
            return self._reply_of(request, [(list(range(len(request.commands))), pipe.execute(raise_on_error=False))])
        try:
            if self._slots_stale:
                self.client.nodes_manager.initialize()
                self._slots_stale = False
            parts = []
            for node, positions in self._nodes_of(request.commands):
                pipe = self.client.get_redis_connection(node).pipeline(transaction=False)
                for command in [*(request.commands[p] for p in positions), wait]:
                    pipe.execute_command(*command)
                replies = pipe.execute(raise_on_error=False)
                raise_first_error(replies, but_not_held=True)  # here, where a moved slot marks the map stale
                parts.append((positions, replies))
        except BaseException:
            self._slots_stale = True
            raise
        return self._reply_of(request, parts)

    async def _asend(self, request: Union[Commands, Alone, Replicated]) -> Any:
        if isinstance(request, Alone):
            return await self.client.execute_command(*request.command, **self._one_node())
        return await adrive(self._by_sha(request), self._asend_pipeline)

    async def _asend_pipeline(self, request: Union[Commands, Replicated]) -> Any:
        """:meth:`_send_pipeline` for asyncio."""
        if isinstance(request, Replicated):
            return await self._asend_replicated(request)
        return await self._pipe(request).execute(raise_on_error=False)

    async def _asend_replicated(self, request: Replicated) -> Tuple[List[Any], List[int]]:
        """:meth:`_send_replicated` for asyncio."""
        wait = ("WAIT", request.replicas, request.timeout_ms)
        if not self.in_cluster:
            pipe = self._pipe([*request.commands, wait])
            replies = await pipe.execute(raise_on_error=False)
            return self._reply_of(request, [(list(range(len(request.commands))), replies)])
        try:
            if self._slots_stale:
                await self.client.nodes_manager.initialize()
                self._slots_stale = False
            parts = []
            for node, positions in self._nodes_of(request.commands):
                sent = [
                    PipelineCommand(i, *command)
                    for i, command in enumerate([*(request.commands[p] for p in positions), wait])
                ]
                await node.execute_pipeline(sent)
                replies = [command.result for command in sent]
                raise_first_error(replies, but_not_held=True)  # here, where a moved slot marks the map stale
                parts.append((positions, replies))
        except BaseException:
            self._slots_stale = True
            raise
        return self._reply_of(request, parts)

    @property
    def description(self) -> str:
        cluster = "cluster " if self.in_cluster else ""
        return f"{self.strategy} store {cluster}{self._description} namespace {self.namespace!r}"

    @property
    def in_cluster(self) -> bool:
        """Whether the client talks to a Redis Cluster."""
        return isinstance(getattr(self, "client", None), (RedisCluster, redis.asyncio.cluster.RedisCluster))

    def _redact(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def _reason(self, error: BaseException) -> str:
        return self._redact(f"{type(error).__name__}: {server_text(error)}")

    def _refusal(self, error: BaseException) -> Optional[str]:
        if isinstance(error, AuthenticationError):  # a ConnectionError to redis-py, yet permanent
            if self._password is None:
                return (
                    "the server wants a password and the URL has none: give it as redis://[user]:PASSWORD@host:port/db"
                )
            return "the server refused the URL's password (a wrong password, or an unknown or disabled user)"
        if not isinstance(error, ResponseError):  # no answer (refused, reset, timed out): try again
            return None
        text = server_text(error)
        if isinstance(error, _TRANSIENT_REPLY_ERRORS) or text.startswith(_TRANSIENT_REPLIES):
            return None
        if isinstance(error, NoPermissionError):
            commands = "EVAL, EVALSHA and BF.*" if self.strategy == "redisbloom" else "EVAL and EVALSHA"
            return (
                f"the server's ACL user {self._username or 'default'!r} lacks a permission this store "
                f"needs (it runs {commands} on the keys '{self.namespace}:*' and '{{{self.namespace}:*'): "
                f"grant them with ACL SETUSER"
            )
        if isinstance(error, ReadOnlyError):
            return "the server is a read-only replica: point the URL at its primary (INFO replication names it)"
        if isinstance(error, OutOfMemoryError):
            return (
                "the server is out of memory (maxmemory reached, and its maxmemory-policy evicts nothing): "
                "raise maxmemory, or free memory"
            )
        if text.startswith("WRONGTYPE"):
            return (
                f"keys of namespace {self.namespace!r} hold values of another type (something else "
                f"uses them): pick another namespace, or delete its keys"
            )
        if "unknown command" in text.lower() or "unknown redis command" in text.lower():
            if "BF." in text or self.strategy == "redisbloom":
                return _NO_REDISBLOOM
            return "the server does not know a command this store needs"
        return "the server refused a command this store needs"

    def _open(self) -> Plan[None]:
        yield from self._check_commands()
        self.meta = yield from self._open_namespace(self._wanted)
        yield from self._adopt_namespace()

    def _check_commands(self) -> Plan[None]:
        """Refuse a server that lacks one of :attr:`commands` (``COMMAND INFO`` answers nil for it).

        A server (or ACL user) that refuses ``COMMAND`` itself is not refused for that: the
        store's commands then speak for themselves at their first use, and it is taken to have
        none of the :attr:`optional_commands`.

        :raises StoreRefused: naming the missing commands.
        """
        wanted = (*self.commands, "WAIT") if self.durability.waits else self.commands  # replicated: WAIT too
        try:
            known = yield Alone(("COMMAND INFO", *wanted, *self.optional_commands))
        except ResponseError as exc:
            if self._refusal(exc) is None:  # LOADING, BUSY...: not now, try again
                raise
            return
        optional = zip(self.optional_commands, known[len(wanted) :])
        self.server_has = frozenset(name for name, info in optional if info)
        missing = [name for name, info in zip(wanted, known) if not info]
        if not missing:
            return
        if any(name.startswith("BF.") for name in missing):
            problem = _NO_REDISBLOOM
        else:
            problem = (
                "the server lacks commands this store needs (renamed or disabled with "
                "rename-command in its configuration, or not implemented by this server): "
                f"{', '.join(missing)}"
            )
        raise StoreRefused(self.description, 1, f"COMMAND INFO knows no {', '.join(missing)}", problem)

    def _record_aliases(self, aliases: Aliases) -> Plan[None]:
        yield from self._write(redis_aliases.record_commands(self.namespace, aliases, self.window, self.clock))

    def _read_aliases(self, fingerprints: Fingerprints) -> Plan[List[Optional[bytes]]]:
        return redis_aliases.read_aliases(self.namespace, fingerprints, self.window, self.clock)

    def _joined(
        self, first: Union[Commands, Replicated], second: Union[Commands, Replicated]
    ) -> Tuple[Any, Callable[[Any], Tuple[Any, Any]]]:
        """Two pipelines as one (a :class:`Replicated` one when either waits for replicas)."""
        parts = [part.commands if isinstance(part, Replicated) else part for part in (first, second)]
        cut = len(parts[0])
        commands = [*parts[0], *parts[1]]
        waits = next((part for part in (first, second) if isinstance(part, Replicated)), None)
        if waits is None:
            return commands, lambda replies: (replies[:cut], replies[cut:])

        def split(reply: Tuple[List[Any], List[int]]) -> Tuple[Any, Any]:
            replies, counted = reply
            head, tail = replies[:cut], replies[cut:]
            return (
                (head, counted) if isinstance(first, Replicated) else head,
                (tail, counted) if isinstance(second, Replicated) else tail,
            )

        return Replicated(commands, waits.replicas, waits.timeout_ms), split

    def _open_namespace(self, wanted: Dict[str, str]) -> Plan[Dict[str, str]]:
        """Create the namespace record or check ours against it; returns the record."""
        flat = [item for pair in wanted.items() for item in pair]
        (reply,) = yield [("EVAL", _OPEN_NAMESPACE, 1, self.meta_key, *flat)]
        stored = {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}
        check_namespace_fields(
            f"namespace {self.namespace!r}",
            self._must_match,
            [stored.get(field) for field in self._must_match],
            [wanted[field] for field in self._must_match],
        )
        check_window_stamp(f"namespace {self.namespace!r}", stored.get("window"), self.window)
        return stored

    def _adopt_namespace(self) -> Plan[None]:
        """Set up what the namespace record (``self.meta``) decides; a failure closes the client."""
        return
        yield  # no request here; RedisBloom reserves its filter

    # -- operators' tools ---------------------------------------------------------------------

    @classmethod
    def read_record(cls, namespace: str, location: Any) -> Optional[Dict[str, str]]:
        url = str(check_redis_url("redis_url", location))
        try:
            client = connect(url)
            try:
                stored = client.hgetall(f"{namespace}:meta")
            finally:
                client.close()
        except redis.AuthenticationError as exc:
            raise StoreRefused(
                redact_url(url), 1, redact_text(str(exc)), "the server refused the URL's password"
            ) from None
        except redis.RedisError as exc:
            raise StoreUnavailable(redact_url(url), 1, redact_text(f"{type(exc).__name__}: {exc}")) from None
        fields = cast(Dict[bytes, bytes], stored)  # the client returns bytes (no decode_responses)
        return {key.decode(): value.decode() for key, value in fields.items()} or None

    def one_node(self) -> redis.Redis:
        """A client of one node: the store's own, or a cluster's default node."""
        if isinstance(self.client, RedisCluster):
            return self.client.get_redis_connection(self.client.get_default_node())
        return cast("redis.Redis", self.client)

    def server_facts(self) -> ServerFacts:
        return self.with_retries(lambda: _server_facts(self.one_node()))

    def delete_namespace(self) -> int:
        return self.with_retries(self._delete_keys)

    def _delete_keys(self) -> int:
        name = self.namespace.encode("ascii")
        # Every key of a namespace (docs/stores.md): its record and RedisBloom's filter, and the keys
        # under its hash tags {<namespace>:<group>}, {<namespace>:bf} and {<namespace>:aliases:<group>};
        # a round's tags differ.
        own_tag = re.compile(rb"\{%s:(?:\d+|bf|aliases:\d+)\}" % re.escape(name))
        deleted = int(self.client.unlink(b"%s:meta" % name, b"%s:bf" % name))
        batch: List[bytes] = []
        for key in self.client.scan_iter(match=b"{%s:*" % name, count=DELETE_BATCH):
            if own_tag.match(key):
                batch.append(key)
            if len(batch) == DELETE_BATCH:
                deleted += int(self.client.unlink(*batch))
                batch = []
        if batch:
            deleted += int(self.client.unlink(*batch))
        return deleted

    def _sentinels(self) -> List[Any]:
        """The clients of the Sentinels a ``redis+sentinel://`` client asks (none otherwise)."""
        manager = getattr(getattr(self.client, "connection_pool", None), "sentinel_manager", None)
        return list(manager.sentinels) if manager is not None and self._url is not None else []

    def close(self) -> None:
        if self.client is not None:
            for sentinel in self._sentinels():
                sentinel.close()
            self.client.close()

    async def aclose(self) -> None:
        if self.client is not None:
            for sentinel in self._sentinels():
                await sentinel.aclose()
            await self.client.aclose()
            if self._url is not None:  # ours: a later open connects again
                self.client = None


def _server_facts(client: redis.Redis) -> ServerFacts:
    info: Dict[str, Any] = client.info("server")
    memory: Dict[str, Any] = client.info("memory")
    name, version = ("Valkey", info["valkey_version"]) if "valkey_version" in info else ("Redis", info["redis_version"])
    modules = tuple(sorted(_module_text(module) for module in client.module_list()))
    used, maxmemory = int(memory["used_memory"]), int(memory.get("maxmemory", 0))
    if maxmemory:
        return ServerFacts(f"{name} {version}", modules, used, maxmemory, "maxmemory")
    return ServerFacts(
        f"{name} {version}",
        modules,
        used,
        int(memory["total_system_memory"]),
        "the machine's memory (no maxmemory set)",
    )


def _module_text(module: Dict[bytes, Any]) -> str:
    """``name major.minor.patch`` from a ``MODULE LIST`` entry (its version is one integer, 20802)."""
    version = int(module[b"ver"])
    return f"{module[b'name'].decode()} {version // 10000}.{version // 100 % 100}.{version % 100}"


#: claim_key on each claim of a call, in order: the ``claim_all`` of a store whose claims take
#: one command each (see :attr:`GroupedScriptStore._primitives`), put after its ``claim_key``.
ONE_BY_ONE = lua("one_by_one")

# First of every script of a grouped store, so that the primitives can read it. KEYS[1] and
# KEYS[2] are the group's lease records, KEYS[3] the call's receipt; TAG is the group's hash tag
# ("{<namespace>:<g>}", KEYS[1] less ":leases"), which starts the name of every claim key of the
# group. ARGV's last three are the window's: GEN is the current generation (-1 without a
# window), OLDEST the oldest live one, FORGET_AT (Unix seconds) when the current one is
# forgotten, by the client's clock (the one clock every layer ages by). decimal(x) is an
# integer's text, each made once per call: Lua turns a number into text with sprintf("%.14g"),
# and redis.call does ("%.17g") for every number given to it, a cost per key that a script
# looping over keys must not pay.
_AGE = lua("age")

# Shared by every script of a grouped store. ARGV[1] = how many of the records are claims (the
# others are reads), ARGV[2] = seconds a receipt lives (0: none), ARGV[3] = the records, one
# string of WIDTH bytes per key (the store's primitives say what a record holds: locate() turns
# it into the claim key and its member, nil for stores whose keys have none), ARGV[4] and
# ARGV[5] = the claims' canonical URLs when leasing: where each ends (little-endian uint32) and
# the URLs back to back, empty otherwise. The step's own arguments follow from ARGV[6]. Fixed
# records in one argument cost the client one argument per group, not one per key, and the
# answer is one string too (as_text). A claim is identified in the lease records by claim_id()
# of the store. RECEIPT holds the answers of an earlier attempt of this call whose reply was
# lost, or nil. The arguments come before the primitives (_CALL), so that claim_all can read
# the records itself; the rest after them (_PRELUDE), as record() needs the store's locate().
_CALL = lua("call")
_PRELUDE = RECEIPTS_LUA + lua("prelude")

# ARGV from 6: ttl, owner, lease_ms, the claims' runs (see GroupedScriptStore._runs), then the
# window's. Per key: 1 won, 0 already claimed, 2 held by another worker's open lease (claims);
# 1/0 (reads). A claim whose lease expired, or was handed back, is won again (and leased or
# made lasting). The claims are first tried together (claim_all(count, ttl, runs): one
# primitive call for all of them, which a store may answer with fewer commands than one per
# key; it returns the positions of the claims it did not win, ascending), then each of those is
# checked against the lease records, in order (not at all while the group holds none). The
# answer is built from the claims lost: a call of new pages costs no step per claim here.
_CLAIM = lua("claim")

# ARGV from 6: action (done, release or renew), ttl, owner, lease_ms, then the window's (every
# key is a claim). Per key: 1 when the owner held the lease and the action was applied, 0 when
# refused.
_SETTLE = lua("settle")

# KEYS: the group's lease records. ARGV: limit, owner, lease_ms. Each lease past its deadline
# leaves the deadline set once: handed back free (holder " <url>": anyone's claim wins it), or,
# with lease_ms > 0, leased to owner at once. Returns the canonical URLs.
_EXPIRED = lua("expired")


class GroupedScriptStore(RedisStore):
    """A Redis store answered by one script call per hash-tag group per batch, with leases.

    Each group ``{<namespace>:<g>}`` holds the claim keys of its fingerprints and two lease
    records: ``{<namespace>:<g>}:leases`` (sorted set: claim id -> deadline in milliseconds of
    the Redis server's clock) and ``{<namespace>:<g>}:lease-urls`` (hash: claim id ->
    ``"<owner> <canonical URL>"``, owner empty once handed back), and, for a few minutes,
    ``{<namespace>:<g>}:receipt:<token>``: the answers of a call that won something, so that
    a retry of that call after a lost reply gets them again. Subclasses give the Lua
    primitives on one claim (:attr:`_primitives`: ``WIDTH`` and ``locate`` of a record,
    ``claim_key``, ``claimed``, ``visit``, ``unclaim``, ``claim_id``), ``claim_all`` (the claims
    of a call tried at once, as ``claim_key`` on each in order would: :data:`ONE_BY_ONE`, or
    fewer commands) and each fingerprint's group and record (:meth:`_records`).
    """

    supports_leases = True
    commands = (*RedisStore.commands, "ZADD", "ZSCORE", "ZREM", "ZRANGEBYSCORE", "HEXISTS", "HGET", "HDEL", "TIME")
    #: Lua defining the store's primitives on one claim key ``k`` and its member ``m``.
    _primitives: ClassVar[str] = ""

    def __init__(self, url: Optional[str] = None, *, groups: int = DEFAULT_GROUPS, **kwargs: Any) -> None:
        integer_in("groups", groups, 1, 16384)
        layout = {"groups": str(groups), **kwargs.pop("layout", {})}
        super().__init__(url, layout=layout, **kwargs)

    def _adopt_namespace(self) -> Plan[None]:
        yield from super()._adopt_namespace()
        #: Adopted from the namespace record: every worker must split keys the same way.
        self.groups = int(self.meta["groups"])
        self._tags = [hash_tag(self.namespace, g) for g in range(self.groups)]
        self._lease_keys = [(tag + b":leases", tag + b":lease-urls") for tag in self._tags]
        code = _AGE + _CALL + self._namespace_primitives() + _PRELUDE
        self._claim_script, self._settle_script = code + _CLAIM, code + _SETTLE

    def _namespace_primitives(self) -> str:
        """The primitives of the namespace's layout (read once its record is adopted)."""
        return self._primitives

    @abc.abstractmethod
    def _records(self, fingerprints: Fingerprints) -> Tuple[np.ndarray, np.ndarray]:
        """The group of each fingerprint, and its record: a row of a numpy array whose bytes the
        store's Lua ``locate`` reads as its claim key (after the group's tag) and its member."""

    def _runs(self, records: np.ndarray) -> Optional[np.ndarray]:
        """The run of each record (uint64), for a store whose ``claim_all`` answers a group's
        claims in runs (those sharing a key): the client then orders each group's claims by run
        (stable) and sends each run's length, so the script reads and writes a key once per run
        without grouping the claims itself. None (the default): claims in the order given."""
        return None

    def _ttl(self) -> int:
        """Seconds a lasting claim lives (0: forever); with a window, 1 (the window decides)."""
        return 1 if self.window is not None else 0

    def _age(self) -> Tuple[int, ...]:
        """The scripts' window arguments, last of their arguments: current generation, oldest
        live one, and when the current one is forgotten (whole seconds, rounded up); ``(-1, 0,
        0)`` without a window. A layout may put its own before them."""
        if self.window is None:
            return -1, 0, 0
        now = self.clock()
        generation = self.window.generation(now)
        return generation, generation - self.window.generations, math.ceil(self.window.forgotten_at(generation))

    def _call_groups(
        self,
        script: str,
        fingerprints: Fingerprints,
        head: Tuple[Any, ...],
        claims: int,
        token: Optional[bytes],
        urls: Optional[Sequence[str]] = None,
        runs: bool = False,
    ) -> Plan[np.ndarray]:
        """One ``EVAL`` of ``script`` per group of ``fingerprints``, all in one pipeline.

        A group's call gets its lease records and its receipt key, then how many of its records
        are claims (those at positions below ``claims``), the receipt's life in seconds (0, so
        no receipt, without ``token`` or claims), its records as one string, the claims' URLs
        (``urls[p]`` for each claim at position ``p``, when given) as two strings, ``head``,
        the lengths of its claims' runs when ``runs`` (little-endian uint32; empty for a store
        without runs), and the window's arguments.

        :returns: the script's answer for each fingerprint, in order (uint8).
        """
        groups, records = self._records(fingerprints)
        run_of = self._runs(records) if runs else None
        order = group_order(groups, claims, run_of)
        ordered = records[order]
        runs_ordered = run_of[order] if run_of is not None else None
        width = ordered.nbytes // max(len(ordered), 1)
        blob = ordered.tobytes()
        starts = np.flatnonzero(np.diff(groups[order])) + 1
        bounds = list(zip([0, *starts.tolist()], [*starts.tolist(), len(order)]))
        is_claim = np.concatenate([[0], np.cumsum(order < claims)])
        in_claims_of = [int(is_claim[end] - is_claim[start]) for start, end in bounds]
        lengths = run_lengths(runs_ordered, [(start, n) for (start, _), n in zip(bounds, in_claims_of)])
        commands: List[Tuple[Any, ...]] = []
        extras: List[Tuple[Any, ...]] = []
        age = self._age()
        for (start, end), in_claims, run_bytes in zip(bounds, in_claims_of, lengths):
            group = int(groups[order[start]])
            ends, joined = b"", b""
            if urls is not None:
                encoded = [urls[p].encode("utf-8") for p in order[start : start + in_claims].tolist()]
                ends = np.cumsum([len(u) for u in encoded], dtype="<u4").tobytes()
                joined = b"".join(encoded)
            receipt = self._tags[group] + b":receipt:" + (token or b"")
            commands.append(
                (
                    "EVAL",
                    script,
                    3,
                    *self._lease_keys[group],
                    receipt,
                    in_claims,
                    self.receipt_seconds if token and in_claims else 0,
                    blob[start * width : end * width],
                    ends,
                    joined,
                    *head,
                    *((run_bytes,) if runs else ()),
                    *age,
                )
            )
            extras.extend(self._group_extras(group, in_claims))
        replies = yield from self._write([*commands, *extras], writes=claims > 0)
        answers = np.empty(len(order), dtype=np.uint8)
        answers[order] = read_answers(replies[: len(commands)])
        return answers

    def _group_extras(self, group: int, claims: int) -> List[Tuple[Any, ...]]:
        """Commands sent after a group's script, in the same pipeline, for a call with ``claims``
        claims in it (their replies are not answers): upkeep a layout does as it goes."""
        return []

    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> Plan[ClaimAnswers]:
        n_claims = len(claims)
        owner, lease_ms, urls = (
            ("", 0, None) if lease is None else (lease.owner, check_lease_seconds(lease.seconds), lease.urls)
        )
        answers = yield from self._call_groups(
            self._claim_script,
            claims + reads,
            (self._ttl(), owner, lease_ms),
            n_claims,
            token,
            urls,
            runs=True,
        )
        claimed = answers[:n_claims]
        held = tuple(np.flatnonzero(claimed == 2).tolist())
        return ClaimAnswers((claimed == 1).tolist(), (answers[n_claims:] == 1).tolist(), held)

    def _settle(
        self, action: str, fingerprints: Fingerprints, owner: str, lease_ms: int, token: bytes
    ) -> Plan[List[bool]]:
        # A renew repeated gives the right answer by itself (the owner still holds the lease and
        # its deadline moves again): no receipt. A done or release repeated would be refused.
        answers = yield from self._call_groups(
            self._settle_script,
            fingerprints,
            (action, self._ttl(), owner, lease_ms),
            len(fingerprints),
            None if action == "renew" else token,
        )
        return (answers == 1).tolist()  # type: ignore[no-any-return]

    def leased_ids(self) -> Set[bytes]:
        """The claim ids under a lease now, open or past their deadline (the fingerprint's 16
        bytes for ``set``), in one pipeline.

        :raises StoreUnavailable: when Redis cannot be reached.
        """

        def read() -> Set[bytes]:
            pipe = self.client.pipeline(transaction=False)
            for leases, _ in self._lease_keys:
                pipe.zrange(leases, 0, -1)
            return {bytes(claim) for members in pipe.execute() for claim in members}

        return self.with_retries(read)

    def lease_counts(self) -> Optional[Tuple[int, int]]:
        def count() -> Tuple[int, int]:
            seconds, micros = self.client.time()
            now_ms = seconds * 1000 + micros // 1000
            pipe = self.client.pipeline(transaction=False)
            for leases, _ in self._lease_keys:
                pipe.zcount(leases, f"({now_ms}", "+inf")
                pipe.zcount(leases, "-inf", now_ms)
            replies = pipe.execute()
            return sum(replies[0::2]), sum(replies[1::2])

        return self.with_retries(count)

    def _expired(self, limit: int, owner: str, lease_ms: int) -> Plan[List[str]]:
        """Rounds of one pipeline: the limit is spread over the groups that may hold more.

        A group that hands back less than its share is exhausted; the others are asked again
        with what is left of the limit, so one call returns ``limit`` URLs whenever that many
        expired leases exist, and never more.
        """
        urls: List[str] = []
        pending = list(range(self.groups))
        random.shuffle(pending)  # no group is always last in line
        while pending and len(urls) < limit:
            left = limit - len(urls)
            shares = [left // len(pending) + (1 if i < left % len(pending) else 0) for i in range(len(pending))]
            asked = [(g, share) for g, share in zip(pending, shares) if share]
            replies = yield from self._write(
                [("EVAL", _EXPIRED, 2, *self._lease_keys[g], share, owner, lease_ms) for g, share in asked]
            )
            exhausted = set()
            for (group, share), reply in zip(asked, replies):
                urls.extend(url.decode("ascii") for url in reply)
                if len(reply) < share:
                    exhausted.add(group)
            pending = [g for g in pending if g not in exhausted]
        return urls
