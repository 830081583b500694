"""The exact tier's keys: a log and in-memory runs in front of run files, merged as they grow.

A log-structured merge, as BUbiNG's sieve and Mercator keep their seen URLs. Each batch's new
keys go to the log (crash safety) and, sorted, into a small in-memory run. Runs of one size
class (a power of :data:`FANOUT`) are merged into one as soon as there are :data:`FANOUT` of
them, so a key is rewritten about ``log4(n / buffer)`` times and there are at most a few runs
per class. When the in-memory runs hold ``buffer_keys`` keys they are merged into a run file
(a *spill*) and the log starts anew. A lookup probes the live runs, largest first, and stops
for a key as soon as one holds it.

**Generations.** With a recrawl window every run holds one generation's keys (the log and the
in-memory runs, the current one's): runs merge only within a generation, and a generation is
forgotten by dropping its runs. Lookups read the live generations only.

**Crash safety.** Every change is made beside the old state and published by replacing the
manifest (written whole, renamed over the old one): a run file complete under a temporary
name, renamed into place, then the manifest that lists it, then the inputs it replaces
deleted. A process killed anywhere leaves the old manifest or the new one; files no manifest
lists are deleted at the next open, and a log whose keys a manifest already spilled is
emptied. :meth:`RunStore.flush` makes the whole state durable (fsync); a change that would
delete durable data (a flushed log's keys, a synced run) syncs its replacement first, so a
power loss never takes what a flush made durable. The manifest marks each run durable or not:
after a power loss a run that was not durable and did not survive is dropped with a warning
(pages claimed since the last flush may be won again: a duplicate fetch, never a lost page),
while a durable one that fails its checks is an error that names it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from .._files import replace_file
from ..windows import Clock, Window
from .format import TIMELESS, ExactFileError, Manifest, run_name
from .log import LOG_NAME, Log
from .runs import Kernels, Run, build_run, open_run

__all__ = ["DEFAULT_BUFFER_KEYS", "FANOUT", "MANIFEST_NAME", "RunInfo", "RunStore"]

LOG = logging.getLogger("crawldedup.exact")
MANIFEST_NAME = "MANIFEST"
#: Keys the in-memory runs (and the log) hold before they are spilled into a run file: about
#: 22 MB of runs and a 32 MiB log.
DEFAULT_BUFFER_KEYS = 1 << 22
#: Runs of one size class (a power of FANOUT keys) are merged into one as soon as there are
#: FANOUT of them: a key is rewritten about log4(n / buffer) times (4.8 writes a key in all at
#: 1e9, 3.5 with 8), and a class holds at most FANOUT - 1 runs between merges: a key held is
#: looked for in 1.2 runs on average at 1e8 (2.1 with 8). A 90%-repeat stream against 2e7
#: stored: 175 ns of CPU a claim in one run of 2e7 (fanout 4), 269 in four of 5e6 (fanout 8).
FANOUT = 4


class RunInfo(NamedTuple):
    """One run, as ``info`` prints it."""

    sequence: int
    generation: int
    keys: int
    nbytes: int
    #: Its file; None for a run in memory.
    path: Optional[str]
    durable: bool


def size_class(keys: int, fanout: int) -> int:
    """The class of a run of ``keys`` keys: ``floor(log_fanout(keys))`` (``fanout`` a power of 2)."""
    return (keys.bit_length() - 1) // (fanout.bit_length() - 1)


def ready_to_merge(runs: Sequence[Run], fanout: int) -> List[Run]:
    """The runs of the smallest size class that holds ``fanout`` or more, or none."""
    classes: Dict[int, List[Run]] = {}
    for run in runs:
        classes.setdefault(size_class(run.keys, fanout), []).append(run)
    for _, members in sorted(classes.items()):
        if len(members) >= fanout:
            return members
    return []


class RunStore:
    """The keys of an exact tier (see the module): in a directory, or in memory when it is None.

    Not thread-safe: its owner (:class:`~crawldedup.exact.filter.ExactFilterBase`) holds a lock.
    """

    def __init__(
        self,
        kernels: Kernels,
        directory: Optional[str],
        window: Optional[Window],
        clock: Clock,
        buffer_keys: int,
        manifest: Manifest,
        runs: List[Run],
        log: Optional[Log],
        writable: bool,
    ) -> None:
        self._kernels = kernels
        self.directory = directory
        self.window = window
        self._clock = clock
        self._buffer_keys = buffer_keys
        self._runs = runs
        self._log = log
        self._writable = writable
        self._next_sequence = manifest.next_sequence
        self._log_sequence = manifest.log_sequence
        #: The in-memory runs: the log's keys, of generation ``_generation``.
        self._memory: List[Run] = []
        self._generation = log.state.generation if log is not None else self._first_generation()
        if log is not None and log.state.count:
            self._memory = [self._memory_run(kernels.sort_keys(log.keys))]

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, kernels: Kernels, directory: Optional[str], window: Optional[Window], clock: Clock, buffer_keys: int
    ) -> RunStore:
        """A new, empty tier in ``directory`` (made; one a crashed creation left is replaced),
        or in memory.

        :raises BlockingIOError: when another process writes a tier in ``directory``.
        """
        manifest = Manifest(window.seconds if window else 0.0, window.generations if window else 0, 0, 0, ())
        if directory is None:
            return cls(kernels, None, window, clock, buffer_keys, manifest, [], None, True)
        os.makedirs(directory, exist_ok=True)
        store = cls(kernels, directory, window, clock, buffer_keys, manifest, [], None, True)
        store._log = Log.create(directory, 0, store._generation, buffer_keys)
        try:
            store._remove_unlisted()
            store._write_manifest(sync=True)  # the tier exists once its manifest does
        except BaseException:
            store._log.close()
            raise
        return store

    @classmethod
    def open(
        cls,
        kernels: Kernels,
        directory: str,
        writable: bool,
        window: Optional[Window],
        clock: Clock,
        buffer_keys: int,
    ) -> RunStore:
        """Open the tier in ``directory`` after checking its manifest, every run it lists (whole:
        header, size, checksum) and its log.

        :param window: the window the tier must have been made for (None: none).
        :raises ExactFileError: naming the file that is missing, damaged or of another window.
        :raises BlockingIOError: for a writer, when another process writes the tier.
        """
        path = os.path.join(directory, MANIFEST_NAME)
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            raise ExactFileError(f"{path}: missing: {directory} is not an exact tier") from None
        except IsADirectoryError:
            raise ExactFileError(f"{path}: is a directory, not a manifest") from None
        manifest = Manifest.unpack(data, path)
        made_for = Window(manifest.window_seconds, manifest.generations) if manifest.generations else None
        if made_for != window:
            raise ExactFileError(
                f"{path}: made for {made_for.describe() if made_for else 'no recrawl window'}, opened with "
                f"{window.describe() if window else 'no recrawl window'}"
            )
        log = Log.open(directory, writable, buffer_keys)
        runs: List[Run] = []
        try:
            dropped = False
            for record in manifest.runs:
                try:
                    runs.append(open_run(directory, record))
                except ExactFileError as exc:
                    if record.durable:
                        raise
                    LOG.warning(
                        "%s (not flushed before a power loss?): dropped; pages claimed since the last flush "
                        "may be won again",
                        exc,
                    )
                    dropped = True
            store = cls(kernels, directory, window, clock, buffer_keys, manifest, runs, log, writable)
        except BaseException:
            for run in runs:
                run.close()
            log.close()
            raise
        store._settle_log(dropped)
        return store

    def _settle_log(self, manifest_stale: bool) -> None:
        """Reconcile the log with the manifest after a crash: a log the manifest already spilled is
        emptied; one newer than the manifest (a power loss kept the log, not the manifest) is kept."""
        assert self._log is not None
        log_sequence = self._log.state.sequence
        if log_sequence < self._log_sequence:  # killed between a spill's manifest and the log's reset
            for run in self._memory:
                run.close()
            self._memory = []
            if self._writable:
                self._log.reset(self._log_sequence, self._generation)
        elif log_sequence > self._log_sequence:
            LOG.warning(
                "%s: the manifest is older than the log (a power loss?): runs spilled since the last "
                "flush are lost, pages claimed since may be won again",
                self.directory,
            )
            self._log_sequence = log_sequence
            manifest_stale = True
        if self._writable:
            if manifest_stale:
                self._write_manifest(sync=True)
            self._remove_unlisted()

    def _remove_unlisted(self) -> None:
        """Delete what a crash left: run files no manifest lists, temporaries."""
        assert self.directory is not None
        listed = {run_name(run.sequence) for run in self._runs} | {MANIFEST_NAME, LOG_NAME}
        for entry in os.scandir(self.directory):
            stale_run = entry.name.startswith("run-") and entry.name.endswith(".run")
            if (stale_run or entry.name.endswith(".tmp")) and entry.name not in listed and entry.is_file():
                os.unlink(entry.path)

    # -- time ----------------------------------------------------------------------------------

    def _first_generation(self) -> int:
        return TIMELESS if self.window is None else self.window.generation(self._clock())

    def current_generation(self) -> int:
        """The generation a key added now joins (a clock set back never hides a newer one)."""
        if self.window is None:
            return TIMELESS
        return max([self.window.generation(self._clock()), self._generation] + [run.generation for run in self._runs])

    def _live(self, generation: int, current: int) -> bool:
        return self.window is None or generation >= current - self.window.generations

    def _live_runs(self) -> List[Run]:
        current = self.current_generation()
        runs = [run for run in self._runs if self._live(run.generation, current)]
        if self._live(self._generation, current):
            runs += self._memory
        return runs

    # -- keys ----------------------------------------------------------------------------------

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Per key (uint64), True when a live generation holds it: the live runs probed largest
        first, each with the keys no run before it held."""
        found = np.zeros(len(keys), dtype=bool)
        pending = np.arange(len(keys))
        for run in sorted(self._live_runs(), key=lambda run: -run.keys):
            if not len(pending):
                break
            held = self._kernels.probe_run(run.index, run.stream, run.header.prefix, keys[pending])
            found[pending[held]] = True
            pending = pending[~held]
        return found

    def add(self, keys: np.ndarray, ordered: np.ndarray) -> None:
        """Add new keys to the current generation: ``keys`` (uint64, distinct, held by no live
        generation) as they came, ``ordered`` the same sorted.

        :raises OSError: when the disk cannot hold them (the log then has not counted them).
        """
        self._check_writable()
        if not len(keys):
            return
        self._rotate()
        if self._log is not None:
            self._log.append(keys)
        self._memory.append(self._memory_run(ordered))
        if sum(run.keys for run in self._memory) >= self._buffer_keys:
            self._spill()  # the in-memory runs merged straight into the file
            return
        while True:
            group = ready_to_merge(self._memory, FANOUT)
            if not group:
                break
            merged = build_run(self._kernels, group, self._generation, 0, None)
            self._memory = [run for run in self._memory if run not in group] + [merged]

    def _memory_run(self, ordered: np.ndarray) -> Run:
        return build_run(self._kernels, ordered, self._generation, 0, None)

    def _check_writable(self) -> None:
        if not self._writable:
            raise ValueError(f"{self.directory}: the exact tier is open read-only")
        if self._log is not None:
            self._log.check_writable()

    # -- changes -------------------------------------------------------------------------------

    def _rotate(self) -> None:
        """Move to the current generation: the in-memory runs of an older one are spilled (or
        dropped, when it is forgotten), forgotten runs are deleted."""
        current = self.current_generation()
        if self._generation != current:
            if self._memory and self._live(self._generation, current):
                self._spill()
            for run in self._memory:
                run.close()
            self._memory = []
            self._generation = current
            if self._log is not None:
                self._log.reset(self._log_sequence, current)
        forgotten = [run for run in self._runs if not self._live(run.generation, current)]
        if forgotten:
            self._runs = [run for run in self._runs if run not in forgotten]
            self._write_manifest(sync=False)
            for run in forgotten:
                run.remove()

    def _spill(self) -> None:
        """Merge the in-memory runs into a run file; the log starts anew."""
        durable = self._log is not None and self._log.state.flushed > 0
        spilled = build_run(self._kernels, self._memory, self._generation, self._next_sequence, self.directory, durable)
        self._next_sequence += 1
        self._log_sequence += 1
        self._runs.append(spilled)
        for run in self._memory:
            run.close()
        self._memory = []
        self._write_manifest(sync=durable)
        if self._log is not None:
            self._log.reset(self._log_sequence, self._generation)
        self._merge_generation(self._generation)

    def _merge_generation(self, generation: int) -> None:
        while True:
            group = ready_to_merge([run for run in self._runs if run.generation == generation], FANOUT)
            if not group:
                return
            self._replace(group, generation)

    def _replace(self, group: List[Run], generation: int) -> None:
        """Merge ``group`` into one run, list it instead of them, then delete them."""
        durable = any(run.durable for run in group)
        merged = build_run(self._kernels, group, generation, self._next_sequence, self.directory, durable)
        self._next_sequence += 1
        self._runs = [run for run in self._runs if run not in group] + [merged]
        self._write_manifest(sync=durable)
        for run in group:
            run.remove()

    def _write_manifest(self, sync: bool) -> None:
        if self.directory is None:
            return
        window = self.window
        manifest = Manifest(
            window.seconds if window else 0.0,
            window.generations if window else 0,
            self._next_sequence,
            self._log_sequence,
            tuple(run.record() for run in self._runs),
        )
        replace_file(Path(self.directory, MANIFEST_NAME), [manifest.pack()], sync=sync)

    def compact(self) -> None:
        """Merge every generation's runs (the in-memory ones too) into one run file each."""
        self._check_writable()
        if self._memory:
            self._spill()
        for generation in sorted({run.generation for run in self._runs}):
            group = [run for run in self._runs if run.generation == generation]
            if len(group) > 1:
                self._replace(group, generation)

    def absorb(self, other: RunStore) -> int:
        """Add every live key of ``other`` that no live generation here holds, to the same
        generation here (``merge`` of two tiers). Returns how many were added."""
        self._check_writable()
        self._rotate()
        current = self.current_generation()
        added = 0
        by_generation: Dict[int, List[np.ndarray]] = {}
        for run in other._live_runs():
            if self._live(run.generation, current):
                by_generation.setdefault(run.generation, []).append(other._kernels.decode_run(*run.arrays()))
        for generation, parts in sorted(by_generation.items()):
            keys = self._kernels.sort_keys(np.concatenate(parts))
            keys = keys[~self.contains(keys)]
            if len(keys):
                durable = any(run.durable for run in self._runs)
                self._runs.append(
                    build_run(self._kernels, keys, generation, self._next_sequence, self.directory, durable)
                )
                self._next_sequence += 1
                self._write_manifest(sync=durable)
                self._merge_generation(generation)
                added += len(keys)
        return added

    def flush(self) -> None:
        """Make the whole tier durable: the log's keys, every run file, the manifest (fsync)."""
        if not self._writable or self.directory is None:
            return
        self._check_writable()
        assert self._log is not None
        self._log.flush()
        for run in self._runs:
            run.sync()
        self._write_manifest(sync=True)

    def close(self) -> None:
        """Flush (a writer) and release every file; closing twice is allowed."""
        try:
            if self._writable and self._log is not None and self._log.may_write:
                self.flush()
        finally:
            for run in self._runs + self._memory:
                run.close()
            self._runs, self._memory = [], []
            if self._log is not None:
                self._log.close()
                self._log = None

    # -- what it holds -------------------------------------------------------------------------

    def __len__(self) -> int:
        """The keys of the live generations (exact)."""
        return sum(run.keys for run in self._live_runs())

    @property
    def nbytes(self) -> int:
        """Bytes of the tier: its run files, its log and its manifest (its runs, in memory)."""
        if self.directory is None:
            return sum(run.index.nbytes + run.stream.nbytes for run in self._runs + self._memory)
        files = [os.path.join(self.directory, name) for name in (MANIFEST_NAME, LOG_NAME)]
        return sum(run.nbytes for run in self._runs) + sum(os.path.getsize(path) for path in files)

    @property
    def memory_bytes(self) -> int:
        """Bytes of the in-memory runs."""
        return sum(run.index.nbytes + run.stream.nbytes for run in self._memory)

    def runs(self) -> List[RunInfo]:
        """The runs of every generation (forgotten ones not yet deleted included), oldest first,
        then the in-memory ones."""
        return [
            RunInfo(run.sequence, run.generation, run.keys, run.nbytes, run.path, run.durable)
            for run in sorted(self._runs, key=lambda run: run.sequence)
        ] + [
            RunInfo(0, run.generation, run.keys, run.index.nbytes + run.stream.nbytes, None, False)
            for run in self._memory
        ]

    def generation_keys(self) -> Dict[int, int]:
        """Keys per live generation."""
        keys: Dict[int, int] = {}
        for run in self._live_runs():
            keys[run.generation] = keys.get(run.generation, 0) + run.keys
        return keys

    @property
    def writable(self) -> bool:
        return self._writable
