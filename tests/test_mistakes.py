"""What a new user trips on, each through the real command or API: a careless input gets one clear
line (or the exception the docs name), never a traceback, and the message says what is wrong
without rewriting anything else (tests/test_cli_faults.py runs the same faults over every
subcommand and option)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

import pytest
import redis
from conftest import RedisServer, find_redisbloom, required_redis_server, serve_redis

from crawldedup import StoreRefused
from crawldedup.cli.exits import ExitCode
from crawldedup.config import SETTINGS
from crawldedup.stores import PostgresStore, RedisKeyStore

COMMAND = [sys.executable, "-m", "crawldedup"]
VARIABLES = {name for setting in SETTINGS.values() for name in (setting.variable, *setting.aliases)}
LINKS = b"https://shop.example/item/1\nhttps://shop.example/item/2\n"


def run(
    args: Sequence[str], cwd: Path, stdin: bytes = b"", stdout: Optional[int] = None, **env: str
) -> subprocess.CompletedProcess:
    """The command in a fresh interpreter, with none of the machine's settings."""
    environ = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    return subprocess.run(
        [*COMMAND, *map(str, args)],
        cwd=cwd,
        input=stdin,
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**environ, **env},
        timeout=120,
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    err = result.stderr.decode()
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crawldedup: error: "), err
    return lines[0]


# ----- 1. tracebacks shown to a CLI user ----------------------------------------------------------


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    state = tmp_path / "crawldedup.bloom"
    assert run(["filter", "--state", state, "--capacity", "1000"], tmp_path, LINKS).returncode == 0
    return state


@pytest.mark.parametrize(
    "args",
    [
        ["info", "crawldedup.bloom"],
        ["doctor", "--strategy", "sqlite", "--sqlite", "d.sqlite", "--samples", "10", "--max-round-trip-ms", "60000"],
        ["info", "--help"],
        ["--version"],
    ],
    ids=["info", "doctor", "help", "version"],
)
def test_a_full_stdout_is_one_line_and_exit_code_4(tmp_path: Path, state_file: Path, args: List[str]):
    with open("/dev/full", "wb") as full:
        result = run(args, tmp_path, stdout=full.fileno())
    assert result.returncode == ExitCode.IO
    assert one_error_line(result) == "crawldedup: error: cannot write stdout: No space left on device"


def test_a_closed_stdout_is_one_line_and_exit_code_4(tmp_path: Path, state_file: Path):
    result = subprocess.run(
        ["sh", "-c", " ".join([*COMMAND, "info", "crawldedup.bloom"]) + " >&-"], cwd=tmp_path, capture_output=True
    )
    assert result.returncode == ExitCode.IO
    assert one_error_line(result) == "crawldedup: error: cannot write stdout: Bad file descriptor"


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_refuses_a_port_out_of_range(tmp_path: Path, port: str):
    result = run(["serve", "--port", port], tmp_path)
    assert result.returncode == ExitCode.USAGE
    line = one_error_line(result)
    assert "--port" in line and "[0, 65535]" in line and repr(port) in line


# ----- 2. password redaction rewrites the message -------------------------------------------------

PASSWORD = "the-Right-one"


@pytest.fixture(scope="module")
def password_redis() -> Iterator[RedisServer]:
    """A redis-server that wants a password."""
    yield from serve_redis(required_redis_server(), find_redisbloom(), ["--requirepass", PASSWORD])


@pytest.mark.redis
@pytest.mark.parametrize("wrong", ["e", "wrong", "r"])
def test_a_wrong_redis_password_is_hidden_and_only_it(password_redis: RedisServer, tmp_path: Path, wrong: str):
    url = f"redis://:{wrong}@127.0.0.1:{password_redis.port}/0"
    with pytest.raises(StoreRefused) as refused:
        RedisKeyStore(url, namespace="redaction", policy_digest="0123456789abcdef")
    api = str(refused.value)
    cli = one_error_line(run(["filter", "--strategy", "set", "--redis-url", url, "--state", "s.bloom"], tmp_path))
    for message in (api, cli):
        # Every word of the message as written, the password field alone masked.
        assert "the server refused the URL's password (a wrong password, or an unknown or disabled user)" in message
        assert f"redis://:***@127.0.0.1:{password_redis.port}/0" in message
        assert f":{wrong}@" not in message
    redis.Redis(port=password_redis.port, password=PASSWORD).close()


@pytest.mark.postgres
@pytest.mark.parametrize("wrong", ["e", "wrong", "r"])
def test_a_wrong_postgres_password_is_hidden_and_only_it(
    postgres_server, postgres_url: str, tmp_path: Path, wrong: str
):
    url = postgres_server.url(password=wrong)
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url, namespace="redaction", policy_digest="0123456789abcdef")
    api = str(refused.value)
    cli = one_error_line(
        run(["filter", "--strategy", "postgres", "--postgres-url", url, "--state", "s.bloom"], tmp_path)
    )
    for message in (api, cli):
        # Every word of the message as written, the password field alone masked.
        assert "the server refused the URL's user or password (a wrong password, or an unknown user)" in message
        assert 'password authentication failed for user "postgres"' in message
        assert f"postgresql://postgres:***@127.0.0.1:{postgres_server.port}/postgres" in message
        assert f":{wrong}@" not in message


@pytest.mark.postgres
@pytest.mark.parametrize("password", ["sec ret", "%zz-Pw"])
def test_a_postgres_url_libpq_cannot_read_is_a_bad_setting_its_password_hidden(tmp_path: Path, password: str):
    """libpq quotes the part of a URL it cannot read, here the password: masked there too."""
    url = f"postgresql://crawler:{password}@127.0.0.1:5432/crawl"
    with pytest.raises(ValueError) as refused:
        PostgresStore(url, namespace="redaction", policy_digest="0123456789abcdef")
    result = run(["filter", "--strategy", "postgres", "--postgres-url", url, "--state", "s.bloom"], tmp_path)
    assert result.returncode == ExitCode.USAGE
    for message in (str(refused.value), one_error_line(result)):
        assert "'postgresql://crawler:***@127.0.0.1:5432/crawl'" in message and '"***"' in message
        assert password not in message


# ----- 7. PostgreSQL with an unknown role ------------------------------------------------------------


@pytest.mark.postgres
def test_an_unknown_postgres_role_is_refused_once(postgres_server, postgres_url: str, tmp_path: Path):
    """Over the server's socket (trust authentication, no password asked), the role that does not
    exist is named by the server: refused at once, exit code 6, as docs/cli.md lists it."""
    url = f"postgresql://nobody@/postgres?host={postgres_server.workdir}&port={postgres_server.port}"
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url, namespace="roles", policy_digest="0123456789abcdef")
    assert refused.value.attempts == 1
    assert "is not a role of the server" in str(refused.value)
    result = run(["filter", "--strategy", "postgres", "--postgres-url", url, "--state", "s.bloom"], tmp_path)
    assert result.returncode == ExitCode.STORE_REFUSED
    line = one_error_line(result)
    assert 'role "nobody" does not exist' in line and "is not a role of the server" in line
