"""Compiled canonicalization of bench/test_bench_canonical.py's mix under policy 3 (the default)
against POLICY_V2 and POLICY_V1: alternating rounds, medians, ranges and the ratios, and the
share of the mix the fast path answers under each.

Run: ``nice python bench/scripts/canonical_policies.py --rounds 41`` (``--ascii``: the part of the
mix written in ASCII alone; ``--rules``: policy 3 with per-host rules too, one for a host the mix
does not have, 1,000 such, and one for ``example.com``, half the mix). Times are the process's
CPU time (``time.process_time``), which a busy machine disturbs less than the wall clock.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawldedup import DEFAULT_POLICY, POLICY_V1, POLICY_V2, HostRule  # noqa: E402
from crawldedup.canonical import _canonical_c  # noqa: E402
from test_bench_canonical import ASCII_URLS, URLS, _run_crawldedup  # noqa: E402

DEFAULT = f"policy {DEFAULT_POLICY.version}"


def _ruled(*patterns: str) -> object:
    return dataclasses.replace(
        DEFAULT_POLICY, host_rules=[HostRule(pattern, drop_params={"sid"}) for pattern in patterns]
    )


RULED = {
    "1 rule elsewhere": _ruled("forum.example"),
    "1,000 rules elsewhere": _ruled(*(f"site{i}.example" for i in range(1000))),
    "a rule for example.com": _ruled("example.com"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--ascii", action="store_true", help="only the URLs of the mix written in ASCII")
    parser.add_argument("--rules", action="store_true", help="policy 3 with per-host rules too")
    args = parser.parse_args()
    urls = ASCII_URLS if args.ascii else URLS
    policies = {DEFAULT: DEFAULT_POLICY, "POLICY_V2": POLICY_V2, "POLICY_V1": POLICY_V1}
    if args.rules:
        policies.update(RULED)
    for name, policy in policies.items():
        fast = sum(_canonical_c.fast_canonicalize(url, policy, base) is not None for url, base in urls)
        print(f"{name}: fast path answers {fast / len(urls):.1%} of {len(urls):,} URLs")
    times = {name: [] for name in policies}
    for _ in range(args.rounds):
        for name, policy in policies.items():  # alternating: each round runs every policy
            start = time.process_time()
            _run_crawldedup(_canonical_c.canonicalize, policy, urls)
            times[name].append(time.process_time() - start)
    for name, runs in times.items():
        print(
            f"{name}: median {statistics.median(runs) * 1e3:.2f} ms "
            f"(range {min(runs) * 1e3:.2f}-{max(runs) * 1e3:.2f}), "
            f"{len(urls) / statistics.median(runs) / 1e6:.2f} M URLs/s"
        )
    for other in list(policies)[1:]:
        ratios = [ours / theirs for ours, theirs in zip(times[DEFAULT], times[other])]
        print(
            f"{DEFAULT} / {other} time: median of per-round ratios {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f}); ratio of medians "
            f"{statistics.median(times[DEFAULT]) / statistics.median(times[other]):.3f}; "
            f"ratio of minimums {min(times[DEFAULT]) / min(times[other]):.3f}"
        )


if __name__ == "__main__":
    main()
