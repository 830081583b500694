"""Compiled canonicalization of bench/test_bench_canonical.py's mix in two builds of crawldedup,
side by side: alternating processes, medians, ranges and the ratio.

Each build is a source tree with its extensions built in place (``python setup.py build_ext
--inplace``), for example this one and a ``git worktree`` of an older commit::

    nice python bench/scripts/canonical_builds.py --base /tmp/old --new . --rounds 15

Each process canonicalizes the mix ``--repeats`` times, one URL a call as the benchmark does,
(``--ascii``: the part of it written in ASCII) under its build's default policy (or ``--policy
v2``, a policy both builds have), and reports
each pass's CPU time (``time.process_time``, which a busy machine disturbs less than the wall
clock). A round runs one process of each build; the ratio of a round's medians is the figure
that holds when the machine's speed drifts between rounds. The load average is printed with
the figures.
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
from typing import Optional

BENCH = Path(__file__).resolve().parents[1]


def _passes(repeats: int, policy_name: Optional[str], ascii_only: bool) -> dict:
    sys.path.insert(0, str(BENCH))
    from crawldedup import DEFAULT_POLICY
    from crawldedup.canonical import _canonical_c, policy_named
    from test_bench_canonical import ASCII_URLS, URLS, _run_crawldedup

    urls = ASCII_URLS if ascii_only else URLS
    policy = policy_named(policy_name) if policy_name else DEFAULT_POLICY
    _run_crawldedup(_canonical_c.canonicalize, policy, urls)  # warm: caches and plan
    times = []
    for _ in range(repeats):
        started = time.process_time()
        _run_crawldedup(_canonical_c.canonicalize, policy, urls)
        times.append(time.process_time() - started)
    return {"policy": policy.version, "rates": [len(urls) / seconds for seconds in times]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="source tree of the build to compare against")
    parser.add_argument("--new", type=Path, default=BENCH.parent, help="source tree of the build measured")
    parser.add_argument("--rounds", type=int, default=11, help="processes per build, alternating")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the mix per process")
    parser.add_argument("--policy", help="a policy both builds name (v1, v2); default: each build's default")
    parser.add_argument("--ascii", action="store_true", help="only the URLs of the mix written in ASCII")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_passes(args.child, args.policy, args.ascii)))
        return
    builds = {"base": args.base.resolve(), "new": args.new.resolve()}
    rates: dict = {name: [] for name in builds}
    policies: dict = {}
    ratios = []
    for _ in range(args.rounds):
        medians = {}
        for name, root in builds.items():
            env = dict(os.environ, PYTHONPATH=str(root / "src"))
            child = subprocess.run(
                [sys.executable, __file__, "--base", str(root), "--child", str(args.repeats)]
                + (["--policy", args.policy] if args.policy else [])
                + (["--ascii"] if args.ascii else []),
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(child.stdout)
            policies[name] = result["policy"]
            rates[name] += result["rates"]
            medians[name] = statistics.median(result["rates"])
        ratios.append(medians["new"] / medians["base"])
    for name, values in rates.items():
        print(
            f"{name} ({builds[name]}, policy {policies[name]}): median {statistics.median(values) / 1e6:.2f}M URLs/s "
            f"(range {min(values) / 1e6:.2f}-{max(values) / 1e6:.2f}M, {len(values)} passes)"
        )
    print(
        f"new / base: {statistics.median(rates['new']) / statistics.median(rates['base']):.3f}x (ratio of medians); "
        f"per round {statistics.median(ratios):.3f}x (range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} rounds) "
        f"(load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
