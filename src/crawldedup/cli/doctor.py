"""``crawldedup doctor``: the smoke test after a deploy, one PASS, FAIL or SKIP line per check.

Checks, in order: two spellings of one page share a canonical form; the store opens (reachable,
the password, the module its strategy needs); the server's software and modules; 20 threads
claiming one URL at once get exactly one winner; the median round trip of a one-URL claim;
bytes per URL of a sample of claims, extrapolated to a million and a billion URLs; whether the
configured capacity fits the server's maxmemory (or its memory, or the disk of a SQLite file).

It writes only under a throwaway namespace ``crawldedup-doctor-<random>``, which it deletes at
the end (after a failure and on Ctrl-C too): the ``cleanup`` line says so. A check the ones
before it make pointless is SKIPped. Exit code 0 when nothing FAILed, else 1.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, cast

from .._wording import counted, sized
from ..canonical import CanonicalPolicy, canonicalize
from ..config import DedupConfig
from ..stores.base import ClaimStore, ServerFacts, StoreUnavailable
from ..stores.factory import open_store
from ._store_options import (
    DEFAULT_SQLITE,
    DURABILITY_OPTIONS,
    STORE_OPTIONS,
    add_durability_options,
    add_policy_option,
    add_store_options,
    store_config,
)
from .exits import CLIError, ExitCode

if TYPE_CHECKING:  # its module imports redis-py: imported when a store of it is opened
    from ..stores.redisbloom import RedisBloomStore

#: Two spellings of one page: tracking parameter, parameter order, case, default port, fragment.
SPELLINGS = ("https://Shop.Example:443/item/7?b=2&utm_source=mail&a=1#reviews", "https://shop.example/item/7?a=1&b=2")
#: Threads of the claim race, and one-URL claims timed for the round trip.
RACERS = 20
ROUND_TRIPS = 20
#: Claims the memory check makes (its sample), in batches of BATCH.
SAMPLE_CLAIMS = 10_000
BATCH = 1_000
#: RedisBloom allocates a filter whole when it is reserved, and a small one is mostly its fixed
#: parts (4.5 bytes per URL at 10,000, 1.4 at 1,000,000 for 1%): the throwaway filter is reserved
#: for a million URLs (1.4 MB) and measured per URL of its capacity.
REDISBLOOM_SAMPLE_CAPACITY = 1_000_000
#: A median round trip above this fails: a batch of 10,000 URLs would wait that long per call.
MAX_ROUND_TRIP_MS = 50.0
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


def add_command(commands: Any, epilog: str, formatter: Any) -> None:
    """Add ``doctor`` to the ``crawldedup`` command's subcommands."""
    doctor = commands.add_parser(
        "doctor",
        help="check a claim store after a deploy: PASS/FAIL lines",
        description="Check a claim store as a crawl will use it: canonical forms, the store and its server, "
        "a 20-thread claim race, the round-trip time, bytes per URL and whether the capacity fits. "
        "It writes only under a throwaway namespace, deleted at the end. Exit code 1 when a check fails.",
        epilog=epilog,
        formatter_class=formatter,
    )
    add_store_options(doctor, namespace=False)
    add_durability_options(doctor)
    add_policy_option(doctor)
    doctor.add_argument(
        "--samples",
        type=int,
        default=SAMPLE_CLAIMS,
        metavar="N",
        help=f"claims the memory check makes (default {SAMPLE_CLAIMS:,})",
    )
    doctor.add_argument(
        "--max-round-trip-ms",
        type=float,
        default=MAX_ROUND_TRIP_MS,
        metavar="MS",
        help=f"fail when the median round trip is slower (default {MAX_ROUND_TRIP_MS:g} ms)",
    )
    doctor.set_defaults(run=run_doctor)


class Report:
    """The lines printed so far, and whether one failed."""

    def __init__(self) -> None:
        self.failed = 0

    def line(self, verdict: str, check: str, text: str) -> None:
        if verdict == FAIL:
            self.failed += 1
        print(f"{verdict}  {check:<11} {text}", flush=True)


def run_doctor(args: argparse.Namespace) -> int:
    """Run the checks; see :func:`add_command` for the options."""
    config = store_config(
        args, "doctor", {**STORE_OPTIONS, **DURABILITY_OPTIONS, "policy": "policy", "policy_file": "policy_file"}
    )
    if config.strategy == "local":
        raise CLIError(
            ExitCode.USAGE,
            "doctor checks a claim store: give --strategy (or $CRAWLDEDUP_STRATEGY) other than "
            "local; see crawldedup doctor --help",
        )
    if args.samples < 1:
        raise CLIError(
            ExitCode.USAGE, f"--samples must be a positive integer, got {args.samples}; see crawldedup doctor --help"
        )
    report = Report()
    _check_canonical(report, config.canonical_policy)
    namespace = f"crawldedup-doctor-{secrets.token_hex(6)}"
    opener = _opener(config, namespace, args.samples)
    try:
        store = opener()
    except StoreUnavailable as exc:  # StoreRefused names the misconfiguration
        report.line(FAIL, "store", str(exc))
        for check in ("server", "claim race", "round trip", "memory", "capacity"):
            report.line(SKIP, check, "the store did not open")
        return _verdict(report)
    try:
        report.line(PASS, "store", f"{store.description} opened")
        facts = _check_server(report, store)
        if _check_race(report, opener):
            _check_round_trip(report, store, args.max_round_trip_ms)
            per_url = _check_memory(report, store, args.samples)
            _check_capacity(report, config, facts, per_url)
        else:
            for check in ("round trip", "memory", "capacity"):
                report.line(SKIP, check, "the claim race failed")
    finally:
        _clean_up(report, store, namespace)
    return _verdict(report)


def _verdict(report: Report) -> int:
    if report.failed:
        print(f"crawldedup doctor: {counted(report.failed, 'check')} failed", file=sys.stderr)
        return ExitCode.INVALID
    return ExitCode.OK


def _opener(config: DedupConfig, namespace: str, samples: int) -> Callable[[], ClaimStore]:
    """Opens a store of the configured strategy on the throwaway namespace, sized for the sample
    (so that sharded sets are measured full, as at capacity; RedisBloom: see REDISBLOOM_SAMPLE_CAPACITY)."""
    capacity = max(samples, REDISBLOOM_SAMPLE_CAPACITY) if config.strategy == "redisbloom" else samples

    def open_one() -> ClaimStore:
        return open_store(
            config.strategy,
            namespace=namespace,
            policy_digest=config.canonical_policy.digest,
            redis_url=config.redis_url,
            sqlite_path=config.sqlite_path or (DEFAULT_SQLITE if config.strategy == "sqlite" else None),
            postgres_url=config.postgres_url,
            capacity=capacity,
            error_rate=config.error_rate,
            ttl_seconds=config.ttl_seconds,
            durability=config.store_durability,
        )

    return open_one


def _check_canonical(report: Report, policy: CanonicalPolicy) -> None:
    forms = {canonicalize(url, policy=policy) for url in SPELLINGS}
    if len(forms) == 1:
        report.line(PASS, "canonical", f"{len(SPELLINGS)} spellings, one page: {forms.pop()}")
    else:
        report.line(
            FAIL, "canonical", f"{len(SPELLINGS)} spellings of one page gave {len(forms)} forms: {sorted(forms)}"
        )


def _check_server(report: Report, store: ClaimStore) -> Optional[ServerFacts]:
    try:
        facts = store.server_facts()
    except StoreUnavailable as exc:
        report.line(FAIL, "server", str(exc))
        return None
    modules = ", ".join(facts.modules) or "none"
    report.line(PASS, "server", f"{facts.software}, modules: {modules}")
    return facts


def _check_race(report: Report, opener: Callable[[], ClaimStore]) -> bool:
    """RACERS threads, each with its own store (connection), claim one fingerprint at once."""
    fingerprint = os.urandom(16)
    barrier = threading.Barrier(RACERS)
    answers: List[Optional[bool]] = [None] * RACERS
    errors: List[str] = []

    def race(slot: int) -> None:
        try:
            with opener() as store:
                barrier.wait(timeout=30)
                answers[slot] = store.claim_many([fingerprint])[0]
        except (StoreUnavailable, threading.BrokenBarrierError) as exc:
            errors.append(str(exc) or type(exc).__name__)
            barrier.abort()

    threads = [threading.Thread(target=race, args=(slot,)) for slot in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        report.line(FAIL, "claim race", f"a racer failed: {errors[0]}")
        return False
    winners = answers.count(True)
    verdict = PASS if winners == 1 else FAIL
    report.line(verdict, "claim race", f"{RACERS} threads claimed one URL at once: {counted(winners, 'winner')}")
    return winners == 1


def _check_round_trip(report: Report, store: ClaimStore, max_ms: float) -> None:
    times_ms: List[float] = []
    try:
        for _ in range(ROUND_TRIPS):
            started = time.perf_counter()
            store.claim_many([os.urandom(16)])
            times_ms.append((time.perf_counter() - started) * 1000)
    except StoreUnavailable as exc:
        report.line(FAIL, "round trip", str(exc))
        return
    median = statistics.median(times_ms)
    verdict = PASS if median <= max_ms else FAIL
    report.line(
        verdict,
        "round trip",
        f"median {median:.2f} ms over {ROUND_TRIPS} one-URL claims "
        f"(max {max(times_ms):.2f} ms; fails above {max_ms:g} ms)",
    )


def _check_memory(report: Report, store: ClaimStore, samples: int) -> Optional[float]:
    try:
        for start in range(0, samples, BATCH):
            store.claim_many([os.urandom(16) for _ in range(min(BATCH, samples - start))])
        if store.strategy == "redisbloom":
            info = cast("RedisBloomStore", store).filter_info()
            per_url: Optional[float] = int(info["Size"]) / int(info["Capacity"])
            measured = f"a filter reserved for {int(info['Capacity']):,} URLs"
        else:
            per_url = store.bytes_per_url()
            measured = f"{samples:,} claims"
    except StoreUnavailable as exc:
        report.line(FAIL, "memory", f"claiming {samples:,} URLs: {exc}")
        return None
    if per_url is None:
        report.line(FAIL, "memory", f"the store holds none of the {samples:,} URLs it claimed")
        return None
    report.line(
        PASS,
        "memory",
        f"{per_url:.1f} bytes per URL over {measured}: {sized(per_url * 1e6)} "
        f"per million URLs, {sized(per_url * 1e9)} per billion",
    )
    return per_url


def _check_capacity(
    report: Report, config: DedupConfig, facts: Optional[ServerFacts], per_url: Optional[float]
) -> None:
    if facts is None or per_url is None or facts.limit_bytes is None:
        report.line(SKIP, "capacity", f"needs the bytes per URL and {facts.limit if facts else 'the server'}")
        return
    needed = config.capacity * per_url
    room = facts.limit_bytes - facts.used_bytes
    text = (
        f"capacity {config.capacity:,} URLs needs {sized(needed)}; {facts.limit} is {sized(facts.limit_bytes)}, "
        f"{sized(facts.used_bytes)} in use"
    )
    if needed <= room:
        report.line(PASS, "capacity", text)
    else:
        report.line(FAIL, "capacity", f"{text}: raise the limit, or lower the capacity (CRAWLDEDUP_CAPACITY)")


def _clean_up(report: Report, store: ClaimStore, namespace: str) -> None:
    try:
        deleted = store.delete_namespace()
    except StoreUnavailable as exc:
        report.line(FAIL, "cleanup", f"throwaway namespace {namespace} not deleted: {exc}")
    else:
        report.line(
            PASS,
            "cleanup",
            f"throwaway namespace {namespace} deleted "
            f"({counted(deleted, 'key' if store.strategy not in ('sqlite', 'postgres') else 'row')})",
        )
    finally:
        store.close()
