"""``crawldedup serve``: the fingerprint service, one AsyncDeduplicator behind HTTP/JSON.

The Deduplicator is configured as ``crawldedup filter``'s is: its options, then the environment
(``CRAWLDEDUP_STRATEGY``, ``CRAWLDEDUP_REDIS_URL``...), then the defaults. It is opened before the server
listens, so a bad setting, state file or store ends the command with filter's exit codes and one
line on stderr; once it listens, a line ``crawldedup serve: listening on http://HOST:PORT ...``
goes to stderr. SIGTERM (or SIGINT) drains the requests in flight, closes the Deduplicator
(flushing its state file) and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields, replace
from typing import Any, Dict, Optional

from .._extras import needs_extra
from ..bloom import FilterFileError
from ..config import SETTINGS, DedupConfig
from ..dedup.aio import AsyncDeduplicator
from ..service.limits import OPTIONS as LIMIT_OPTIONS  # nothing of the service extra: --help shows them
from ..service.limits import Limits
from ..stores.base import NamespaceConflict, StoreRefused, StoreUnavailable
from ..stores.factory import STRATEGIES
from ._args import file_path, namespace_name, port
from ._store_options import DURABILITY_OPTIONS, add_durability_options, add_location_options, add_policy_option
from .exits import CLIError, ExitCode, usage_error

#: The port ``serve`` listens on without --port.
DEFAULT_PORT = 8707
#: Option -> the DedupConfig field it sets (read and checked as that field's variable is).
CONFIG_OPTIONS = {
    "strategy": "strategy",
    "redis_url": "redis_url",
    "namespace": "namespace",
    "state": "state_path",
    "capacity": "capacity",
    "error_rate": "error_rate",
    "sqlite": "sqlite_path",
    "ttl_days": "ttl_days",
    "generations": "generations",
    "postgres_url": "postgres_url",
    "service_url": "service_url",
    "policy": "policy",
    "policy_file": "policy_file",
    "local_tier": "local_tier",
    **DURABILITY_OPTIONS,
}


def add_command(commands: Any, epilog: str, formatter: Any) -> None:
    """Add ``serve`` to the ``crawldedup`` command's subcommands."""
    serve = commands.add_parser(
        "serve",
        help="answer is_seen / mark_seen and claims over HTTP (the fingerprint service)",
        description="Serve one Deduplicator over HTTP/JSON to crawlers in any language: POST /is_seen, "
        "/mark_seen, /v1/claim, /v1/seen, /v1/done, /v1/release, /v1/renew, /v1/expired; "
        "GET /healthz and /metrics (docs/service.md). Needs the service extra: "
        "pip install 'crawldedup[service]'.",
        epilog=epilog,
        formatter_class=formatter,
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs --token-file)"
    )
    serve.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    serve.add_argument(
        "--token-file",
        type=file_path,
        metavar="FILE",
        help="a file whose first line is the bearer token every request must carry",
    )
    serve.add_argument(
        "--strategy",
        metavar="{" + ",".join(STRATEGIES) + "}",
        help="the claim store ($CRAWLDEDUP_STRATEGY; default exact: the service's own state, no page lost)",
    )
    serve.add_argument(
        "--local-tier",
        metavar="{exact,bloom}",
        help="with a store, what answers before it: exact (no page lost) or bloom (a false positive loses its "
        "page, up to the error rate of the new pages) ($CRAWLDEDUP_LOCAL_TIER; default exact)",
    )
    add_location_options(serve)
    serve.add_argument(
        "--namespace",
        type=namespace_name,
        metavar="NAME",
        help="the crawl's key prefix in the store ($CRAWLDEDUP_NAMESPACE)",
    )
    add_policy_option(serve)
    serve.add_argument(
        "--state",
        type=file_path,
        metavar="FILE",
        help="the local filter's file ($CRAWLDEDUP_STATE; default: in memory)",
    )
    serve.add_argument(
        "--capacity", metavar="N", help="URLs the local filter and store are sized for ($CRAWLDEDUP_CAPACITY)"
    )
    serve.add_argument(
        "--error-rate", metavar="P", help="false-positive rate of the local filter ($CRAWLDEDUP_ERROR_RATE)"
    )
    serve.add_argument(
        "--ttl-days",
        metavar="DAYS",
        help="the recrawl window: lifetime of a claim in the store and the local filter ($CRAWLDEDUP_TTL_DAYS)",
    )
    serve.add_argument(
        "--generations", metavar="G", help="generations the local filter's window is cut into ($CRAWLDEDUP_GENERATIONS)"
    )
    add_durability_options(serve)
    serve.add_argument(
        "--verify-hits",
        action="store_true",
        help="send the local filter's hits to the store too, so that a false positive loses no page",
    )
    serve.add_argument(
        "--worker-id",
        metavar="ID",
        help="owner of the leases taken through this server (default: random); servers given "
        "the same id settle each other's leases",
    )
    serve.add_argument(
        "--open-healthz",
        action="store_true",
        help="answer GET /healthz without the token, for load balancers' probes (its status alone: no data)",
    )
    limits = serve.add_argument_group("limits", "what each client may use (docs/service.md, Limits)")
    for field in fields(Limits):
        default = field.default
        kind = float if isinstance(default, float) else int
        shown = f"{default:g}" if isinstance(default, float) else f"{default:,}"
        limits.add_argument(
            f"--{field.name.replace('_', '-')}",
            type=kind,
            metavar="S" if kind is float else "N",
            help=f"{LIMIT_OPTIONS[field.name]} (default {shown})",
        )
    serve.set_defaults(run=run_serve)


def service_config(args: argparse.Namespace) -> DedupConfig:
    """The environment's settings, with the options given on top, each checked as its variable is.

    :raises CLIError: (exit code 2) naming the option or variable that is wrong.
    """
    try:
        config = DedupConfig.from_env()
        given: Dict[str, Any] = {}
        for option, field in CONFIG_OPTIONS.items():
            text = getattr(args, option)
            if text is not None:
                given[field] = SETTINGS[field].read(field, text)
        return replace(config, **given)
    except ValueError as exc:
        raise usage_error("serve", str(exc)) from None


def run_serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; see :func:`add_command` for the options."""
    with needs_extra("crawldedup serve", "service"):
        from ..metrics import DedupMetrics
        from ..service import app, server
    config = service_config(args)
    try:
        limits = service_limits(args, server.fit_descriptors)
    except ValueError as exc:
        raise usage_error("serve", str(exc)) from None
    token: Optional[str] = None
    try:
        if args.token_file is not None:
            token = server.read_token(args.token_file)
        server.check_bind(args.host, token)
    except OSError as exc:
        raise usage_error("serve", f"--token-file {args.token_file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise usage_error("serve", str(exc)) from None

    async def main(stop: server.Stop) -> None:
        dedup = await _open(config, args)
        try:
            try:
                sock = server.listen(args.host, args.port)
            except OSError as exc:
                raise CLIError(
                    ExitCode.USAGE, f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
                ) from None
            metrics = DedupMetrics()  # prometheus_client's default registry: the process's own metrics too
            metrics.attach(dedup)
            service = app.ServiceApp(dedup, metrics, token=token, open_healthz=args.open_healthz, limits=limits)
            where = server.address(sock)
            await server.serve(
                service,
                sock,
                stop,
                lambda: print(
                    f"crawldedup serve: listening on {where} (strategy {config.strategy}, namespace {dedup.namespace})",
                    file=sys.stderr,
                    flush=True,
                ),
            )
        finally:
            await dedup.aclose()

    server.run(main)
    print("crawldedup serve: stopped", file=sys.stderr, flush=True)
    return ExitCode.OK


def service_limits(args: argparse.Namespace, fit: Any) -> Limits:
    """The limits given as options over the defaults, ``max_connections`` fitted to the descriptors
    (``fit(max_connections, reserved)``; a line on stderr when it had to be lowered).

    :raises ValueError: for a limit that is not positive, or bodies over the buffered bytes.
    """
    given = {field.name: getattr(args, field.name) for field in fields(Limits) if getattr(args, field.name) is not None}
    limits = Limits(**given)
    fitted = fit(limits.max_connections, limits.store_connections)
    if fitted < limits.max_connections:
        print(
            f"crawldedup serve: --max-connections lowered to {fitted:,}: the file descriptors (ulimit -n) "
            f"allow no more beside the store's {limits.store_connections}",
            file=sys.stderr,
        )
        limits = replace(limits, max_connections=fitted)
    return limits


async def _open(config: DedupConfig, args: argparse.Namespace) -> AsyncDeduplicator:
    """The service's AsyncDeduplicator, opened (its store reached, its state file open).

    :raises CLIError: for a bad setting (2), a bad state file or namespace (3), a store that is
        unreachable (5) or refuses (6).
    """
    try:
        dedup = AsyncDeduplicator(config=config, verify_hits=args.verify_hits, worker_id=args.worker_id)
        return await dedup.open()
    except StoreRefused as exc:
        raise CLIError(ExitCode.STORE_REFUSED, str(exc)) from None
    except StoreUnavailable as exc:
        raise CLIError(ExitCode.STORE, str(exc)) from None
    except (NamespaceConflict, FilterFileError) as exc:
        raise CLIError(ExitCode.STATE, str(exc)) from None
    except OSError as exc:
        raise CLIError(ExitCode.STATE, f"state file {config.state_path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise usage_error("serve", str(exc)) from None
