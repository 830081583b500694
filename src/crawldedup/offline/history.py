"""The history of an offline crawl: every page taken as new, by fingerprint, in Parquet.

A history is a directory (a documented format, docs/engines.md "The history")::

    <history>/_crawldedup-history.json    {"format": 1, "policy": <digest>, "partitions": P}
    <history>/prefix=<p>/part-0.parquet   the pages whose fingerprint starts with prefix p

Each file holds ``fingerprint`` (``FIXED_LEN_BYTE_ARRAY(16)``, the 16 bytes of
:func:`crawldedup.fingerprint`, with a Parquet Bloom filter that DuckDB, Spark and Arrow read),
``url`` (the canonical URL) and ``seen`` (when the page was last taken as new, UTC); the
partition ``prefix`` is the fingerprint's first 16 bits shifted to ``P`` (a power of two)
values, so that the engines join one partition at a time. The policy digest says what a
fingerprint means: a job under another policy is refused.
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._checks import PathArg
from .._files import sync_tree
from ..arrow import FINGERPRINT_TYPE

__all__ = [
    "HISTORY_FORMAT",
    "HISTORY_SCHEMA",
    "INFO_NAME",
    "HistoryError",
    "HistoryInfo",
    "HistoryWriter",
    "check_partitions",
    "finish_history",
    "prefixes",
    "read_info",
    "history_files",
    "replace_history",
    "scratch_beside",
    "write_partition",
]

#: The version of the history's layout.
HISTORY_FORMAT = 1
#: The file beside the partitions that says what the history is.
INFO_NAME = "_crawldedup-history.json"
#: The columns of every history file (the partition ``prefix`` is in the directory names).
HISTORY_SCHEMA = pa.schema(
    [("fingerprint", FINGERPRINT_TYPE), ("url", pa.string()), ("seen", pa.timestamp("us", tz="UTC"))]
)
#: The Bloom filter's false-positive rate in each file (DuckDB and Spark skip a file it excludes).
BLOOM_FPP = 0.01


class HistoryError(ValueError):
    """A history directory that is not one, or one made under another policy."""


def check_partitions(partitions: int) -> int:
    """:raises ValueError: unless ``partitions`` is a power of two from 1 to 65,536."""
    if not (isinstance(partitions, int) and 1 <= partitions <= 1 << 16 and partitions & (partitions - 1) == 0):
        raise ValueError(f"partitions must be a power of two from 1 to 65536, got {partitions!r}")
    return partitions


def prefixes(hashes: np.ndarray, partitions: int) -> np.ndarray:
    """The partition of each ``(h1, h2)`` row: the fingerprint's first two bytes, big-endian,
    shifted to ``partitions`` values (int32)."""
    first = hashes[:, 0] if len(hashes) else np.zeros(0, dtype=np.uint64)
    top = ((first & np.uint64(0xFF)) << np.uint64(8)) | ((first >> np.uint64(8)) & np.uint64(0xFF))
    return (top >> np.uint64(16 - partitions.bit_length() + 1)).astype(np.int32)


@dataclass(frozen=True)
class HistoryInfo:
    """What ``crawldedup-history.json`` says."""

    policy: str
    partitions: int

    def to_json(self) -> str:
        return json.dumps({"format": HISTORY_FORMAT, "policy": self.policy, "partitions": self.partitions})


def read_info(directory: PathArg) -> Optional[HistoryInfo]:
    """The history's info, or None where no history is (a missing or empty directory).

    :raises HistoryError: for a directory that holds something else, or a damaged info file.
    """
    path = Path(directory)
    if not path.exists():
        left = sorted(path.parent.glob(f"{path.name}.old-*")) if path.parent.exists() else []
        if left:  # stopped between the two renames of replace_history
            raise HistoryError(f"{path}: missing, but {left[0]} holds the history before the last run: rename it back")
        return None
    if path.is_dir() and not any(path.iterdir()):
        return None
    try:
        found = json.loads((path / INFO_NAME).read_text(encoding="utf-8"))
        if found["format"] != HISTORY_FORMAT:
            raise HistoryError(f"{path}: history format {found['format']}, this crawldedup reads {HISTORY_FORMAT}")
        return HistoryInfo(str(found["policy"]), check_partitions(int(found["partitions"])))
    except FileNotFoundError:
        raise HistoryError(f"{path}: not a crawldedup history (no {INFO_NAME})") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HistoryError(f"{path}/{INFO_NAME}: not a history's info ({exc})") from None


def history_files(directory: PathArg) -> List[str]:
    """The Parquet files of a history (none for a missing one)."""
    return sorted(str(p) for p in Path(directory).glob("prefix=*/*.parquet"))


def _file_writer(path: Path, ndv: int) -> pq.ParquetWriter:
    return pq.ParquetWriter(
        path, HISTORY_SCHEMA, bloom_filter_options={"fingerprint": {"ndv": max(1024, ndv), "fpp": BLOOM_FPP}}
    )


def write_partition(directory: PathArg, prefix: int, rows: pa.Table, ndv: int) -> None:
    """Write one partition of a new history (``rows`` of ``HISTORY_SCHEMA``) whole."""
    folder = Path(directory) / f"prefix={prefix}"
    folder.mkdir()
    with _file_writer(folder / "part-0.parquet", ndv) as writer:
        writer.write_table(rows.select(HISTORY_SCHEMA.names).cast(HISTORY_SCHEMA))


def finish_history(directory: PathArg, info: HistoryInfo) -> None:
    """Sync a new history's files, then write its info last (a directory without it is no history)."""
    path = Path(directory)
    sync_tree(path)
    (path / INFO_NAME).write_text(info.to_json() + "\n", encoding="utf-8")
    sync_tree(path)


class HistoryWriter:
    """Writes a new history directory from batches that arrive grouped by ``prefix``.

    :param directory: where the history goes (created; it must not exist).
    :param expected_rows: the number of rows, for the size of each file's Bloom filter.
    """

    def __init__(self, directory: PathArg, info: HistoryInfo, expected_rows: int) -> None:
        self.directory = Path(directory)
        self.info = info
        self.directory.mkdir(parents=True)
        self._ndv = expected_rows // info.partitions * 2
        self._prefix: Optional[int] = None
        self._writer: Optional[pq.ParquetWriter] = None
        self.rows = 0

    def write(self, batch: Union[pa.RecordBatch, pa.Table]) -> None:
        """Write rows of the schema ``HISTORY_SCHEMA`` plus ``prefix``, in ascending prefix order."""
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        if table.num_rows == 0:
            return
        prefix = table.column("prefix").to_numpy()
        cuts = np.flatnonzero(prefix[1:] != prefix[:-1]) + 1
        for start, stop in zip(np.concatenate([[0], cuts]), np.append(cuts, len(prefix))):
            self._write_one(int(prefix[start]), table.slice(int(start), int(stop - start)))

    def _write_one(self, prefix: int, rows: pa.Table) -> None:
        if prefix != self._prefix:
            if self._prefix is not None and prefix < self._prefix:
                raise ValueError(f"history rows must come in ascending prefix order, got {prefix} after {self._prefix}")
            self._close_file()
            folder = self.directory / f"prefix={prefix}"
            folder.mkdir()
            self._writer = _file_writer(folder / "part-0.parquet", self._ndv)
            self._prefix = prefix
        assert self._writer is not None
        self._writer.write_table(rows.select(HISTORY_SCHEMA.names).cast(HISTORY_SCHEMA))
        self.rows += rows.num_rows

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def close(self) -> None:
        """Finish the files and write the info last."""
        self._close_file()
        finish_history(self.directory, self.info)


def replace_history(new: PathArg, directory: PathArg) -> None:
    """Put the finished history ``new`` in place of ``directory`` (renames: a crash leaves the
    old history or the new one, plus at most a ``.old-*`` directory to remove)."""
    target, new = Path(directory), Path(new)
    old = target.with_name(f"{target.name}.old-{uuid.uuid4().hex[:8]}")
    if target.exists():
        target.rename(old)
    new.rename(target)
    if old.exists():
        shutil.rmtree(old)


def scratch_beside(directory: PathArg, what: str) -> Path:
    """A new path beside ``directory``, on its file system, for a history being made."""
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    return target.with_name(f"{target.name}.{what}-{uuid.uuid4().hex[:8]}")
