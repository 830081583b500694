"""The hand-over of ``crawldedup filter --jobs`` alone: CPU per batch of the main process and of
its workers when a worker does no work (it answers each batch of lines with a prepared batch
made beforehand), so that what is left is sending the lines and taking the prepared batch back.

Run: ``python bench/scripts/jobs_transport.py --batches 600`` (a frontier of 20 batches of
10,000 lines is made first). Times are CPU time (``getrusage``), per batch of 10,000 lines.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]

from crawldedup.canonical import DEFAULT_POLICY  # noqa: E402
from crawldedup.cli._io import line_batches  # noqa: E402
from crawldedup.cli._jobs import OrderedWork  # noqa: E402
from crawldedup.cli.filter import LineBatch, PreparedLines, prepare_lines  # noqa: E402

BATCH = 10_000
KINDS = 20
PREPARED: List[PreparedLines] = []


def answer(batch: LineBatch) -> PreparedLines:
    """A worker's answer without its work: a batch prepared beforehand, of the same frontier."""
    return PREPARED[len(batch.data) % len(PREPARED)]


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=600)
    args = parser.parse_args()
    made = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "frontier.py"), "--links", str(BATCH * KINDS)],
        capture_output=True,
        check=True,
    )
    batches = list(line_batches(iter([made.stdout.rstrip(b"\n")]), BATCH))
    PREPARED.extend(prepare_lines(LineBatch(data, None, False), DEFAULT_POLICY) for data in batches)
    items = (LineBatch(batches[i % KINDS], None, False) for i in range(args.batches))
    before = _children_cpu()  # the frontier's generator was a child too
    started, wall = time.process_time(), time.monotonic()
    with OrderedWork(answer, 2) as work:
        rows = sum(len(prepared.prepared.positions) for _, prepared in work.map(items))
        main_cpu = time.process_time() - started
    workers = _children_cpu() - before
    assert rows > 0
    print(
        f"{args.batches} batches of {BATCH:,} lines through 2 workers: main process "
        f"{main_cpu / args.batches * 1e3:.3f} ms of CPU a batch, workers "
        f"{workers / args.batches * 1e3:.3f} ms, wall "
        f"{(time.monotonic() - wall) / args.batches * 1e3:.3f} ms"
    )


if __name__ == "__main__":
    main()
