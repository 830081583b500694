"""The offline job on Spark: the same job as on DuckDB, for links and histories past one machine.

The links are canonicalized by ``mapInArrow`` on the executors (:mod:`crawldedup.integrations.spark`);
the distinct pages and the history are shuffled by fingerprint prefix and anti-joined there;
the updated history is written partitioned by prefix, with Parquet Bloom filters on the
fingerprint column (``parquet.bloom.filter.enabled#fingerprint``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from .._files import sync_tree
from ..integrations.spark import with_url_columns
from .history import finish_history, history_files, replace_history, scratch_beside
from .job import Job, JobReport

__all__ = ["run_on_spark", "spark_session"]


def spark_session(master: str = "local[*]") -> Any:
    """A session for the job: timestamps written as Parquet's, the driver on loopback when local."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("crawldedup offline")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    return builder.getOrCreate()


def run_on_spark(job: Job, *, master: str = "local[*]", session: Optional[Any] = None) -> JobReport:
    """Run ``job`` on Spark (``session``, or a new one on ``master``).

    :raises HistoryError: for a history of another policy or other partitions.
    :raises FileExistsError: when the new pages' path exists.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    job.check_outputs()
    info = job.history_info()
    spark = session or spark_session(master)
    columns = [job.url] + ([job.base] if job.base is not None else [])
    made = with_url_columns(spark.read.parquet(*job.links).select(*columns), job.url, job.base, job.policy)
    made = made.persist(StorageLevel.MEMORY_AND_DISK)
    shift = 17 - info.partitions.bit_length()
    prefix = F.shiftright(F.conv(F.hex(F.substring("fingerprint", 1, 2)), 16, 10).cast("int"), shift)
    pages = (
        made.where(F.col("canonical").isNotNull())
        .select("fingerprint", F.col("canonical").alias("url"))
        .withColumn("prefix", prefix)
        .repartition(info.partitions, "prefix")
        .dropDuplicates(["fingerprint"])
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    files = history_files(job.history)
    if files:
        history = spark.read.option("basePath", str(job.history)).parquet(*files)
    else:
        history = spark.createDataFrame([], "fingerprint binary, url string, seen timestamp, prefix int")
    cutoff = job.cutoff()
    counted = history if cutoff is None else history.where(F.col("seen") >= F.lit(cutoff))
    fresh = pages.join(counted.select("fingerprint", "prefix"), ["fingerprint", "prefix"], "left_anti")
    fresh = fresh.persist(StorageLevel.MEMORY_AND_DISK)
    report = JobReport()
    totals = made.agg(
        F.count(F.lit(1)), F.count(F.when(F.col(job.url).isNull(), 1)), F.count(F.col("error"))
    ).collect()[0]
    report.links, report.null, report.refused = int(totals[0]), int(totals[1]), int(totals[2])
    report.pages, report.new = pages.count(), fresh.count()
    report.history_before = history.count() if files else 0
    report.renewed = fresh.join(history.select("fingerprint", "prefix"), ["fingerprint", "prefix"], "left_semi").count()
    pages_path = Path(job.new_pages)
    pages_part = pages_path.with_name(f".{pages_path.name}.part")
    fresh.select("url", "fingerprint").write.parquet(str(pages_part))
    sync_tree(pages_part)
    pages_part.rename(pages_path)
    updated = history.join(fresh.select("fingerprint", "prefix"), ["fingerprint", "prefix"], "left_anti").unionByName(
        fresh.withColumn("seen", F.lit(job.now).cast("timestamp"))
    )
    scratch = scratch_beside(job.history, "new")
    (
        updated.repartition(info.partitions, "prefix")
        .write.partitionBy("prefix")
        .option("parquet.bloom.filter.enabled#fingerprint", "true")
        .option("parquet.bloom.filter.expected.ndv#fingerprint", str(max(1024, 2 * report.pages // info.partitions)))
        .parquet(str(scratch))
    )
    report.history_after = report.history_before + report.new - report.renewed  # renewed rows are replaced
    finish_history(scratch, info)
    replace_history(scratch, job.history)
    for kept in (made, pages, fresh):
        kept.unpersist()
    return report
