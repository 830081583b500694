"""``crawldedup filter`` loses no page at its seams, through the real command: every ``--jobs``
gives the same pages (a plain filter grows with workers as without); one run at a time writes a
state file (the second is refused naming the process, a dead one never blocks); a line too long
to keep is one invalid line whatever the pipe's read sizes; a pipe still being written gets its
pages back once it is silent."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

import pytest
from conftest import summary_counts

COMMAND = [sys.executable, "-m", "crawldedup", "filter"]
#: 200,000 distinct pages into a filter of 10,000: it grows twice.
DISTINCT = 200_000


def distinct_pages(count: int) -> bytes:
    return "".join(f"https://site{i % 97}.example/page/{i}\n" for i in range(count)).encode()


def filter_run(tmp_path: Path, state: str, *args: str, data: Optional[bytes] = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*COMMAND, "--state", str(tmp_path / state), *args],
        input=data,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.parametrize("window", [["--ttl-days", "0"], []], ids=["plain", "windowed"])
def test_every_jobs_gives_the_same_pages_and_the_filter_grows(window, tmp_path):
    data = distinct_pages(DISTINCT)
    outputs = []
    for jobs in ("1", "2", "3"):
        result = filter_run(tmp_path, f"jobs{jobs}.bloom", "--capacity", "10000", "--jobs", jobs, *window, data=data)
        assert result.returncode == 0, result.stderr
        assert "filter grew" in result.stderr.decode() and "does not grow" not in result.stderr.decode()
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    # The filter grew: what it lost is its false positives alone (1% at most), not a full filter's.
    assert len(outputs[0].splitlines()) > DISTINCT * 0.99


def test_a_second_run_on_a_state_file_is_refused_naming_the_process(tmp_path):
    with subprocess.Popen(
        [*COMMAND, "-q", "--state", str(tmp_path / "state.bloom")], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write(b"https://a.example/1\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == b"https://a.example/1\n"  # running, its state file open
        second = filter_run(tmp_path, "state.bloom", data=b"https://a.example/1\nhttps://a.example/2\n")
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    message = second.stderr.decode()
    assert second.returncode == 3 and second.stdout == b""
    assert message == (
        f"crawldedup: error: state file {tmp_path / 'state.bloom'}: in use by process {holder.pid} "
        f"({tmp_path / 'state.bloom.lock'} is locked): one run at a time writes a state file; wait for it "
        "to end, or give this run another state file\n"
    )
    assert not (tmp_path / "state.bloom.lock").exists()  # removed by the run that ended
    after = filter_run(tmp_path, "state.bloom", data=b"https://a.example/1\nhttps://a.example/2\n")
    assert after.returncode == 0 and after.stdout == b"https://a.example/2\n"


def test_a_killed_run_with_workers_never_blocks_the_next(tmp_path):
    """SIGKILL a ``--jobs 3`` run while its workers hold batches: the next run starts at once."""
    with subprocess.Popen(
        [*COMMAND, "--state", str(tmp_path / "state.bloom"), "--jobs", "3", "--batch-size", "100"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as killed:
        assert killed.stdin is not None and killed.stdout is not None
        killed.stdin.write(distinct_pages(1_000))  # ten batches: the workers are forked
        killed.stdin.flush()
        assert killed.stdout.readline()  # a batch came back
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
    rerun = filter_run(tmp_path, "state.bloom", "--jobs", "3", data=distinct_pages(1_000))
    assert rerun.returncode == 0, rerun.stderr
    # Every page the killed run printed was committed, or is printed again now: none lost.
    assert len(rerun.stdout.splitlines()) <= 1_000


LONG = b"x" * (2 << 20) + b"http://evil.example/never-a-line"
LONG_INPUT = (
    b"http://a.example/1\n" + LONG + b"\nhttp://a.example/2\n" + b"y" * ((1 << 20) + 7) + b"\nhttp://a.example/3\n"
)


def write_in_pieces(process: subprocess.Popen, data: bytes, piece: int) -> None:
    assert process.stdin is not None
    for start in range(0, len(data), piece):
        process.stdin.write(data[start : start + piece])
        process.stdin.flush()
    process.stdin.close()


@pytest.mark.parametrize("piece", [1 << 12, 1 << 16, 3 << 20])
def test_a_line_too_long_is_one_invalid_line_whatever_the_read_sizes(piece, tmp_path):
    with subprocess.Popen(
        [*COMMAND, "--state", str(tmp_path / "s.bloom"), "--rejects", str(tmp_path / "rejects.txt")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        writer = threading.Thread(target=write_in_pieces, args=(process, LONG_INPUT, piece))
        writer.start()  # stdout and stderr are read meanwhile: neither pipe can fill up and stall it
        out, err = process.stdout.read(), process.stderr.read()
        writer.join()
        assert process.wait(timeout=120) == 0
    assert out.splitlines() == [b"http://a.example/1", b"http://a.example/2", b"http://a.example/3"]
    counts = summary_counts(err)
    assert counts["lines read"] == LONG_INPUT.count(b"\n") == 5 and counts["invalid"] == 2
    rejects = (tmp_path / "rejects.txt").read_text().splitlines()
    assert [line.split("\t")[1] for line in rejects] == [
        f"line too long: {len(LONG):,} bytes, the most read is 1,048,576",
        f"line too long: {(1 << 20) + 7:,} bytes, the most read is 1,048,576",
    ]
    assert rejects[0].startswith("xxxx") and "evil" not in rejects[0]


def test_canonicalize_keeps_one_output_line_per_input_line(tmp_path):
    (tmp_path / "in.txt").write_bytes(LONG_INPUT)
    result = subprocess.run(
        [sys.executable, "-m", "crawldedup", "canonicalize", str(tmp_path / "in.txt")], capture_output=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stdout.splitlines() == [b"http://a.example/1", b"", b"http://a.example/2", b"", b"http://a.example/3"]
    assert [line.split(b": ", 1)[1] for line in result.stderr.splitlines()][0].startswith(b"line too long")


def test_a_pipe_still_being_written_gets_its_pages_back_once_silent(tmp_path):
    """The first line comes back while the writer still holds the pipe open (it would wait for
    10,000 lines otherwise); then the rest at the end."""
    with subprocess.Popen(
        [*COMMAND, "-q", "--state", str(tmp_path / "s.bloom"), "--flush-after", "0.05"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b"https://live.example/1\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready and process.stdout.readline() == b"https://live.example/1\n"
        process.stdin.write(b"https://live.example/1\nhttps://live.example/2\n")
        process.stdin.close()
        assert process.stdout.read() == b"https://live.example/2\n"
        assert process.wait(timeout=60) == 0


@pytest.mark.parametrize("value", ["0", "-1", "abc", "7200"])
def test_flush_after_takes_seconds(value, tmp_path):
    result = filter_run(tmp_path, "s.bloom", "--flush-after", value, data=b"")
    assert result.returncode == 2 and b"--flush-after" in result.stderr
