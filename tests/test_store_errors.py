"""Permanent store errors fail at once with what to fix; transient ones are retried.

Each permanent error is made for real: a redis-server without RedisBloom, one with a password,
a replica, ACL users without a command or a key, ``maxmemory`` reached, keys of another type,
and SQLite paths that are not writable databases. The server's own error counters
(``INFO errorstats``) prove that exactly one attempt reached it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional, Sequence

import pytest
import redis
from conftest import SERVER_KINDS, RedisServer, find_redisbloom, required_redis_server, required_server, serve_redis

from crawldedup import Deduplicator, StoreRefused, StoreUnavailable
from crawldedup.stores import RetryPolicy, SQLiteStore
from crawldedup.stores.factory import open_store

DIGEST = "0123456789abcdef"
#: Retries that a permanent error must not use: a retried error would count 4 on the server.
RETRY = RetryPolicy(retries=3, backoff_seconds=0.01, max_backoff_seconds=0.02)
PASSWORD = "right-Hv62"
REDIS_STRATEGIES = ["set", "sharded-set", "bloom"]
COMMAND = [sys.executable, "-m", "crawldedup"]


def make(strategy: str, url: str, namespace: str = "errors"):
    return open_store(
        strategy,
        namespace=namespace,
        policy_digest=DIGEST,
        redis_url=url,
        capacity=10_000,
        error_rate=0.001,
        retry=RETRY,
    )


def error_replies(admin: redis.Redis) -> Dict[str, int]:
    """Error replies the server sent since its last CONFIG RESETSTAT, by error code."""
    return {name[len("errorstat_") :]: fields["count"] for name, fields in admin.info("errorstats").items()}


def handshake_errors(admin: redis.Redis) -> Counter:
    """Error replies a new client's handshake gets from the server (redis-py 8 asks
    ``CLIENT SETINFO``, which Redis 7.0 does not know): sent once per connection."""
    admin.config_resetstat()
    settings = admin.connection_pool.connection_kwargs
    client = redis.Redis(**{name: settings.get(name) for name in ("host", "port", "username", "password")})
    client.ping()
    client.close()
    return Counter(error_replies(admin))


def refused_once(
    admin: redis.Redis, call: Callable[[], object], code: str, *words: str, handshake: bool = True
) -> StoreRefused:
    """``call`` raises StoreRefused after one attempt: one ``code`` error reply on the server,
    besides those of one client's handshake (none when the handshake itself fails)."""
    expected = handshake_errors(admin) if handshake else Counter()
    expected[code] += 1
    admin.config_resetstat()
    with pytest.raises(StoreRefused) as raised:
        call()
    assert raised.value.attempts == 1
    assert Counter(error_replies(admin)) == expected
    message = str(raised.value)
    for word in words:
        assert word in message, message
    return raised.value


def run_filter(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*COMMAND, "filter", "--state", "s.bloom", *map(str, args)],
        cwd=cwd,
        input=b"https://shop.example/a\n",
        capture_output=True,
        timeout=60,
    )


def assert_one_line(result: subprocess.CompletedProcess, code: int, *words: str) -> str:
    err = result.stderr.decode()
    assert result.returncode == code, (result.returncode, err)
    assert "Traceback" not in err and result.stdout == b""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _server(extra_args: Sequence[str] = (), module: Optional[str] = "default") -> Iterator[RedisServer]:
    binary = required_redis_server()
    yield from serve_redis(binary, find_redisbloom() if module == "default" else module, extra_args)


@pytest.fixture(scope="module")
def bare_redis() -> Iterator[RedisServer]:
    """A redis-server without the RedisBloom module."""
    yield from _server(module=None)


@pytest.fixture(scope="module")
def password_redis() -> Iterator[RedisServer]:
    """A redis-server that wants a password."""
    yield from _server(["--requirepass", PASSWORD])


@pytest.fixture(scope="module")
def replica_redis(redis_server: RedisServer) -> Iterator[RedisServer]:
    """A read-only replica of the session's Redis."""
    yield from _server(["--replicaof", "127.0.0.1", str(redis_server.port)])


@pytest.fixture
def admin(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


# ---------------------------------------------------------------------------- permanent: Redis


def test_bloom_without_the_module_says_how_to_load_it(bare_redis):
    admin = bare_redis.client()
    admin.config_resetstat()
    with pytest.raises(StoreRefused) as raised:
        make("bloom", bare_redis.url)
    # Refused at open by COMMAND INFO, before any BF.* command could fail on the server.
    message = str(raised.value)
    for words in ("lacks the RedisBloom module", "--loadmodule", "Redis Stack", "BF.RESERVE, BF.MADD, BF.MEXISTS"):
        assert words in message, message
    assert raised.value.attempts == 1
    assert isinstance(raised.value, StoreUnavailable)  # `except StoreUnavailable` still catches it
    assert "cmdstat_eval" not in admin.info("commandstats") and admin.dbsize() == 0  # not even the namespace record
    admin.close()


#: A command each store sends only from its scripts, disabled in the server's configuration.
DISABLED = {"set": "PERSIST", "sharded-set": "SADD"}


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_a_server_without_a_command_of_the_store_is_refused_at_open_naming_it(kind):
    binary = required_server(kind)
    disabled = [arg for command in DISABLED.values() for arg in ("--rename-command", command, "")]
    server = next(serve := serve_redis(binary, None, disabled))
    try:
        admin = server.client()
        for strategy, command in DISABLED.items():
            with pytest.raises(StoreRefused) as raised:
                make(strategy, server.url)
            message = str(raised.value)
            assert raised.value.attempts == 1
            assert "lacks commands this store needs" in message and "rename-command" in message, message
            assert message.endswith(f"(COMMAND INFO knows no {command})"), message
        assert admin.dbsize() == 0  # refused before the namespace record was written
        admin.close()
    finally:
        serve.close()


@pytest.mark.parametrize("strategy", REDIS_STRATEGIES)
def test_wrong_password_is_refused_once_and_redacted(password_redis, strategy):
    admin = redis.Redis(port=password_redis.port, password=PASSWORD)
    url = f"redis://:wrong-Pq27@127.0.0.1:{password_redis.port}/0"
    refused = refused_once(
        admin, lambda: make(strategy, url), "WRONGPASS", "refused the URL's password", ":***@", handshake=False
    )
    assert "wrong-Pq27" not in str(refused) and PASSWORD not in str(refused)
    with make(
        strategy, f"redis://:{PASSWORD}@127.0.0.1:{password_redis.port}/0", namespace=f"auth-{strategy}"
    ) as store:
        assert store.claim_many([b"p" * 16]) == [True]
    admin.close()


@pytest.mark.parametrize("strategy", REDIS_STRATEGIES)
def test_missing_password_is_refused_once(password_redis, strategy):
    admin = redis.Redis(port=password_redis.port, password=PASSWORD)
    refused_once(
        admin, lambda: make(strategy, password_redis.url), "NOAUTH", "wants a password", "has none", handshake=False
    )
    admin.close()


@pytest.mark.parametrize("strategy", REDIS_STRATEGIES)
def test_acl_user_without_eval_is_refused_once_naming_the_command(redis_url, admin, strategy):
    admin.acl_setuser("no-eval", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-eval"])
    try:
        url = redis_url.replace("redis://", "redis://no-eval:pw@")
        refused_once(admin, lambda: make(strategy, url), "NOPERM", "ACL user 'no-eval'", "'eval'", "ACL SETUSER")
    finally:
        admin.acl_deluser("no-eval")


@pytest.mark.parametrize("strategy", REDIS_STRATEGIES)
def test_acl_user_without_the_namespace_keys_is_refused_once_naming_them(redis_url, admin, strategy):
    admin.acl_setuser("other-keys", enabled=True, passwords=["+pw"], keys=["other:*"], commands=["+@all"])
    try:
        url = redis_url.replace("redis://", "redis://other-keys:pw@")
        refused_once(admin, lambda: make(strategy, url, namespace="crawl7"), "NOPERM", "'crawl7:*'", "'{crawl7:*'")
    finally:
        admin.acl_deluser("other-keys")


@pytest.mark.parametrize("strategy", REDIS_STRATEGIES)
def test_read_only_replica_is_refused_once(replica_redis, strategy):
    replica = replica_redis.client()
    # A namespace of its own: one that the primary already holds needs no write to open.
    refused_once(
        replica,
        lambda: make(strategy, replica_redis.url, namespace=f"replica-{strategy}"),
        "READONLY",
        "read-only replica",
        "primary",
    )
    replica.close()


@pytest.mark.parametrize("strategy", REDIS_STRATEGIES)
def test_full_maxmemory_is_refused_once_and_the_batch_can_be_retried(redis_url, admin, strategy):
    fps = [b"m" * 16]  # one fingerprint, one group: one script call per attempt
    with make(strategy, redis_url) as store:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", "1")  # below what an empty server uses
        try:
            refused_once(admin, lambda: store.claim_many(fps), "OOM", "out of memory", "maxmemory", handshake=False)
        finally:
            admin.config_set("maxmemory", "0")
        # Nothing of the batch was confirmed: the same batch, once memory is back, wins every page.
        assert store.claim_many(fps) == [True] * len(fps)


@pytest.mark.parametrize("strategy", REDIS_STRATEGIES)
def test_namespace_keys_of_another_type_are_refused_once(redis_url, admin, strategy):
    admin.set("taken:meta", "a string, not the namespace record")
    refused_once(
        admin,
        lambda: make(strategy, redis_url, namespace="taken"),
        "WRONGTYPE",
        "keys of namespace 'taken' hold values of another type",
    )


def test_bad_redis_url_names_the_setting_and_hides_the_password():
    for call, name in [
        (lambda url: make("set", url), "url"),
        (lambda url: Deduplicator("set", redis_url=url), "redis_url (CRAWLDEDUP_REDIS_URL)"),
        (lambda url: Deduplicator.from_env({"DEDUP_STRATEGY": "set", "REDIS_URL": url}), "redis_url (REDIS_URL)"),
    ]:
        with pytest.raises(ValueError) as raised:
            call("redis://crawler:pw-Zq81x@localhost:abc/0")
        message = str(raised.value)
        assert message.startswith(f"{name} must be a URL starting with redis://, rediss://, unix://"), message
        assert "'redis://crawler:***@localhost:abc/0'" in message and "got 'abc'" in message
        assert "pw-Zq81x" not in message


@pytest.mark.parametrize(
    "url, problem",
    [
        ("http://localhost:6379/0", "unknown scheme http://"),
        ("redis://localhost:0/0", "port must be a number in [1, 65535], got 0"),
        ("redis://localhost:70000/0", "port must be a number in [1, 65535], got '70000'"),
        ("redis://localhost:6379/first", "database must be a number, got 'first'"),
        ("redis://localhost:6379/0?socket_timeout=soon", "socket_timeout"),
    ],
)
def test_unusable_redis_urls_are_refused_before_connecting(url, problem):
    with pytest.raises(ValueError, match="redis_url \\(CRAWLDEDUP_REDIS_URL\\) must be") as raised:
        Deduplicator("set", redis_url=url)
    assert problem in str(raised.value)


# ---------------------------------------------------------------------------- transient: retried


def test_busy_server_is_retried_until_it_answers(redis_url, admin):
    """BUSY (a long script running) is transient: the claim waits it out through retries."""
    admin.config_set("busy-reply-threshold", "50")
    spin = (
        "local s = redis.call('TIME') repeat local t = redis.call('TIME') "
        "until (t[1] - s[1]) * 1e6 + t[2] - s[2] > 1.5e6"
    )
    retry = RetryPolicy(retries=20, backoff_seconds=0.1, max_backoff_seconds=0.5)
    store = open_store(
        "set", namespace="busy", policy_digest=DIGEST, redis_url=redis_url, capacity=10, error_rate=0.01, retry=retry
    )
    spinner = threading.Thread(target=lambda: redis.Redis.from_url(redis_url).eval(spin, 0))
    probe = redis.Redis.from_url(redis_url)
    try:
        spinner.start()
        while True:  # until the server answers BUSY
            try:
                probe.ping()
            except redis.ResponseError as exc:
                assert str(exc).startswith("BUSY")
                break
        assert store.claim_many([b"b" * 16]) == [True]
        assert store.failed_attempts >= 1
    finally:
        spinner.join()
        admin.config_set("busy-reply-threshold", "5000")
        store.close()
        probe.close()


# ---------------------------------------------------------------------------- permanent: SQLite


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """Makes a file read-only, for root too (``chattr +i``); undone after the test."""
    made: list = []

    def make_read_only(path: Path) -> None:
        if os.geteuid() != 0:
            path.chmod(0o444)
            return
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("root ignores file modes and chattr +i is not available here")
        made.append(path)

    yield make_read_only
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def sqlite_case(kind: str, tmp_path: Path, immutable: Callable[[Path], None]) -> Path:
    """A path where the SQLite store cannot keep its claims, of one kind."""
    path = tmp_path / "claims.sqlite"
    if kind == "not-a-database":
        path.write_bytes(b"these are not the pages you are looking for\n" * 200)
    elif kind == "directory":
        path.mkdir()
    elif kind == "missing-directory":
        path = tmp_path / "missing" / "claims.sqlite"
    elif kind == "read-only":
        SQLiteStore(path, namespace="other", policy_digest=DIGEST).close()
        immutable(path)
    elif kind == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads every file")
        path.write_bytes(b"")
        path.chmod(0)
    return path


SQLITE_CASES = {
    "not-a-database": "the file is not a SQLite database",
    "directory": "the path is a directory",
    "missing-directory": "does not exist",
    "read-only": "the file is read-only",
    "unreadable": "cannot be read",
}


@pytest.mark.parametrize("kind", SQLITE_CASES)
def test_sqlite_path_that_is_not_a_writable_database_is_refused_once(tmp_path, immutable, kind):
    path = sqlite_case(kind, tmp_path, immutable)
    with pytest.raises(StoreRefused) as raised:
        SQLiteStore(path, namespace="crawl", policy_digest=DIGEST, retry=RETRY)
    assert raised.value.attempts == 1
    assert str(raised.value).startswith(f"sqlite store {str(path)!r}")
    assert SQLITE_CASES[kind] in raised.value.problem
    with pytest.raises(StoreRefused, match=str(path)):  # through the Deduplicator too
        Deduplicator("sqlite", sqlite_path=path)


# ---------------------------------------------------------------------------- through the CLI


@pytest.mark.parametrize("kind", SQLITE_CASES)
def test_cli_sqlite_path_that_is_not_a_writable_database(tmp_path, immutable, kind):
    path = sqlite_case(kind, tmp_path, immutable)
    result = run_filter(["--strategy", "sqlite", "--sqlite", path], tmp_path)
    assert_one_line(result, 6, str(path), SQLITE_CASES[kind])


def cli_refused_once(
    admin: redis.Redis, args: Sequence[str], cwd: Path, code: Optional[str], *words: str, handshake: bool = True
) -> str:
    """``crawldedup filter ARGS`` fails with one line and exit code 6 after one attempt (counted as
    in :func:`refused_once`; ``code`` None: refused without an error reply); returns the line."""
    expected = handshake_errors(admin) if handshake else Counter()
    if code is not None:
        expected[code] += 1
    admin.config_resetstat()
    (cwd / "s.bloom").unlink(missing_ok=True)  # a state file belongs to one namespace
    line = assert_one_line(run_filter(args, cwd), 6, *words)
    assert Counter(error_replies(admin)) == expected
    return line


def test_cli_bloom_without_the_module(tmp_path, bare_redis):
    admin = bare_redis.client()
    # COMMAND INFO finds no BF.* command at open: no command fails on the server.
    cli_refused_once(
        admin,
        ["--strategy", "bloom", "--redis-url", bare_redis.url],
        tmp_path,
        None,
        "lacks the RedisBloom module",
        "--loadmodule",
    )
    admin.close()


def test_cli_wrong_and_missing_password(tmp_path, password_redis):
    admin = redis.Redis(port=password_redis.port, password=PASSWORD)
    wrong = f"redis://:wrong-Pq27@127.0.0.1:{password_redis.port}/0"
    line = cli_refused_once(
        admin,
        ["--strategy", "set", "--redis-url", wrong],
        tmp_path,
        "WRONGPASS",
        "refused the URL's password",
        ":***@",
        handshake=False,
    )
    assert "wrong-Pq27" not in line
    cli_refused_once(
        admin,
        ["--strategy", "set", "--redis-url", password_redis.url],
        tmp_path,
        "NOAUTH",
        "wants a password",
        handshake=False,
    )
    admin.close()


def test_cli_acl_wrong_type_read_only_and_oom(tmp_path, redis_url, admin, replica_redis):
    admin.acl_setuser("no-eval", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-eval"])
    admin.set("taken:meta", "a string")
    replica = replica_redis.client()
    try:
        cli_refused_once(
            admin,
            ["--strategy", "sharded-set", "--redis-url", redis_url.replace("redis://", "redis://no-eval:pw@")],
            tmp_path,
            "NOPERM",
            "ACL user 'no-eval'",
            "'eval'",
        )
        cli_refused_once(
            admin,
            ["--strategy", "sharded-set", "--redis-url", redis_url, "--namespace", "taken"],
            tmp_path,
            "WRONGTYPE",
            "another type",
        )
        cli_refused_once(
            replica,
            ["--strategy", "set", "--redis-url", replica_redis.url, "--namespace", "replica-cli"],
            tmp_path,
            "READONLY",
            "read-only replica",
        )
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", "1")
        cli_refused_once(admin, ["--strategy", "set", "--redis-url", redis_url], tmp_path, "OOM", "out of memory")
    finally:
        admin.config_set("maxmemory", "0")
        admin.acl_deluser("no-eval")
        replica.close()


def test_cli_bad_redis_url_names_the_option(tmp_path):
    result = run_filter(["--strategy", "set", "--redis-url", "redis://crawler:pw-Zq81x@localhost:abc/0"], tmp_path)
    line = assert_one_line(
        result, 2, "--redis-url", "'redis://crawler:***@localhost:abc/0'", "got 'abc'", "see crawldedup filter --help"
    )
    assert "pw-Zq81x" not in line
    assert not (tmp_path / "s.bloom").exists()


def test_cli_bad_redis_url_variable_names_the_variable(tmp_path):
    result = subprocess.run(
        [*COMMAND, "filter", "--state", "s.bloom", "--strategy", "set"],
        cwd=tmp_path,
        input=b"https://shop.example/a\n",
        capture_output=True,
        timeout=60,
        env={**os.environ, "REDIS_URL": "redis://localhost:abc/0"},
    )
    assert_one_line(result, 2, "REDIS_URL", "got 'abc'", "see crawldedup filter --help")
