"""The offline job on DuckDB (the default engine): one process, spilling to disk past its memory.

The links are read and canonicalized in batches by the Arrow kernels and stored once, distinct
and ordered by prefix, in DuckDB; then each prefix in turn is anti-joined with that
partition of the history (DuckDB reads only its directory), its new pages appended to the
new pages' file and its history rows to the new history's partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Union

from .._extras import needs_extra
from .._files import sync_tree
from .history import HISTORY_SCHEMA, HistoryInfo, HistoryWriter, history_files, replace_history, scratch_beside
from .job import Job, JobReport
from .links import LINK_SCHEMA, LinkCounts, link_batches, open_links

with needs_extra("crawldedup offline", "engines"):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..arrow import FINGERPRINT_TYPE

__all__ = ["NEW_PAGES_SCHEMA", "run_on_duckdb"]

#: The new pages' file: each page once, its canonical URL and fingerprint.
NEW_PAGES_SCHEMA = pa.schema([("url", pa.string()), ("fingerprint", FINGERPRINT_TYPE)])


def _connect(memory_limit: Optional[str], temp_directory: Optional[str], threads: Optional[int]) -> Any:
    with needs_extra("crawldedup offline", "engines"):
        import duckdb

    config: Dict[str, Union[str, bool, int, float, List[str]]] = {"preserve_insertion_order": False}
    if memory_limit:
        config["memory_limit"] = memory_limit
    if temp_directory:
        config["temp_directory"] = temp_directory
    if threads:
        config["threads"] = threads
    for name in ("memory_limit", "temp_directory"):
        value = config.get(name)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"{name} must be text in UTF-8 (DuckDB reads no other), got {value!r}") from None
    try:
        return duckdb.connect(config=config)
    except duckdb.Error as exc:  # a setting it cannot read, such as a memory limit without its unit
        given = ", ".join(f"{name}={config[name]!r}" for name in ("memory_limit", "temp_directory") if name in config)
        raise ValueError(f"DuckDB refused {given}: {' '.join(str(exc).split())}") from None


def _count(con: Any, query: str, params: Optional[Dict[str, Any]] = None) -> int:
    return int(con.sql(query, params=params).fetchall()[0][0])


def run_on_duckdb(
    job: Job,
    *,
    memory_limit: Optional[str] = None,
    temp_directory: Optional[str] = None,
    threads: Optional[int] = None,
) -> JobReport:
    """Run ``job`` on DuckDB; ``memory_limit`` (``"4GB"``), ``temp_directory`` (where it spills)
    and ``threads`` go to DuckDB's settings.

    :raises HistoryError: for a history of another policy or other partitions.
    :raises FileExistsError: when the new pages' file exists.
    :raises KeyError: for a column the links lack.
    """
    job.check_outputs()
    info = job.history_info()
    dataset = open_links(job.links, job.url, job.base)
    report = JobReport()
    counts = LinkCounts()
    failed: List[BaseException] = []

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from link_batches(
                dataset, counts, url=job.url, base=job.base, policy=job.policy, partitions=info.partitions
            )
        except BaseException as exc:  # DuckDB reports it as its own error: keep ours to raise
            failed.append(exc)
            raise

    con = _connect(memory_limit, temp_directory, threads)
    try:
        con.register("link_stream", pa.RecordBatchReader.from_batches(LINK_SCHEMA, batches()))
        try:
            con.execute(
                "CREATE TEMP TABLE links AS SELECT fingerprint, any_value(url) AS url, prefix "
                "FROM link_stream GROUP BY fingerprint, prefix ORDER BY prefix"
            )
        except Exception:
            if failed:
                raise failed[0] from None
            raise
        con.unregister("link_stream")
        report.links, report.null, report.refused = counts.links, counts.null, counts.refused
        files = history_files(job.history)
        if files:
            con.read_parquet(files, hive_partitioning=True).project(
                "fingerprint, url, seen, prefix::INTEGER AS prefix"
            ).create_view("history")
        else:
            con.execute("CREATE TEMP TABLE history (fingerprint BLOB, url VARCHAR, seen TIMESTAMPTZ, prefix INTEGER)")
        report.pages = _count(con, "SELECT count(*) FROM links")
        report.history_before = _count(con, "SELECT count(*) FROM history")
        _by_prefix(con, job, info, report)
    finally:
        con.close()
    return report


def _by_prefix(con: Any, job: Job, info: HistoryInfo, report: JobReport) -> None:
    """The anti-join, a prefix at a time; the new pages synced before the history is replaced."""
    scratch = scratch_beside(job.history, "new")
    pages_path = Path(job.new_pages)
    pages_part = pages_path.with_name(f".{pages_path.name}.part")
    history = HistoryWriter(scratch, info, report.history_before + report.pages)
    cutoff = job.cutoff()
    seen_filter = "" if cutoff is None else "AND h.seen >= $cutoff"
    arguments = {} if cutoff is None else {"cutoff": cutoff}
    with pq.ParquetWriter(pages_part, NEW_PAGES_SCHEMA) as pages:
        for prefix in range(info.partitions):
            where = {"prefix": prefix, **arguments}
            con.execute(
                "CREATE OR REPLACE TEMP TABLE fresh AS SELECT l.fingerprint, l.url FROM links l "
                "WHERE l.prefix = $prefix AND NOT EXISTS (SELECT 1 FROM history h WHERE h.prefix = $prefix "
                f"AND h.fingerprint = l.fingerprint {seen_filter})",
                where,
            )
            fresh = con.sql("SELECT url, fingerprint FROM fresh").to_arrow_table()
            if fresh.num_rows:
                pages.write_table(fresh.cast(NEW_PAGES_SCHEMA))
                report.new += fresh.num_rows
                report.renewed += _count(
                    con,
                    "SELECT count(*) FROM fresh f SEMI JOIN history h ON h.prefix = $prefix "
                    "AND h.fingerprint = f.fingerprint",
                    {"prefix": prefix},
                )
            rows = con.sql(
                "SELECT fingerprint, url, seen, $prefix AS prefix FROM history h WHERE h.prefix = $prefix "
                "AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.fingerprint = h.fingerprint) "
                "UNION ALL SELECT fingerprint, url, $now AS seen, $prefix AS prefix FROM fresh",
                params={"prefix": prefix, "now": job.now},
            ).to_arrow_table()
            history.write(rows.cast(pa.schema([*HISTORY_SCHEMA, ("prefix", pa.int32())])))
    sync_tree(pages_part)
    pages_part.rename(pages_path)
    sync_tree(pages_path)
    history.close()
    report.history_after = history.rows
    replace_history(scratch, job.history)
