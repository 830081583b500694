"""The log: the keys added since the last spill, in a mapped file, so a process crash loses none.

The in-memory runs hold these keys sorted; the log holds them in the order they came, 8 bytes
each after a 4 KiB header page, so a process killed at any point leaves every key whose add
returned (the page cache keeps what the mapping wrote). Two 128-byte header slots take turns:
an append writes its keys past the count, then the slot not in use with the new count, the
running CRC-32 of the keys and an update counter one higher. A process killed while writing a
slot leaves the other one, whose count and checksum still hold (keys are only ever written
past the count). ``flush`` msyncs the keys and records how many were flushed, with their
checksum: after a power loss the log opens with its keys, or, when they were torn, with the
flushed ones, or names itself damaged.
"""

from __future__ import annotations

import dataclasses
import logging
import mmap
import os
import zlib
from typing import Optional

import numpy as np

from .._files import reserve_space
from .._wording import counted
from .format import HEADER_BYTES, LOG_SLOT_BYTES, LOG_SLOTS, ExactFileError, LogState
from .lock import WriterLock

__all__ = ["Log", "LOG_NAME"]

LOG = logging.getLogger("crawldedup.exact")
#: The log's file name in the tier's directory.
LOG_NAME = "log"
#: Keys a new log file has room for; it doubles when full.
_FIRST_CAPACITY = 1 << 13


def _file_bytes(capacity: int) -> int:
    return HEADER_BYTES + 8 * capacity


class Log:
    """The log of a tier's directory, open for writing (locked) or for reading (a snapshot)."""

    def __init__(
        self, path: str, fd: int, mapping: mmap.mmap, state: LogState, slot: int, lock: Optional[WriterLock], limit: int
    ) -> None:
        self.path = path
        self.state = state
        #: Keys the log grows to hold at most by doubling (the tier's buffer); more when asked.
        self.limit = limit
        self._fd = fd
        self._mapping = mapping
        self._slot = slot
        self._lock = lock

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, sequence: int, generation: int, limit: int) -> Log:
        """Create the empty log of a new tier (replacing one left by a tier that was never completed).

        :param limit: the keys it grows to hold by doubling (the tier's buffer).
        :raises BlockingIOError: when another process writes a tier in ``directory``.
        """
        path = os.path.join(directory, LOG_NAME)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)
        try:
            lock = WriterLock(fd, path)  # before the file is touched: it may be another's
        except BaseException:
            os.close(fd)
            raise
        try:
            size = _file_bytes(min(_FIRST_CAPACITY, limit))
            os.ftruncate(fd, 0)
            reserve_space(fd, size, path, "the exact tier's log")
            mapping = mmap.mmap(fd, size)
            state = LogState(sequence, generation, 0, 0, 0, 0, 0)
            for slot in range(LOG_SLOTS):
                mapping[slot * LOG_SLOT_BYTES : (slot + 1) * LOG_SLOT_BYTES] = state.pack()
        except BaseException:
            lock.close()
            raise
        return cls(path, fd, mapping, state, 0, lock, limit)

    @classmethod
    def open(cls, directory: str, writable: bool, limit: int) -> Log:
        """Open the log of a tier's directory: its newest header slot whose keys check out.

        :raises ExactFileError: when no slot is valid, or the keys fail their checksums beyond
            what a power loss since the last flush explains.
        :param limit: the keys it grows to hold by doubling (the tier's buffer).
        :raises BlockingIOError: for a writer, when another process writes the tier.
        """
        path = os.path.join(directory, LOG_NAME)
        try:
            fd = os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            raise ExactFileError(f"{path}: missing: the exact tier has no log") from None
        lock = None
        try:
            if writable:
                lock = WriterLock(fd, path)
            size = os.fstat(fd).st_size
            if size < HEADER_BYTES or (size - HEADER_BYTES) % 8:
                raise ExactFileError(f"{path}: truncated log: {counted(size, 'byte')}")
            mapping = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
            try:
                state, slot = _newest_state(mapping, path, size)
            except BaseException:
                mapping.close()
                raise
        except BaseException:
            if lock is not None:
                lock.close()
            else:
                os.close(fd)
            raise
        log = cls(path, fd, mapping, state, slot, lock, limit)
        try:
            checked = _checked_count(mapping, state, path)
        except BaseException:
            log.close()
            raise
        if checked != state.count:  # the keys past the flushed ones were torn
            repaired = dataclasses.replace(state, count=checked, crc=state.flushed_crc)
            if writable:
                log._write(repaired)
            else:
                log.state = repaired
        return log

    # -- keys ----------------------------------------------------------------------------------

    @property
    def keys(self) -> np.ndarray:
        """A copy of the keys, in the order they were added."""
        return np.frombuffer(self._mapping, dtype="<u8", count=self.state.count, offset=HEADER_BYTES).astype(np.uint64)

    def append(self, keys: np.ndarray) -> None:
        """Add ``keys`` (uint64) after the others: written, then counted (the header slot).

        :raises OSError: when the disk cannot hold a larger log (nothing was added).
        """
        if not len(keys):
            return
        self.check_writable()
        data = np.ascontiguousarray(keys, dtype="<u8")
        count = self.state.count
        self._make_room(count + len(data))
        target = np.frombuffer(self._mapping, dtype="<u8", count=len(data), offset=HEADER_BYTES + 8 * count)
        target[:] = data
        del target  # no view may outlive the call: the mapping is remapped when it grows
        crc = zlib.crc32(data.data, self.state.crc)
        self._write(dataclasses.replace(self.state, count=count + len(data), crc=crc))

    def reset(self, sequence: int, generation: int) -> None:
        """Start the log anew, empty, for ``sequence`` (its keys are in a run now, or forgotten)."""
        self.check_writable()
        self._write(LogState(sequence, generation, 0, 0, 0, 0, self.state.counter))

    def flush(self) -> None:
        """Make the keys durable (msync), then record them as flushed."""
        if self._lock is None:
            return
        self._mapping.flush()
        self._write(dataclasses.replace(self.state, flushed=self.state.count, flushed_crc=self.state.crc))
        self._mapping.flush(0, mmap.PAGESIZE)
        os.fsync(self._fd)

    def close(self) -> None:
        if self._mapping is not None:
            self._mapping.close()
        if self._lock is not None:
            self._lock.close()  # closes the descriptor too
        else:
            os.close(self._fd)

    @property
    def nbytes(self) -> int:
        return len(self._mapping)

    # -- inside --------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """:raises ValueError: when the log is open read-only.
        :raises BlockingIOError: in a forked child of its writer."""
        if self._lock is None:
            raise ValueError(f"{self.path}: the exact tier is open read-only")
        self._lock.check_writable()

    @property
    def may_write(self) -> bool:
        """True for the writer that opened the log (not a reader, not its forked child)."""
        return self._lock is not None and self._lock.writable

    def _write(self, state: LogState) -> None:
        """Store ``state`` in the slot not in use, one update later: the switch is one write of a
        slot whose own checksum says whether it is whole."""
        state = dataclasses.replace(state, counter=self.state.counter + 1)
        slot = 1 - self._slot
        self._mapping[slot * LOG_SLOT_BYTES : (slot + 1) * LOG_SLOT_BYTES] = state.pack()
        self.state, self._slot = state, slot

    def _make_room(self, keys: int) -> None:
        if _file_bytes(keys) <= len(self._mapping):
            return
        # Doubling, but not past what the tier's buffer holds (a spill empties the log there).
        size = max(_file_bytes(keys), min(2 * len(self._mapping) - HEADER_BYTES, _file_bytes(self.limit)))
        reserve_space(self._fd, size, self.path, "the exact tier's log")
        self._mapping.close()
        self._mapping = mmap.mmap(self._fd, size)


def _newest_state(mapping: mmap.mmap, path: str, size: int) -> tuple[LogState, int]:
    """The valid header slot with the highest update counter whose keys fit the file."""
    found = []
    problems = []
    for slot in range(LOG_SLOTS):
        try:
            state = LogState.unpack(mapping[slot * LOG_SLOT_BYTES : (slot + 1) * LOG_SLOT_BYTES], path)
        except ExactFileError as exc:
            problems.append(str(exc))
            continue
        if HEADER_BYTES + 8 * state.count > size:
            problems.append(f"{path}: truncated log: {state.count:,} keys need more than {counted(size, 'byte')}")
            continue
        found.append((state.counter, slot, state))
    if not found:
        raise ExactFileError(problems[-1])
    _, slot, state = max(found)
    return state, slot


def _crc_of(mapping: mmap.mmap, count: int) -> int:
    with memoryview(mapping) as whole, whole[HEADER_BYTES : HEADER_BYTES + 8 * count] as keys:
        return zlib.crc32(keys)


def _checked_count(mapping: mmap.mmap, state: LogState, path: str) -> int:
    """How many of the log's keys hold: all of them, or (after a power loss tore the last
    ones) the flushed ones.

    :raises ExactFileError: when the flushed keys do not check out either.
    """
    if _crc_of(mapping, state.count) == state.crc:
        return state.count
    if _crc_of(mapping, state.flushed) == state.flushed_crc:
        LOG.warning(
            "%s: the last %d keys of the log were damaged (a power loss since the last flush?); "
            "the %d flushed keys are kept, pages claimed since may be won again",
            path,
            state.count - state.flushed,
            state.flushed,
        )
        return state.flushed
    raise ExactFileError(f"{path}: corrupted log: its {counted(state.flushed, 'flushed key')} fail their checksum")
