"""Crawls begun before policy 2 continue with POLICY_V1: a frozen state file made with policy 1
(tests/data/state-policy1.bloom, by tests/data/make_state_policy1.py) opens with ``policy=POLICY_V1``,
``CRAWLDEDUP_POLICY=v1`` and ``--policy v1`` (CLI, Scrapy), and is refused under the default
(policy 3) with a message naming both policies and the setting that continues the old crawl.
Crawls begun under policy 2 continue with POLICY_V2 the same way, and a policy file
(``--policy-file``, ``CRAWLDEDUP_POLICY_FILE``) is a policy of its own digest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crawldedup import DEFAULT_POLICY, POLICY_V1, POLICY_V2, Deduplicator, FilterFileError, load_policy_file
from crawldedup.config import DedupConfig

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

DATA = Path(__file__).parent / "data"
URLS = (DATA / "state-policy1-urls.txt").read_text(encoding="utf-8").splitlines()
COMMAND = [sys.executable, "-m", "crawldedup"]
# The settings the file was made with (tests/data/make_state_policy1.py).
MADE_WITH = {"capacity": 1_000, "error_rate": 0.01, "ttl_days": 0}
# The frozen file is the Bloom filter alone, as every state file before the exact tier.
FROZEN = {**MADE_WITH, "strategy": "local"}


@pytest.fixture
def state(tmp_path) -> Path:
    """A copy of the frozen policy 1 state file."""
    path = tmp_path / "state.bloom"
    shutil.copyfile(DATA / "state-policy1.bloom", path)
    return path


def assert_names_the_way_on(message: str) -> None:
    assert f"canonical policy 1 ({POLICY_V1.digest})" in message
    assert f"canonical policy 3 ({DEFAULT_POLICY.digest})" in message
    assert "--policy v1" in message and "CRAWLDEDUP_POLICY=v1" in message and "POLICY_V1" in message


def test_the_frozen_file_is_policy_1s():
    assert POLICY_V1.digest == "716e8d2d2c1c1eae"
    assert (
        b"crawldedup-state/1 policy=716e8d2d2c1c1eae namespace=crawldedup"
        in (DATA / "state-policy1.bloom").read_bytes()
    )


def test_policy_v1_continues_the_crawl(state):
    with Deduplicator(state=state, policy=POLICY_V1, **FROZEN) as dedup:
        assert dedup.claim_many(URLS) == [False] * len(URLS)
        assert dedup.claim_many(["https://shop.example/item/200?id=200"]) == [True]


def test_policy_v1_by_name(state):
    with Deduplicator(state=state, policy="v1", **FROZEN) as dedup:
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
        "DEDUP_STRATEGY": "local",
    }
    with Deduplicator.from_env(environ) as dedup:
        assert dedup.policy is POLICY_V1
        assert dedup.claim_many(URLS[:5]) == [False] * 5


@pytest.mark.parametrize("value", ["v4", "1", "policy1"])
def test_crawldedup_policy_variable_names_a_policy(value):
    with pytest.raises(ValueError, match=f"policy \\(CRAWLDEDUP_POLICY\\) must be one of v1, v2, v3.*{value}"):
        DedupConfig.from_env({"CRAWLDEDUP_POLICY": value})


def test_config_default_is_policy_3():
    assert DedupConfig().policy == "v3" and DedupConfig().canonical_policy is DEFAULT_POLICY
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
    assert f"canonical policy 3 ({DEFAULT_POLICY.digest})".encode() in info


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
        [*COMMAND, "canonicalize", "--policy", "v4"], input=b"", capture_output=True, timeout=60, cwd=tmp_path
    )
    err = result.stderr.decode()
    assert result.returncode == 2 and len(err.strip().splitlines()) == 1 and "v1, v2, v3" in err


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
            "CRAWLDEDUP_STRATEGY": "local",
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
            "CRAWLDEDUP_STRATEGY": "local",
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


# ----- policy 2 -> policy 3 ----------------------------------------------------------------------
@pytest.fixture
def state_v2(tmp_path) -> Path:
    """A state file of a crawl begun under policy 2 (its digest is pinned in test_canonical.py)."""
    path = tmp_path / "state2.bloom"
    with Deduplicator(state=path, policy=POLICY_V2, **MADE_WITH) as dedup:
        assert dedup.claim_many(URLS) == [True] * len(URLS)
    return path


def test_policy_2_state_refused_under_policy_3_naming_the_flag(state_v2):
    with pytest.raises(FilterFileError) as refused:
        Deduplicator(state=state_v2, **MADE_WITH)
    message = str(refused.value)
    assert f"canonical policy 2 ({POLICY_V2.digest})" in message
    assert f"canonical policy 3 ({DEFAULT_POLICY.digest})" in message
    assert "--policy v2" in message and "CRAWLDEDUP_POLICY=v2" in message and "POLICY_V2" in message


def test_policy_2_state_continues_with_policy_v2(state_v2):
    with Deduplicator(state=state_v2, policy="v2", **MADE_WITH) as dedup:
        assert dedup.policy is POLICY_V2
        assert dedup.claim_many(URLS) == [False] * len(URLS)
    result = _filter(state_v2, env={"CRAWLDEDUP_POLICY": "v2"})
    assert result.returncode == 0 and result.stdout == b"", result.stderr.decode()
    result = _filter(state_v2, "--policy", "v2")
    assert result.returncode == 0 and result.stdout == b"", result.stderr.decode()
    refused = _filter(state_v2)
    err = refused.stderr.decode()
    assert refused.returncode == 3 and len(err.strip().splitlines()) == 1 and "--policy v2" in err


POLICY_FILE = """format = 1
base = "v3"

[[host]]
match = "shop.example"
drop_params = ["sid"]
"""


def test_policy_file_state_refuses_other_policies_and_names_the_file_flag(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(POLICY_FILE, encoding="utf-8")
    policy = load_policy_file(rules)
    state = tmp_path / "ruled.bloom"
    made = _filter(state, "--policy-file", str(rules))
    assert made.returncode == 0, made.stderr.decode()
    assert _filter(state, env={"CRAWLDEDUP_POLICY_FILE": str(rules)}).stdout == b""
    refused = _filter(state)
    err = refused.stderr.decode()
    assert refused.returncode == 3 and len(err.strip().splitlines()) == 1
    assert f"a custom canonical policy ({policy.digest})" in err and "--policy-file" in err
    assert DedupConfig.from_env({"CRAWLDEDUP_POLICY_FILE": str(rules)}).canonical_policy == policy


def test_a_bad_policy_file_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('format = 1\n[[host]]\nmatch = "a.example"\ndrop = ["x"]\n', encoding="utf-8")
    result = subprocess.run(
        [*COMMAND, "canonicalize", "--policy-file", str(bad)], input=b"", capture_output=True, timeout=60
    )
    err = result.stderr.decode()
    assert result.returncode == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(bad) in err and "unknown field(s) drop" in err
    with pytest.raises(ValueError, match="CRAWLDEDUP_POLICY_FILE.*bad.toml.*unknown field"):
        DedupConfig.from_env({"CRAWLDEDUP_POLICY_FILE": str(bad)})


def test_scrapy_policy_file_setting(tmp_path):
    pytest.importorskip("scrapy")
    from scrapy.settings import Settings

    from crawldedup.scrapy import deduplicator_from_settings

    rules = tmp_path / "rules.json"
    rules.write_text('{"format": 1, "base": "v2", "host": [{"match": "a.example", "keep_params": ["sid"]}]}')
    settings = Settings({"CRAWLDEDUP_POLICY_FILE": str(rules), "CRAWLDEDUP_TTL_DAYS": 0})
    with deduplicator_from_settings(settings) as dedup:
        assert dedup.policy == load_policy_file(rules) and dedup.policy.version == 2
        assert dedup.claim_many(["https://a.example/?sid=1", "https://a.example/?sid=2"]) == [True, True]
        assert dedup.claim_many(["https://b.example/?sid=1", "https://b.example/?sid=2"]) == [True, False]
