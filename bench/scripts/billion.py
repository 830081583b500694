"""Fill a billion-capacity, 1% Bloom filter file with a billion distinct URL-like keys.

Not part of CI (it writes a 1.27 GB file and runs for minutes). Keys are real ``str`` URLs,
built in batches and added through ``add_many``, so the figure includes hashing::

    python bench/scripts/billion.py --path /tmp/billion.bloom            # the full run
    python bench/scripts/billion.py --path /tmp/b.bloom --items 100000000 # a documented fraction

Prints items/s, the wall and CPU ns a key of ``add_many``, file size, peak RSS, reopen time
and the measured false-positive rate (1,000,000 keys that were never added) as ``key: value``
lines on stdout.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

from crawldedup import BloomFilter
from crawldedup.bloom import HAS_EXTENSION


def url_keys(start: int, stop: int, kind: str = "item") -> list[str]:
    """Distinct URL-like keys (~60 bytes): 100,000 hosts, one path per key."""
    return [f"https://www.site{i % 100_000}.example/catalog/{kind}-{i}?ref=crawl" for i in range(start, stop)]


#: /proc/vmstat counters printed as the fill's differences: pages dirtied and written back,
#: page faults, file pages mapped as huge pages.
VMSTAT = ("nr_dirtied", "nr_written", "pgfault", "pgmajfault", "thp_file_mapped")


def vmstat() -> dict[str, int]:
    """The kernel's /proc/vmstat counters (Linux), or nothing."""
    try:
        with open("/proc/vmstat") as counters:
            return {name: int(value) for name, value in (line.split() for line in counters)}
    except OSError:
        return {}


def progress(done: int, total: int, started: float) -> None:
    elapsed = time.perf_counter() - started
    rate = done / elapsed if elapsed else 0.0
    remaining = (total - done) / rate if rate else 0.0
    filled = int(40 * done / total)
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (40 - filled)}] {done:,}/{total:,} "
        f"{rate / 1e6:.2f} M/s, {remaining / 60:.1f} min left "
    )
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", required=True, help="filter file to create (replaced if it exists)")
    parser.add_argument("--capacity", type=int, default=1_000_000_000)
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--items", type=int, default=None, help="keys to add (default: capacity)")
    parser.add_argument("--batch", type=int, default=1_000_000)
    parser.add_argument("--probes", type=int, default=1_000_000, help="absent keys for the FP rate")
    args = parser.parse_args(argv)
    items = args.capacity if args.items is None else args.items

    print(f"implementation: {'cy' if HAS_EXTENSION else 'py'}")
    print(f"capacity: {args.capacity}\nerror_rate: {args.error_rate}\nitems: {items}")
    vm_before, usage_before = vmstat(), resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    adding = adding_cpu = 0.0
    with BloomFilter(args.capacity, args.error_rate, args.path, overwrite=True) as bf:
        print(f"num_blocks: {bf.num_blocks}\nnum_hashes: {bf.num_hashes}")
        for start in range(0, items, args.batch):
            keys = url_keys(start, min(start + args.batch, items))
            tick, cpu_tick = time.perf_counter(), time.thread_time()
            bf.add_many(keys)
            adding += time.perf_counter() - tick
            adding_cpu += time.thread_time() - cpu_tick
            progress(start + len(keys), items, started)
        sys.stderr.write("\n")
        bf.flush()
        approx_items = bf.approx_items
    total = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"user_seconds: {usage.ru_utime - usage_before.ru_utime:.1f}\nsystem_seconds: "
        f"{usage.ru_stime - usage_before.ru_stime:.1f}\nminor_faults: {usage.ru_minflt - usage_before.ru_minflt}\n"
        f"major_faults: {usage.ru_majflt - usage_before.ru_majflt}"
    )
    vm_after = vmstat()
    for name in VMSTAT:  # the whole machine's, not this process's alone
        if name in vm_before and name in vm_after:
            print(f"vmstat_{name}: {vm_after[name] - vm_before[name]}")
    print(f"load_average: {os.getloadavg()[0]:.1f}")
    print(f"fill_seconds: {total:.1f}\nitems_per_second: {items / total:.0f}")
    print(f"add_many_ns_per_item: {adding / items * 1e9:.1f}  (key building excluded)")
    # The CPU this thread spent in add_many: what other jobs on a shared machine change least.
    print(f"add_many_cpu_ns_per_item: {adding_cpu / items * 1e9:.1f}")
    print(f"approx_items: {approx_items}")
    print(
        f"file_bytes: {os.path.getsize(args.path)}\nbits_per_item: {os.path.getsize(args.path) * 8 / args.capacity:.3f}"
    )
    # ru_maxrss is KiB on Linux, bytes on macOS; it counts the mapped file pages the run touched.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    print(f"peak_rss_bytes: {peak}")

    tick = time.perf_counter()
    with BloomFilter.open(args.path) as bf:
        print(f"reopen_seconds: {time.perf_counter() - tick:.4f}")
        sample = url_keys(max(0, items - 1_000_000), items)  # the last million added
        missing = int((~bf.contains_many(sample)).sum())
        print(f"present_checked: {len(sample)}\npresent_missing: {missing}")
        absent = url_keys(0, args.probes, "never")
        false_positives = int(bf.contains_many(absent).sum())
        print(f"false_positive_rate: {false_positives / args.probes:.5f}  ({false_positives}/{args.probes})")
    return 0 if missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
