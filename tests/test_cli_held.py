"""Pages held by leases are never silent: a run whose store fails before its commit says how many
pages of its written batch its leases hold and until when; the next run counts pages held by
another run's leases apart from the duplicates. Through the real command and a real Redis."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

pytestmark = pytest.mark.redis

PAGES = [f"https://held.example/p/{i}" for i in range(10)]


def start_filter(redis_url: str, tmp_path: Path, *args: str) -> subprocess.Popen:
    """``filter`` of the ten pages in batches of five on the set store; its stdout a pipe the test reads."""
    (tmp_path / "in.txt").write_text("\n".join(PAGES) + "\n")
    return subprocess.Popen(
        [sys.executable, "-m", "crawldedup", "filter", "--strategy", "set", "--redis-url", redis_url]
        + ["--state", str(tmp_path / "state.bloom"), "--batch-size", "5", "--jobs", "1", *args]
        + [str(tmp_path / "in.txt")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for_first_batch(process: subprocess.Popen) -> None:
    """Return once the first batch is written (held, not yet committed: the command waits until
    its reader has taken the lines out of the pipe)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    assert ready, "the first batch never came"


def lines(data: bytes) -> List[str]:
    return data.decode().splitlines()


def test_a_store_failing_before_the_commit_names_the_pages_it_holds(redis_server, redis_url, tmp_path):
    process = start_filter(redis_url, tmp_path)
    wait_for_first_batch(process)
    redis_server.stop()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 5, err
    assert lines(out) == PAGES[:5]
    message = err.decode().strip()
    assert message.count("\n") == 0, message  # one line
    assert re.search(
        r"; 5 pages of the last batch, written, stay held by this run's leases until \d\d:\d\d:\d\d", message
    )


def test_the_next_run_counts_pages_another_run_holds_apart_from_duplicates(redis_url, tmp_path):
    killed = start_filter(redis_url, tmp_path)
    wait_for_first_batch(killed)
    killed.send_signal(signal.SIGKILL)  # its first batch stays leased, its state file unlocked
    killed.communicate(timeout=60)
    rerun = start_filter(redis_url, tmp_path)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert lines(out) == PAGES[5:]
    summary = err.decode()
    assert re.search(r"duplicates dropped\s+0\n", summary), summary
    assert re.search(r"held by leases\s+5\s+pages another run or worker holds", summary), summary
