"""A Bloom filter that forgets: generations of a recrawl window, in the slots of one file.

Each key's super-block (chosen by ``h1`` as in a plain filter) holds one 64-byte block per
slot, side by side, and the generation ``g`` of the window (:mod:`crawldedup.windows`) lives in
slot ``g mod (G + 1)``. A key is seen while one of the live generations holds it; an add puts a
key that none holds into the current generation. When the clock enters a new generation, the
slot it takes over (the generation ``G + 1`` before, already forgotten) is zeroed and given to
it. A lookup reads ``G + 1`` adjacent cache lines, one memory access pattern, rather than one
line in each of ``G + 1`` separate filters (docs/format.md has the measurement).

Rotation is crash-safe without a journal: the header first marks the slot empty, then its
blocks are zeroed, then the header gives it the new generation. A process killed in between
leaves an empty slot (zeroed again before use), and the live generations' slots are never
written by a rotation.

The file has one writer at a time (like the pure-Python plain filter): a second process
opening it with ``"r+"`` gets ``BlockingIOError``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, List, NamedTuple, Optional, Tuple, TypeVar

import numpy as np

from .._checks import PathArg
from ..fingerprints import hash_one
from ..windows import Clock, Window, system_clock
from ._base import FilterBase, as_hash_array, closed_error, read_only_error
from .format import BLOCK_BITS, MAX_NUM_BLOCKS, NO_GENERATION, Header, check_parameters
from .sizing import choose_shape
from .storage import BloomFile

_Windowed = TypeVar("_Windowed", bound="WindowedFilterBase")
#: ``(blocks, num_blocks, num_hashes, slots, live mask, hashes) -> found``, a twin's lookup.
ContainsKernel = Callable[[np.ndarray, int, int, int, int, np.ndarray], np.ndarray]
#: ``(blocks, num_blocks, num_hashes, slots, older mask, current slot, hashes) -> new``, a twin's add.
AddKernel = Callable[[np.ndarray, int, int, int, int, int, np.ndarray], np.ndarray]


class Generation(NamedTuple):
    """One live generation of a windowed filter: what ``info`` prints."""

    generation: int
    slot: int
    starts_at: float
    forgotten_at: float
    approx_items: int


def slot_shape(capacity: int, error_rate: float, window: Window) -> Tuple[int, int]:
    """``(num_blocks, num_hashes)`` of one slot: a plain filter's shape for ``capacity`` keys.

    A lookup misses in every live slot, so its false-positive rate is at most the sum of theirs
    (union bound). A slot's rate ``f(n)`` is convex in its keys ``n`` at these loads, with
    ``f(0) = 0``, so ``f(a) + f(b) <= f(a + b)``: however the ``capacity`` keys of the live
    generations fall into them (all in one burst, or evenly), the sum stays at most
    ``f(capacity) <= error_rate``. Sizing the slots for ``capacity / G`` keys instead would
    take a fifth of the memory at G = 4 but break the bound for a crawl that claims most of its
    pages in one generation, which crawls do (a first pass over a site).

    :raises ValueError: when the slots together would need more than ``MAX_NUM_BLOCKS`` blocks.
    """
    num_blocks, num_hashes = choose_shape(capacity, error_rate)
    if num_blocks * window.live_count > MAX_NUM_BLOCKS:
        raise ValueError(
            f"capacity {capacity} at error_rate {error_rate!r} in {window.live_count} slots needs "
            f"{num_blocks * window.live_count} blocks, more than the {MAX_NUM_BLOCKS} a filter can hold"
        )
    return num_blocks, num_hashes


class WindowedFilterBase(FilterBase):
    """A Bloom filter whose keys are forgotten after a recrawl window (see the module).

    The API is the plain filter's (``add``, ``in``, ``add_many``, ``contains_many``, the hash
    forms, ``flush``, ``close``, ``union``, ``copy``), with ``window`` and :meth:`generations`.
    ``approx_items`` counts the keys of the live generations.

    :param capacity: keys in the live generations (a window and one generation) that the
        filter is sized for (>= 1), however they fall in time.
    :param error_rate: false-positive rate wanted over the whole window, in (0, 1).
    :param window: the recrawl window and its generations.
    :param path: file to create; anonymous memory when None.
    :param overwrite: replace an existing file at ``path`` instead of raising.
    :param metadata: up to 1024 bytes stored in the header for the layers above.
    :param clock: the time source (seconds since the epoch), ``time.time`` by default.
    :raises TypeError: for arguments of the wrong type.
    :raises ValueError: for values out of range.
    :raises FileExistsError: when ``path`` exists and ``overwrite`` is false.
    """

    _WINDOWED = True
    _contains_kernel: ContainsKernel
    _add_kernel: AddKernel
    _blocks: Optional[np.ndarray]
    _clock: Clock

    def __init__(
        self,
        capacity: int,
        error_rate: float,
        window: Window,
        path: Optional[PathArg] = None,
        *,
        overwrite: bool = False,
        metadata: bytes = b"",
        clock: Clock = system_clock,
    ) -> None:
        check_parameters(capacity, error_rate, metadata)
        if not isinstance(window, Window):
            raise TypeError(f"window must be a Window, got {type(window).__name__}")
        num_blocks, num_hashes = slot_shape(capacity, float(error_rate), window)
        header = Header(
            capacity,
            float(error_rate),
            num_blocks,
            num_hashes,
            metadata,
            window_seconds=window.seconds,
            generations=window.generations,
            slot_generations=(NO_GENERATION,) * window.live_count,
            slot_items=(0,) * window.live_count,
        )
        self._clock = clock
        self._attach(BloomFile.create(header, path, overwrite, self._ATOMIC_OR))

    @classmethod
    def open(cls: type[_Windowed], path: PathArg, mode: str = "r", *, clock: Clock = system_clock) -> _Windowed:
        """Open an existing windowed filter file: ``"r"`` to query it, ``"r+"`` to add to it as well.

        :raises ValueError: for another mode.
        :raises FilterKindError: for a plain filter file (format v1).
        :raises FilterFileError: when the path is missing, a directory or not a valid filter.
        :raises BlockingIOError: with ``"r+"``, when another process writes the file.
        """
        self = cls.__new__(cls)
        self._clock = clock
        self._attach(BloomFile.open(path, mode, cls._ATOMIC_OR, windowed=True))
        return self

    def _map_bits(self, file: BloomFile) -> None:
        self._blocks = file.blocks()
        self._slot_items: List[int] = list(file.header.slot_items)

    def _unmap_bits(self) -> None:
        self._blocks = None

    # -- time ------------------------------------------------------------------------------

    @property
    def window(self) -> Window:
        """The recrawl window the file was made for."""
        header = self._header()
        return Window(header.window_seconds, header.generations)

    def _current_generation(self, header: Header) -> int:
        # A clock set back never revives a forgotten generation nor hides a newer one.
        return max(self.window.generation(self._clock()), max(header.slot_generations))

    def _live_mask(self, header: Header, generation: int) -> int:
        oldest = generation - header.generations
        return sum(1 << slot for slot, held in enumerate(header.slot_generations) if oldest <= held <= generation)

    def _rotate(self, file: BloomFile) -> Tuple[int, int]:
        """Give the current generation its slot (zeroed) and forget the expired ones.

        :returns: the current slot and the mask of the other live slots.
        """
        header = file.header
        generation = self._current_generation(header)
        current = generation % header.slots
        live = self._live_mask(header, generation)
        if header.slot_generations[current] != generation:
            held = [g if live >> slot & 1 else NO_GENERATION for slot, g in enumerate(header.slot_generations)]
            self._slot_items = [n if live >> slot & 1 else 0 for slot, n in enumerate(self._slot_items)]
            file.write_header(self._with_slots(header, held))  # 1. forget the expired slots
            file.clear_slot(current)  # 2. zero the one taken over
            held[current] = generation
            file.write_header(self._with_slots(file.header, held))  # 3. give it the generation
            live |= 1 << current
        return current, live & ~(1 << current)

    def _with_slots(self, header: Header, held: List[int]) -> Header:
        self._count = sum(self._slot_items)
        return dataclasses.replace(
            header,
            slot_generations=tuple(held),
            slot_items=tuple(self._slot_items),
            approx_items=self._count,
            clean=False,
        )

    def generations(self) -> List[Generation]:
        """The live generations, oldest first: which slot holds each, when it started, when its
        keys are forgotten and how many it holds."""
        with self._exclusive() as file:
            header = file.header
            generation = self._current_generation(header)
            live = self._live_mask(header, generation)
            window = self.window
            found = [
                Generation(g, slot, g * window.span, window.forgotten_at(g), self._slot_items[slot])
                for slot, g in enumerate(header.slot_generations)
                if live >> slot & 1
            ]
        return sorted(found)

    # -- keys ------------------------------------------------------------------------------

    def add_hashes(self, hashes: Any) -> np.ndarray:
        """Add keys already hashed by ``hash_many`` to the current generation, in order; True
        where the key was new (in no live generation).

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        :raises io.UnsupportedOperation: when the filter is read-only.
        """
        hashes = as_hash_array(hashes)
        with self._exclusive() as file:
            if file.read_only:
                raise read_only_error()
            if file.writers is not None:
                file.writers.check_writable()
            current, older = self._rotate(file)
            assert self._blocks is not None
            header = file.header
            new = type(self)._add_kernel(
                self._blocks, header.num_blocks, header.num_hashes, header.slots, older, current, hashes
            )
            added = int(new.sum())
            self._slot_items[current] += added
            self._count += added
        return new

    def contains_hashes(self, hashes: Any) -> np.ndarray:
        """Per key already hashed by ``hash_many``, True when a live generation probably holds it.

        :raises TypeError: for another dtype.
        :raises ValueError: for another shape, or when the filter is closed.
        """
        hashes = as_hash_array(hashes)
        with self._exclusive() as file:
            header = file.header
            live = self._live_mask(header, self._current_generation(header))
            assert self._blocks is not None
            return type(self)._contains_kernel(
                self._blocks, header.num_blocks, header.num_hashes, header.slots, live, hashes
            )

    def add(self, item: Any) -> bool:
        """Add one key; True when it was new (the polarity of ``BF.ADD`` and ``SET NX``).

        :raises TypeError: when ``item`` is neither ``str`` nor bytes-like.
        :raises io.UnsupportedOperation: when the filter is read-only.
        :raises ValueError: when the filter is closed.
        """
        return bool(self.add_hashes(np.array([hash_one(item)], dtype=np.uint64))[0])

    def __contains__(self, item: Any) -> bool:
        """True when a live generation probably holds ``item``.

        :raises TypeError: when ``item`` is neither ``str`` nor bytes-like.
        :raises ValueError: when the filter is closed.
        """
        return bool(self.contains_hashes(np.array([hash_one(item)], dtype=np.uint64))[0])

    # -- counts and statistics -------------------------------------------------------------

    @property
    def approx_items(self) -> int:
        """Approximate number of keys in the live generations."""
        with self._exclusive() as file:
            live = self._live_mask(file.header, self._current_generation(file.header))
            return sum(n for slot, n in enumerate(self._slot_items) if live >> slot & 1)

    @property
    def num_bits(self) -> int:
        """The size of the bit array, every slot included."""
        header = self._header()
        return header.num_blocks * header.slots * BLOCK_BITS

    def _live_slots(self, file: BloomFile) -> List[int]:
        live = self._live_mask(file.header, self._current_generation(file.header))
        return [slot for slot in range(file.header.slots) if live >> slot & 1]

    @property
    def fill_ratio(self) -> float:
        """The fraction of bits set in the live generations' slots (scans them)."""
        with self._exclusive() as file:
            slots = self._live_slots(file)
            return sum(file.fill_ratio(slot) for slot in slots) / len(slots) if slots else 0.0

    @property
    def estimated_error_rate(self) -> float:
        """The false-positive rate now across the live generations, from the fill of each block."""
        with self._exclusive() as file:
            return 1.0 - math.prod(1.0 - file.estimated_error_rate(slot) for slot in self._live_slots(file))

    def _store_counts(self) -> None:
        if self._file is not None and not self._file.read_only:
            self._file.header = dataclasses.replace(self._file.header, slot_items=tuple(self._slot_items))

    def flush(self) -> None:
        """Write the bits and the per-generation counts to disk (msync); a no-op in memory.

        :raises ValueError: when the filter is closed.
        """
        with self._lock:
            self._store_counts()
        super().flush()

    def close(self) -> None:
        """Mark the file cleanly closed with its counts and unmap it; closing twice is allowed."""
        with self._lock:
            self._store_counts()
        super().close()

    def _shape_fields(self, header: Header) -> str:
        return (
            f"window={self.window.describe()!r} blocks={header.num_blocks} slots={header.slots} "
            f"num_hashes={header.num_hashes}"
        )

    # -- whole-filter operations -----------------------------------------------------------

    def union(self: _Windowed, other: FilterBase) -> _Windowed:
        """Add every key of ``other``'s live generations to the same generations here, in place.

        Both must be windowed filters with the same window and shape. A generation of
        ``other`` older than the one this filter keeps in that slot is already forgotten here.

        :raises TypeError: when ``other`` is not a Bloom filter.
        :raises ValueError: when the kinds, windows or shapes differ, or either filter is closed.
        :raises io.UnsupportedOperation: when this filter is read-only.
        """
        if not isinstance(other, FilterBase):
            raise TypeError(f"can only union with another Bloom filter, got {type(other).__name__}")
        if not isinstance(other, WindowedFilterBase):
            raise ValueError("cannot union a windowed filter with a plain one")
        theirs = other.mapped_file()
        their_generations = other.generations()
        with self._exclusive() as file:
            if file.read_only:
                raise read_only_error()
            mine, yours = file.header, theirs.header
            if (mine.window_seconds, mine.generations) != (yours.window_seconds, yours.generations):
                raise ValueError(
                    f"cannot union filters of different windows: {self.window.describe()} vs {other.window.describe()}"
                )
            if (mine.num_blocks, mine.num_hashes) != (yours.num_blocks, yours.num_hashes):
                raise ValueError(
                    f"cannot union filters of different shapes: {mine.num_blocks} x {mine.num_hashes} "
                    f"vs {yours.num_blocks} x {yours.num_hashes} per slot"
                )
            held = list(mine.slot_generations)
            for generation in their_generations:
                slot = generation.slot
                if held[slot] > generation.generation:
                    continue
                if held[slot] < generation.generation:
                    file.clear_slot(slot)
                    held[slot] = generation.generation
                target = file.slot_blocks(slot)
                np.bitwise_or(target, theirs.slot_blocks(slot), out=target)
                self._slot_items[slot] = file.estimate_items(slot)
            file.write_header(self._with_slots(file.header, held))
        return self

    def copy(self: _Windowed, path: Optional[PathArg] = None, *, overwrite: bool = False) -> _Windowed:
        """Return a copy with the same window, shape, generations, bits, metadata and counts.

        :raises FileExistsError: when ``path`` exists and ``overwrite`` is false.
        :raises ValueError: when the filter is closed.
        """
        if self._file is None:
            raise closed_error()
        with self._lock:
            self._store_counts()
        duplicate = super().copy(path, overwrite=overwrite)
        duplicate._clock = self._clock
        return duplicate
