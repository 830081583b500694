"""``crawldedup migrate``: move a ``set`` namespace's claims to another store, so that a running
crawl changes strategy without re-crawling what it visited (``stores/migration.py`` copies);
or seed a store's namespace with a local state file (``--from-state``, ``stores/seed.py``), so
that a single-host crawl grows into a fleet without re-crawling.

The cutover, in order (docs/cli.md): run ``migrate`` while the workers run (the long copy);
stop the workers; run the same command again (a last pass: it copies what was claimed during
the first); start the workers on the new strategy. Each run is one pass, and a pass killed at
any point resumes where it stopped. With ``--from-state``: stop the single-host crawl, run
``migrate`` (a killed run resumes), start the workers on the store.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Dict, Optional, Union, cast

from .._wording import counted
from ..bloom import GrowingFilter, open_filter_file
from ..config import SETTINGS, DedupConfig
from ..dedup.seed import window_text
from ..dedup.state import state_policy
from ..stores.admin import namespace_record
from ..stores.base import NamespaceConflict, StoreRefused, StoreUnavailable, window_of_stamp
from ..stores.factory import REDIS_STRATEGIES, STRATEGIES, STRATEGY_OF_KIND, open_store
from ..stores.migration import BATCH, Migration, MigrationConflict
from ..stores.seed import SEED_CHUNK_BYTES, SeedConflict, upload_seed
from ..windows import Window
from ._args import file_path, namespace_name, positive_int, redis_url
from ._store_options import DEFAULT_SQLITE, add_location_options, store_config
from .exits import CLIError, ExitCode, usage_error, using

#: Option -> the DedupConfig field it sets (the source's Redis and namespace, the target's sizes).
if TYPE_CHECKING:  # their module imports redis-py: imported when the source store is opened
    from ..stores.redis_keys import RedisKeyStore
    from ..stores.sharded_set import RedisShardedSetStore

#: The strategies whose namespaces can be migrated: ``set`` (its claim keys can be scanned) into
#: any store, and a windowed ``sharded-set`` of the generations layout into the ticks layout.
SOURCE_STRATEGIES = ("set", "sharded-set")

OPTIONS = {
    "redis_url": "redis_url",
    "namespace": "namespace",
    "sqlite": "sqlite_path",
    "postgres_url": "postgres_url",
    "service_url": "service_url",
    "capacity": "capacity",
    "error_rate": "error_rate",
    "ttl_days": "ttl_days",
    "generations": "generations",
}


def add_command(commands: Any, epilog: str, formatter: Any) -> None:
    """Add ``migrate`` to the ``crawldedup`` command's subcommands."""
    migrate = commands.add_parser(
        "migrate",
        help="copy a set namespace's claims into another store, or move a windowed sharded-set namespace "
        "into the ticks layout (resumable)",
        description="Copy every claim of a set namespace into another store with SCAN in batches (or every "
        "live claim of a windowed sharded-set namespace of the generations layout into a new sharded-set "
        "namespace of the ticks layout, shard by shard), recording "
        "the cursor so that a killed run resumes. Cutover: run it while the workers run, stop them, "
        "run it again, start them on the new strategy (docs/cli.md).",
        epilog=epilog,
        formatter_class=formatter,
    )
    source = migrate.add_mutually_exclusive_group(required=True)
    source.add_argument("--from", dest="source", choices=SOURCE_STRATEGIES, help="the store the claims are in")
    source.add_argument(
        "--from-state",
        type=file_path,
        metavar="FILE",
        help="a local state file (crawldedup filter --state) to seed the target namespace with: "
        "every Deduplicator on it treats the file's pages as seen",
    )
    migrate.add_argument(
        "--to",
        dest="target",
        required=True,
        choices=[name for name, store in STRATEGIES.items() if store is not None],
        help="the store to copy them into",
    )
    migrate.add_argument(
        "--redis-url", type=redis_url, metavar="URL", help="the source's Redis ($CRAWLDEDUP_REDIS_URL)"
    )
    migrate.add_argument(
        "--namespace", type=namespace_name, metavar="NAME", help="the source namespace ($CRAWLDEDUP_NAMESPACE)"
    )
    migrate.add_argument(
        "--to-redis-url", type=redis_url, metavar="URL", help="the target's Redis (default: the source's)"
    )
    migrate.add_argument(
        "--to-namespace",
        type=namespace_name,
        metavar="NAME",
        help="the target namespace (default: the source's; on the source's Redis it must differ)",
    )
    migrate.add_argument(
        "--sqlite",
        type=file_path,
        metavar="FILE",
        help=f"the target database of --to sqlite (default $CRAWLDEDUP_SQLITE or ./{DEFAULT_SQLITE})",
    )
    add_location_options(migrate, skip=("redis_url", "sqlite"))  # the targets' others
    migrate.add_argument(
        "--capacity", metavar="N", help="URLs a new target namespace is sized for ($CRAWLDEDUP_CAPACITY)"
    )
    migrate.add_argument(
        "--error-rate", metavar="P", help="false-positive rate of a RedisBloom target ($CRAWLDEDUP_ERROR_RATE)"
    )
    migrate.add_argument(
        "--ttl-days",
        metavar="DAYS",
        help="lifetime of the copies in a set target; with --from-state, the workers' recrawl "
        "window, which must be the file's ($CRAWLDEDUP_TTL_DAYS)",
    )
    migrate.add_argument(
        "--generations",
        metavar="G",
        help="with --from-state: the workers' generations, which must be the file's ($CRAWLDEDUP_GENERATIONS)",
    )
    migrate.add_argument(
        "--chunk-kib",
        type=positive_int,
        default=SEED_CHUNK_BYTES >> 10,
        metavar="KIB",
        help=f"with --from-state: KiB per stored chunk of the file (default {SEED_CHUNK_BYTES >> 10:,})",
    )
    migrate.add_argument(
        "--batch-size",
        type=positive_int,
        default=BATCH,
        metavar="N",
        help=f"keys per SCAN step and per claim of the target (default {BATCH:,})",
    )
    migrate.add_argument(
        "--restart",
        action="store_true",
        help="start over when a pass to another target was left half way (an abandoned migration); "
        "with --from-state, replace the namespace's seed of another file",
    )
    migrate.set_defaults(run=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    """Run one pass; see :func:`add_command` for the options."""
    config = store_config(args, "migrate", OPTIONS)
    if args.from_state is not None:
        return _run_seed(args, config)
    if config.redis_url is None:
        raise usage_error("migrate", f"the {args.source} source needs --redis-url (or $CRAWLDEDUP_REDIS_URL)")
    if args.source == "sharded-set" and args.target != "sharded-set":
        raise usage_error("migrate", "a sharded-set namespace moves into the ticks layout: give --to sharded-set")
    target_url = args.to_redis_url or config.redis_url
    target_namespace = args.to_namespace or config.namespace
    try:
        for text, field in ((target_url, "redis_url"), (target_namespace, "namespace")):
            SETTINGS[field].check(text)
    except ValueError as exc:
        raise usage_error("migrate", str(exc)) from None
    if args.target != "sqlite" and target_url == config.redis_url and target_namespace == config.namespace:
        raise usage_error(
            "migrate",
            f"the target namespace must differ from the source's on the same Redis: give --to-namespace "
            f"(the namespace {config.namespace!r} stays stamped with the {args.source} strategy)",
        )
    try:
        record = namespace_record(args.source, config.namespace, redis_url=config.redis_url)
        if record is None:
            raise CLIError(ExitCode.STATE, f"namespace {config.namespace!r} does not exist: nothing to migrate")
        kind = STRATEGY_OF_KIND.get(record.get("store", ""), record.get("store"))
        if kind != args.source:
            raise CLIError(
                ExitCode.STATE,
                f"namespace {config.namespace!r} holds the claims of the {kind} strategy, "
                f"not {args.source}: only set and sharded-set namespaces can be migrated, with their --from",
            )
        window = window_of_stamp(record.get("window"))
        if args.source == "sharded-set" and (
            window is None or record.get("window_layout", "generations") != "generations"
        ):
            raise CLIError(
                ExitCode.STATE,
                f"namespace {config.namespace!r} keeps no generations of claims (it has no window, or is in the "
                f"ticks layout already): nothing to migrate",
            )
        # The target keeps the source's window, what the crawl's workers use; a namespace made
        # before windows were recorded gets the window of these settings (a default worker's).
        explicit = args.ttl_days is not None or args.generations is not None
        target_window = config.window if explicit or "window" not in record else window
        return _run(args, config, record, window, target_window, target_url, target_namespace)
    except StoreRefused as exc:
        raise CLIError(ExitCode.STORE_REFUSED, str(exc)) from None
    except StoreUnavailable as exc:
        raise CLIError(ExitCode.STORE, str(exc)) from None
    except (NamespaceConflict, MigrationConflict) as exc:
        raise CLIError(ExitCode.STATE, str(exc)) from None


def _run(
    args: argparse.Namespace,
    config: DedupConfig,
    record: Dict[str, str],
    window: Optional[Window],
    target_window: Optional[Window],
    target_url: Optional[str],
    target_namespace: str,
) -> int:
    policy = record["policy"]
    # A sharded-set namespace moves into the ticks layout with its own window and sharding.
    moving = args.source == "sharded-set"
    layouts = ("generations", "ticks") if moving else (None, None)
    capacity = int(record["capacity"]) if moving else config.capacity
    with (
        cast(
            "Union[RedisKeyStore, RedisShardedSetStore]",
            open_store(
                args.source,
                namespace=config.namespace,
                policy_digest=policy,
                redis_url=config.redis_url,
                capacity=capacity,
                error_rate=config.error_rate,
                window=window,
                window_layout=layouts[0],
            ),
        ) as source,
        open_store(
            args.target,
            namespace=target_namespace,
            policy_digest=policy,
            redis_url=target_url,
            sqlite_path=config.sqlite_path or DEFAULT_SQLITE,
            postgres_url=config.postgres_url,
            service_url=config.service_url,
            capacity=capacity,
            error_rate=config.error_rate,
            ttl_seconds=config.ttl_seconds,
            window=window if moving else target_window,
            window_layout=layouts[1],
        ) as target,
    ):
        try:
            done = Migration(source, target, args.batch_size).run_pass(restart=args.restart)
        except MigrationConflict:
            raise
        except ValueError as exc:  # a Redis Cluster source cannot be scanned
            raise CLIError(ExitCode.USAGE, str(exc)) from None
        print(
            f"crawldedup migrate: pass {done.passes} done: {counted(done.copied, 'claim')} copied to "
            f"{target.description}, {done.present:,} already there, {done.leased:,} leased and left out "
            f"(copied once their lease is done)",
            file=sys.stderr,
        )
        if done.passes == 1:
            print(
                f"crawldedup migrate: next, stop the workers, run the same command again (a last pass), then "
                f"start them with CRAWLDEDUP_STRATEGY={args.target} CRAWLDEDUP_NAMESPACE={target_namespace}"
                f"{_window_settings(target_window)} (the target's recrawl window: {window_text(target_window)})",
                file=sys.stderr,
            )
    return ExitCode.OK


def _window_settings(window: Optional[Window]) -> str:
    """The settings a worker needs for ``window``, beyond the defaults (empty when they are)."""
    default = DedupConfig().window
    if window == default:
        return ""
    if window is None:
        return " CRAWLDEDUP_TTL_DAYS=0"
    return f" CRAWLDEDUP_TTL_DAYS={window.seconds / 86_400:g} CRAWLDEDUP_GENERATIONS={window.generations}"


def _run_seed(args: argparse.Namespace, config: DedupConfig) -> int:
    """Seed the target namespace with the state file of ``--from-state`` (resuming a stopped upload)."""
    target_url = args.to_redis_url or config.redis_url
    namespace = args.to_namespace or config.namespace
    if args.target in REDIS_STRATEGIES and target_url is None:
        raise usage_error(
            "migrate", f"the {args.target} target needs --redis-url or --to-redis-url (or $CRAWLDEDUP_REDIS_URL)"
        )
    try:
        SETTINGS["namespace"].check(namespace)
    except ValueError as exc:
        raise usage_error("migrate", str(exc)) from None
    path = args.from_state
    with using(f"state file {path}"):
        with GrowingFilter(open_filter_file(path, "r")) as seed:
            policy = state_policy(seed, path)
            window = seed.window
            pages = seed.approx_items
            files = [str(stage.path) for stage in seed.stages()]
    if window != config.window:
        raise CLIError(
            ExitCode.STATE,
            f"{path}: made for a recrawl window of {window_text(window)}, the workers would "
            f"use {window_text(config.window)}: give the file's --ttl-days and --generations "
            f"(and start the workers with them)",
        )
    try:
        with open_store(
            args.target,
            namespace=namespace,
            policy_digest=policy,
            redis_url=target_url,
            sqlite_path=config.sqlite_path or DEFAULT_SQLITE,
            postgres_url=config.postgres_url,
            service_url=config.service_url,
            capacity=config.capacity,
            error_rate=config.error_rate,
            ttl_seconds=config.ttl_seconds,
            window=config.window,
        ) as target:
            done = upload_seed(
                target,
                files,
                policy=policy,
                window=window_text(window),
                chunk_bytes=args.chunk_kib << 10,
                restart=args.restart,
            )
            where = target.description
    except StoreRefused as exc:
        raise CLIError(ExitCode.STORE_REFUSED, str(exc)) from None
    except StoreUnavailable as exc:
        raise CLIError(ExitCode.STORE, f"{exc} (run the same command again: the upload resumes)") from None
    except (NamespaceConflict, SeedConflict) as exc:
        raise CLIError(ExitCode.STATE, str(exc)) from None
    if not done.sent:
        sent = "already there"
    else:
        sent = f"{done.sent:,} sent" + (f", resumed at chunk {done.resumed_at + 1}" if done.resumed_at else "")
    print(
        f"crawldedup migrate: seeded {where} with {path} ({done.record.size:,} bytes, about {pages:,} pages, "
        f"{counted(done.record.chunks, 'chunk')}, {sent}): start the workers with "
        f"CRAWLDEDUP_STRATEGY={args.target} CRAWLDEDUP_NAMESPACE={namespace}",
        file=sys.stderr,
    )
    return ExitCode.OK
