"""``crawldedup stats``: what a store namespace and a state file hold, read without changing them.

For a store (``--strategy`` and its location, ``--namespace``, ``--round``): the claims held,
bytes per URL measured on the live server (sampled ``MEMORY USAGE``, ``BF.INFO``; see
docs/stores.md), the memory they take, open leases; for RedisBloom its fill, false-positive
rate now and the pages it has skipped so far (an estimate). For a state file (``--state``): the
local filter's fill, false-positive rate now and its skipped pages so far. Human rows or
``--json``.

The namespace must exist: stats reads its record first and never creates one (exit code 3).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, cast

from .._wording import sized
from ..bloom import GrowingFilter, Stage, WindowedBloomFilter, open_filter
from ..bloom.sizing import expected_false_positive_rate
from ..config import DedupConfig
from ..stores.admin import namespace_record
from ..stores.base import ClaimStore, StoreRefused, StoreUnavailable, window_of_stamp
from ..stores.factory import STRATEGY_OF_KIND, open_store
from ..stores.urls import redact_url
from ._args import round_name
from ._io import Output
from ._store_options import DEFAULT_SQLITE, add_store_options, store_config
from .exits import CLIError, ExitCode

if TYPE_CHECKING:  # its module imports redis-py: imported when a store of it is opened
    from ..stores.redisbloom import RedisBloomStore

#: Points of the integral of a filter's false-positive rate over its fill (the skipped pages).
INTEGRAL_POINTS = 64


def add_command(commands: Any, epilog: str, formatter: Any) -> None:
    """Add ``stats`` to the ``crawldedup`` command's subcommands."""
    stats = commands.add_parser(
        "stats",
        help="what a store namespace or a state file holds",
        description="Report a store namespace (claims held, bytes per URL measured on the server, memory, "
        "open leases, RedisBloom's fill and error rate) and a state file (the local filter's fill "
        "and error rate), with the pages their false positives skipped so far (an estimate). "
        "Nothing is changed.",
        epilog=epilog,
        formatter_class=formatter,
    )
    add_store_options(stats)
    stats.add_argument("--round", type=round_name, metavar="NAME", help="a crawl round: namespace <namespace>:<NAME>")
    stats.add_argument("--state", metavar="FILE", help="a state file (the local filter) to describe too")
    stats.add_argument("--json", action="store_true", help="print one JSON document (fields in docs/cli.md)")
    stats.set_defaults(run=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    """Print the report; see :func:`add_command` for the options."""
    config = store_config(args, "stats")
    state = args.state or config.state_path
    if config.strategy == "local" and state is None:
        raise CLIError(
            ExitCode.USAGE,
            "stats describes a store (--strategy) or a state file (--state); see crawldedup stats --help",
        )
    report: Dict[str, Any] = {}
    if config.strategy != "local":
        namespace = config.namespace if args.round is None else f"{config.namespace}:{args.round}"
        sqlite_path = config.sqlite_path or (DEFAULT_SQLITE if config.strategy == "sqlite" else None)
        report["store"] = _store_report(config, namespace, sqlite_path)
    if state is not None:
        report["local_filter"] = _filter_report(state)
    text = json.dumps(report, indent=2) + "\n" if args.json else render(report)
    Output(sys.stdout.buffer, "stdout").write_lines(text.splitlines())
    return ExitCode.OK


def _store_report(config: DedupConfig, namespace: str, sqlite_path: Optional[str]) -> Dict[str, Any]:
    strategy, redis_url, postgres_url = config.strategy, config.redis_url, config.postgres_url
    try:
        record = namespace_record(
            strategy, namespace, redis_url=redis_url, sqlite_path=sqlite_path, postgres_url=postgres_url
        )
        if record is None:
            where = {"sqlite": sqlite_path, "postgres": postgres_url}.get(strategy, redis_url)
            raise CLIError(
                ExitCode.STATE, f"namespace {namespace!r} does not exist in {_redacted(where)}: nothing to report"
            )
        theirs = STRATEGY_OF_KIND.get(record.get("store", ""), record.get("store"))
        if theirs != strategy:
            raise CLIError(
                ExitCode.STATE,
                f"namespace {namespace!r} holds the claims of the {theirs} strategy, "
                f"not {strategy}: give --strategy {theirs}",
            )
        # The record's own layout (capacity, error rate) is adopted: these only fill the constructor.
        with open_store(
            strategy,
            namespace=namespace,
            policy_digest=record["policy"],
            redis_url=redis_url,
            sqlite_path=sqlite_path,
            postgres_url=postgres_url,
            capacity=int(record.get("capacity", 1)),
            error_rate=float(record.get("error_rate", 0.01)),
            window=window_of_stamp(record.get("window")),
        ) as store:
            return _measure(store)
    except StoreRefused as exc:
        raise CLIError(ExitCode.STORE_REFUSED, str(exc)) from None
    except StoreUnavailable as exc:
        raise CLIError(ExitCode.STORE, str(exc)) from None


def _redacted(where: Optional[str]) -> str:
    return redact_url(where) if where and "://" in where else str(where)


def _measure(store: ClaimStore) -> Dict[str, Any]:
    claims = store.count_claims()
    per_url = store.bytes_per_url()
    report: Dict[str, Any] = {
        "store": store.description,
        "strategy": store.strategy,
        "namespace": store.namespace,
        "claims": claims,
        "bytes_per_url": per_url,
        "memory_bytes": round(per_url * claims) if per_url is not None else None,
    }
    leases = store.lease_counts()
    if leases is not None:
        report["leases_open"], report["leases_expired"] = leases
    if store.strategy == "redisbloom":
        info = cast("RedisBloomStore", store).filter_info()
        size, capacity, items = int(info["Size"]), int(info["Capacity"]), int(info["Number of items inserted"])
        rate = _redisbloom_rate(size, capacity)
        report["redisbloom"] = {
            "capacity": capacity,
            "size_bytes": size,
            "items": items,
            "filters": int(info["Number of filters"]),
            "fill": items / capacity,
            "error_rate_now": rate(items),
            "skipped_estimate": _skipped(rate, items),
        }
    return report


def _redisbloom_rate(size_bytes: int, capacity: int) -> Callable[[float], float]:
    """RedisBloom's false-positive rate at n items: a plain Bloom filter of ``size_bytes * 8``
    bits with ``ceil(ln 2 * bits per entry)`` hashes, as it reserves one (past capacity it adds
    filters: the rate of the first is shown)."""
    bits = size_bytes * 8
    hashes = math.ceil(math.log(2) * bits / capacity)
    return lambda items: (1.0 - math.exp(-hashes * items / bits)) ** hashes


def _skipped(rate: Callable[[float], float], items: int) -> float:
    """Pages a filter took for seen while it grew to ``items``: each new page met the rate of
    the moment, so their sum is the integral of the rate over the fill (trapezoids)."""
    if items <= 0:
        return 0.0
    points = [items * i / INTEGRAL_POINTS for i in range(INTEGRAL_POINTS + 1)]
    rates = [rate(x) for x in points]
    return sum((a + b) / 2 for a, b in zip(rates, rates[1:])) * items / INTEGRAL_POINTS


def _newer_rate(rate: Callable[[int], float], older_miss: float, items: int) -> float:
    """The rate a generation of ``items`` took a new page for seen, while the older live ones,
    which all missed it with probability ``older_miss``, answered too."""
    return 1.0 - older_miss * (1.0 - rate(items))


def _later_stages_skipped(bloom: GrowingFilter) -> float:
    """The pages a grown filter's stages after the first skipped: each filled while the older
    ones (frozen) answered too."""
    stages = bloom.stages()
    skipped = 0.0
    older_miss = 1.0 - expected_false_positive_rate(stages[0].approx_items, stages[0].num_blocks, stages[0].num_hashes)
    for stage in stages[1:]:

        def stage_rate(n: float, stage: Stage = stage, frozen: float = older_miss) -> float:
            return 1.0 - frozen * (1.0 - expected_false_positive_rate(round(n), stage.num_blocks, stage.num_hashes))

        skipped += _skipped(stage_rate, stage.approx_items)
        older_miss *= 1.0 - expected_false_positive_rate(stage.approx_items, stage.num_blocks, stage.num_hashes)
    return skipped


def _filter_report(path: str) -> Dict[str, Any]:
    try:
        bloom = open_filter(path, "r")
    except OSError as exc:
        raise CLIError(ExitCode.STATE, f"state file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # FilterFileError names the path and the problem
        raise CLIError(ExitCode.STATE, str(exc)) from None
    with bloom:
        base = bloom.base if isinstance(bloom, GrowingFilter) else bloom
        blocks, hashes = base.num_blocks, base.num_hashes

        def rate(items: float) -> float:
            return expected_false_positive_rate(round(items), blocks, hashes)

        oldest: Optional[Dict[str, Any]] = None
        if isinstance(base, WindowedBloomFilter):
            generations = base.generations()
            if generations:
                first = generations[0]
                oldest = {
                    "generation": first.generation,
                    "starts_at": first.starts_at,
                    "forgotten_at": first.forgotten_at,
                    "items": first.approx_items,
                }
            # Each generation filled its own slot while the older live ones answered too: a new
            # page was skipped when any of them took it for seen.
            skipped, older_miss = 0.0, 1.0
            for generation in generations:
                skipped += _skipped(partial(_newer_rate, rate, older_miss), generation.approx_items)
                older_miss *= 1.0 - rate(generation.approx_items)
        else:
            skipped = _skipped(rate, base.approx_items)
        if isinstance(bloom, GrowingFilter):
            skipped += _later_stages_skipped(bloom)
        return {
            "path": path,
            "size_bytes": os.path.getsize(path),
            "capacity": bloom.capacity,
            "error_rate": bloom.error_rate,
            "items": bloom.approx_items,
            "fill": bloom.fill_ratio,
            "error_rate_now": bloom.estimated_error_rate,
            "skipped_estimate": skipped,
            "oldest_generation": oldest,
            "metadata": bloom.metadata.decode("ascii", "backslashreplace"),
        }


def render(report: Dict[str, Any]) -> str:
    """The report as ``name  value`` rows under a heading per part."""
    rows: List[Tuple[str, str]] = []
    store = report.get("store")
    if store is not None:
        rows.append(("store", store["store"]))
        rows.append(("  claims held", f"{store['claims']:,}"))
        per_url = store["bytes_per_url"]
        rows.append(("  bytes per URL", f"{per_url:.1f} (measured on the server)" if per_url is not None else "-"))
        if store["memory_bytes"] is not None:
            rows.append(("  memory", sized(store["memory_bytes"])))
        if "leases_open" in store:
            rows.append(
                (
                    "  leases",
                    f"{store['leases_open']:,} open, {store['leases_expired']:,} past their deadline "
                    f"(not yet handed back)",
                )
            )
        bloom = store.get("redisbloom")
        if bloom is not None:
            rows.append(
                (
                    "  redisbloom",
                    f"{bloom['items']:,} of {bloom['capacity']:,} items ({bloom['fill']:.1%}), "
                    f"{sized(bloom['size_bytes'])}, {bloom['filters']} filter(s)",
                )
            )
            rows.append(("  error rate now", f"{bloom['error_rate_now']:.3g}"))
            rows.append(("  skipped so far", f"~{bloom['skipped_estimate']:,.0f} new pages taken for seen (estimate)"))
    local = report.get("local_filter")
    if local is not None:
        rows.append(("local filter", local["path"]))
        rows.append(
            (
                "  capacity",
                f"{local['capacity']:,} at error rate {local['error_rate']:g} ({sized(local['size_bytes'])})",
            )
        )
        rows.append(("  items", f"{local['items']:,} (estimate)"))
        rows.append(("  fill", f"{local['fill']:.2%} of bits set"))
        rows.append(("  error rate now", f"{local['error_rate_now']:.3g}"))
        rows.append(
            (
                "  skipped so far",
                f"~{local['skipped_estimate']:,.0f} new pages taken for seen (estimate; none when hits are verified)",
            )
        )
        oldest = local["oldest_generation"]
        if oldest is not None:
            rows.append(
                (
                    "  oldest generation",
                    f"{oldest['generation']}, from {_utc(oldest['starts_at'])}, "
                    f"forgotten at {_utc(oldest['forgotten_at'])}, ~{oldest['items']:,} items",
                )
            )
    width = max(len(name) for name, _ in rows) + 2
    return "crawldedup stats\n" + "".join(f"{name:<{width}}{value}\n" for name, value in rows)


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))
