"""File format v1 (docs/format.md): header fields, the frozen fixture, twins reading each other, bad files."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

from crawldedup import FilterFileError, bloom
from crawldedup.bloom.format import FORMAT_VERSION

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

DATA = Path(__file__).parent / "data"
#: sha256 of the block area of tests/data/format-v1.bloom; a change means the format changed.
FIXTURE_BLOCKS_SHA256 = "e41158555261ed434dbcd3fb1f2d6a7f1cf1744362c8fd6673e86d5aef3b50fa"
#: The header fields at their documented offsets (docs/format.md), read independently of _format.
FIELDS = struct.Struct("<8sIIIIIIQdQIIQII")

WRITERS = READERS = [pytest.param("crawldedup.bloom:PyBloomFilter", id="py")]
if bloom.HAS_EXTENSION:
    WRITERS = READERS = WRITERS + [
        pytest.param("crawldedup.bloom._bloom_c:CBloomFilter", id="cy", marks=pytest.mark.cython)
    ]


def implementation(name: str) -> type:
    module, _, cls = name.partition(":")
    return getattr(__import__(module, fromlist=[cls]), cls)


def read_fields(path: Path) -> dict:
    data = path.read_bytes()
    names = [
        "magic",
        "version",
        "header_bytes",
        "layout",
        "hash",
        "seed",
        "block_bytes",
        "capacity",
        "error_rate",
        "num_blocks",
        "num_hashes",
        "flags",
        "approx_items",
        "metadata_len",
        "reserved",
    ]
    fields = dict(zip(names, FIELDS.unpack_from(data)))
    fields["metadata"] = data[80 : 80 + fields["metadata_len"]]
    fields["crc_ok"] = struct.unpack_from("<I", data, 4092)[0] == zlib.crc32(data[:4092])
    fields["size"] = len(data)
    return fields


def test_header_fields_at_their_documented_offsets(bloom_cls, tmp_path):
    path = tmp_path / "h.bloom"
    bf = bloom_cls(10_000, 0.001, path, metadata=b"policy:abc")
    bf.add_many(["a", "b", "c"])
    shape = (bf.num_blocks, bf.num_hashes)
    open_fields = read_fields(path)
    assert open_fields["flags"] & 1 == 0, "an open writer leaves the clean flag down"
    bf.close()
    fields = read_fields(path)
    assert fields["magic"] == b"CDDBLOOM" and fields["version"] == 1 and fields["header_bytes"] == 4096
    assert (fields["layout"], fields["hash"], fields["seed"], fields["block_bytes"]) == (1, 1, 0, 64)
    assert (fields["capacity"], fields["error_rate"]) == (10_000, 0.001)
    assert (fields["num_blocks"], fields["num_hashes"]) == shape
    assert fields["flags"] == 1 and fields["approx_items"] == 3 and fields["reserved"] == 0
    assert fields["metadata"] == b"policy:abc" and fields["crc_ok"]
    assert fields["size"] == 4096 + 64 * fields["num_blocks"]


def test_format_v1_fixture_is_frozen(bloom_cls):
    path = DATA / "format-v1.bloom"
    fields = read_fields(path)
    assert (fields["magic"], fields["version"], fields["capacity"], fields["error_rate"]) == (
        b"CDDBLOOM",
        1,
        1000,
        0.01,
    )
    assert (fields["num_blocks"], fields["num_hashes"], fields["approx_items"]) == (20, 6, 501)
    assert fields["metadata"] == b"crawldedup format-v1 fixture" and fields["crc_ok"] and fields["flags"] == 1
    assert hashlib.sha256(path.read_bytes()[4096:]).hexdigest() == FIXTURE_BLOCKS_SHA256
    keys = (DATA / "format-v1-keys.txt").read_text(encoding="utf-8").splitlines()
    assert len(keys) == 501
    with bloom_cls.open(path) as bf:
        assert bf.contains_many(keys).all()
        assert all(key in bf for key in keys)
        absent = [f"https://absent.example/{i}" for i in range(1000)]
        assert bf.contains_many(absent).mean() < 0.05


def test_fixture_generator_reproduces_the_fixture(tmp_path):
    script = (DATA / "make_format_v1.py").read_text(encoding="utf-8")
    (tmp_path / "make_format_v1.py").write_text(script, encoding="utf-8")
    subprocess.run([sys.executable, str(tmp_path / "make_format_v1.py")], check=True, capture_output=True)
    assert (tmp_path / "format-v1.bloom").read_bytes() == (DATA / "format-v1.bloom").read_bytes()
    assert (tmp_path / "format-v1-keys.txt").read_bytes() == (DATA / "format-v1-keys.txt").read_bytes()


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("reader", READERS)
def test_twins_read_each_others_files(writer, reader, tmp_path):
    present = [f"https://w.example/{i}" for i in range(3000)] + ["", "ü", b"\x00\xff"]
    absent = [f"https://r.example/{i}" for i in range(3000)]
    writer_cls, reader_cls = implementation(writer), implementation(reader)
    with writer_cls(5000, 0.01, tmp_path / "w.bloom") as written:
        written.add_many(present[:1500])
        for key in present[1500:]:
            written.add(key)
        expected = list(written.contains_many(absent))
        count = written.approx_items
    with reader_cls.open(tmp_path / "w.bloom", "r+") as read:
        assert read.contains_many(present).all()
        assert list(read.contains_many(absent)) == expected
        assert [key in read for key in absent] == expected
        assert read.approx_items == count > 2900


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("reader", READERS)
def test_twins_write_identical_bytes(writer, reader, tmp_path):
    keys = [f"https://same.example/{i}" for i in range(5000)] + ["日本", b"raw"]
    files = []
    for name, cls in (("a", implementation(writer)), ("b", implementation(reader))):
        with cls(8000, 0.001, tmp_path / f"{name}.bloom", metadata=b"same") as bf:
            bf.add_many(keys[:2500])
            bf.update(keys[2500:])
            bf.add("one more")
        files.append((tmp_path / f"{name}.bloom").read_bytes())
    assert files[0] == files[1]


# -- bad files: each opened in a child process, so a crash fails the test -----------------------


def good_file(directory: Path) -> Path:
    path = directory / "good.bloom"
    with bloom.PyBloomFilter(1000, 0.01, path) as bf:
        bf.add_many(["a", "b"])
    return path


def make_bad(kind: str, directory: Path) -> Path:
    data = good_file(directory).read_bytes()
    path = directory / "bad.bloom"
    if kind == "empty":
        data = b""
    elif kind == "truncated header":
        data = data[:100]
    elif kind == "truncated bits":
        data = data[:-64]
    elif kind == "trailing bytes":
        data = data + b"\0" * 64
    elif kind == "wrong magic":
        data = b"NOTBLOOM" + data[8:]
    elif kind == "foreign file":
        data = b"%PDF-1.7\n" + bytes(5000)
    elif kind == "newer version":
        page = bytearray(data[:4096])
        struct.pack_into("<I", page, 8, FORMAT_VERSION + 1)
        struct.pack_into("<I", page, 4092, zlib.crc32(bytes(page[:4092])))
        data = bytes(page) + data[4096:]
    elif kind.startswith("flipped byte"):
        offset = int(kind.split()[-1])
        flipped = bytearray(data)
        flipped[offset] ^= 0x10
        data = bytes(flipped)
    elif kind == "directory":
        path.mkdir()
        return path
    elif kind == "missing":
        return path
    path.write_bytes(data)
    return path


BAD_FILES = {
    "empty": "empty file",
    "truncated header": "truncated header",
    "truncated bits": "truncated bits",
    "trailing bytes": "trailing bytes",
    "wrong magic": "bad magic",
    "foreign file": "bad magic",
    "newer version": f"format version {FORMAT_VERSION + 1} is newer",
    "flipped byte 9": "unsupported format version|newer",
    "flipped byte 33": "checksum",
    "flipped byte 50": "checksum",
    "flipped byte 66": "checksum",
    "flipped byte 2000": "checksum",
    "flipped byte 4094": "checksum",
    "directory": "is a directory",
    "missing": "no such file",
}

CHILD = textwrap.dedent("""
    import sys
    from crawldedup import FilterFileError
    module, _, name = sys.argv[1].partition(":")
    cls = getattr(__import__(module, fromlist=[name]), name)
    try:
        cls.open(sys.argv[2], sys.argv[3])
    except FilterFileError as error:
        assert isinstance(error, ValueError)
        print(error)
        sys.exit(0)
    sys.exit("opened without error")
""")


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_files_are_filter_file_errors_not_crashes(reader, kind, tmp_path):
    path = make_bad(kind, tmp_path)
    mode = "r+" if kind in ("truncated bits", "flipped byte 2000") else "r"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, reader, str(path), mode], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, f"child exited {child.returncode}: {child.stderr[-2000:]}"
    message = child.stdout.strip()
    assert str(path) in message
    assert any(part in message for part in BAD_FILES[kind].split("|")), message


def test_bad_file_error_in_process_keeps_the_file_untouched(bloom_cls, tmp_path):
    path = make_bad("truncated bits", tmp_path)
    before = path.read_bytes()
    with pytest.raises(FilterFileError, match="truncated bits: file is 5,312 bytes, the header says 5,376"):
        bloom_cls.open(path, "r+")
    assert path.read_bytes() == before
