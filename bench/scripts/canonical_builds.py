"""Compiled canonicalization of bench/test_bench_canonical.py's mix in two builds of crawldedup,
side by side: alternating processes, medians, ranges and the ratio (policy 2, the default).

Each build is a source tree with its extensions built in place (``python setup.py build_ext
--inplace``), for example this one and a ``git worktree`` of an older commit::

    nice python bench/scripts/canonical_builds.py --base /tmp/old --new . --rounds 15

Each process canonicalizes the mix ``--repeats`` times, one URL a call as the benchmark does,
and reports each pass's CPU time (``time.process_time``, which a busy machine disturbs less
than the wall clock); the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]


def _passes(repeats: int) -> list:
    sys.path.insert(0, str(BENCH))
    from crawldedup import DEFAULT_POLICY
    from crawldedup.canonical import _canonical_c
    from test_bench_canonical import URLS, _run_crawldedup

    _run_crawldedup(_canonical_c.canonicalize, DEFAULT_POLICY)  # warm: caches and plan
    times = []
    for _ in range(repeats):
        started = time.process_time()
        _run_crawldedup(_canonical_c.canonicalize, DEFAULT_POLICY)
        times.append(time.process_time() - started)
    return [len(URLS) / seconds for seconds in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="source tree of the build to compare against")
    parser.add_argument("--new", type=Path, default=BENCH.parent, help="source tree of the build measured")
    parser.add_argument("--rounds", type=int, default=11, help="processes per build, alternating")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the mix per process")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_passes(args.child)))
        return
    builds = {"base": args.base.resolve(), "new": args.new.resolve()}
    rates: dict = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, root in builds.items():
            env = dict(os.environ, PYTHONPATH=str(root / "src"))
            child = subprocess.run(
                [sys.executable, __file__, "--base", str(root), "--child", str(args.repeats)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            rates[name] += json.loads(child.stdout)
    for name, values in rates.items():
        print(
            f"{name} ({builds[name]}): median {statistics.median(values) / 1e6:.2f}M URLs/s "
            f"(range {min(values) / 1e6:.2f}-{max(values) / 1e6:.2f}M, {len(values)} passes)"
        )
    print(
        f"new / base: {statistics.median(rates['new']) / statistics.median(rates['base']):.2f}x "
        f"(load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
