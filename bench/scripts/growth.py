"""What growing costs: ns per key of a grown filter of 1, 2 and 4 stages holding the same keys,
and the false-positive rate measured after growth against ``error_rate``.

    python bench/scripts/growth.py --items 1000000 --rounds 5
    python bench/scripts/growth.py --items 10000000 --rounds 3

Each variant holds ``--items`` keys: one stage is a filter made for them all (it never
grows); 2 and 4 stages are filters made small enough to grow into that many. A miss reads one
block per stage, a hit stops at the stage holding the key (older stages first). Each round runs
every variant once, in an order that alternates, so that a neighbour's load falls on all of
them alike; the report gives medians, ranges and each variant's ratio to one stage.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Dict, List

from filter_keys import many_hashes, timed

from crawldedup import bloom
from crawldedup.bloom.growing import GROWTH, GrowingFilter


def base_capacity(items: int, stages: int) -> int:
    """A first capacity that ``items`` keys grow into ``stages`` stages, the newest about half full."""
    if stages == 1:
        return int(items * 1.2)
    # Stage 0 is full at ~0.87 c, stage i at ~1.02 c s^i.
    return int(items / (0.87 + sum(1.02 * GROWTH**i for i in range(1, stages - 1)) + 0.5 * GROWTH ** (stages - 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--probes", type=int, default=1_000_000, help="absent and present keys looked up per step")
    parser.add_argument("--stages", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    n = args.items
    present = many_hashes("present", n)
    folder = Path(tempfile.mkdtemp(prefix="growth-bench-"))
    filters: Dict[int, GrowingFilter] = {}
    for stages in args.stages:
        grown = GrowingFilter(bloom.BloomFilter(base_capacity(n, stages), args.error_rate, folder / f"s{stages}.bloom"))
        added = timed(lambda: [grown.add_hashes(present[i : i + 100_000]) for i in range(0, n, 100_000)], n)
        got = len(grown.stages())
        print(
            f"{stages} stages wanted: {got} made from capacity {grown.stages()[0].capacity:,}; "
            f"add_hashes {added:.1f} ns/key while growing, {grown.num_bits / 8 / n:.2f} bytes/key"
        )
        filters[stages] = grown
    m = min(args.probes, n)
    results: Dict[str, Dict[int, List[float]]] = {"miss": {}, "hit": {}, "miss, batches of 1,000": {}}
    for round_ in range(args.rounds):
        absent = many_hashes(f"absent{round_}", m)
        order = args.stages if round_ % 2 == 0 else args.stages[::-1]
        for stages in order:
            f = filters[stages]
            results["miss"].setdefault(stages, []).append(timed(lambda: f.contains_hashes(absent), m))
            results["hit"].setdefault(stages, []).append(timed(lambda: f.contains_hashes(present[:m]), m))
            small = absent[:100_000]
            results["miss, batches of 1,000"].setdefault(stages, []).append(
                timed(
                    lambda: [f.contains_hashes(small[i : i + 1_000]) for i in range(0, len(small), 1_000)], len(small)
                )
            )
    print(
        f"\ncontains_hashes, ns per key, {n:,} keys held, {args.rounds} alternating rounds: "
        "median [range] ratio to 1 stage"
    )
    for name, by_stages in results.items():
        base = statistics.median(by_stages[args.stages[0]])
        cells = [
            f"{stages} stages {statistics.median(v):6.1f} [{min(v):.1f}-{max(v):.1f}] "
            f"{statistics.median(v) / base:.2f}x"
            for stages, v in by_stages.items()
        ]
        print(f"  {name:<24} " + " | ".join(cells))
    fp_probe = many_hashes("fp-probe", 1_000_000)
    print(f"\nfalse-positive rate on 1,000,000 absent keys (error_rate {args.error_rate:g}):")
    for stages, f in filters.items():
        measured = float(f.contains_hashes(fp_probe).mean())
        print(f"  {stages} stages: measured {measured:.5f}, expected from the counts {f.expected_error_rate:.5f}")
        f.close()
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


if __name__ == "__main__":
    main()
