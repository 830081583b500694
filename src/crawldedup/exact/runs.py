"""Runs: immutable sorted sets of 64-bit keys, in memory or in a mapped file of their own.

A run is made once, whole (from a batch's sorted keys, or by merging runs), and never written
again. In a file it is built under a temporary name, its checksum computed and stored in its
header, then renamed into place; opening it checks its header, its size and its checksum
before any key is read, so a truncated or damaged run is named, never read as a wrong answer.
"""

from __future__ import annotations

import mmap
import os
import zlib
from typing import Callable, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .._files import reserve_space
from .format import (
    HEADER_BYTES,
    ExactFileError,
    RunHeader,
    RunRecord,
    index_bytes,
    prefix_bits,
    run_file_bytes,
    run_name,
    stream_bytes,
)

__all__ = ["Kernels", "Run", "build_run", "open_run"]

RunArrays = Tuple[np.ndarray, np.ndarray, int]


class Kernels(NamedTuple):
    """One twin's kernels (``_runs_py`` or ``_runs_c``): the same answers and the same bytes."""

    sort_keys: Callable[[np.ndarray], np.ndarray]
    encode_run: Callable[[np.ndarray, int, np.ndarray, np.ndarray], None]
    decode_run: Callable[[np.ndarray, np.ndarray, int], np.ndarray]
    probe_run: Callable[[np.ndarray, np.ndarray, int, np.ndarray], np.ndarray]
    merge_runs: Callable[[Sequence[RunArrays], int, np.ndarray, np.ndarray], None]


class Run:
    """One sorted run: its header, and its index and stream as arrays (views of its mapping
    when it lives in a file)."""

    __slots__ = ("header", "index", "stream", "path", "durable", "_mapping")

    def __init__(
        self,
        header: RunHeader,
        index: np.ndarray,
        stream: np.ndarray,
        path: Optional[str] = None,
        mapping: Optional[mmap.mmap] = None,
        durable: bool = False,
    ) -> None:
        self.header = header
        self.index = index
        self.stream = stream
        self.path = path
        #: Whether the file was synced (fsync): it then survives a power loss.
        self.durable = durable
        self._mapping = mapping

    @property
    def keys(self) -> int:
        return self.header.keys

    @property
    def generation(self) -> int:
        return self.header.generation

    @property
    def sequence(self) -> int:
        return self.header.sequence

    @property
    def nbytes(self) -> int:
        """Bytes of the run (its file's size, or what it would be)."""
        return self.header.file_bytes

    def arrays(self) -> RunArrays:
        """What the kernels take: ``(index, stream, prefix bits)``."""
        return self.index, self.stream, self.header.prefix

    def record(self) -> RunRecord:
        """The run as the manifest lists it."""
        header = self.header
        return RunRecord(header.sequence, header.generation, header.keys, header.prefix, header.body_crc, self.durable)

    def sync(self) -> None:
        """Make the run's file durable (fsync): it then survives a power loss."""
        if self.path is not None and not self.durable:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.durable = True

    def close(self) -> None:
        """Drop the arrays and the mapping (the file stays)."""
        self.index = self.stream = np.zeros(0, dtype=np.uint8)
        if self._mapping is not None:
            self._mapping.close()
            self._mapping = None

    def remove(self) -> None:
        """Close the run and delete its file."""
        self.close()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        where = self.path or "memory"
        return f"<Run {self.sequence} generation={self.generation} keys={self.keys} {where}>"


def _body_crc(mapping: mmap.mmap) -> int:
    with memoryview(mapping) as whole, whole[HEADER_BYTES:] as body:
        return zlib.crc32(body)


def _views(buffer: Union[mmap.mmap, bytearray], keys: int, prefix: int) -> Tuple[np.ndarray, np.ndarray]:
    index = np.frombuffer(buffer, dtype="<u8", count=(1 << prefix) + 1, offset=HEADER_BYTES)
    stream = np.frombuffer(
        buffer, dtype=np.uint8, count=stream_bytes(keys, prefix), offset=HEADER_BYTES + index_bytes(prefix)
    )
    return index, stream


def build_run(
    kernels: Kernels,
    sources: Union[np.ndarray, Sequence[Run]],
    generation: int,
    sequence: int,
    directory: Optional[str],
    durable: bool = False,
) -> Run:
    """Make the run of ``sources``: a batch's keys, sorted and distinct, or disjoint runs to merge.

    :param directory: where its file goes; None keeps it in memory.
    :param durable: sync the file before it is renamed into place (it replaces durable data).
    :raises OSError: when the file cannot be written (nothing is left at its name).
    """
    keys = len(sources) if isinstance(sources, np.ndarray) else sum(run.keys for run in sources)
    prefix = prefix_bits(keys)

    def fill(index: np.ndarray, stream: np.ndarray) -> None:
        if isinstance(sources, np.ndarray):
            kernels.encode_run(sources, prefix, index, stream)
        else:
            kernels.merge_runs([run.arrays() for run in sources], prefix, index, stream)

    if directory is None:
        index = np.zeros((1 << prefix) + 1, dtype=np.uint64)
        stream = np.zeros(stream_bytes(keys, prefix), dtype=np.uint8)
        fill(index, stream)
        return Run(RunHeader(keys, prefix, generation, sequence, 0), index, stream)
    name = run_name(sequence)
    path = os.path.join(directory, name)
    temporary = os.path.join(directory, f".{name}.tmp")
    size = run_file_bytes(keys, prefix)
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o666)
    try:
        reserve_space(fd, size, path, "a run of the exact tier")
        # On an error the mapping goes with the last view of it (a traceback may hold one).
        mapping = mmap.mmap(fd, size)
        index, stream = _views(mapping, keys, prefix)
        fill(index, stream)
        header = RunHeader(keys, prefix, generation, sequence, _body_crc(mapping))
        mapping[:HEADER_BYTES] = header.pack()
        if durable:
            mapping.flush()
            os.fsync(fd)
        os.replace(temporary, path)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise
    finally:
        os.close(fd)
    # The mapping that wrote it reads it too: its pages are mapped already (a new mapping would
    # fault each one in again). The arrays are made read-only: a run never changes.
    index.flags.writeable = stream.flags.writeable = False
    return Run(header, index, stream, path, mapping, durable)


def open_run(directory: str, record: RunRecord) -> Run:
    """Open the run ``record`` names after checking its file whole: header, size and checksum.

    :raises ExactFileError: naming the file, when it is missing, truncated, damaged or not the
        run the manifest lists.
    """
    path = os.path.join(directory, record.name)
    try:
        file = open(path, "rb")
    except FileNotFoundError:
        raise ExactFileError(f"{path}: missing: the manifest lists it") from None
    with file:
        size = os.fstat(file.fileno()).st_size
        header = RunHeader.unpack(file.read(HEADER_BYTES), path, size)
        found = (header.sequence, header.generation, header.keys, header.prefix, header.body_crc)
        listed = (record.sequence, record.generation, record.keys, record.prefix, record.body_crc)
        if found != listed:
            raise ExactFileError(
                f"{path}: not the run the manifest lists (sequence, generation, keys, prefix, "
                f"checksum: {found} against {listed})"
            )
        mapping = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)
    actual = _body_crc(mapping)
    if actual != header.body_crc:
        mapping.close()
        raise ExactFileError(
            f"{path}: corrupted run: checksum {actual:#010x} does not match the stored {header.body_crc:#010x}"
        )
    index, stream = _views(mapping, header.keys, header.prefix)
    return Run(header, index, stream, path, mapping, record.durable)
