"""Windowed against plain filter, alternating A/B rounds on a shared machine: ns per key of
``add_hashes``/``contains_hashes`` (the probes, where the designs differ) and ``add_many``/
``contains_many`` (hashing included, fresh ``str`` keys each round), the measured
false-positive rate of the windowed filter over its whole window, and the design not taken:
G + 1 independent plain filters probed one after the other.

    python bench/scripts/windowed_ab.py --items 1000000 --rounds 5
    python bench/scripts/windowed_ab.py --items 50000000 --rounds 3

Each round runs every variant once, in an order that alternates, so that a neighbour's load
falls on all of them alike; the report gives medians, ranges and the windowed/plain ratio.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Callable, Dict, List

import numpy as np
from filter_keys import CHUNK, many_hashes, timed

from crawldedup import bloom
from crawldedup.windows import ManualClock, Window

START = 1_800_000_000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--no-strings", action="store_true", help="skip add_many (it fills the filters)")
    args = parser.parse_args()
    n, window = args.items, Window(30 * 86_400.0, args.generations)
    clock = ManualClock(START)
    plain = bloom.BloomFilter(n, args.error_rate)
    windowed = bloom.WindowedBloomFilter(n, args.error_rate, window, clock=clock)
    separate = [bloom.BloomFilter(n, args.error_rate) for _ in range(window.live_count)]
    # The windowed filter gets its n keys spread over the live generations, as a steady crawl.
    present = many_hashes("present", n)
    share = -(-n // window.live_count)
    for g in range(window.live_count):
        windowed.add_hashes(present[g * share : (g + 1) * share])
        separate[g].add_hashes(present[g * share : (g + 1) * share])
        if g < window.live_count - 1:
            clock.advance(window.span)
    plain.add_hashes(present)
    absent = many_hashes("absent", n)
    print(f"items {n:,}, error rate {args.error_rate}, {window.describe()}, compiled={bloom.HAS_EXTENSION}")
    print(
        f"bytes: plain {plain.num_bits // 8:,}, windowed {windowed.num_bits // 8:,} "
        f"({windowed.num_bits / plain.num_bits:.2f}x)"
    )
    print(
        f"measured false-positive rate over the window: windowed {windowed.contains_hashes(absent).mean():.5f}, "
        f"plain {plain.contains_hashes(absent).mean():.5f} (target {args.error_rate})"
    )

    def contains_separately() -> None:
        found = np.zeros(len(absent), dtype=bool)
        for one in separate:
            rest = np.flatnonzero(~found)
            found[rest] = one.contains_hashes(absent[rest])

    variants: Dict[str, Callable[[int], float]] = {
        "contains_hashes plain": lambda r: timed(lambda: plain.contains_hashes(absent), n),
        "contains_hashes windowed": lambda r: timed(lambda: windowed.contains_hashes(absent), n),
        "contains_hashes G+1 filters": lambda r: timed(contains_separately, n),
    }

    def on_fresh_strings(call: Callable[[List[str]], object], label: str) -> Callable[[int], float]:
        # New str objects for every round, made a chunk at a time; only the calls are timed.
        def run(r: int) -> float:
            spent = 0.0
            for start in range(0, n, CHUNK):
                keys = [f"https://{label}{r}.example/item/{i}?ref=x" for i in range(start, min(start + CHUNK, n))]
                spent += timed(lambda: call(keys), n)
            return spent

        return run

    variants["contains_many plain"] = on_fresh_strings(plain.contains_many, "c")
    variants["contains_many windowed"] = on_fresh_strings(windowed.contains_many, "c")
    if not args.no_strings:  # adds fill the filters past the n keys measured above
        variants["add_many plain"] = on_fresh_strings(plain.add_many, "a")
        variants["add_many windowed"] = on_fresh_strings(windowed.add_many, "a")
    results: Dict[str, List[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else reversed(names):
            results[name].append(variants[name](r))
    medians = {}
    for name, values in results.items():
        medians[name] = statistics.median(values)
        print(f"{name:30} median {medians[name]:8.1f} ns/key   range {min(values):.1f}-{max(values):.1f}")
    for op in ("contains_hashes", "contains_many", "add_many"):
        if f"{op} plain" in medians:
            print(f"{op}: windowed / plain = {medians[f'{op} windowed'] / medians[f'{op} plain']:.2f}x")
    print(
        "contains_hashes: G+1 filters / plain = "
        f"{medians['contains_hashes G+1 filters'] / medians['contains_hashes plain']:.2f}x"
    )


if __name__ == "__main__":
    main()
