"""Each engine, in local mode, gives every row of a few thousand URLs what canonicalize() and
fingerprint() give it: DuckDB's Arrow functions, a Polars expression, PySpark's mapInArrow on a
local[2] JVM, Dask on a distributed.LocalCluster, Ray Data's map_batches. The JVM, the cluster
and Ray start once per session (the slow tests share them)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import pytest
from conftest import required_module

from crawldedup import POLICY_V1, InvalidURL, canonicalize, fingerprint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_urls import engine_urls  # noqa: E402

pa = required_module("pyarrow")

ROWS = engine_urls(3000)
URLS = [url for url, _ in ROWS]
BASES = [base for _, base in ROWS]
TABLE = pa.table({"id": list(range(len(ROWS))), "url": URLS, "base": BASES})


def expected(
    url: Optional[str], base: Optional[str], policy=None
) -> Tuple[Optional[str], Optional[str], Optional[bytes]]:
    if url is None:
        return None, None, None
    try:
        canonical = canonicalize(url, base=base, policy=policy)
    except InvalidURL as exc:
        return None, str(exc), None
    return canonical, None, fingerprint(canonical)


def check_rows(
    got: Sequence[Tuple[int, Optional[str], Optional[str], Optional[bytes]]], policy=None, bases=True
) -> None:
    """Every row (id, canonical, error, fingerprint) is what the API gives its URL."""
    assert sorted(row[0] for row in got) == list(range(len(ROWS)))
    wrong = [
        (row, expected(URLS[row[0]], BASES[row[0]] if bases else None, policy))
        for row in got
        if tuple(row[1:]) != expected(URLS[row[0]], BASES[row[0]] if bases else None, policy)
    ]
    assert wrong == []
    assert sum(row[1] is not None for row in got) > len(ROWS) // 2  # most are pages


def test_duckdb_functions():
    duckdb = required_module("duckdb")
    from crawldedup.integrations.duckdb import register

    con = duckdb.connect()
    register(con)
    con.register("links", TABLE)
    got = con.sql(
        "SELECT id, canonical_link(url, base), link_refusal(url, base), link_fingerprint(url, base) FROM links"
    ).fetchall()
    check_rows(got)
    alone = con.sql("SELECT id, canonical_url(url), url_refusal(url), url_fingerprint(url) FROM links").fetchall()
    check_rows(alone, bases=False)


def test_duckdb_functions_under_another_policy():
    duckdb = required_module("duckdb")
    from crawldedup.integrations.duckdb import register

    con = duckdb.connect()
    register(con, policy=POLICY_V1)
    con.register("links", TABLE)
    check_rows(
        con.sql(
            "SELECT id, canonical_link(url, base), link_refusal(url, base), link_fingerprint(url, base) FROM links"
        ).fetchall(),
        policy=POLICY_V1,
    )


def _polars_rows(frame) -> List[tuple]:
    return list(frame.select("id", "canonical", "error", "fingerprint").iter_rows())


def test_polars_expression_eager_and_lazy():
    pl = required_module("polars")
    from crawldedup.integrations.polars import url_columns, with_url_columns

    frame = pl.from_arrow(TABLE)
    check_rows(_polars_rows(with_url_columns(frame, base="base")))
    lazy = with_url_columns(frame.lazy(), "url").collect()
    check_rows(_polars_rows(lazy), bases=False)
    # An expression like any other: in a filter, over a computed column.
    kept = frame.filter(url_columns(pl.col("url"), "base").struct.field("error").is_null())
    assert kept.height == sum(expected(u, b)[1] is None for u, b in ROWS)


@pytest.mark.slow
def test_spark_map_in_arrow(spark_session):
    from crawldedup.integrations.spark import with_url_columns

    frame = spark_session.createDataFrame(TABLE).repartition(3)
    made = with_url_columns(frame, base="base")
    assert [f.name for f in made.schema.fields][-3:] == ["canonical", "error", "fingerprint"]
    got = [
        (r["id"], r["canonical"], r["error"], None if r["fingerprint"] is None else bytes(r["fingerprint"]))
        for r in made.collect()
    ]
    check_rows(got)


@pytest.mark.slow
def test_dask_on_a_local_cluster(dask_client):
    import dask.dataframe as dd

    from crawldedup.integrations.dask import with_url_columns

    frame = dd.from_pandas(TABLE.to_pandas(), npartitions=3)
    made = with_url_columns(frame, base="base").compute()
    got = [(r.id, r.canonical, r.error, r.fingerprint) for r in made.itertuples()]
    check_rows([(i, None if _na(c) else c, None if _na(e) else e, None if _na(f) else f) for i, c, e, f in got])


def _na(value: object) -> bool:
    import pandas as pd

    return value is None or value is pd.NA


@pytest.mark.slow
def test_spark_pages_of_keeps_the_pages_in_link_order(spark_session):
    from crawldedup.integrations.spark import pages_of

    frame = spark_session.createDataFrame(TABLE).repartition(1)
    got = [(r["url"], bytes(r["fingerprint"])) for r in pages_of(frame, base="base").collect()]
    want = [(canonical, fp) for canonical, _, fp in (expected(u, b) for u, b in ROWS) if canonical is not None]
    assert got == want


@pytest.fixture(scope="session")
def ray_session() -> Iterator[object]:
    ray = required_module("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")  # Ray Data's own settings warn of themselves
def test_ray_data_map_batches(ray_session):
    from crawldedup.integrations.ray import with_url_columns

    dataset = ray_session.data.from_arrow(TABLE).repartition(3)
    made = with_url_columns(dataset, base="base", batch_size=500).to_arrow_refs()
    table = pa.concat_tables(ray_session.get(made))
    got = list(zip(*(table.column(name).to_pylist() for name in ("id", "canonical", "error", "fingerprint"))))
    check_rows(got)
