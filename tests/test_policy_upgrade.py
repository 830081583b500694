"""Crawls begun before policy 2 continue with POLICY_V1: a frozen state file made with policy 1
(tests/data/state-policy1.bloom, by tests/data/make_state_policy1.py) opens with ``policy=POLICY_V1``,
``CRAWLDEDUP_POLICY=v1`` and ``--policy v1`` (CLI, Scrapy), and is refused under policy 2 with a
message naming both policies and the setting that continues the old crawl."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crawldedup import DEFAULT_POLICY, POLICY_V1, Deduplicator, FilterFileError
from crawldedup.config import DedupConfig

DATA = Path(__file__).parent / "data"
URLS = (DATA / "state-policy1-urls.txt").read_text(encoding="utf-8").splitlines()
COMMAND = [sys.executable, "-m", "crawldedup"]
# The settings the file was made with (tests/data/make_state_policy1.py).
MADE_WITH = {"capacity": 1_000, "error_rate": 0.01, "ttl_days": 0}


@pytest.fixture
def state(tmp_path) -> Path:
    """A copy of the frozen policy 1 state file."""
    path = tmp_path / "state.bloom"
    shutil.copyfile(DATA / "state-policy1.bloom", path)
    return path


def assert_names_the_way_on(message: str) -> None:
    assert f"canonical policy 1 ({POLICY_V1.digest})" in message
    assert f"canonical policy 2 ({DEFAULT_POLICY.digest})" in message
    assert "--policy v1" in message and "CRAWLDEDUP_POLICY=v1" in message and "POLICY_V1" in message


def test_the_frozen_file_is_policy_1s():
    assert POLICY_V1.digest == "716e8d2d2c1c1eae"
    assert (
        b"crawldedup-state/1 policy=716e8d2d2c1c1eae namespace=crawldedup"
        in (DATA / "state-policy1.bloom").read_bytes()
    )


def test_policy_v1_continues_the_crawl(state):
    with Deduplicator(state=state, policy=POLICY_V1, **MADE_WITH) as dedup:
        assert dedup.claim_many(URLS) == [False] * len(URLS)
        assert dedup.claim_many(["https://shop.example/item/200?id=200"]) == [True]


def test_policy_v1_by_name(state):
    with Deduplicator(state=state, policy="v1", **MADE_WITH) as dedup:
        assert dedup.policy is POLICY_V1
        assert dedup.claim_many(URLS[:3]) == [False] * 3


def test_policy_2_is_refused_naming_both_policies(state):
    with pytest.raises(FilterFileError) as refused:
        Deduplicator(state=state, **MADE_WITH)
    assert str(refused.value).startswith(f"{state}: made with canonical policy 1")
    assert_names_the_way_on(str(refused.value))


def test_crawldedup_policy_variable(state):
    environ = {
        "CRAWLDEDUP_POLICY": "v1",
        "CRAWLDEDUP_STATE": str(state),
        "VISITED_TTL_DAYS": "0",
        "BLOOM_CAPACITY": "1000",
    }
    with Deduplicator.from_env(environ) as dedup:
        assert dedup.policy is POLICY_V1
        assert dedup.claim_many(URLS[:5]) == [False] * 5


@pytest.mark.parametrize("value", ["v3", "1", "policy1"])
def test_crawldedup_policy_variable_names_a_policy(value):
    with pytest.raises(ValueError, match=f"policy \\(CRAWLDEDUP_POLICY\\) must be one of v1, v2.*{value}"):
        DedupConfig.from_env({"CRAWLDEDUP_POLICY": value})


def test_config_default_is_policy_2():
    assert DedupConfig().policy == "v2" and DedupConfig().canonical_policy is DEFAULT_POLICY
    assert DedupConfig(policy=" V1 ").policy == "v1"


def test_a_policy_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="CanonicalPolicy or a name"):
        Deduplicator(policy=1)  # type: ignore[arg-type]


def _filter(state: Path, *options: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*COMMAND, "filter", "--state", str(state), "--ttl-days", "0", "-q", *options],
        input="".join(url + "\n" for url in URLS).encode(),
        capture_output=True,
        timeout=60,
        cwd=state.parent,
        env={**os.environ, **(env or {})},
    )


def test_cli_policy_v1_continues_the_crawl(state):
    result = _filter(state, "--policy", "v1")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == b""  # every URL was seen before


def test_cli_environment_variable(state):
    result = _filter(state, env={"CRAWLDEDUP_POLICY": "v1"})
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == b""


def test_cli_refuses_the_file_under_policy_2_in_one_line(state):
    result = _filter(state)
    err = result.stderr.decode()
    assert result.returncode == 3 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert_names_the_way_on(err)


def test_cli_info_names_the_policy_a_state_file_was_made_with(state, tmp_path):
    old = subprocess.run([*COMMAND, "info", str(state)], capture_output=True, timeout=60)
    assert old.returncode == 0, old.stderr.decode()
    assert b"\npolicy " in old.stdout and b"canonical policy 1 (716e8d2d2c1c1eae)" in old.stdout
    new = tmp_path / "new.bloom"
    made = subprocess.run(
        [*COMMAND, "filter", "--state", str(new), "-q"],
        input=b"https://a.example/\n",
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr.decode()
    info = subprocess.run([*COMMAND, "info", str(new)], capture_output=True, timeout=60).stdout
    assert f"canonical policy 2 ({DEFAULT_POLICY.digest})".encode() in info


def test_cli_canonicalize_policy_option(tmp_path):
    urls = b"http:/a.example/x\nhttp://0x7f.1/\n"
    v2 = subprocess.run([*COMMAND, "canonicalize"], input=urls, capture_output=True, timeout=60, cwd=tmp_path)
    v1 = subprocess.run(
        [*COMMAND, "canonicalize", "--policy", "v1"], input=urls, capture_output=True, timeout=60, cwd=tmp_path
    )
    assert v2.stdout.decode().splitlines() == ["http://a.example/x", "http://127.0.0.1/"]
    assert v1.stdout.decode().splitlines() == ["", "http://0x7f.1/"]
    assert v1.returncode == 1 and "no host" in v1.stderr.decode()


def test_cli_refuses_an_unknown_policy_in_one_line(tmp_path):
    result = subprocess.run(
        [*COMMAND, "canonicalize", "--policy", "v3"], input=b"", capture_output=True, timeout=60, cwd=tmp_path
    )
    err = result.stderr.decode()
    assert result.returncode == 2 and len(err.strip().splitlines()) == 1 and "v1, v2" in err


def test_scrapy_setting(state):
    pytest.importorskip("scrapy")
    from scrapy.settings import Settings

    from crawldedup.scrapy import deduplicator_from_settings

    settings = Settings(
        {
            "CRAWLDEDUP_POLICY": "v1",
            "CRAWLDEDUP_STATE": str(state),
            "CRAWLDEDUP_TTL_DAYS": 0,
            "CRAWLDEDUP_CAPACITY": 1000,
        }
    )
    with deduplicator_from_settings(settings) as dedup:
        assert dedup.policy is POLICY_V1
        assert dedup.claim_many(URLS[:4]) == [False] * 4
    settings = Settings(
        {
            "CRAWLDEDUP_POLICY": {"version": 1},
            "CRAWLDEDUP_STATE": str(state),
            "CRAWLDEDUP_TTL_DAYS": 0,
            "CRAWLDEDUP_CAPACITY": 1000,
        }
    )
    with deduplicator_from_settings(settings) as dedup:
        assert dedup.policy == POLICY_V1
    with pytest.raises(FilterFileError, match="--policy v1"):
        deduplicator_from_settings(Settings({"CRAWLDEDUP_STATE": str(state), "CRAWLDEDUP_TTL_DAYS": 0}))


def test_async_deduplicator_and_crawlee_read_the_variable():
    """crawlee's storage client takes an AsyncDeduplicator, made by ``from_env`` in its docs."""
    from crawldedup import AsyncDeduplicator

    assert AsyncDeduplicator.from_env({"CRAWLDEDUP_POLICY": "v1"}).policy is POLICY_V1
    assert AsyncDeduplicator.from_env({}).policy is DEFAULT_POLICY
    assert AsyncDeduplicator(policy="v1").policy is POLICY_V1
