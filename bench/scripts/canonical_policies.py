"""Compiled canonicalization of bench/test_bench_canonical.py's mix under policy 2 (the default)
against POLICY_V1: alternating rounds, medians, ranges and the ratio, and the share of the mix
the fast path answers under each.

Run: ``nice python bench/scripts/canonical_policies.py --rounds 41``. Times are the process's CPU
time (``time.process_time``), which a busy machine disturbs less than the wall clock.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawldedup import DEFAULT_POLICY, POLICY_V1  # noqa: E402
from crawldedup.canonical import _canonical_c  # noqa: E402
from test_bench_canonical import URLS, _run_crawldedup  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    policies = {"policy 2": DEFAULT_POLICY, "POLICY_V1": POLICY_V1}
    for name, policy in policies.items():
        fast = sum(_canonical_c.fast_canonicalize(url, policy, base) is not None for url, base in URLS)
        print(f"{name}: fast path answers {fast / len(URLS):.1%} of {len(URLS):,} URLs")
    times = {name: [] for name in policies}
    for _ in range(args.rounds):
        for name, policy in policies.items():  # alternating: each round runs both
            start = time.process_time()
            _run_crawldedup(_canonical_c.canonicalize, policy)
            times[name].append(time.process_time() - start)
    for name, runs in times.items():
        print(
            f"{name}: median {statistics.median(runs) * 1e3:.2f} ms "
            f"(range {min(runs) * 1e3:.2f}-{max(runs) * 1e3:.2f}), "
            f"{len(URLS) / statistics.median(runs) / 1e6:.2f} M URLs/s"
        )
    ratios = [two / one for two, one in zip(times["policy 2"], times["POLICY_V1"])]
    print(
        f"policy 2 / POLICY_V1 time: median of per-round ratios {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}); ratio of medians "
        f"{statistics.median(times['policy 2']) / statistics.median(times['POLICY_V1']):.3f}; "
        f"ratio of minimums {min(times['policy 2']) / min(times['POLICY_V1']):.3f}"
    )


if __name__ == "__main__":
    main()
