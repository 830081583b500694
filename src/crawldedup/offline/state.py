"""Pages between a history and a local state file (of ``crawldedup filter`` and of a local
Deduplicator: the Bloom filter, with the exact tier beside it unless made by the filter alone),
both ways.

- :func:`history_to_state`: a new state file holding every page of a history (within the
  window, when one is given), stamped with the history's policy, for a crawl on one host to
  go on from an offline history.
- :func:`state_to_history`: a state file keeps fingerprints, not URLs, so the pages come from a list
  of URLs (e.g. the output of ``crawldedup filter``, which prints each page it took once): those
  the state file holds join the history, as a job's new pages would.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from .._checks import PathArg
from .._extras import needs_extra
from ..bloom import FilterFileError, GrowingFilter, open_filter_file
from ..canonical import POLICIES, CanonicalPolicy, policy_conflict
from ..dedup.state import open_state, state_policy
from .history import HistoryError, history_files, read_info
from .job import Job, JobReport
from .on_duckdb import run_on_duckdb

with needs_extra("crawldedup offline", "engines"):
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from ..arrow import canonicalize_array, fingerprint_array

__all__ = ["history_to_state", "state_to_history"]


def _hashes(fingerprints: pa.Array) -> np.ndarray:
    fixed = fingerprints.cast(pa.binary(16))
    return np.frombuffer(fixed.buffers()[1], dtype="<u8").reshape(-1, 2)[fixed.offset : fixed.offset + len(fixed)]


def history_to_state(
    history: PathArg,
    state: PathArg,
    policy: CanonicalPolicy,
    *,
    error_rate: float = 0.01,
    capacity: Optional[int] = None,
    window: Optional[timedelta] = None,
    now: Optional[datetime] = None,
) -> int:
    """Write a new (plain) state file holding the history's pages; with ``window``, only those
    taken as new within it. Returns the pages written.

    :raises HistoryError: for a missing history or one of another policy.
    :raises FileExistsError: when ``state`` exists.
    """
    info = read_info(history)
    if info is None:
        raise HistoryError(f"{history}: no history there")
    if info.policy != policy.digest:
        raise HistoryError(f"{history}: made with {policy_conflict(info.policy, policy.digest)}")
    if Path(state).exists():
        raise FileExistsError(f"{state} exists: the pages go to a new state file")
    dataset = ds.dataset(history_files(history), format="parquet")
    rows = dataset.count_rows()
    cutoff = None if window is None else (now or datetime.now(timezone.utc)) - window
    wanted = None if cutoff is None else ds.field("seen") >= pa.scalar(cutoff, pa.timestamp("us", tz="UTC"))
    written = 0
    with open_state(state, max(capacity or 0, rows, 1000), error_rate, policy) as bloom:
        for batch in dataset.to_batches(columns=["fingerprint"], filter=wanted):
            bloom.add_hashes(np.ascontiguousarray(_hashes(batch.column(0))))
            written += batch.num_rows
        bloom.flush()
    return written


def _url_lines(paths: Sequence[PathArg]) -> Iterable[str]:
    for path in paths:
        with open(path, encoding="utf-8", errors="surrogateescape") as lines:
            for line in lines:
                line = line.rstrip("\n")
                if line:
                    yield line


def state_to_history(
    state: PathArg,
    urls: Sequence[PathArg],
    history: PathArg,
    *,
    now: Optional[datetime] = None,
    partitions: Optional[int] = None,
) -> JobReport:
    """Add to ``history`` the pages of the text files ``urls`` (a URL a line) that the state
    file holds. The state file's policy is the history's (a history of another is refused).

    :raises FilterFileError: for a file that is not a state file.
    :raises HistoryError: for a history of another policy.
    """
    with GrowingFilter(open_filter_file(state, "r")) as bloom:
        digest = state_policy(bloom, state)
        policy = next((p for p in POLICIES.values() if p.digest == digest), None)
        if policy is None:
            raise FilterFileError(f"{state}: made with a policy this crawldedup does not name (digest {digest})")
        column = pa.array(list(_url_lines(urls)), type=pa.string())
        canonical, _ = canonicalize_array(column, policy=policy)
        pages = canonical.drop_null()
        held = bloom.contains_hashes(np.ascontiguousarray(_hashes(fingerprint_array(pages).combine_chunks())))
        kept = pages.combine_chunks().filter(pa.array(held))
    with tempfile.TemporaryDirectory(dir=Path(history).resolve().parent) as scratch:
        links = Path(scratch) / "held.parquet"
        pq.write_table(pa.table({"url": kept}), links)
        job = Job(
            [str(links)],
            history,
            Path(scratch) / "new.parquet",
            policy=policy,
            now=now or datetime.now(timezone.utc),
            partitions=partitions,
        )
        report = run_on_duckdb(job)
    report.extra["not held"] = len(pages) - len(kept)
    return report
