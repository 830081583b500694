"""What the ``crawldedup`` command says, run as a subprocess: reasons worded as the API words
them, counts in the singular or plural they need, and each strategy under the name typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

import pytest

from crawldedup.canonical import canonicalize_each, canonicalize_many

COMMAND = [sys.executable, "-m", "crawldedup"]
#: "café" written in Latin-1: 0xE9 is not UTF-8.
LATIN1_URL = "http://example.com/caf\u00e9".encode("latin-1")
UTF8_URL = "http://example.com/caf\u00e9".encode("utf-8")


def run(args: Sequence[str], cwd: Path, stdin: Optional[bytes] = None) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, input=stdin, capture_output=True, timeout=60)


def api_reason(url: bytes, base: Optional[bytes] = None) -> str:
    """The reason the API gives for refusing ``url`` (found on ``base``)."""
    if base is None:
        errors = canonicalize_many([url]).errors
    else:
        errors = canonicalize_each([url], [base]).errors
    return str(errors[0])


# ---------------------------------------------------------------------------- bytes that are not UTF-8


def test_rejects_name_bytes_that_are_not_utf8_as_the_api_does(tmp_path: Path) -> None:
    lines = [UTF8_URL, LATIN1_URL, LATIN1_URL + b"\t/page", b"http://example.com/ok"]
    result = run(["filter", "--state", "s.bloom", "--rejects", "rejects.tsv"], tmp_path, stdin=b"\n".join(lines))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == ["http://example.com/caf%C3%A9", "http://example.com/ok"]
    expected = [
        LATIN1_URL + b"\t" + api_reason(LATIN1_URL).encode(),
        LATIN1_URL + b"\t/page\t" + api_reason(b"/page", LATIN1_URL).encode(),
    ]
    assert (tmp_path / "rejects.tsv").read_bytes().splitlines() == expected
    assert "byte 0xE9 at offset 22" in api_reason(LATIN1_URL)


def test_canonicalize_names_bytes_that_are_not_utf8_as_the_api_does(tmp_path: Path) -> None:
    result = run(["canonicalize"], tmp_path, stdin=b"\n".join([UTF8_URL, LATIN1_URL, b"http://example.com/ok"]))
    assert result.returncode == 1
    assert result.stdout.decode().split("\n") == ["http://example.com/caf%C3%A9", "", "http://example.com/ok", ""]
    assert result.stderr.decode().splitlines() == [f"<stdin>:2: {api_reason(LATIN1_URL)}"]


# ---------------------------------------------------------------------------- counts


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    # One page, one batch, a filter of one block with one probe per key: every count is 1.
    result = run(
        [
            "filter",
            "--strategy",
            "sqlite",
            "--capacity",
            "1",
            "--error-rate",
            "0.5",
            "--state",
            "s.bloom",
            "--ttl-days",
            "0",
        ],
        tmp_path,
        stdin=b"https://a.example/\n",
    )
    assert result.returncode == 0, result.stderr.decode()
    summary = result.stderr.decode()
    assert "~1 of 1 item at 50% error" in summary
    assert "1 round trip," in summary
    info = run(["info", "s.bloom"], tmp_path)
    assert "(1 block, 1 hash per key)" in info.stdout.decode()
    merged = run(["merge", "s.bloom", "-o", "m.bloom"], tmp_path)
    assert merged.stderr.decode().strip() == (
        "crawldedup merge: wrote m.bloom from 1 filter, and its exact tier m.bloom.exact (1 page)"
    )


def test_counts_of_more_than_one_are_plural(tmp_path: Path) -> None:
    result = run(
        ["filter", "--strategy", "sqlite", "--batch-size", "1", "--state", "s.bloom"],
        tmp_path,
        stdin=b"https://a.example/\nhttps://b.example/\n",
    )
    assert result.returncode == 0, result.stderr.decode()
    summary = result.stderr.decode()
    assert "2 round trips," in summary and "of 10,000,000 items" in summary
    info = run(["info", "s.bloom"], tmp_path).stdout.decode()
    assert " blocks in each of 5 slots, 7 hashes per key)" in info
    merged = run(["merge", "s.bloom", "s.bloom", "-o", "m.bloom"], tmp_path)
    assert merged.stderr.decode().strip() == (
        "crawldedup merge: wrote m.bloom from 2 filters, and its exact tier m.bloom.exact (2 pages)"
    )


# ---------------------------------------------------------------------------- strategy names


def test_an_unreachable_store_is_named_by_its_strategy(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for strategy in ("set", "sharded-set", "redisbloom"):
        result = run(
            ["filter", "--strategy", strategy, "--redis-url", f"redis://127.0.0.1:{port}/0", "--state", "s.bloom"],
            tmp_path,
            stdin=b"https://a.example/\n",
        )
        assert result.returncode == 5
        assert result.stderr.decode().startswith(f"crawldedup: error: {strategy} store redis://127.0.0.1:{port}/0 ")
        assert "attempts (" in result.stderr.decode()


@pytest.mark.redis
@pytest.mark.parametrize("strategy", ["set", "sharded-set", "redisbloom"])
def test_the_summary_names_the_store_by_its_strategy(tmp_path: Path, redis_url: str, strategy: str) -> None:
    result = run(
        ["filter", "--strategy", strategy, "--redis-url", redis_url, "--state", "s.bloom"],
        tmp_path,
        stdin=b"https://a.example/\n",
    )
    assert result.returncode == 0, result.stderr.decode()
    store_row = [line for line in result.stderr.decode().splitlines() if line.lstrip().startswith("store ")]
    assert len(store_row) == 1
    assert store_row[0].split()[1:3] == [strategy, strategy], store_row[0]
    assert "keys" not in store_row[0]


@pytest.mark.redis
def test_a_namespace_of_another_strategy_is_named_by_strategies(tmp_path: Path, redis_url: str) -> None:
    first = run(
        ["filter", "--strategy", "set", "--redis-url", redis_url, "--state", "a.bloom"],
        tmp_path,
        stdin=b"https://a.example/\n",
    )
    assert first.returncode == 0, first.stderr.decode()
    second = run(
        ["filter", "--strategy", "redisbloom", "--redis-url", redis_url, "--state", "b.bloom"],
        tmp_path,
        stdin=b"https://a.example/\n",
    )
    assert second.returncode == 3
    assert "holds the claims of the set strategy, this is the redisbloom strategy" in second.stderr.decode()


def test_one_attempt_is_singular() -> None:
    from crawldedup import StoreUnavailable

    assert str(StoreUnavailable("set store x", 1, "refused")) == "set store x: unavailable after 1 attempt (refused)"
    assert str(StoreUnavailable("set store x", 2, "refused")) == "set store x: unavailable after 2 attempts (refused)"
