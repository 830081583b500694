"""The Arrow kernel against canonicalize_many in CPU seconds, alternated, for a shared machine.

Usage: python bench/scripts/arrow_kernel.py [--rounds 15]

The lists of bench/test_bench_arrow.py (``mix``: the canonicalization benchmark's crawl mix;
``frontier``: examples/frontier.py's absolute links; 120,000 rows each). Each round times, in
turn, ``canonicalize_many(list)`` and ``canonicalize_array(column)``, then the same two with the
fingerprints (``hash_many`` of the canonical list; ``url_columns``), in the CPU time of this
process (the kernels run in this thread), so that other work on the machine slows the pair
alike. Prints the median URLs a second of each, its range, and the median of the per-round
ratios kernel / list.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from crawldedup.arrow import canonicalize_array, url_columns  # noqa: E402
from crawldedup.canonical import canonicalize_many  # noqa: E402
from crawldedup.fingerprints import hash_many  # noqa: E402
from test_bench_arrow import COLUMNS, LISTS, ROWS  # noqa: E402


def cpu(function, argument) -> float:
    started = time.process_time()
    function(argument)
    return time.process_time() - started


def with_hashes(urls) -> None:
    hash_many([url for url in canonicalize_many(urls).urls if url is not None])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    pairs = {
        "canonical": ((canonicalize_many, "canonicalize_many"), (canonicalize_array, "canonicalize_array")),
        "+fingerprints": ((with_hashes, "canonicalize_many+hash_many"), (url_columns, "url_columns")),
    }
    for name in LISTS:
        for what, ((list_fn, list_name), (column_fn, column_name)) in pairs.items():
            times = {list_name: [], column_name: []}
            for _ in range(args.rounds):
                times[list_name].append(cpu(list_fn, LISTS[name]))
                times[column_name].append(cpu(column_fn, COLUMNS[name]))
            ratios = [c / lst for c, lst in zip(times[column_name], times[list_name])]
            for label, values in times.items():
                rates = sorted(ROWS / v for v in values)
                print(
                    f"{name:9s} {label:28s} {statistics.median(rates) / 1e6:5.2f} M URLs/s CPU "
                    f"[{rates[0] / 1e6:.2f}-{rates[-1] / 1e6:.2f}]"
                )
            print(
                f"{name:9s} {what:28s} kernel / list CPU time: median {statistics.median(ratios):.2f} "
                f"[{min(ratios):.2f}-{max(ratios):.2f}]"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
