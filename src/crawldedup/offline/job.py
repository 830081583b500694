"""What an offline job is, whichever engine runs it: its inputs, its checks and its report.

Links (Parquet: a URL column, optionally the page each was found on) and a history (see
:mod:`.history`) give the new pages (Parquet: ``url``, ``fingerprint``) and the updated history:
a page is new when its fingerprint is not in the history, or was last taken as new longer
than the window ago. Exact: an anti-join on all 128 bits, one fingerprint prefix at a time.
The new pages are written (and flushed to disk) before the history is replaced, so a job
stopped at any point loses no page: run again, it gives the same new pages again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, Optional, Sequence

from .._checks import PathArg
from ..canonical import DEFAULT_POLICY, CanonicalPolicy, policy_conflict
from .history import HistoryError, HistoryInfo, check_partitions, read_info

__all__ = ["DEFAULT_PARTITIONS", "Job", "JobReport"]

#: Partitions of a new history: 64 files for a small one; give more for a large one (docs/engines.md).
DEFAULT_PARTITIONS = 64


@dataclass
class JobReport:
    """What a job found, counted."""

    links: int = 0
    null: int = 0
    refused: int = 0
    pages: int = 0  # distinct pages among the links
    new: int = 0  # of them, not in the history (or seen longer than the window ago)
    renewed: int = 0  # of the new ones, in the history but seen longer than the window ago
    history_before: int = 0
    history_after: int = 0
    extra: Dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    """One offline run's inputs.

    :param links: Parquet files or directories of links.
    :param history: the history directory (missing or empty: a first run).
    :param new_pages: the Parquet file (DuckDB) or directory (Spark, Dask) of new pages to write.
    :param window: pages taken as new longer ago than this are new again (None: never).
    :param now: the time stamped on the new pages' history rows (UTC).
    :param partitions: a new history's partitions (an existing one keeps its own).
    """

    links: Sequence[str]
    history: PathArg
    new_pages: PathArg
    url: str = "url"
    base: Optional[str] = None
    policy: CanonicalPolicy = DEFAULT_POLICY
    window: Optional[timedelta] = None
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    partitions: Optional[int] = None

    def history_info(self) -> HistoryInfo:
        """The history's info (a new one's for a first run).

        :raises HistoryError: for a history of another policy or other partitions.
        """
        found = read_info(self.history)
        if found is None:
            return HistoryInfo(self.policy.digest, check_partitions(self.partitions or DEFAULT_PARTITIONS))
        if found.policy != self.policy.digest:
            raise HistoryError(f"{self.history}: made with {policy_conflict(found.policy, self.policy.digest)}")
        if self.partitions is not None and self.partitions != found.partitions:
            raise HistoryError(
                f"{self.history}: has {found.partitions} partitions, not {self.partitions} (leave out --partitions)"
            )
        return found

    def cutoff(self) -> Optional[datetime]:
        """History rows seen before this are no longer seen (None without a window)."""
        return None if self.window is None else self.now - self.window

    def check_outputs(self) -> None:
        """:raises FileExistsError: when the new pages' path exists (a job never overwrites them)."""
        if Path(self.new_pages).exists():
            raise FileExistsError(f"{self.new_pages} exists: the new pages of a job go to a new path")
