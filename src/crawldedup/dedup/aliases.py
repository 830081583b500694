"""The alias map of the ``local`` strategy: in memory, and in a journal beside the state file.

The map and its rules are :mod:`crawldedup.stores.aliases`'s (requested fingerprint -> final
fingerprint, stamped with the window's generation, bounded); here a full map drops its oldest
recorded alias first. With a state file the map is also kept in ``<state>.aliases``, made when
the first alias is recorded (a crawl without redirects has none), format version 1
(docs/stores.md, "Aliases")::

    0   8   magic b"CDALIAS1"
    then records of 40 bytes: requested fingerprint (16), final fingerprint (16), stamp (int64 LE)

A batch is one ``write`` appended at the end, read back at open in order (the last record of a
requested fingerprint wins); a torn last record (a process killed mid-write) is cut off. When the
journal holds more than twice the map's records (and at least :data:`COMPACT_MIN` of them), it is
rewritten with the live map (a temporary file renamed over it). Several processes on one state
file each keep their own map, read from the journal when they open; losing an alias loses no
page (its requested URL is fetched again, and its final page answered by its claim).
"""

from __future__ import annotations

import os
import struct
import threading
from collections import OrderedDict
from pathlib import Path
from typing import BinaryIO, List, Optional, Tuple

from .._files import replace_file
from ..fingerprints import Fingerprints
from ..stores.aliases import Aliases, oldest_live, stamp
from ..windows import Clock, Window

#: What follows a state file's path to name its alias journal.
ALIASES_SUFFIX = ".aliases"
ALIASES_MAGIC = b"CDALIAS1"
RECORD = struct.Struct("<16s16sq")
#: A journal is not compacted before it holds this many records.
COMPACT_MIN = 4_096


class AliasFileError(ValueError):
    """A file that is not an alias journal; the message names the path."""


class LocalAliases:
    """The alias map of a Deduplicator without a store; safe to share between threads.

    :param path: the journal (None: in memory only).
    :param window: the recrawl window aliases age with (None: never).
    :param clock: the time source of the window.
    :raises AliasFileError: for a file that is not an alias journal.
    """

    def __init__(self, path: Optional[str], window: Optional[Window], clock: Clock) -> None:
        self._window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._map: OrderedDict[bytes, Tuple[bytes, int]] = OrderedDict()
        self._records = 0
        self._path = Path(path) if path is not None else None
        self._file: Optional[BinaryIO] = None
        if self._path is not None and self._path.exists():  # else made by the first alias recorded
            self._file = self._open(self._path)

    def _open(self, path: Path) -> BinaryIO:
        file = open(path, "a+b")
        try:
            file.seek(0)
            data = file.read()
            if not data:
                file.write(ALIASES_MAGIC)
                file.flush()
                return file
            if not data.startswith(ALIASES_MAGIC):
                raise AliasFileError(f"{path}: not an alias journal of crawldedup (magic {data[:8]!r})")
            whole = (len(data) - len(ALIASES_MAGIC)) // RECORD.size
            for requested, final, generation in RECORD.iter_unpack(data[len(ALIASES_MAGIC) :][: whole * RECORD.size]):
                self._map.pop(requested, None)
                self._map[requested] = (final, generation)
            self._records = whole
            end = len(ALIASES_MAGIC) + whole * RECORD.size
            if end != len(data):  # a torn last record
                file.truncate(end)
        except BaseException:
            file.close()
            raise
        return file

    def record(self, aliases: Aliases) -> None:
        """Record a batch (see :mod:`crawldedup.stores.aliases`); a full map drops its oldest."""
        generation = stamp(self._window, self._clock)
        pairs = list(zip(aliases.requested.as_bytes(), aliases.finals.as_bytes()))
        with self._lock:
            for requested, final in pairs:
                self._map.pop(requested, None)
                self._map[requested] = (final, generation)
            while len(self._map) > aliases.capacity:
                self._map.popitem(last=False)
            if self._path is None:
                return
            if self._file is None:  # the first alias of this state file: its journal begins
                self._file = self._open(self._path)
            self._file.write(b"".join(RECORD.pack(requested, final, generation) for requested, final in pairs))
            self._file.flush()
            self._records += len(pairs)
            if self._records > max(COMPACT_MIN, 2 * len(self._map)):
                self._compact()

    def _compact(self) -> None:
        assert self._file is not None and self._path is not None
        records = [RECORD.pack(requested, final, generation) for requested, (final, generation) in self._map.items()]
        self._file.close()
        replace_file(self._path, [ALIASES_MAGIC, *records])
        self._file = open(self._path, "ab")
        self._records = len(records)

    def read(self, fingerprints: Fingerprints) -> List[Optional[bytes]]:
        """The live final fingerprint of each requested one (None: no alias)."""
        oldest = oldest_live(self._window, self._clock)
        with self._lock:
            found = [self._map.get(fp) for fp in fingerprints.as_bytes()]
        return [entry[0] if entry is not None and entry[1] >= oldest else None for entry in found]

    def __len__(self) -> int:
        return len(self._map)

    def close(self) -> None:
        """Close the journal (everything recorded is already written)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def aliases_path(state_path: Optional[str]) -> Optional[str]:
    """The journal beside a state file (None without one)."""
    return None if state_path is None else os.fspath(state_path) + ALIASES_SUFFIX
