"""Persistence across processes: reopen elsewhere, survive SIGKILL, share one file between writers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from crawldedup import bloom
from crawldedup.bloom.format import HEADER_BYTES

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

IMPLEMENTATIONS = [pytest.param("crawldedup.bloom:PyBloomFilter", id="py")]
if bloom.HAS_EXTENSION:
    IMPLEMENTATIONS.append(pytest.param("crawldedup.bloom._bloom_c:CBloomFilter", id="cy", marks=pytest.mark.cython))

PRELUDE = textwrap.dedent("""
    import sys
    module, _, name = sys.argv[1].partition(":")
    Filter = getattr(__import__(module, fromlist=[name]), name)
    path = sys.argv[2]
""")


def run_child(code: str, implementation: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code), implementation, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def key(i: int) -> str:
    return f"https://persist.example/page/{i}"


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_reopened_in_another_process_every_item_is_present(implementation, tmp_path):
    path = str(tmp_path / "p.bloom")
    writer = run_child(
        """
        with Filter(50_000, 0.001, path, metadata=b"m") as bf:
            bf.add_many([f"https://persist.example/page/{i}" for i in range(20_000)])
            for i in range(20_000, 30_000):
                bf.add(f"https://persist.example/page/{i}")
    """,
        implementation,
        path,
    )
    assert writer.returncode == 0, writer.stderr
    reader = run_child(
        """
        with Filter.open(path) as bf:
            keys = [f"https://persist.example/page/{i}" for i in range(30_000)]
            assert bf.contains_many(keys).all() and all(k in bf for k in keys)
            print(bf.approx_items, bf.metadata.decode())
    """,
        implementation,
        path,
    )
    assert reader.returncode == 0, reader.stderr
    count, metadata = reader.stdout.split()
    assert 29_900 < int(count) <= 30_000 and metadata == "m"


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("batch", [False, True], ids=["add", "add_many"])
def test_sigkill_mid_insert_keeps_every_returned_add(implementation, batch, tmp_path):
    path = str(tmp_path / "k.bloom")
    # The child reports each add (or each batch) that returned, then is killed while adding more.
    child = subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-c",
            PRELUDE
            + textwrap.dedent("""
        bf = Filter(2_000_000, 0.01, path)
        batch = sys.argv[3] == "1"
        i = 0
        while True:
            if batch:
                bf.add_many([f"https://persist.example/page/{j}" for j in range(i, i + 100)])
                i += 100
            else:
                bf.add(f"https://persist.example/page/{i}")
                i += 1
            sys.stdout.write(f"{i}\\n")
    """),
            implementation,
            path,
            "1" if batch else "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    done = 0
    try:
        for line in child.stdout:
            done = int(line)
            if done >= 20_000:
                os.kill(child.pid, signal.SIGKILL)
                break
        done = max([done] + [int(line) for line in child.stdout])  # what was reported before the kill
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    check = run_child(
        f"""
        with Filter.open(path) as bf:
            keys = [f"https://persist.example/page/{{i}}" for i in range({done})]
            missing = [k for k, hit in zip(keys, bf.contains_many(keys)) if not hit]
            assert not missing, missing[:5]
            print(bf.approx_items)
    """,
        implementation,
        path,
    )
    assert check.returncode == 0, check.stderr
    assert int(check.stdout) == pytest.approx(done, rel=0.05), "an unclean file recounts approx_items"


@pytest.mark.cython
@pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="atomic OR across processes is the extension's")
@pytest.mark.parametrize("batch", [500, 10_000], ids=["atomic-batches", "batches-that-ask"])
def test_processes_sharing_a_file_never_lose_a_bit(tmp_path, batch):
    """Two writers start together and set bits in the same words for a while: the file must
    hold exactly the bits of both key sets (a lost OR shows as a missing bit). Batches of
    10,000 ask to write alone (plain ORs) where the platform's locks say who writes."""
    path, go = str(tmp_path / "shared.bloom"), tmp_path / "go"
    count = 400_000
    bloom.BloomFilter(count, 0.01, path).close()
    code = PRELUDE + textwrap.dedent("""
        import os, time
        go, tag, batch, count = sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
        todo = [[f"https://shared.example/{tag}/{i}" for i in range(start, start + batch)]
                for start in range(0, count, batch)]
        with Filter.open(path, "r+") as bf:
            print("ready", flush=True)
            while not os.path.exists(go):
                time.sleep(0.001)
            for keys in todo:
                bf.add_many(keys)
    """)
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                "crawldedup.bloom._bloom_c:CBloomFilter",
                path,
                str(go),
                tag,
                str(batch),
                str(count),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    go.touch()
    for writer in writers:
        writer.communicate(timeout=120)
        assert writer.returncode == 0
    expected = bloom.BloomFilter(count, 0.01, str(tmp_path / "expected.bloom"))
    for tag in ("a", "b"):
        expected.add_many([f"https://shared.example/{tag}/{i}" for i in range(count)])
    expected.close()
    with open(path, "rb") as shared, open(tmp_path / "expected.bloom", "rb") as alone:
        assert shared.read()[HEADER_BYTES:] == alone.read()[HEADER_BYTES:]
    with bloom.BloomFilter.open(path) as bf:
        for tag in ("a", "b"):
            assert bf.contains_many([f"https://shared.example/{tag}/{i}" for i in range(count)]).all()
