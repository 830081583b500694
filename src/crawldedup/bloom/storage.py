"""The storage behind a filter: header page plus blocks, in a mapped file or anonymous memory.

Both twins keep one ``BloomFile`` and probe its blocks through their own view of ``mm``.
Creation goes through a temporary file that is renamed into place once complete, so a crash
never leaves a half-written file at the path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import math
import mmap
import os
import secrets
import stat
from typing import Iterator, Optional

import numpy as np

from .._checks import PathArg
from .._files import reserve_space
from . import writer_lock
from .format import (
    BLOCK_BITS,
    BLOCK_BYTES,
    HEADER_BYTES,
    MAX_STAGES,
    STAGES_FIELD,
    FilterFileError,
    FilterKindError,
    Header,
)

#: Statistics scan the blocks in 64 MiB slices, so a 1.2 GB filter needs no 1.2 GB temporary.
_SCAN_BLOCKS = 1 << 20
#: Transparent huge pages cut TLB misses on large mappings where the kernel offers them
#: (anonymous memory; see docs/performance.md for what it measured). Below 2 MiB they cannot apply.
_HUGEPAGE_MIN_BYTES = 2 << 20
#: A batch of at least one key per this many 4 KiB pages of a file mapping is a bulk load: it
#: touches nearly every 2 MiB of the file anyway, so huge pages cost it no extra page cache or
#: write-back, and they spare it most page faults and TLB misses (docs/performance.md). A
#: crawler's batches stay below it and keep 4 KiB pages: with huge ones, each key it adds would
#: dirty 2 MiB of page cache for the kernel to write back.
_BULK_PAGES_PER_KEY = 2
#: Anonymous mappings are private to the process where the platform can say so (not Windows,
#: where no process forks).
_PRIVATE = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}

if hasattr(np, "bitwise_count"):  # numpy >= 2.0

    def _popcount_rows(rows: np.ndarray) -> np.ndarray:
        counts: np.ndarray = np.bitwise_count(rows.view(np.uint64)).sum(axis=1, dtype=np.int64)
        return counts

else:  # pragma: no cover  (numpy 1.x)
    _BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def _popcount_rows(rows: np.ndarray) -> np.ndarray:
        counts: np.ndarray = _BYTE_POPCOUNT[rows].sum(axis=1, dtype=np.int64)
        return counts


def _advise_hugepages(mm: mmap.mmap, size: int, name: str = "MADV_HUGEPAGE") -> None:
    advice = getattr(mmap, name, None)
    if advice is not None and size >= _HUGEPAGE_MIN_BYTES:
        try:
            mm.madvise(advice)
        except OSError:  # pragma: no cover  (kernel without THP)
            pass


def _move_into_place(tmp: str, path: str, overwrite: bool) -> None:
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails with FileExistsError instead of replacing: no race with a writer
    except FileExistsError:
        raise
    except (OSError, NotImplementedError):  # pragma: no cover  (file systems without hard links)
        if os.path.lexists(path):
            raise FileExistsError(
                errno.EEXIST, "filter file exists (pass overwrite=True to replace it)", path
            ) from None
        os.rename(tmp, path)
    else:
        os.unlink(tmp)


def _write_new_file(header: Header, path: str, overwrite: bool) -> None:
    directory, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    # 0o666 and the process umask, like open(path, "w"): never wider than the user asked for.
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with open(fd, "r+b") as file:
            reserve_space(file.fileno(), header.file_bytes, path)
            file.write(header.pack())
        _move_into_place(tmp, path, overwrite)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


class BloomFile:
    """One filter's header and blocks, mapped in memory.

    ``header.approx_items`` is the count at open; the twins keep the live count and hand it back
    on ``flush`` and ``close``.
    """

    def __init__(
        self,
        mm: mmap.mmap,
        header: Header,
        path: Optional[str],
        read_only: bool,
        atomic_or: bool,
        writers: Optional[writer_lock.WriterLock] = None,
    ) -> None:
        self.mm = mm
        self.header = header
        self.path = path
        self.read_only = read_only
        self.atomic_or = atomic_or
        self.writers = writers

    @classmethod
    def create(cls, header: Header, path: Optional[PathArg], overwrite: bool, atomic_or: bool) -> BloomFile:
        """Create a new empty filter with ``header``'s shape, in memory when ``path`` is None.

        :param atomic_or: whether the filter sets bits with atomic ORs when it shares the file.
        :raises FileExistsError: when ``path`` exists and ``overwrite`` is false.
        :raises OSError: when the disk cannot hold the file (nothing is left at ``path``).
        """
        if path is None:
            # Private: a forked child gets its own copy, as with any Python object, so the
            # process that made the filter is its only writer.
            mm = mmap.mmap(-1, header.file_bytes, **_PRIVATE)
            _advise_hugepages(mm, header.file_bytes)
            mm[:HEADER_BYTES] = header.pack()
            return cls(mm, header, None, False, atomic_or)
        path = os.fspath(path)
        if not overwrite and os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "filter file exists (pass overwrite=True to replace it)", path)
        _write_new_file(dataclasses.replace(header, clean=True), path, overwrite)
        return cls.open(path, "r+", atomic_or, windowed=header.windowed)

    @classmethod
    def open(cls, path: PathArg, mode: str, atomic_or: bool, windowed: bool = False) -> BloomFile:
        """Open an existing filter file after checking its whole header and its size.

        With mode ``"r+"`` this process joins the file's writers (``crawldedup._writers``).

        :param atomic_or: whether the filter sets bits with atomic ORs when it shares the file.
        :param windowed: whether the caller is a windowed filter (format v2) or a plain one (v1).
        :raises ValueError: for a mode other than ``"r"`` and ``"r+"``.
        :raises FilterKindError: for a file of the other kind (windowed or plain).
        :raises FilterFileError: for a missing path, a directory or a file that is not a valid filter.
        :raises OSError: with mode ``"r+"``, when the disk cannot hold the blocks of a sparse file.
        :raises BlockingIOError: with mode ``"r+"``, when the file's other writers cannot share it.
        """
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        path = os.fspath(path)
        if os.path.isdir(path):
            raise FilterFileError(f"{path}: is a directory, not a filter file")
        try:
            file = open(path, "rb" if mode == "r" else "r+b")
        except FileNotFoundError:
            raise FilterFileError(f"{path}: no such file") from None
        with file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise FilterFileError(f"{path}: not a regular file")
            with writer_lock.header_access(file.fileno(), write=False):
                header = Header.unpack(file.read(HEADER_BYTES), path, status.st_size)
            if header.windowed != windowed:
                raise FilterKindError(
                    f"{path}: a windowed filter (format v2): open it with "
                    "crawldedup.bloom.open_filter or WindowedBloomFilter.open"
                    if header.windowed
                    else f"{path}: a plain filter without a recrawl window (format v1)"
                )
            if mode == "r+":  # a sparse file (copied with cp --sparse, say) gets its blocks now
                reserve_space(file.fileno(), header.file_bytes, path)
            access = mmap.ACCESS_READ if mode == "r" else mmap.ACCESS_WRITE
            writers = writer_lock.join(path, file.fileno(), atomic_or=atomic_or) if mode == "r+" else None
            try:
                mm = mmap.mmap(file.fileno(), header.file_bytes, access=access)
                if writers is not None:
                    # Another writer may have grown the filter (a new stage count) between the
                    # read above and the join; none can while this one has it open.
                    with writer_lock.header_access(file.fileno(), write=False):
                        header = Header.unpack(mm[:HEADER_BYTES], path, header.file_bytes)
            except BaseException:
                if writers is not None:
                    writers.close()
                raise
        self = cls(mm, header, path, mode == "r", atomic_or, writers)
        if not header.clean:
            # A writer did not close it (crash, kill, or still open): recount from the bits.
            counts = tuple(self.estimate_items(slot) for slot in range(header.slots))
            self.header = dataclasses.replace(
                header, approx_items=sum(counts), slot_items=counts if header.windowed else ()
            )
        self.write_state(self.header.approx_items, clean=False)
        return self

    def stored_stages(self) -> int:
        """The stage count in the header page as stored now (a reader's view of a filter that
        a writer may have grown since it was opened)."""
        if self.path is None or not self.read_only:
            return self.header.stages  # no one else grows it while this writer has it open
        # One aligned u32 that only its one writer changes, and only upward: no lock needed.
        stored: int = STAGES_FIELD.unpack_from(self.mm)[0]
        return max(self.header.stages, min(stored, MAX_STAGES))

    def blocks(self) -> np.ndarray:
        """Return a uint8 view of the blocks (read-only when the file is); drop it before ``close``."""
        return np.frombuffer(
            self.mm, dtype=np.uint8, count=self.header.num_blocks * self.header.slots * BLOCK_BYTES, offset=HEADER_BYTES
        )

    def slot_blocks(self, slot: int) -> np.ndarray:
        """Return a ``(num_blocks, 64)`` view of one slot's blocks (all of them in a plain filter)."""
        return self.blocks().reshape(self.header.num_blocks, self.header.slots, BLOCK_BYTES)[:, slot, :]

    def block_popcounts(self, slot: int = 0) -> Iterator[np.ndarray]:
        """Yield the number of set bits of every block of ``slot``, in slices of ``_SCAN_BLOCKS`` blocks."""
        rows = self.slot_blocks(slot)
        for start in range(0, len(rows), _SCAN_BLOCKS):
            yield _popcount_rows(rows[start : start + _SCAN_BLOCKS])

    def clear_slot(self, slot: int) -> None:
        """Zero every block of ``slot`` (a windowed filter reusing it for a new generation)."""
        rows = self.slot_blocks(slot)
        for start in range(0, len(rows), _SCAN_BLOCKS):
            rows[start : start + _SCAN_BLOCKS] = 0

    def estimate_items(self, slot: int = 0) -> int:
        """Estimate how many keys were added to ``slot``, from the set bits of each block.

        ``l`` keys set ``s = 512 (1 - (1 - 1/512) ** (k l))`` distinct bits of a block on
        average; inverting that per block and summing gives the estimate.
        """
        per_key = self.header.num_hashes * math.log1p(-1.0 / BLOCK_BITS)
        total = 0.0
        for counts in self.block_popcounts(slot):
            unset = np.maximum(1.0 - counts / BLOCK_BITS, 0.5 / BLOCK_BITS)  # a full block counts as nearly full
            total += float(np.log(unset).sum()) / per_key
        return int(round(total))

    def fill_ratio(self, slot: int = 0) -> float:
        """Return the fraction of bits set in ``slot`` (scans its bit array)."""
        set_bits = sum(int(counts.sum()) for counts in self.block_popcounts(slot))
        return set_bits / (self.header.num_blocks * BLOCK_BITS)

    def estimated_error_rate(self, slot: int = 0) -> float:
        """Return the false-positive rate of a random absent key in ``slot``: the mean over its
        blocks of ``fill ** k``."""
        k = self.header.num_hashes
        total = sum(float(((counts / BLOCK_BITS) ** k).sum()) for counts in self.block_popcounts(slot))
        return total / self.header.num_blocks

    @contextlib.contextmanager
    def plain_or(self) -> Iterator[bool]:
        """Yield True while bits may be set with plain ORs: in memory, or while this is the
        file's only writer; False while they must be atomic (other writers have it open).

        :raises BlockingIOError: in a forked child that may not write a pure-Python writer's file.
        """
        if self.writers is None:
            yield self.path is None or not self.atomic_or  # no locks here: atomic where it can
            return
        self.writers.check_writable()
        with self.writers.plain_or() as alone:
            yield alone or not self.atomic_or

    @contextlib.contextmanager
    def bulk(self, keys: int) -> Iterator[None]:
        """Ask for huge pages in a file mapping while a batch of ``keys`` keys sets its bits, if
        the batch is a bulk load (:data:`_BULK_PAGES_PER_KEY`); the mapping's pages already in
        memory stay as they are. Only a hint: the bits and what survives a crash are the same."""
        if self.path is None or keys * _BULK_PAGES_PER_KEY < self.header.file_bytes // 4096:
            yield
            return
        _advise_hugepages(self.mm, self.header.file_bytes)
        try:
            yield
        finally:
            _advise_hugepages(self.mm, self.header.file_bytes, "MADV_NOHUGEPAGE")

    def write_state(self, approx_items: int, clean: bool) -> None:
        """Store the count and the clean-close flag in the header page (no-op when read-only)."""
        self.write_header(dataclasses.replace(self.header, approx_items=approx_items, clean=clean))

    def write_header(self, header: Header) -> None:
        """Store ``header`` (same shape) in the header page (no-op when read-only)."""
        if self.read_only:
            return
        if self.writers is not None:
            self.writers.check_writable()
        self.header = header
        with self.writers.header_written() if self.writers is not None else contextlib.nullcontext():
            self.mm[:HEADER_BYTES] = self.header.pack()

    def flush(self, approx_items: int) -> None:
        """Write the count to the header and the mapped pages to disk (msync)."""
        self.write_state(approx_items, clean=False)
        if self.path is not None and not self.read_only:
            self.mm.flush()

    def close(self, approx_items: int) -> None:
        """Mark the file cleanly closed with its final count and unmap it.

        Every view from ``blocks()`` must be gone by now. While other writers have the file
        open it stays marked in use: the last one to close marks it clean.
        """
        if self.writers is None:
            self.write_state(approx_items, clean=True)
        elif self.writers.writable:
            with self.writers.plain_or() as alone:
                self.write_state(approx_items, clean=alone or not self.atomic_or)
        self.mm.close()
        if self.writers is not None:
            self.writers.close()
