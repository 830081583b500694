"""Write N rows of discovered links to Parquet for the engine benchmarks.

Usage: python bench/scripts/engine_links.py ROWS OUT.parquet [--pages-per-million 200000] [--seed 37]

One million links of examples/frontier.py (every spelling a crawler meets: tracking parameters,
case, ports, fragments, wrapped share links, relative links resolved against their page, a few
links that are not web pages) are made once; each further million is the same frontier with
its hosts renamed (``.example`` -> ``.example<k>``, vectorized in Arrow), so the rows hold
``ROWS / 1e6 * pages-per-million`` distinct pages. Columns: ``url`` (absolute; relative links are
resolved by the generator's page so that every engine reads the same strings) and ``base``
(null). The last line on stderr says how many rows, distinct raw strings and pages the file holds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from urllib.parse import urljoin

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import frontier  # noqa: E402

TILE = 1_000_000


def base_tile(pages: int, seed: int) -> pa.Array:
    lines: list = []
    frontier.generate(TILE, pages, seed=seed, write=lines.append)
    urls = []
    for line in "".join(lines).split("\n"):
        if line:
            page, _, link = line.rpartition("\t")
            urls.append(urljoin(page, link) if page else link)
    return pa.array(urls[:TILE], type=pa.string())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rows", type=int)
    parser.add_argument("out")
    parser.add_argument("--pages-per-million", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()
    started = time.perf_counter()
    tile = base_tile(args.pages_per_million, args.seed)
    schema = pa.schema([("url", pa.string()), ("base", pa.string())])
    written = 0
    with pq.ParquetWriter(args.out, schema, compression="zstd") as writer:
        k = 0
        while written < args.rows:
            urls = tile if k == 0 else pc.replace_substring(tile, ".example", f".example{k}")
            urls = urls.slice(0, min(TILE, args.rows - written))
            writer.write_table(pa.table({"url": urls, "base": pa.nulls(len(urls), pa.string())}, schema=schema))
            written += len(urls)
            k += 1
    print(
        f"{written:,} rows in {k} tiles of {TILE:,} ({args.pages_per_million:,} pages a tile) -> {args.out} "
        f"in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
