"""The offline job's first run on one machine: Parquet links -> each page once, on DuckDB or Polars.

Usage: /usr/bin/time -v python bench/scripts/offline_rows.py {duckdb,polars} LINKS.parquet WORK_DIR
           [--memory-limit 8GB]

- ``duckdb``: ``crawldedup.offline.run_on_duckdb`` (the ``crawldedup offline run`` default): the
  links canonicalized and fingerprinted by the Arrow kernels in batches, stored distinct in
  DuckDB (spilling to WORK_DIR past the memory limit), anti-joined with the (empty) history a
  prefix at a time, the new pages and the history written.
- ``polars``: ``url_columns`` as a Polars expression over a lazy scan, ``unique`` on the
  fingerprint, ``sink_parquet`` (streaming engine).

Prints wall seconds, rows a second and the pages found; peak RSS is /usr/bin/time's "Maximum
resident set size". Make LINKS with bench/scripts/engine_links.py (links-100m: 100,000,000 rows).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engine", choices=["duckdb", "polars"])
    parser.add_argument("links")
    parser.add_argument("work")
    parser.add_argument("--memory-limit", default="8GB")
    parser.add_argument("--partitions", type=int, default=64)
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.perf_counter()
    if args.engine == "duckdb":
        from crawldedup.offline import Job, run_on_duckdb

        report = run_on_duckdb(
            Job([args.links], work / "history", work / "new.parquet", partitions=args.partitions),
            memory_limit=args.memory_limit,
            temp_directory=str(work / "spill"),
        )
        rows, pages = report.links, report.new
    else:
        import polars as pl

        from crawldedup.integrations.polars import url_columns

        (
            pl.scan_parquet(args.links)
            .select(url_columns("url").alias("made"))
            .unnest("made")
            .filter(pl.col("canonical").is_not_null())
            .unique("fingerprint")
            .select(pl.col("canonical").alias("url"), "fingerprint")
            .sink_parquet(work / "new.parquet")
        )
        rows = pl.scan_parquet(args.links).select(pl.len()).collect().item()
        pages = pl.scan_parquet(work / "new.parquet").select(pl.len()).collect().item()
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.engine}: {rows:,} rows in {seconds:.1f} s ({rows / seconds:,.0f} rows/s), {pages:,} pages, "
        f"peak RSS {peak:,.0f} MiB",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
