"""The offline job: Parquet files of discovered links and a history of fingerprints give the new
pages and the updated history, exactly, on DuckDB (one machine) or on Spark or Dask (many).

``crawldedup offline`` runs it (docs/engines.md); :func:`run_on_duckdb`, :func:`run_on_spark`
and :func:`run_on_dask` are the same job on each engine, from a :class:`Job`. The history's
format is in :mod:`.history`; :mod:`.state` moves pages between a history and a local state file.
"""

from .history import HISTORY_SCHEMA, HistoryError, HistoryInfo, read_info
from .job import DEFAULT_PARTITIONS, Job, JobReport
from .on_dask import run_on_dask
from .on_duckdb import NEW_PAGES_SCHEMA, run_on_duckdb
from .on_spark import run_on_spark

__all__ = [
    "DEFAULT_PARTITIONS",
    "HISTORY_SCHEMA",
    "NEW_PAGES_SCHEMA",
    "HistoryError",
    "HistoryInfo",
    "Job",
    "JobReport",
    "read_info",
    "run_on_dask",
    "run_on_duckdb",
    "run_on_spark",
]
