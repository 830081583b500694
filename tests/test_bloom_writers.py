"""Writers of one file see each other: a lone writer sets bits with plain ORs, writers that
share a file use atomic ORs, and the pure-Python filter, which has none, keeps its file to itself."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from crawldedup import bloom
from crawldedup.bloom import writer_lock
from crawldedup.bloom.format import HEADER_BYTES, Header

pytestmark = [
    pytest.mark.twins,
    pytest.mark.skipif(not writer_lock.SUPPORTED, reason="needs open-file-description locks (Linux)"),
]

COMPILED = "crawldedup.bloom._bloom_c:CBloomFilter"
PURE = "crawldedup.bloom:PyBloomFilter"
needs_extension = pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="atomic OR is the extension's")
#: Either twin, by the name a child process imports it by.
TWINS = [pytest.param(PURE, id="py"), pytest.param(COMPILED, id="cy", marks=[pytest.mark.cython, needs_extension])]

HOLDER = textwrap.dedent("""
    import sys
    module, _, name = sys.argv[1].partition(":")
    Filter = getattr(__import__(module, fromlist=[name]), name)
    with Filter.open(sys.argv[2], "r+") as bf:
        print("ready", flush=True)
        sys.stdin.readline()
""")


@pytest.fixture(autouse=True)
def _locks_work_here(tmp_path):
    """Skip where the file system under tmp_path keeps no locks (or an emulator lacks them)."""
    probe = tmp_path / "probe"
    probe.write_bytes(b"probe")
    with open(probe, "r+b") as file:
        lock = writer_lock.join(str(probe), file.fileno(), atomic_or=True)
    if lock is None:
        pytest.skip("this file system keeps no open-file-description locks")
    lock.close()
    probe.unlink()


class Holder:
    """Another process with the file open for writing, until ``close``."""

    def __init__(self, implementation: str, path: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, implementation, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line != "ready\n":
            self.process.kill()
            raise AssertionError(f"holder did not open the file: {line!r} {self.process.communicate()[1]}")

    def close(self) -> None:
        self.process.communicate("close\n", timeout=60)
        assert self.process.returncode == 0


def keys(tag: str, count: int) -> list[str]:
    return [f"https://writers.example/{tag}/{i}" for i in range(count)]


def header(path: str) -> Header:
    with open(path, "rb") as file:
        return Header.unpack(file.read(HEADER_BYTES), path, os.path.getsize(path))


def blocks(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()[HEADER_BYTES:]


def plain_or(bf) -> bool:
    with bf._file.plain_or() as alone:
        return alone


@needs_extension
def test_a_lone_writer_sets_plain_bits_until_another_joins(tmp_path):
    path = str(tmp_path / "w.bloom")
    with bloom.BloomFilter(10_000, 0.01, path) as bf:
        assert plain_or(bf)
        holder = Holder(COMPILED, path)
        try:
            assert not plain_or(bf)
            added = bf.add_many(keys("shared", 5_000))  # the atomic path, a batch big enough to ask
            assert added.sum() > 4_900 and bf.contains_many(keys("shared", 5_000)).all()
        finally:
            holder.close()
        assert plain_or(bf)
    reader = bloom.BloomFilter.open(path)  # readers take no lock and are not counted
    with bloom.BloomFilter.open(path, "r+") as again:
        assert plain_or(again)
    reader.close()


@needs_extension
def test_plain_and_atomic_paths_write_the_same_bytes(tmp_path):
    alone, shared = str(tmp_path / "alone.bloom"), str(tmp_path / "shared.bloom")
    batch = keys("same", 20_000)
    extra = bloom.PyBloomFilter(20_000, 0.01)
    extra.add_many(keys("extra", 5_000))
    bloom.BloomFilter(20_000, 0.01, shared).close()
    holder = Holder(COMPILED, shared)
    try:
        with bloom.BloomFilter.open(shared, "r+") as bf:
            assert not plain_or(bf)
            shared_new = bf.add_many(batch)
            bf.union(extra)  # atomic, word by word
            assert bf.contains_many(keys("extra", 5_000)).all()
    finally:
        holder.close()
    with bloom.BloomFilter(20_000, 0.01, alone) as bf:
        alone_new = bf.add_many(batch)
        bf.union(extra)
    assert np.array_equal(shared_new, alone_new)
    assert blocks(alone) == blocks(shared)


@pytest.mark.parametrize("holder_impl", TWINS)
@pytest.mark.parametrize("opener", TWINS)
def test_the_pure_python_filter_keeps_its_file_to_itself(tmp_path, holder_impl, opener):
    cls = bloom.PyBloomFilter if opener == PURE else bloom.BloomFilter
    path = str(tmp_path / "own.bloom")
    bloom.PyBloomFilter(1_000, 0.01, path).close()
    holder = Holder(holder_impl, path)
    try:
        if holder_impl == COMPILED and opener == COMPILED:
            cls.open(path, "r+").close()  # two compiled writers share
        else:
            with pytest.raises(BlockingIOError, match="open for writing by another process") as caught:
                cls.open(path, "r+")
            assert caught.value.filename == path and "pure-Python" in str(caught.value)
        with cls.open(path) as reader:  # readers are never refused
            assert reader.contains_many(["x"]).tolist() == [False]
    finally:
        holder.close()
    with cls.open(path, "r+") as bf:  # free again once the holder is gone
        assert bf.add("x")


@needs_extension
def test_last_writer_to_close_marks_the_file_clean(tmp_path):
    path = str(tmp_path / "clean.bloom")
    first = bloom.BloomFilter(1_000, 0.01, path)
    second = bloom.BloomFilter.open(path, "r+")
    first.add("a")
    first.close()
    assert not header(path).clean, "another writer still has it open"
    second.add("b")
    second.close()
    assert header(path).clean


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@needs_extension
def test_after_fork_parent_and_child_are_two_writers(tmp_path):
    path = str(tmp_path / "fork.bloom")
    bf = bloom.BloomFilter(20_000, 0.01, path)
    assert plain_or(bf)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: writes at the same time as the parent, through its own lock
        status = 1
        try:
            os.close(read_end)
            alone = plain_or(bf)
            os.write(write_end, b"1" if alone else b"0")
            for start in range(0, 40_000, 2_000):
                bf.add_many([f"https://writers.example/child/{i}" for i in range(start, start + 2_000)])
            bf.close()
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    child_alone = os.read(read_end, 1)
    os.close(read_end)
    assert child_alone == b"0", "the child shares the file with its parent"
    for start in range(0, 40_000, 2_000):
        bf.add_many([f"https://writers.example/parent/{i}" for i in range(start, start + 2_000)])
    assert os.waitpid(pid, 0)[1] == 0
    assert plain_or(bf), "alone again once the child has gone"
    assert bf.contains_many(keys("child", 40_000)).all() and bf.contains_many(keys("parent", 40_000)).all()
    bf.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_may_not_write_a_pure_python_writers_file(tmp_path):
    path = str(tmp_path / "py-fork.bloom")
    bf = bloom.PyBloomFilter(1_000, 0.01, path)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            refused = []
            for write in (lambda: bf.add("child"), lambda: bf.add_many(["child"]), bf.flush):
                try:
                    write()
                except BlockingIOError as exc:
                    refused.append("reopen the filter" in str(exc))
            status = 0 if refused == [True, True, True] else 2
            bf.close()
        finally:
            os._exit(status)
    assert os.waitpid(pid, 0)[1] == 0
    assert bf.add("parent") and "child" not in bf
    bf.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_filter_in_memory_belongs_to_its_process(bloom_cls):
    bf = bloom_cls(1_000, 0.01)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if bf.add("child") else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert "child" not in bf and bf.add("parent")


@pytest.mark.parametrize("implementation", TWINS)
def test_a_header_is_never_read_or_written_half_way(tmp_path, implementation):
    """Writers store the count and flags in the header page at times of their own (open, flush,
    close) while readers open the file: no one may see a page that fails its checksum."""
    path, go, done = str(tmp_path / "header.bloom"), tmp_path / "go", tmp_path / "done"
    bloom.PyBloomFilter(100_000, 0.01, path).close()
    writer = textwrap.dedent("""
        import os, sys, time
        module, _, name = sys.argv[1].partition(":")
        Filter = getattr(__import__(module, fromlist=[name]), name)
        path, go, step = sys.argv[2], sys.argv[3], int(sys.argv[4])
        bf = Filter.open(path, "r+")
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.001)
        for i in range(60_000):
            bf._file.write_state(i * step, clean=False)  # what flush() stores, without the msync
        bf.close()
    """)
    reader = textwrap.dedent("""
        import os, sys, time
        from crawldedup import FilterFileError, bloom
        path, go, done = sys.argv[1:4]
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.001)
        opened, torn = 0, []
        while not os.path.exists(done) or opened < 100:
            try:
                bloom.PyBloomFilter.open(path).close()
                opened += 1
            except FilterFileError as exc:
                torn.append(str(exc))
        print(opened, len(torn), torn[:1])
    """)
    steps = [1, 7] if implementation == COMPILED else [1]  # the twin writes alone
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", writer, implementation, path, str(go), str(step)], stdout=subprocess.PIPE, text=True
        )
        for step in steps
    ]
    readers = [
        subprocess.Popen([sys.executable, "-c", reader, path, str(go), str(done)], stdout=subprocess.PIPE, text=True)
    ]
    for process in writers + readers:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    go.touch()
    for process in writers:
        process.communicate(timeout=120)
        assert process.returncode == 0
    done.touch()
    output, _ = readers[0].communicate(timeout=120)
    opened, torn, first = output.split(maxsplit=2)
    assert int(opened) >= 100 and int(torn) == 0, first
    with bloom.PyBloomFilter.open(path) as bf:  # and the last writer left a whole, clean header
        assert bf._file is not None and bf._file.header.clean


def test_a_file_system_without_locks_is_used_unlocked(bloom_cls, tmp_path, monkeypatch):
    """Some network and FUSE file systems keep no locks (ENOLCK): such a file opens and takes
    adds as where the locks are missing, with atomic ORs for the compiled filter."""
    import errno
    import fcntl

    real = fcntl.fcntl

    def no_locks(fd, command, *args):
        if command in (fcntl.F_OFD_SETLK, fcntl.F_OFD_SETLKW, fcntl.F_OFD_GETLK):
            raise OSError(errno.ENOLCK, "No locks available")
        return real(fd, command, *args)

    monkeypatch.setattr(fcntl, "fcntl", no_locks)
    path = str(tmp_path / "nolocks.bloom")
    with bloom_cls(10_000, 0.01, path) as bf:
        assert bf._file.writers is None
        assert plain_or(bf) == (bloom_cls is bloom.PyBloomFilter)
        assert bf.add_many(keys("nolocks", 2_000)).all()
    with bloom_cls.open(path, "r+") as bf, bloom_cls.open(path) as reader:
        assert reader.contains_many(keys("nolocks", 2_000)).all() and bf.add("one more")
