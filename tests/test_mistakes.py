"""What a new user trips on, each through the real command or API: a careless input gets one clear
line (or the exception the docs name), never a traceback, and the message says what is wrong
without rewriting anything else (tests/test_cli_faults.py runs the same faults over every
subcommand and option)."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

import pytest
import redis
from conftest import RedisServer, find_redisbloom, required_redis_server, serve_redis

from crawldedup import Deduplicator, StoreRefused
from crawldedup.cli.exits import ExitCode
from crawldedup.config import SETTINGS, DedupConfig
from crawldedup.stores import PostgresStore, RedisKeyStore
from crawldedup.stores.factory import ALIASES, STRATEGIES

COMMAND = [sys.executable, "-m", "crawldedup"]
DOCS = Path(__file__).resolve().parent.parent / "docs"
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


# ----- 10. docs that do not match ---------------------------------------------------------------


@pytest.mark.parametrize("documented", [Deduplicator, DedupConfig], ids=["Deduplicator", "DedupConfig"])
def test_the_strategies_documented_are_the_strategies(documented):
    """Each docstring's list of strategies names every one by its name (an alias such as
    ``bloom`` only as the same as its name)."""
    doc = inspect.getdoc(documented) or ""
    text = " ".join(doc.partition(":param strategy:")[2].partition(":param")[0].split())
    named = set(re.findall(r"``([a-z-]+)``", text))
    assert set(STRATEGIES) <= named, text
    for alias, name in ALIASES.items():
        assert alias not in named or f"``{name}`` (``{alias}`` is the same)" in text, text


def test_the_default_state_file_is_as_big_as_docs_cli_says(tmp_path: Path):
    """docs/cli.md's sizes and bits per URL of the default state file and of --ttl-days 0."""
    docs = (DOCS / "cli.md").read_text()
    assert run(["filter", "--state", "window.bloom"], tmp_path, LINKS).returncode == 0
    assert run(["filter", "--state", "plain.bloom", "--ttl-days", "0"], tmp_path, LINKS).returncode == 0
    for state, mib, bits in (("window.bloom", "60.6", "50.82"), ("plain.bloom", "12.1", "10.16")):
        info = " ".join(run(["info", state], tmp_path).stdout.decode().split())
        assert f"({mib} MiB)" in info and f"bits per item {bits} at capacity" in info, info
    assert "60.6 MiB file" in docs and "50.82 bits per URL at capacity" in docs
    assert "`--ttl-days 0`" in docs and "12.1 MiB, 10.16 bits per URL" in docs


# ----- 3. stderr closed or full ---------------------------------------------------------------------


@pytest.mark.parametrize("redirection", ["2>&-", "2>/dev/full"])
def test_a_lost_stderr_changes_no_exit_code_and_loses_no_page(tmp_path: Path, redirection: str):
    (tmp_path / "links.txt").write_bytes(LINKS)
    line = " ".join([*COMMAND, "filter", "links.txt", "--state", "s.bloom"])
    first = subprocess.run(["sh", "-c", f"{line} {redirection}"], cwd=tmp_path, capture_output=True, timeout=120)
    assert (first.returncode, first.stdout) == (ExitCode.OK, LINKS)  # the summary lost, the run fine
    failing = " ".join([*COMMAND, "filter", "missing.txt", "--state", "s.bloom"])
    second = subprocess.run(["sh", "-c", f"{failing} {redirection}"], cwd=tmp_path, capture_output=True, timeout=120)
    assert (second.returncode, second.stdout) == (ExitCode.IO, b"")  # its line lost, its code not


# ----- 5. --service-url beside every --strategy ------------------------------------------------------


def test_every_command_that_takes_a_strategy_takes_each_stores_location():
    from crawldedup.cli.main import build_parser

    (commands,) = [action for action in build_parser()._actions if action.dest == "command"]
    strategies = 0
    for name, parser in commands.choices.items():
        options = {option: action for action in parser._actions for option in action.option_strings}
        if "--strategy" not in options and "--to" not in options:
            continue
        strategies += 1
        shown = " ".join(parser.format_help().split())
        for option, variable in (
            ("--redis-url", "CRAWLDEDUP_REDIS_URL"),
            ("--sqlite", "CRAWLDEDUP_SQLITE"),
            ("--postgres-url", "CRAWLDEDUP_POSTGRES_URL"),
            ("--service-url", "CRAWLDEDUP_SERVICE_URL"),
        ):
            assert option in options and variable in shown, (name, option)
    assert strategies >= 6  # filter, content, serve, doctor, stats, migrate


def test_filter_reaches_the_service_of_service_url(tmp_path: Path):
    result = run(
        ["filter", "--strategy", "service", "--service-url", "http://127.0.0.1:1", "--state", "s.bloom"],
        tmp_path,
        LINKS,
        CRAWLDEDUP_TTL_DAYS="0",
    )
    assert result.returncode == ExitCode.STORE
    line = one_error_line(result)
    assert "service store http://127.0.0.1:1 " in line and "unavailable after" in line
    bad = run(["filter", "--strategy", "service", "--service-url", "ftp://x"], tmp_path, LINKS)
    assert bad.returncode == ExitCode.USAGE and "--service-url" in one_error_line(bad)


# ----- 6. a single string where a batch is expected, and what is not a URL -----------------------


@pytest.mark.parametrize("method", ["add_many", "contains_many", "update"])
@pytest.mark.parametrize("twin", ["compiled", "python"])
def test_a_filter_refuses_one_key_where_a_batch_is_expected(method: str, twin: str):
    from crawldedup.bloom import HAS_EXTENSION, BloomFilter, PyBloomFilter

    if twin == "compiled" and not HAS_EXTENSION:
        pytest.skip("the compiled twin is not built")
    cls = BloomFilter if twin == "compiled" else PyBloomFilter
    with cls(1_000, 0.01) as bloom:
        for single in ("https://x.example/", b"https://x.example/"):
            with pytest.raises(TypeError, match=f"not a single {type(single).__name__}"):
                getattr(bloom, method)(single)
        assert bloom.approx_items == 0 and "h" not in bloom  # no character became a key


@pytest.mark.parametrize("call", [lambda d: d.claim(None), lambda d: d.claim_many([1, 2])], ids=["claim", "claim_many"])
def test_the_deduplicator_refuses_what_is_not_a_url(call):
    with Deduplicator("local", capacity=1_000) as dedup:
        with pytest.raises(TypeError, match="URL must be str or bytes"):
            call(dedup)
        assert dedup.claim_many(["mailto:x@y.example", "https://x.example/"]) == [False, True]  # data, not mistakes


# ----- 9. an error rate too small to build ----------------------------------------------------------


@pytest.mark.parametrize("rate", [4e-21, 1e-300, 5e-324])
def test_an_error_rate_below_the_smallest_is_refused_with_the_range(tmp_path: Path, rate: float):
    with pytest.raises(ValueError, match=r"error_rate .*must be a number in \[1e-20, 1\), got"):
        Deduplicator("local", capacity=1_000, error_rate=rate)
    result = run(["filter", "--error-rate", repr(rate)], tmp_path, LINKS)
    assert result.returncode == ExitCode.USAGE
    assert "must be a number in [1e-20, 1)" in one_error_line(result)
    from_env = run(["filter", "--state", "s.bloom"], tmp_path, LINKS, CRAWLDEDUP_ERROR_RATE=repr(rate))
    assert from_env.returncode == ExitCode.USAGE and "CRAWLDEDUP_ERROR_RATE" in one_error_line(from_env)


def test_the_smallest_error_rate_builds_and_grows():
    with Deduplicator("local", capacity=100, error_rate=1e-20, ttl_days=0) as dedup:
        assert dedup.claim_many([f"https://x.example/{i}" for i in range(1_000)]) == [True] * 1_000
        assert len(dedup.local_filter.stages()) > 1  # grew past capacity, its stages at the floor


# ----- 11. scripts/test ------------------------------------------------------------------------------

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "test"


def test_scripts_test_waits_for_the_dpkg_lock_and_labels_the_expected_lines():
    text = SCRIPT.read_text()
    calls = [
        line for line in text.splitlines() if "apt-get " in line and not re.search(r"\b(echo|die|command -v)\b", line)
    ]
    assert len(calls) == 2 and all("apt-get -o DPkg::Lock::Timeout=" in call for call in calls), calls
    # The build logs' lines it shows (the no-compiler builds' warning and error) are labelled.
    lines = text.splitlines()
    shown = [
        i
        for i, line in enumerate(lines)
        if line.startswith("grep -F") and ("FALLBACK_WARNING" in line or "compile" in line)
    ]
    assert len(shown) == 2, shown
    for i in shown:
        assert "sed 's/^/expected (" in lines[i] + lines[i + 1], lines[i]


# ----- 12. defaults that surprise -----------------------------------------------------------------


def test_the_readme_says_where_each_keeps_its_filter():
    readme = (DOCS.parent / "README.md").read_text()
    main_job = readme.partition("## The main job")[2].partition("\n## ")[0]
    assert "./crawldedup.bloom" in main_job and "`Deduplicator()` keeps its filter in memory" in main_job


def test_no_alias_journal_without_an_alias(tmp_path: Path):
    state = tmp_path / "crawl.bloom"
    with Deduplicator("local", capacity=1_000, state=str(state)) as dedup:
        dedup.claim_many(["https://x.example/a", "https://x.example/b"])
    assert state.exists() and not Path(f"{state}.aliases").exists()
    with Deduplicator("local", capacity=1_000, state=str(state)) as dedup:
        dedup.claim_final(["https://x.example/c"], [["https://x.example/short"]])  # a redirect: an alias
    assert Path(f"{state}.aliases").stat().st_size == 8 + 40
    with Deduplicator("local", capacity=1_000, state=str(state)) as dedup:  # read back
        assert dedup.seen_through_redirects(["https://x.example/short"]) == [True]


def test_doctor_does_not_make_the_sqlite_database_it_checks(tmp_path: Path):
    result = run(["doctor", "--strategy", "sqlite", "--sqlite", "claims.sqlite"], tmp_path)
    assert result.returncode == ExitCode.INVALID
    assert "FAIL  store       the SQLite database claims.sqlite does not exist" in result.stdout.decode()
    assert not (tmp_path / "claims.sqlite").exists()
