"""The offline job on Dask (a ``distributed`` scheduler, or a new LocalCluster): the same job as
on DuckDB, spread over the workers.

Each partition of links is canonicalized by the Arrow kernels on a worker; the pages are
shuffled by fingerprint prefix; each task then judges its prefixes against those partitions of
the history alone (read from their own directories), writes its new pages' file and its
partitions of the new history. The driver only counts and renames.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .._extras import needs_extra
from .._files import sync_tree
from .history import (
    HISTORY_SCHEMA,
    HistoryInfo,
    finish_history,
    prefixes,
    replace_history,
    scratch_beside,
    write_partition,
)
from .job import Job, JobReport
from .on_duckdb import NEW_PAGES_SCHEMA

with needs_extra("crawldedup offline --engine dask", "engines"):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..arrow import FINGERPRINT_TYPE, url_columns

__all__ = ["run_on_dask"]

_COUNTS = ["links", "null", "refused", "pages", "new", "renewed", "history_after"]


def _hashes(fingerprints: pa.Array) -> np.ndarray:
    return np.frombuffer(fingerprints.buffers()[1], dtype="<u8").reshape(-1, 2)[
        fingerprints.offset : fingerprints.offset + len(fingerprints)
    ]


def _pages(frame: pd.DataFrame, job: Job, partitions: int) -> Tuple[pd.DataFrame, Dict[str, int]]:
    """One partition of links as its pages (fingerprint halves, prefix, URL), and its counts."""
    urls = pa.chunked_array([pa.array(frame[job.url], type=pa.large_string(), from_pandas=True)])
    bases = None
    if job.base is not None:
        bases = pa.chunked_array([pa.array(frame[job.base], type=pa.large_string(), from_pandas=True)])
    made = url_columns(urls, bases=bases, policy=job.policy)
    kept = made.canonical.is_valid()
    fingerprints = made.fingerprint.filter(kept).combine_chunks()
    hashes = _hashes(fingerprints) if len(fingerprints) else np.zeros((0, 2), np.uint64)
    pages = pd.DataFrame(
        {
            "h1": hashes[:, 0],
            "h2": hashes[:, 1],
            "prefix": prefixes(hashes, partitions),
            "url": pd.arrays.ArrowExtensionArray(made.canonical.filter(kept).combine_chunks().cast(pa.string())),
        }
    )
    counts = {"links": len(frame), "null": urls.null_count, "refused": len(made.error) - made.error.null_count}
    return pages, counts


def _judge(pages: pd.DataFrame, job: Job, info: HistoryInfo, scratch: Path, pages_dir: Path, task: int) -> pd.DataFrame:
    """Judge the prefixes of one shuffled partition: its new pages' file, its history partitions."""
    counts: Dict[str, int] = dict.fromkeys(_COUNTS, 0)
    fresh_tables = []
    cutoff = job.cutoff()
    for prefix, group in pages.groupby("prefix", sort=True):
        group = group.drop_duplicates(subset=["h1", "h2"])
        counts["pages"] += len(group)
        old = _history_partition(job.history, int(prefix))
        old_keys = old[["h1", "h2"]]
        counted = old if cutoff is None else old[old["seen"] >= pd.Timestamp(cutoff)]
        marked = group.merge(counted[["h1", "h2"]].assign(_seen=True), on=["h1", "h2"], how="left")
        fresh = marked[marked["_seen"].isna()].drop(columns="_seen")
        counts["new"] += len(fresh)
        counts["renewed"] += len(fresh.merge(old_keys, on=["h1", "h2"]))
        kept = old.merge(fresh[["h1", "h2"]].assign(_fresh=True), on=["h1", "h2"], how="left")
        kept = kept[kept["_fresh"].isna()]
        rows = pd.concat(
            [kept[["h1", "h2", "url", "seen"]], fresh[["h1", "h2", "url"]].assign(seen=pd.Timestamp(job.now))]
        )
        _write_partition(scratch, info, int(prefix), rows)
        counts["history_after"] += len(rows)
        fresh_tables.append(_as_table(fresh[["h1", "h2", "url"]])[1])
    if fresh_tables:
        pq.write_table(pa.concat_tables(fresh_tables), pages_dir / f"part-{task:05d}.parquet")
    return pd.DataFrame([counts])


def _as_table(rows: pd.DataFrame) -> Tuple[pa.Array, pa.Table]:
    """The rows' fingerprints (16 bytes, from the halves) and URLs as an Arrow table."""
    hashes = np.ascontiguousarray(np.stack([rows["h1"].to_numpy(np.uint64), rows["h2"].to_numpy(np.uint64)], axis=1))
    fingerprints = pa.Array.from_buffers(FINGERPRINT_TYPE, len(rows), [None, pa.py_buffer(hashes)])
    return fingerprints, pa.table(
        {"url": pa.array(rows["url"], pa.string()), "fingerprint": fingerprints}, schema=NEW_PAGES_SCHEMA
    )


def _history_partition(history: Any, prefix: int) -> pd.DataFrame:
    """One partition of the history: halves, URL and when seen (empty when it has none)."""
    files = sorted(Path(history).glob(f"prefix={prefix}/*.parquet"))
    if not files:
        return pd.DataFrame(
            {
                "h1": pd.Series([], dtype=np.uint64),
                "h2": pd.Series([], dtype=np.uint64),
                "url": pd.Series([], dtype=pd.ArrowDtype(pa.string())),
                "seen": pd.Series([], dtype="datetime64[us, UTC]"),
            }
        )
    table = pa.concat_tables([pq.read_table(f, columns=["fingerprint", "url", "seen"]) for f in files])
    fixed = table.column("fingerprint").cast(FINGERPRINT_TYPE).combine_chunks()
    hashes = _hashes(fixed)
    return pd.DataFrame(
        {
            "h1": hashes[:, 0],
            "h2": hashes[:, 1],
            "url": pd.arrays.ArrowExtensionArray(table.column("url").combine_chunks().cast(pa.string())),
            "seen": table.column("seen").to_pandas(),
        }
    )


def _write_partition(scratch: Path, info: HistoryInfo, prefix: int, rows: pd.DataFrame) -> None:
    fingerprints, _ = _as_table(rows)
    table = pa.table(
        {
            "fingerprint": fingerprints,
            "url": pa.array(rows["url"], pa.string()),
            "seen": pa.array(rows["seen"], HISTORY_SCHEMA.field("seen").type),
            "prefix": pa.array(np.full(len(rows), prefix, np.int32)),
        }
    )
    write_partition(scratch, prefix, table, len(rows))


def run_on_dask(job: Job, *, scheduler: Optional[str] = None, client: Optional[Any] = None) -> JobReport:
    """Run ``job`` on Dask: ``client``, or a client of ``scheduler``, or of a new LocalCluster.

    :raises HistoryError: for a history of another policy or other partitions.
    :raises FileExistsError: when the new pages' path exists.
    """
    from distributed import Client, LocalCluster

    job.check_outputs()
    info = job.history_info()
    own = None
    if client is None:
        own = Client(scheduler) if scheduler else Client(LocalCluster(host="127.0.0.1", dashboard_address=":0"))
    try:
        return _run(job, info)
    finally:
        if own is not None:
            cluster = own.cluster
            own.close()
            if cluster is not None and scheduler is None:
                cluster.close()


def _run(job: Job, info: HistoryInfo) -> JobReport:
    with needs_extra("crawldedup offline --engine dask", "engines"):
        import dask
        import dask.dataframe as dd
        from dask.dataframe.utils import make_meta

    columns = [job.url] + ([job.base] if job.base is not None else [])
    links = dd.read_parquet(list(job.links), columns=columns)
    made = [dask.delayed(_pages, nout=2)(part, job, info.partitions) for part in links.to_delayed()]
    page_parts, count_parts = dask.persist([m[0] for m in made], [m[1] for m in made])  # canonicalized once
    report = JobReport()
    for counts in dask.compute(*count_parts):
        report.links += counts["links"]
        report.null += counts["null"]
        report.refused += counts["refused"]
    pages = dd.from_delayed(page_parts, meta=_pages(make_meta(links), job, info.partitions)[0])
    shuffled = pages.shuffle(on="prefix", npartitions=min(info.partitions, max(1, pages.npartitions)))
    scratch = scratch_beside(job.history, "new")
    scratch.mkdir()
    pages_path = Path(job.new_pages)
    pages_dir = pages_path.with_name(f".{pages_path.name}.part")
    pages_dir.mkdir()
    judged = shuffled.map_partitions(
        lambda part, partition_info=None: _judge(
            part, job, info, scratch, pages_dir, (partition_info or {}).get("number", os.getpid())
        ),
        meta=pd.DataFrame({name: pd.Series([], dtype=np.int64) for name in _COUNTS}),
    ).compute()
    for name in ("pages", "new", "renewed", "history_after"):
        setattr(report, name, int(judged[name].sum()))
    # Partitions of the history no link fell in go to the new history as they are (hard links).
    for folder in Path(job.history).glob("prefix=*"):
        if not (scratch / folder.name).exists():
            (scratch / folder.name).mkdir()
            for file in folder.iterdir():
                os.link(file, scratch / folder.name / file.name)
                report.history_after += pq.ParquetFile(file).metadata.num_rows
    report.history_before = sum(
        pq.ParquetFile(f).metadata.num_rows for f in Path(job.history).glob("prefix=*/*.parquet")
    )
    sync_tree(pages_dir)
    pages_dir.rename(pages_path)
    finish_history(scratch, info)
    replace_history(scratch, job.history)
    return report
