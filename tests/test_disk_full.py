"""A full disk: creating, opening or copying a filter file, and the command, on a file system with no room.

Two ways to run out of room, so that every machine runs some of these:

- a small tmpfs the test mounts (root on Linux, as in CI's containers): ENOSPC, and the case
  that used to kill the process, a sparse file whose pages the disk cannot back (SIGBUS on
  the first add);
- RLIMIT_FSIZE in a child process (any POSIX user): EFBIG.

Each scenario runs in a child process with faulthandler on, so a SIGBUS fails the test with
the child's traceback instead of killing pytest. Every failure must be an ``OSError`` naming
the path, and leave nothing at the path (nor a temporary file beside it) that could later
open as a valid filter.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crawldedup import FilterFileError, bloom

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

TWINS = [pytest.param("py", id="py")]
if bloom.HAS_EXTENSION:
    TWINS.append(pytest.param("cy", id="cy", marks=pytest.mark.cython))

#: A filter of this capacity at 1% is 131,200 bytes (4,096 + 1,986 blocks of 64).
CAPACITY = 100_000
FILE_BYTES = 131_200

SCENARIO = textwrap.dedent("""
    import json, os, resource, shutil, signal, sys
    from crawldedup import bloom
    twin, action, path, capacity = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    limit = int(sys.argv[5])
    if bloom.HAS_EXTENSION:
        from crawldedup.bloom._bloom_c import CBloomFilter
    cls = CBloomFilter if twin == "cy" else bloom.PyBloomFilter
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death by SIGXFSZ
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    keys = [f"https://full.example/{i}" for i in range(capacity)]
    try:
        if action == "create":
            bf = cls(capacity, 0.01, path)
        elif action == "open":
            bf = cls.open(path, "r+")
        else:  # copy an in-memory filter to path
            source = cls(capacity, 0.01)
            source.add_many(keys[:100])
            bf = source.copy(path)
        bf.add_many(keys)  # touches every page of a filter this full
        bf.close()
    except OSError as error:
        print(json.dumps({"outcome": "error", "type": type(error).__name__, "errno": error.errno,
                          "message": str(error)}))
    else:
        print(json.dumps({"outcome": "ok"}))
""")


def run_scenario(twin: str, action: str, path: Path, capacity: int = CAPACITY, fsize_limit: int = 0) -> dict:
    """Run one scenario in a child; a signal (SIGBUS, SIGXFSZ) or any other death fails the test."""
    child = subprocess.run(
        [
            sys.executable,
            "-X",
            "faulthandler",
            "-c",
            SCENARIO,
            twin,
            action,
            str(path),
            str(capacity),
            str(fsize_limit),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, f"the child died ({child.returncode}) {action}ing {path}:\n{child.stderr[-3000:]}"
    return json.loads(child.stdout)


def assert_nothing_left(path: Path) -> None:
    """No file at ``path`` that opens as a filter, and no temporary file beside it."""
    if path.exists():
        with pytest.raises(FilterFileError):
            bloom.PyBloomFilter.open(path)
    leftovers = [p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]
    assert leftovers == [], leftovers


def assert_no_room(result: dict, path: Path, *codes: int) -> None:
    assert result["outcome"] == "error", result
    assert result["errno"] in codes, result
    assert str(path) in result["message"], result


# ----- a tmpfs with no room ----------------------------------------------------------------------------


@pytest.mark.parametrize("twin", TWINS)
def test_a_filter_that_fits_works_there(small_fs, twin):
    """The control: the same scenario succeeds when there is room, so the failures below are the disk's."""
    path = small_fs / "fits.bloom"
    assert run_scenario(twin, "create", path) == {"outcome": "ok"}
    with bloom.PyBloomFilter.open(path) as bf:
        assert "https://full.example/7" in bf and bf.approx_items > CAPACITY * 0.9


@pytest.mark.parametrize("twin", TWINS)
def test_creating_a_filter_larger_than_the_disk(small_fs, twin):
    path = small_fs / "huge.bloom"
    result = run_scenario(twin, "create", path, capacity=20 * CAPACITY)  # 2.6 MB on a 1 MiB disk
    assert_no_room(result, path, errno.ENOSPC)
    assert "No space left" in result["message"]
    assert_nothing_left(path)


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("action", ["create", "copy"])
def test_a_new_filter_on_an_almost_full_disk(small_fs, fill, twin, action):
    """Room for the header page but not for the bits: an error at creation, not SIGBUS at the first add."""
    fill(small_fs, leave_bytes=64 * 1024)
    path = small_fs / f"{action}.bloom"
    assert_no_room(run_scenario(twin, action, path), path, errno.ENOSPC)
    assert_nothing_left(path)


@pytest.mark.parametrize("twin", TWINS)
def test_opening_a_sparse_file_on_a_full_disk(small_fs, fill, tmp_path, twin):
    """A valid file whose blocks were never allocated (copied sparse): mode r+ reserves them or fails cleanly."""
    source = tmp_path / "source.bloom"
    with bloom.PyBloomFilter(CAPACITY, 0.01, source) as bf:
        bf.add("https://full.example/0")
    path = small_fs / "sparse.bloom"
    data = source.read_bytes()
    with open(path, "wb") as sparse:  # the header and one non-zero block only: holes elsewhere
        sparse.write(data[:4096])
        sparse.truncate(len(data))
    fill(small_fs, leave_bytes=16 * 1024)
    assert_no_room(run_scenario(twin, "open", path), path, errno.ENOSPC)
    with bloom.PyBloomFilter.open(path) as bf:  # still the same valid (empty) filter, read-only
        assert bf.num_blocks == (FILE_BYTES - 4096) // 64


def test_the_command_on_a_full_disk(small_fs, fill, tmp_path):
    fill(small_fs, leave_bytes=64 * 1024)
    state = small_fs / "state.bloom"
    urls = "".join(f"https://full.example/{i}\n" for i in range(100)).encode()
    result = subprocess.run(
        [sys.executable, "-m", "crawldedup", "filter", "--state", str(state), "--capacity", str(CAPACITY)],
        input=urls,
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 3, result
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crawldedup: error: state file"), lines
    assert str(state) in lines[0] and "No space left on device" in lines[0], lines
    assert result.stdout == b""
    assert_nothing_left(state)


def test_merge_onto_a_full_disk(small_fs, fill, tmp_path):
    inputs = []
    for name in ("a", "b"):
        with bloom.PyBloomFilter(CAPACITY, 0.01, tmp_path / f"{name}.bloom") as bf:
            bf.add(name)
        inputs.append(str(tmp_path / f"{name}.bloom"))
    fill(small_fs, leave_bytes=16 * 1024)
    output = small_fs / "merged.bloom"
    result = subprocess.run(
        [sys.executable, "-m", "crawldedup", "merge", *inputs, "-o", str(output)],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 4, result
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and f"cannot write {output}" in lines[0] and "No space left" in lines[0], lines
    assert_nothing_left(output)
    assert not any(p.name.endswith(".merging") for p in small_fs.iterdir())


# ----- a file size limit (RLIMIT_FSIZE), for any POSIX user -------------------------------------------

needs_rlimit = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")


@needs_rlimit
@pytest.mark.parametrize("twin", TWINS)
def test_creating_a_filter_past_the_file_size_limit(tmp_path, twin):
    path = tmp_path / "limited.bloom"
    result = run_scenario(twin, "create", path, fsize_limit=64 * 1024)
    assert_no_room(result, path, errno.EFBIG)
    assert_nothing_left(path)
    assert run_scenario(twin, "create", path, fsize_limit=FILE_BYTES) == {"outcome": "ok"}  # exactly enough


@needs_rlimit
def test_the_command_past_the_file_size_limit(tmp_path):
    limit = 64 * 1024
    child = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        from crawldedup.cli import main
        sys.exit(main(sys.argv[1:]))
    """)
    result = subprocess.run(
        [sys.executable, "-c", child, "filter", "--state", "s.bloom", "--capacity", str(CAPACITY)],
        input=b"https://a.example/\n",
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 3, result
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crawldedup: error: state file s.bloom"), lines
    assert os.strerror(errno.EFBIG) in lines[0], lines
    assert_nothing_left(tmp_path / "s.bloom")
