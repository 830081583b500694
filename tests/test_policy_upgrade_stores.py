"""A crawl begun under policy 2 in a store continues with ``--policy v2``: each store's namespace,
the page stores and the service, made under POLICY_V2, refuse a client of the default (policy
3) with one message naming both policies and the way on (``--policy v2``,
``CRAWLDEDUP_POLICY=v2``, ``POLICY_V2``), and open with it, their claims and pages intact.
tests/test_policy_upgrade.py has the state files'; these run on the real servers of conftest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from conftest import ServeProcess, page_store_family

from crawldedup import DEFAULT_POLICY, POLICY_V2, Deduplicator, NamespaceConflict, canonicalize
from crawldedup.config import SETTINGS
from crawldedup.pages import PageFileError

#: Pages policy 2 merges (it drops sid) and policy 3 keeps apart, and one they agree on.
URLS = ["https://news.example/story?sid=1", "https://news.example/story?sid=2", "https://news.example/a?utm_source=x"]
#: Content fingerprints of URLS[0] and URLS[2]: 64 bits apart.
CONTENTS = [0x0F0F_0F0F_0F0F_0F0F, 0xF0F0_F0F0_F0F0_F0F0]


def test_policy_2_merges_what_policy_3_keeps_apart():
    assert len({canonicalize(url, policy=POLICY_V2) for url in URLS[:2]}) == 1
    assert len({canonicalize(url) for url in URLS[:2]}) == 2


def assert_names_the_way_on(message: str) -> None:
    assert f"canonical policy 2 ({POLICY_V2.digest})" in message, message
    assert f"canonical policy 3 ({DEFAULT_POLICY.digest})" in message, message
    assert "--policy v2" in message and "CRAWLDEDUP_POLICY=v2" in message and "POLICY_V2" in message, message


def environment(strategy: str, location: Dict[str, object], **extra: str) -> Dict[str, str]:
    """The variables that open ``strategy`` at ``location`` (Deduplicator keyword arguments)."""
    variables = {SETTINGS[field].variable: str(value) for field, value in location.items()}
    return {SETTINGS["strategy"].variable: strategy, **variables, **extra}


# --- a namespace of each store ------------------------------------------------------------------


def test_a_namespace_of_policy_2_refuses_the_default_and_opens_with_v2(store_strategy, store_location):
    with Deduplicator(store_strategy, policy=POLICY_V2, namespace="old", **store_location) as old:
        assert old.claim_many(URLS) == [True, False, True]
    with pytest.raises(NamespaceConflict) as refused:
        Deduplicator(store_strategy, namespace="old", **store_location)
    assert_names_the_way_on(str(refused.value))
    with Deduplicator(store_strategy, policy="v2", namespace="old", **store_location) as again:
        assert again.policy is POLICY_V2
        assert again.claim_many(URLS) == [False, False, False]
    env = environment(store_strategy, store_location, CRAWLDEDUP_POLICY="v2", CRAWLDEDUP_NAMESPACE="old")
    with Deduplicator.from_env(env) as from_env:
        assert from_env.seen(URLS) == [True, True, True]
    # A new namespace is the default's, as a new crawl is.
    with Deduplicator(store_strategy, namespace="new", **store_location) as new:
        assert new.claim_many(URLS) == [True, True, True]


def test_the_cli_refuses_a_policy_2_namespace_in_one_line_and_continues_it_with_v2(redis_url, tmp_path):
    """The CLI opens a store as every Deduplicator does (above, each store): one line, exit code 3."""
    with Deduplicator("set", redis_url=redis_url, policy=POLICY_V2, namespace="old", ttl_days=0) as old:
        assert old.claim_many(URLS[:1]) == [True]
    options = ["--strategy", "set", "--redis-url", redis_url, "--namespace", "old", "--ttl-days", "0", "-q"]

    def run(*more: str, state: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "crawldedup", "filter", "--state", str(tmp_path / state), *options, *more],
            input="".join(url + "\n" for url in URLS),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )

    refused = run(state="default.bloom")
    assert refused.returncode == 3 and refused.stdout == "" and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert_names_the_way_on(refused.stderr)
    continued = run("--policy", "v2", state="v2.bloom")
    assert continued.returncode == 0, continued.stderr
    assert continued.stdout.split() == [canonicalize(URLS[2], policy=POLICY_V2)]


# --- the page stores ----------------------------------------------------------------------------


@pytest.fixture(
    params=[
        "state",
        "sqlite",
        pytest.param("set", marks=pytest.mark.redis),
        pytest.param("sharded-set", marks=pytest.mark.redis),
        pytest.param("redisbloom", marks=pytest.mark.redis),
    ]
)
def pages_family(request: pytest.FixtureRequest, tmp_path: Path) -> dict:
    """Deduplicator arguments of each page store: the local journal beside a state file, SQLite's,
    and Redis's (under three strategies)."""
    return page_store_family(request.param, request, tmp_path)


def test_pages_of_policy_2_refuse_the_default_and_open_with_v2(pages_family, tmp_path):
    """Pages belong to the namespace without its round: a round under the default meets the pages
    a round under policy 2 stored, and is refused; under POLICY_V2 it compares with them."""
    error = PageFileError if pages_family["strategy"] == "local" else NamespaceConflict

    def open_round(name: str, **kwargs: object) -> Deduplicator:
        options = {**pages_family, "namespace": "crawl", "crawl_round": name, "capacity": 10_000, **kwargs}
        if "state" in pages_family:  # each round its own state file, the pages in one journal
            options.update(state=tmp_path / f"{name}.state", pages_path=tmp_path / "crawl.pages")
        return Deduplicator(options.pop("strategy"), **options)

    with open_round("r1", policy=POLICY_V2) as first:
        assert [check.verdict for check in first.check_content(URLS[::2], CONTENTS)] == ["new", "new"]
    with open_round("r2") as default, pytest.raises(error) as refused:
        default.check_content(URLS[::2], CONTENTS)
    assert_names_the_way_on(str(refused.value))
    with open_round("r3", policy="v2") as continued:
        assert [check.verdict for check in continued.check_content(URLS[::2], CONTENTS)] == [
            "unchanged",
            "unchanged",
        ]


# --- the service --------------------------------------------------------------------------------


def test_serve_policy_v2_refuses_a_default_client_and_serves_a_v2_one(redis_url):
    with ServeProcess(
        ["--strategy", "set", "--redis-url", redis_url, "--namespace", "old", "--policy", "v2"]
    ) as server:
        with pytest.raises(NamespaceConflict) as refused:
            Deduplicator("service", service_url=server.url, namespace="old")
        assert_names_the_way_on(str(refused.value))
        with Deduplicator("service", service_url=server.url, namespace="old", policy="v2") as client:
            assert client.claim_many(URLS) == [True, False, True]
        env = environment("service", {"service_url": server.url}, CRAWLDEDUP_POLICY="v2", CRAWLDEDUP_NAMESPACE="old")
        with Deduplicator.from_env(env) as from_env:
            assert from_env.claim_many(URLS) == [False, False, False]
        assert "Traceback" not in server.stderr


def test_serve_refuses_to_start_on_a_policy_2_namespace_naming_the_flag(redis_url):
    with Deduplicator("set", redis_url=redis_url, namespace="old", policy=POLICY_V2) as old:
        assert old.claim_many(URLS) == [True, False, True]
    command = [sys.executable, "-m", "crawldedup", "serve", "--port", "0", "--strategy", "set"]
    command += ["--redis-url", redis_url, "--namespace", "old"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode == 3 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert_names_the_way_on(refused.stderr)
    with ServeProcess(
        ["--strategy", "set", "--redis-url", redis_url, "--namespace", "old", "--policy", "v2"]
    ) as server:
        with Deduplicator("service", service_url=server.url, namespace="old", policy="v2") as client:
            assert client.claim_many(URLS) == [False, False, False]
    env = {**os.environ, SETTINGS["policy"].variable: "v2"}
    with ServeProcess(["--strategy", "set", "--redis-url", redis_url, "--namespace", "old"], env=env) as server:
        with Deduplicator("service", service_url=server.url, namespace="old", policy="v2") as client:
            assert client.seen(URLS) == [True, True, True]
