"""The offline job: links + history -> new pages + updated history, exact, on each engine.

Every run is checked against the API: the new pages are exactly the canonical URLs of the
links (each once) that the history did not hold within the window, and the updated history is
the old one plus them, stamped; the history's files carry a Parquet Bloom filter DuckDB reads.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest
from conftest import required_module

from crawldedup import POLICY_V1, InvalidURL, canonicalize, fingerprint
from crawldedup.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_urls import engine_urls  # noqa: E402

pa = required_module("pyarrow")
pq = required_module("pyarrow.parquet")
duckdb = required_module("duckdb")
from crawldedup.offline import HistoryError, Job, read_info, run_on_dask, run_on_duckdb, run_on_spark  # noqa: E402
from crawldedup.offline.state import history_to_state, state_to_history  # noqa: E402

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
ROWS = engine_urls(2500)


def pages_of(rows: List[Tuple[Optional[str], Optional[str]]], policy=None) -> Set[str]:
    found = set()
    for url, base in rows:
        if url is None:
            continue
        try:
            found.add(canonicalize(url, base=base, policy=policy))
        except InvalidURL:
            pass
    return found


def write_links(path: Path, rows) -> str:
    pq.write_table(pa.table({"url": [u for u, _ in rows], "base": [b for _, b in rows]}), path)
    return str(path)


def new_pages(path: Path) -> Dict[str, bytes]:
    table = pq.read_table(path)
    urls, fps = table.column("url").to_pylist(), table.column("fingerprint").to_pylist()
    assert len(set(urls)) == len(urls)  # each page once
    return dict(zip(urls, fps))


def history_of(directory: Path) -> Dict[bytes, Tuple[str, datetime]]:
    table = duckdb.sql(
        f"SELECT fingerprint, url, seen FROM read_parquet('{directory}/prefix=*/*.parquet', hive_partitioning=true)"
    ).fetchall()
    found = {bytes(fp): (url, seen) for fp, url, seen in table}
    assert len(found) == len(table)  # each page once
    return found


def run_on(engine: str, job: Job, spark_session=None, dask_client=None):
    if engine == "duckdb":
        return run_on_duckdb(job)
    if engine == "spark":
        return run_on_spark(job, session=spark_session)
    return run_on_dask(job, client=dask_client)


def check_runs(tmp_path: Path, engine: str, every: bool = True, **sessions) -> None:
    """A first run, the same links a day later (nothing new), a month and more later with a
    30-day window (everything new again), and other links (only the unseen); the slow engines
    run the first and the last only (the last then renews the first's pages it meets)."""
    first, second = ROWS[:1800], ROWS[1200:]
    links = write_links(tmp_path / "links1.parquet", first)
    history = tmp_path / "history"
    window = timedelta(days=30)
    job = Job([links], history, tmp_path / "new1.parquet", base="base", now=T0, partitions=8, window=window)
    report = run_on(engine, job, **sessions)
    want = pages_of(first)
    got = new_pages(tmp_path / "new1.parquet")
    assert set(got) == want and report.new == report.pages == len(want)
    assert all(fp == fingerprint(url) for url, fp in got.items())
    assert report.links == len(first) and report.null == sum(u is None for u, _ in first)
    assert report.refused == sum(1 for u, b in first if u is not None) - sum(
        1 for u, b in first if u is not None and pages_of([(u, b)])
    )
    stored = history_of(history)
    assert {url for url, _ in stored.values()} == want and all(seen == T0 for _, seen in stored.values())
    assert read_info(history).partitions == 8

    if not every:
        others = write_links(tmp_path / "links2.parquet", second)
        last = Job(
            [others], history, tmp_path / "new4.parquet", base="base", now=T0 + timedelta(days=31), window=window
        )
        report = run_on(engine, last, **sessions)
        assert set(new_pages(tmp_path / "new4.parquet")) == pages_of(second)
        assert report.renewed == len(pages_of(second) & want)
        assert {url for url, _ in history_of(history).values()} == want | pages_of(second)
        return
    again = Job([links], history, tmp_path / "new2.parquet", base="base", now=T0 + timedelta(days=1), window=window)
    report = run_on(engine, again, **sessions)
    assert new_pages(tmp_path / "new2.parquet") == {} and report.new == 0 and report.history_after == len(want)

    later = Job([links], history, tmp_path / "new3.parquet", base="base", now=T0 + timedelta(days=31), window=window)
    report = run_on(engine, later, **sessions)
    assert set(new_pages(tmp_path / "new3.parquet")) == want and report.renewed == len(want)
    assert all(seen == T0 + timedelta(days=31) for _, seen in history_of(history).values())

    others = write_links(tmp_path / "links2.parquet", second)
    last = Job([others], history, tmp_path / "new4.parquet", base="base", now=T0 + timedelta(days=32), window=window)
    report = run_on(engine, last, **sessions)
    assert set(new_pages(tmp_path / "new4.parquet")) == pages_of(second) - want
    assert {url for url, _ in history_of(history).values()} == want | pages_of(second)


def test_duckdb_job_three_runs_and_a_window(tmp_path):
    check_runs(tmp_path, "duckdb")


def test_history_files_carry_a_bloom_filter_duckdb_reads(tmp_path):
    links = write_links(tmp_path / "links.parquet", ROWS)
    run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "new.parquet", base="base", partitions=4))
    files = sorted((tmp_path / "h").glob("prefix=*/part-0.parquet"))
    assert len(files) == 4
    for file in files:
        column = pq.ParquetFile(file).metadata.row_group(0).column(0)
        assert column.path_in_schema == "fingerprint" and column.bloom_filter_offset is not None
    held = pq.read_table(files[0]).column("fingerprint")[0].as_py()
    probe = f"SELECT bloom_filter_excludes FROM parquet_bloom_probe('{files[0]}', 'fingerprint', ?)"
    assert duckdb.execute(probe, [held]).fetchall() == [(False,)]
    absent = sum(duckdb.execute(probe, [bytes([i]) * 16]).fetchall()[0][0] for i in range(50))
    assert absent >= 40  # 1% false positives: nearly every absent key is excluded


def test_a_history_of_another_policy_or_partitions_is_refused(tmp_path):
    links = write_links(tmp_path / "links.parquet", ROWS[:50])
    run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n1.parquet", base="base"))
    with pytest.raises(HistoryError, match="policy"):
        run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n2.parquet", policy=POLICY_V1))
    with pytest.raises(HistoryError, match="partitions"):
        run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n3.parquet", partitions=2))
    with pytest.raises(FileExistsError):
        run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n1.parquet"))
    with pytest.raises(KeyError, match="nope"):
        run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n4.parquet", url="nope"))


def test_a_run_stopped_before_the_history_is_replaced_loses_no_page(tmp_path, monkeypatch):
    """New pages are on disk before the history changes: a run that dies in between leaves the
    old history, and the next run gives the same pages again (a duplicate, never a loss)."""
    from crawldedup.offline import on_duckdb

    links = write_links(tmp_path / "links.parquet", ROWS)

    def dies(*_args):
        raise OSError("killed")

    monkeypatch.setattr(on_duckdb, "replace_history", dies)
    with pytest.raises(OSError):
        run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n1.parquet", base="base"))
    monkeypatch.undo()
    first = new_pages(tmp_path / "n1.parquet")
    assert read_info(tmp_path / "h") is None
    run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n2.parquet", base="base"))
    assert new_pages(tmp_path / "n2.parquet") == first == {u: fingerprint(u) for u in pages_of(ROWS)}


def test_cli_runs_the_job_and_names_problems_in_one_line(tmp_path, capsys):
    links = write_links(tmp_path / "links.parquet", ROWS)
    history, out = tmp_path / "h", tmp_path / "new.parquet"
    code = main(
        [
            "offline",
            "run",
            links,
            "--history",
            str(history),
            "--new-pages",
            str(out),
            "--base-column",
            "base",
            "--partitions",
            "4",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0 and f"{len(pages_of(ROWS)):,} new" in err
    assert set(new_pages(out)) == pages_of(ROWS)
    assert main(["offline", "run", links, "--history", str(history), "--new-pages", str(out)]) == 4
    assert "exists" in capsys.readouterr().err
    assert (
        main(
            [
                "offline",
                "run",
                links,
                "--history",
                str(history),
                "--new-pages",
                str(tmp_path / "x"),
                "--url-column",
                "link",
            ]
        )
        == 2
    )
    assert "no column 'link'" in capsys.readouterr().err
    assert (
        main(["offline", "run", links, "--history", str(history), "--new-pages", str(tmp_path / "y"), "--policy", "v1"])
        == 3
    )
    assert "policy" in capsys.readouterr().err
    assert (
        main(
            [
                "offline",
                "run",
                links,
                "--history",
                str(history),
                "--new-pages",
                str(tmp_path / "z"),
                "--window-days",
                "-1",
            ]
        )
        == 2
    )


def test_history_to_a_state_file_and_back(tmp_path):
    from crawldedup import Deduplicator

    links = write_links(tmp_path / "links.parquet", ROWS)
    run_on_duckdb(Job([links], tmp_path / "h", tmp_path / "n.parquet", base="base", now=T0))
    state = tmp_path / "crawl.bloom"
    from crawldedup import DEFAULT_POLICY

    assert history_to_state(tmp_path / "h", state, DEFAULT_POLICY) == len(pages_of(ROWS))
    with Deduplicator("exact", state=str(state), ttl_days=0) as dedup:  # the local crawl goes on from it
        assert not any(dedup.claim_many(sorted(pages_of(ROWS))))
        assert all(dedup.claim_many(["https://brand-new.example/a", "https://brand-new.example/b"]))
    listed = tmp_path / "pages.txt"
    listed.write_text("https://brand-new.example/a\nhttps://brand-new.example/b\nhttps://never-claimed.example/\n")
    report = state_to_history(state, [listed], tmp_path / "h", now=T0 + timedelta(days=1))
    assert report.new == 2 and report.extra["not held"] == 1
    assert {url for url, _ in history_of(tmp_path / "h").values()} == pages_of(ROWS) | {
        "https://brand-new.example/a",
        "https://brand-new.example/b",
    }


@pytest.mark.slow
def test_spark_job_two_runs_and_a_window(tmp_path, spark_session):
    check_runs(tmp_path, "spark", every=False, spark_session=spark_session)


@pytest.mark.slow
def test_dask_job_two_runs_and_a_window(tmp_path, dask_client):
    check_runs(tmp_path, "dask", every=False, dask_client=dask_client)
