"""PySpark local[2]: Parquet links -> deduplicated Parquet, three ways, side by side.

Usage: python bench/scripts/spark_dedup.py LINKS.parquet OUT_DIR [--only crawldedup,w3lib,raw]

- ``crawldedup``: ``pages_of`` (mapInArrow over the Arrow kernels: each link's canonical URL and
  fingerprint, refused links left out in the worker), then ``dropDuplicates`` on the 16-byte
  fingerprint: one row per page.
- ``crawldedup-columns``: the same with ``with_url_columns`` (every input column back, plus
  canonical, error and fingerprint), filtered in Spark.
- ``w3lib``: ``w3lib.url.canonicalize_url`` in a pandas UDF, then ``dropDuplicates`` on its
  output: the usual Python way.
- ``raw``: ``dropDuplicates`` on the raw strings: no canonicalization, so every spelling of a
  page is kept.

Each writes its Parquet to OUT_DIR/<way>; the table gives wall seconds and the rows written
(pages found). make LINKS with bench/scripts/engine_links.py (links-20m: 20,000,000 rows).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import pyarrow as pa


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("links")
    parser.add_argument("out")
    parser.add_argument("--only", default="crawldedup,w3lib,raw")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    from crawldedup.integrations.spark import with_url_columns
    from crawldedup.offline.on_spark import spark_session

    spark = spark_session(args.master)
    spark.conf.set("spark.sql.shuffle.partitions", "8")
    # Splits of 32 MB: enough tasks to keep both cores busy to the end (a 285 MB file gives 9).
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(32 << 20))
    spark.sparkContext.setLogLevel("ERROR")

    @pandas_udf("string")
    def w3lib_canonical(urls):  # type: ignore[no-untyped-def]
        import pandas as pd
        from w3lib.url import canonicalize_url

        def one(url):
            try:
                return canonicalize_url(url)
            except Exception:
                return None

        return pd.Series([one(u) for u in urls], dtype=object)

    ways = {
        "crawldedup": lambda links: (
            with_url_columns(links)
            .where(F.col("canonical").isNotNull())
            .dropDuplicates(["fingerprint"])
            .select(F.col("canonical").alias("url"), "fingerprint")
        ),
        "w3lib": lambda links: (
            links.select(w3lib_canonical("url").alias("url")).where(F.col("url").isNotNull()).dropDuplicates(["url"])
        ),
        "raw": lambda links: links.select("url").where(F.col("url").isNotNull()).dropDuplicates(["url"]),
    }
    rows = spark.read.parquet(args.links).count()
    print(f"{rows:,} link rows, Spark {spark.version}, master {args.master}, pyarrow {pa.__version__}", flush=True)
    for name in args.only.split(","):
        target = os.path.join(args.out, name)
        shutil.rmtree(target, ignore_errors=True)
        started = time.perf_counter()
        ways[name](spark.read.parquet(args.links).select("url")).write.parquet(target)
        seconds = time.perf_counter() - started
        pages = spark.read.parquet(target).count()
        print(f"{name:11s} {seconds:8.1f} s  {rows / seconds:12,.0f} rows/s  {pages:12,} rows written", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
