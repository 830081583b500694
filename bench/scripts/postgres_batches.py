"""How the postgres store sends a batch: the three one-statement forms, claims/s in alternating
rounds (the machine is shared), each into a fresh table of the store's shape.

    nice python bench/scripts/postgres_batches.py --claims 200000 --rounds 3   # starts its own PostgreSQL

- ``bytea``: the batch as one ``bytea`` parameter, split by the server (what the store sends);
- ``array``: a ``bytea[]`` parameter, unnested;
- ``copy``: ``COPY`` (binary) into a temporary table, then one insert-select, in one transaction.

Each is ``INSERT ... SELECT DISTINCT ... ORDER BY fingerprint ON CONFLICT DO NOTHING RETURNING``,
in calls of 10,000 distinct random fingerprints, against a server with PostgreSQL's defaults.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the PostgresServer the tests use

import psycopg  # noqa: E402
from conftest import PostgresServer, find_postgres_bin  # noqa: E402

BATCH = 10_000
SPLIT = (
    "SELECT substring(%(one)s::bytea FROM i * 16 + 1 FOR 16) "
    "FROM generate_series(0, length(%(one)s::bytea) / 16 - 1) AS i"
)
INSERT = (
    "INSERT INTO {table} (fingerprint, token) SELECT DISTINCT fp, 1 FROM {source} ORDER BY fp "
    "ON CONFLICT DO NOTHING RETURNING fingerprint"
)
SOURCES = {"bytea": f"({SPLIT}) AS s (fp)", "array": "unnest(%(many)s::bytea[]) AS s (fp)"}


def claim(db: psycopg.Connection, form: str, table: str, batch: List[bytes]) -> int:
    if form == "copy":
        with db.transaction():
            db.execute("CREATE TEMP TABLE IF NOT EXISTS batch (fp bytea) ON COMMIT DELETE ROWS")
            with db.cursor().copy("COPY batch (fp) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["bytea"])
                for fp in batch:
                    copy.write_row((fp,))
            return len(db.execute(INSERT.format(table=table, source="batch"), binary=True).fetchall())
    query = INSERT.format(table=table, source=SOURCES[form])
    return len(db.execute(query, {"one": b"".join(batch), "many": batch}, binary=True).fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bindir = find_postgres_bin()
    if bindir is None:
        sys.exit("PostgreSQL not found: apt-get install postgresql")
    server = PostgresServer(bindir, durable=True)
    server.start()
    rates: Dict[str, List[float]] = {"bytea": [], "array": [], "copy": []}
    try:
        with psycopg.connect(server.url(), autocommit=True) as db:
            for r in range(args.rounds):
                fps = [os.urandom(16) for _ in range(args.claims)]
                for form in list(rates) if r % 2 == 0 else list(rates)[::-1]:
                    table = f"claims_{form}_{r}"
                    db.execute(
                        f"CREATE TABLE {table} (fingerprint bytea PRIMARY KEY, token bigint NOT NULL, "
                        f"claimed_at double precision)"
                    )
                    began = time.perf_counter()
                    for start in range(0, len(fps), BATCH):
                        assert claim(db, form, table, fps[start : start + BATCH]) == len(fps[start : start + BATCH])
                    rates[form].append(len(fps) / (time.perf_counter() - began))
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)
    print(f"{args.claims:,} claims in calls of {BATCH:,}, {args.rounds} rounds, medians (ranges)")
    for form, values in rates.items():
        print(f"{form:6} {statistics.median(values):>8,.0f} claims/s ({min(values):,.0f}-{max(values):,.0f})")


if __name__ == "__main__":
    main()
