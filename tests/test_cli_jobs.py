"""``crawldedup filter --jobs N``: worker processes prepare the batches, the output is the same.

The same frontier through ``--jobs 1`` and ``--jobs 2`` or 3 gives the same bytes on stdout, the
same rejects file, the same summary counts and the same state file, whatever the batch size;
and the fault paths (Ctrl-C, a closed pipe, a full disk, a worker killed) lose no page.
"""

from __future__ import annotations

import gzip
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np
import pytest
from conftest import interrupt_after_first_line, stop_reading_after_first_line, summary_counts

from crawldedup.bloom import open_filter
from crawldedup.cli._io import NEWLINE_PIECE, Interruptions, line_batches
from crawldedup.cli._jobs import SLOT_BYTES, OrderedWork, _Worker, available_cores, cpu_quota

COMMAND = [sys.executable, "-m", "crawldedup", "filter"]


def frontier_bytes(lines: int, seed: int = 7) -> bytes:
    """Links of 400 pages in many spellings, relative links (``BASE<TAB>LINK``), invalid lines,
    empty lines, CRLF line ends and bytes that are not UTF-8."""
    rng = random.Random(seed)
    out: List[bytes] = []
    for _ in range(lines):
        page = rng.randrange(400)
        kind = rng.randrange(9)
        if kind == 0:
            line = f"HTTPS://Shop.Example:443/item/{page}/?b=2&a=1&utm_source=x#top".encode()
        elif kind == 1:
            line = f"https://shop.example/list/{page % 7}\t../item/{page}?a=1&b=2".encode()
        elif kind == 2:
            line = f"https://bücher.example/buch/{page}".encode()
        elif kind == 3:
            line = b"mailto:sales@shop.example" if page % 2 else b""
        elif kind == 4:
            line = f"https://shop.example/item/{page}?a=1&b=2\r".encode()  # a CRLF line end
        elif kind == 5 and page % 5 == 0:
            line = b"https://shop.example/caf\xe9/" + str(page).encode()  # Latin-1, not UTF-8
        else:
            line = f"https://shop.example/item/{page}?a=1&b=2".encode()
        out.append(line)
    return b"\n".join(out) + b"\n"


def run_filter(cwd: Path, jobs: int, args: Sequence[str], state: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [*COMMAND, *args, "--state", state, "--jobs", str(jobs), "--capacity", "100000"],
        cwd=cwd,
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()
    return result


@pytest.mark.parametrize("output", ["canonical", "raw"])
@pytest.mark.parametrize("batch", [7, 1_000, 50_000])
def test_jobs_print_the_same_bytes_in_input_order(tmp_path: Path, output: str, batch: int) -> None:
    (tmp_path / "a.txt").write_bytes(frontier_bytes(6_000, seed=1))
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(frontier_bytes(6_000, seed=2)))
    args = ["a.txt", "b.txt.gz", "--output", output, "--batch-size", str(batch)]
    runs = {
        jobs: run_filter(tmp_path, jobs, [*args, "--rejects", f"rejects{jobs}.txt"], f"s{jobs}.bloom")
        for jobs in (1, 2, 3)
    }
    first = runs[1]
    assert first.stdout and summary_counts(first.stderr)["invalid"] > 0
    for jobs in (2, 3):
        assert runs[jobs].stdout == first.stdout
        assert summary_counts(runs[jobs].stderr) == summary_counts(first.stderr)
        assert (tmp_path / f"rejects{jobs}.txt").read_bytes() == (tmp_path / "rejects1.txt").read_bytes()
        with open_filter(tmp_path / "s1.bloom") as one, open_filter(tmp_path / f"s{jobs}.bloom") as many:
            assert many.approx_items == one.approx_items
            assert all(
                url in many
                for url in first.stdout.decode("utf-8", "surrogateescape").splitlines()
                if output == "canonical"
            )


def test_jobs_read_stdin(tmp_path: Path) -> None:
    data = frontier_bytes(5_000)
    outputs = [
        subprocess.run(
            [*COMMAND, "--jobs", str(jobs), "--batch-size", "300", "--state", f"s{jobs}.bloom"],
            cwd=tmp_path,
            input=data,
            capture_output=True,
            timeout=120,
        ).stdout
        for jobs in (1, 2)
    ]
    assert outputs[0] and outputs[0] == outputs[1]


def test_jobs_0_takes_the_cores_available_and_a_bad_count_is_a_usage_error(tmp_path: Path) -> None:
    data = frontier_bytes(3_000)
    runs = {
        jobs: subprocess.run(
            [*COMMAND, "--jobs", jobs, "--batch-size", "500", "--state", f"s{jobs}.bloom"],
            cwd=tmp_path,
            input=data,
            capture_output=True,
            timeout=120,
        )
        for jobs in ("1", "0", "-1")
    }
    assert runs["0"].returncode == 0 and runs["0"].stdout == runs["1"].stdout != b""
    assert runs["-1"].returncode == 2
    assert runs["-1"].stderr.decode().splitlines() == [
        "crawldedup: error: argument --jobs: must be a positive integer, or 0 for the cores available, got '-1'; "
        "see crawldedup filter --help"
    ]


def test_a_batch_is_printed_before_more_input_arrives(tmp_path: Path) -> None:
    """A crawler that writes its links as it finds them gets each batch's pages without waiting
    for the batches after it."""
    worker = subprocess.Popen(
        [*COMMAND, "--jobs", "2", "--batch-size", "100", "--state", "s.bloom"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        worker.stdin.write("".join(f"https://shop.example/item/{page}\n" for page in range(300)).encode())
        printed = [worker.stdout.readline() for _ in range(300)]  # three batches, stdin still open
        assert printed[-1] == b"https://shop.example/item/299\n"
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
        worker.stdout.close()
        assert worker.stderr is not None
        worker.stderr.close()
    assert worker.returncode == 0


def _batched_as_read(lines: List[bytes], size: int, rng: random.Random, cuts: int) -> None:
    """``line_batches`` of ``lines`` cut into blocks of whole lines at ``cuts`` random places, as
    the reader yields them, gives every ``size`` lines in turn."""
    text = b"\n".join(lines)
    blocks, start = [], 0
    for cut in sorted(rng.sample(range(len(text)), cuts)):
        cut = text.find(b"\n", cut)
        if cut < 0:
            break
        if cut >= start:
            blocks.append(text[start:cut])
            start = cut + 1
    blocks.append(text[start:])
    batches = list(line_batches(iter(blocks), size))
    assert [batch.split(b"\n") for batch in batches] == [lines[i : i + size] for i in range(0, len(lines), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 10, 64])
def test_line_batches_cut_every_size_lines(size: int) -> None:
    rng = random.Random(size)
    _batched_as_read([b"x" * rng.randrange(4) for _ in range(500)], size, rng, 40)


@pytest.mark.parametrize("size", [1, 7, 1_000, 50_000])
def test_line_batches_cut_blocks_longer_than_a_counted_piece(size: int) -> None:
    # Blocks of several NEWLINE_PIECEs, lines of 0 to 40 bytes (empty ones too).
    rng = random.Random(size)
    lines = [b"y" * rng.randrange(41) for _ in range(60_000)]
    assert sum(map(len, lines)) > 8 * NEWLINE_PIECE
    _batched_as_read(lines, size, rng, 5)


def _square(value: int) -> int:
    if value < 0:
        raise ValueError(f"negative: {value}")
    return value * value


def test_ordered_work_keeps_order_and_raises_as_one_process_would() -> None:
    with OrderedWork(_square, 3) as work:
        assert [result for _, result in work.map(iter(range(50)))] == [n * n for n in range(50)]
    with OrderedWork(_square, 2) as work:
        results = []
        with pytest.raises(ValueError, match="negative: -1"):
            for _, result in work.map(iter([1, 2, 3, -1, 5])):
                results.append(result)
        assert results == [1, 4, 9]


#: The process the tests run in: a worker forked from it has another id.
_TEST_PROCESS = os.getpid()


def _square_where(item: Tuple[int, float]) -> Tuple[int, bool]:
    """The square, and whether the main process made it; a worker first waits ``delay``
    seconds, so that the main process, finding it full, prepares items itself."""
    value, delay = item
    here = os.getpid() == _TEST_PROCESS
    if not here:
        time.sleep(delay)
    if value < 0:
        raise ValueError(f"negative: {value}")
    return value * value, here


def test_the_main_process_prepares_items_while_the_workers_are_full() -> None:
    with OrderedWork(_square_where, 2) as work:
        results = [result for _, result in work.map(iter([(n, 0.02) for n in range(60)]))]
    assert [square for square, _ in results] == [n * n for n in range(60)]
    made_here = sum(here for _, here in results)
    assert 1 < made_here < 60  # the first item and more here, the rest in the worker


def test_an_item_that_fails_in_the_main_process_raises_in_its_turn() -> None:
    # The first item is made here, the next four fill the worker (each takes it half a
    # second), so the sixth and the seventh (which fails) are made here, before the worker's.
    items = [(n, 0.5) for n in (1, 2, 3, 4, 5, 6, -7, 8)]
    seen = []
    with OrderedWork(_square_where, 2) as work:
        with pytest.raises(ValueError, match="negative: -7"):
            for (value, _), (_square, here) in work.map(iter(items)):
                seen.append((value, here))
    assert seen == [(1, True), (2, False), (3, False), (4, False), (5, False), (6, True)]


def _checksum_and_echo(item: Tuple[int, pickle.PickleBuffer]) -> Tuple[int, np.ndarray, pickle.PickleBuffer]:
    seed, data = item
    view = memoryview(data)
    return seed, np.frombuffer(view, dtype=np.uint8).astype(np.uint64).cumsum(), pickle.PickleBuffer(bytes(view[::-1]))


def test_ordered_work_moves_large_items_through_shared_memory_or_whole_through_the_pipe() -> None:
    """Items and results with buffers out of band, in the slots or (too large) through the pipe,
    come back intact and in order, also after a slot was used many times over."""
    sizes = [0, 1, 600_000, SLOT_BYTES + 1, 3, SLOT_BYTES, 700_000] + [50_000 + n for n in range(40)]
    payloads = [
        np.random.default_rng(n).integers(0, 256, size, dtype=np.uint8).tobytes() for n, size in enumerate(sizes)
    ]
    with OrderedWork(_checksum_and_echo, 2) as work:
        results = list(work.map(iter([(n, pickle.PickleBuffer(data)) for n, data in enumerate(payloads)])))
    assert [seed for _, (seed, _, _) in results] == list(range(len(payloads)))
    for (_, (seed, sums, echo)), data in zip(results, payloads):
        expected = np.frombuffer(data, dtype=np.uint8).astype(np.uint64).cumsum()
        assert np.array_equal(sums, expected) and bytes(echo) == data[::-1], seed


def test_available_cores_is_the_affinity_within_the_cpu_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert available_cores(str(tmp_path)) == affinity  # no cgroup files: no quota
    v2 = tmp_path / "v2"
    v2.mkdir()
    for limit, cores in [
        ("max 100000", affinity),
        ("50000 100000", 1),
        ("150000 100000", min(2, affinity)),
        ("100000000 100000", affinity),
        ("garbage", affinity),
    ]:
        (v2 / "cpu.max").write_text(limit + "\n")
        assert available_cores(str(v2)) == cores, limit
    assert cpu_quota(str(v2 / "none")) is None
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert cpu_quota(str(v2)) == 1.5
    v1 = tmp_path / "v1" / "cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    for quota, cores in [("-1", affinity), ("20000", 1), ("100000", 1)]:
        (v1 / "cpu.cfs_quota_us").write_text(quota + "\n")
        assert available_cores(str(tmp_path / "v1")) == cores, quota
    assert available_cores() >= 1


def test_jobs_default_to_the_cores_available(tmp_path: Path) -> None:
    """Without --jobs, a run of several batches uses a process a core: the main one and a
    worker for each other core (here, two cores asked through the CPU affinity: one worker)."""
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores and CPU affinity")
    two = sorted(os.sched_getaffinity(0))[:2]
    (tmp_path / "in.txt").write_text("".join(f"https://shop.example/item/{n}\n" for n in range(20_000)))
    run = subprocess.Popen(
        [*COMMAND, "in.txt", "--state", "s.bloom", "--batch-size", "100"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        preexec_fn=lambda: os.sched_setaffinity(0, two),
    )
    assert run.stdout is not None
    first = b"".join(run.stdout.readline() for _ in range(100))  # the first batch: the workers start after it
    workers = _children(run.pid)
    rest, err = run.communicate(timeout=120)
    assert run.returncode == 0, err.decode()
    assert len(workers) == 1
    assert (first + rest).decode().splitlines() == [f"https://shop.example/item/{n}" for n in range(20_000)]


# ---------------------------------------------------------------------------- fault paths


def _long_run(tmp_path: Path, pages: int) -> subprocess.Popen:
    """A run of ``2 * pages`` lines in batches of 200 with ``--jobs 2`` (the main process and a
    worker, started once the first batch is read: :func:`_first_batch`), in a session of its own
    (its process group can be signalled as a terminal's Ctrl-C signals it)."""
    lines = [f"https://shop.example/item/{page}?v={variant}" for variant in ("a", "b") for page in range(pages)]
    (tmp_path / "long.txt").write_text("".join(f"{line}\n" for line in lines))
    return subprocess.Popen(
        [*COMMAND, "long.txt", "--state", "s.bloom", "--batch-size", "200", "--jobs", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        start_new_session=True,
    )


def _first_batch(run: subprocess.Popen) -> List[str]:
    """The lines of a :func:`_long_run`'s first batch, read whole (the run waits for that)."""
    assert run.stdout is not None
    return [run.stdout.readline().decode().strip() for _ in range(200)]


def _every_page_once(tmp_path: Path, printed: List[str], pages: int) -> None:
    again = subprocess.run(
        [*COMMAND, "long.txt", "--state", "s.bloom", "--jobs", "2"], cwd=tmp_path, capture_output=True, timeout=120
    )
    assert again.returncode == 0, again.stderr.decode()
    rest = again.stdout.decode().splitlines()
    assert not set(printed) & set(rest)
    assert sorted(printed + rest) == sorted(f"https://shop.example/item/{p}?v={v}" for v in "ab" for p in range(pages))


@pytest.mark.skipif(os.name != "posix", reason="signals and process groups")
@pytest.mark.parametrize("to_group", [False, True], ids=["process", "process-group"])
def test_sigint_with_jobs_prints_the_summary_and_loses_no_page(tmp_path: Path, to_group: bool) -> None:
    """Ctrl-C in a terminal reaches the workers too (the process group): they ignore it, and the
    main process stops between two batches."""
    worker = _long_run(tmp_path, 25_000)
    printed = interrupt_after_first_line(worker, tmp_path / "s.bloom", to_group=to_group)
    assert len(printed) < 50_000
    _every_page_once(tmp_path, printed, 25_000)


@pytest.mark.skipif(os.name != "posix", reason="exit code of a closed pipe on POSIX")
def test_closed_stdout_with_jobs_stops_quietly(tmp_path: Path) -> None:
    worker = _long_run(tmp_path, 25_000)
    stop_reading_after_first_line(worker)
    # The batch its reader left unread was handed back: a rerun prints every page once.
    _every_page_once(tmp_path, [], 25_000)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_dev_full_with_jobs_is_one_line_and_loses_no_page(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text(
        "".join(f"https://shop.example/item/{p}?v={v}\n" for v in "ab" for p in range(5_000))
    )
    with open("/dev/full", "wb") as full:
        failed = subprocess.run(
            [*COMMAND, "long.txt", "--state", "s.bloom", "--batch-size", "200", "--jobs", "2"],
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    err = failed.stderr.decode()
    assert failed.returncode == 4, err
    assert err.splitlines() == ["crawldedup: error: cannot write stdout: No space left on device"]
    _every_page_once(tmp_path, [], 5_000)


@pytest.mark.skipif(os.name != "posix", reason="kills a worker process")
def test_a_worker_killed_is_one_line_and_loses_no_page(tmp_path: Path) -> None:
    worker = _long_run(tmp_path, 25_000)
    assert worker.stdout is not None
    printed = _first_batch(worker)
    children = _children(worker.pid)
    assert children, "no worker process"
    os.kill(children[0], signal.SIGKILL)
    try:
        rest, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    printed += rest.decode().split()
    if worker.returncode == 0:  # the run was over before the kill reached the worker
        pytest.skip("the run ended before the worker was killed")
    assert worker.returncode == 4, err.decode()
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert lines == ["crawldedup: error: a worker process of --jobs died (killed, or out of memory)"]
    with open_filter(tmp_path / "s.bloom") as bf:
        assert all(url in bf for url in printed)
    _every_page_once(tmp_path, printed, 25_000)


@pytest.mark.skipif(os.name != "posix", reason="kills the main process")
def test_the_workers_end_when_the_main_process_is_killed(tmp_path: Path) -> None:
    """A main process killed outright (SIGKILL, the OOM killer) leaves no worker behind, and a
    rerun loses no page; at most the batch printed but not yet committed is printed again."""
    run = _long_run(tmp_path, 25_000)
    assert run.stdout is not None
    printed = _first_batch(run)
    workers = _children(run.pid)
    assert len(workers) == 1, workers
    run.kill()
    printed += run.communicate(timeout=60)[0].decode().split()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers), "a worker outlived the main process"
    again = subprocess.run(
        [*COMMAND, "long.txt", "--state", "s.bloom", "--jobs", "2"], cwd=tmp_path, capture_output=True, timeout=120
    )
    assert again.returncode == 0, again.stderr.decode()
    rest = again.stdout.decode().split()
    pages = {f"https://shop.example/item/{p}?v={v}" for v in "ab" for p in range(25_000)}
    assert set(printed) | set(rest) == pages  # none lost
    assert len(printed) + len(rest) - len(pages) <= 200  # won twice: one batch at most


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children(pid: int) -> List[int]:
    """The child processes of ``pid`` (Linux /proc), waiting up to 10 s for the first."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as listing:
                found = [int(child) for child in listing.read().split()]
        except OSError:
            pytest.skip("no /proc/PID/task/PID/children here")
        if found:
            return found
        time.sleep(0.01)
    return []


@pytest.mark.skipif(os.name != "posix", reason="signals of a forked worker")
def test_a_worker_stopped_as_it_starts_ends_quietly(capfd):
    """stop() right after the fork: the worker must not meet the main process's handlers, which
    would raise KeyboardInterrupt in it and print a traceback under a closed pipe's exit."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    with Interruptions():
        for _ in range(40):
            worker = _Worker(len, context)
            worker.stop()
            assert worker.process.exitcode == -signal.SIGTERM
    assert "Traceback" not in capfd.readouterr().err
