"""The options that choose a claim store, for the commands that open one (``doctor``, ``stats``).

Each option is read and checked as its environment variable is (:data:`~crawldedup.config.SETTINGS`),
and the environment (``CRAWLDEDUP_STRATEGY``, ``CRAWLDEDUP_REDIS_URL``...) fills in what the options leave out.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from typing import Any, Dict, Mapping, Optional

from ..canonical import DEFAULT_POLICY, POLICIES, CanonicalPolicy, PolicyFileError, load_policy_file, policy_named
from ..config import SETTINGS, DedupConfig
from ..stores.factory import REDIS_STRATEGIES, STRATEGIES
from .exits import CLIError, ExitCode

#: The database of ``--strategy sqlite`` without --sqlite or $CRAWLDEDUP_SQLITE.
DEFAULT_SQLITE = "crawldedup.sqlite"
#: Option (as argparse names it) -> the DedupConfig field it sets.
STORE_OPTIONS = {
    "strategy": "strategy",
    "redis_url": "redis_url",
    "sqlite": "sqlite_path",
    "postgres_url": "postgres_url",
    "namespace": "namespace",
    "capacity": "capacity",
    "error_rate": "error_rate",
    "ttl_days": "ttl_days",
}
#: The options of :func:`add_durability_options` -> the DedupConfig fields they set.
DURABILITY_OPTIONS = {
    "durability": "durability",
    "durable_replicas": "durable_replicas",
    "durable_timeout": "durable_timeout",
}


def add_store_options(parser: argparse.ArgumentParser, namespace: bool = True) -> None:
    """Add ``--strategy``, ``--redis-url``, ``--sqlite``, ``--namespace`` (unless ``namespace``
    is False), ``--capacity``, ``--error-rate`` and ``--ttl-days`` to ``parser``."""
    stores = [name for name, store in STRATEGIES.items() if store is not None]
    parser.add_argument(
        "--strategy", metavar="{" + ",".join(stores) + "}", help="the claim store ($CRAWLDEDUP_STRATEGY)"
    )
    parser.add_argument(
        "--redis-url",
        metavar="URL",
        help=f"Redis of the {', '.join(REDIS_STRATEGIES)} strategies ($CRAWLDEDUP_REDIS_URL)",
    )
    parser.add_argument(
        "--sqlite",
        metavar="FILE",
        help=f"database of the sqlite strategy (default $CRAWLDEDUP_SQLITE or ./{DEFAULT_SQLITE})",
    )
    parser.add_argument(
        "--postgres-url", metavar="URL", help="database of the postgres strategy ($CRAWLDEDUP_POSTGRES_URL)"
    )
    if namespace:
        parser.add_argument(
            "--namespace", metavar="NAME", help="the crawl's key prefix in the store ($CRAWLDEDUP_NAMESPACE)"
        )
    parser.add_argument("--capacity", metavar="N", help="URLs the store is sized for ($CRAWLDEDUP_CAPACITY)")
    parser.add_argument("--error-rate", metavar="P", help="false-positive rate of RedisBloom ($CRAWLDEDUP_ERROR_RATE)")
    parser.add_argument(
        "--ttl-days", metavar="DAYS", help="lifetime of a claim in the set store ($CRAWLDEDUP_TTL_DAYS)"
    )


def add_durability_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--durability``, ``--durable-replicas`` and ``--durable-timeout`` (the Redis stores')."""
    parser.add_argument(
        "--durability",
        metavar="{primary,replicated}",
        help="answer a claim once the Redis primary has it (primary, the default) or once WAIT "
        "confirmed it on replicas (replicated) ($CRAWLDEDUP_DURABILITY)",
    )
    parser.add_argument(
        "--durable-replicas",
        metavar="N",
        help="replicated: replicas that must confirm a batch (default 1) ($CRAWLDEDUP_DURABLE_REPLICAS)",
    )
    parser.add_argument(
        "--durable-timeout",
        metavar="SECONDS",
        help="replicated: how long WAIT waits for them (default 1) ($CRAWLDEDUP_DURABLE_TIMEOUT)",
    )


def store_config(args: argparse.Namespace, command: str, options: Mapping[str, str] = STORE_OPTIONS) -> DedupConfig:
    """The environment's settings with the options given on top, each checked as its variable is.

    :param options: option (as argparse names it) -> the DedupConfig field it sets.

    :raises CLIError: (exit code 2) naming the option or variable that is wrong.
    """
    try:
        config = DedupConfig.from_env()
        given: Dict[str, Any] = {}
        for option, field in options.items():
            text = getattr(args, option, None)
            if text is not None:
                given[field] = SETTINGS[field].read(field, text)
        return replace(config, **given)
    except ValueError as exc:
        raise CLIError(ExitCode.USAGE, f"{exc}; see crawldedup {command} --help") from None


def _policy_name(text: str) -> str:
    try:
        policy_named(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip().lower()


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--policy {v1,v2,v3}`` and ``--policy-file FILE``: the canonical policy
    (``$CRAWLDEDUP_POLICY``, ``$CRAWLDEDUP_POLICY_FILE``; default v3)."""
    parser.add_argument(
        "--policy",
        type=_policy_name,
        metavar="{" + ",".join(POLICIES) + "}",
        help="the canonical policy: v3 (the default: hosts as browsers read them, no content parameter "
        "dropped), v2 or v1 (continue a crawl, state file or namespace begun before policy 3 or 2) "
        "($CRAWLDEDUP_POLICY)",
    )
    parser.add_argument(
        "--policy-file",
        metavar="FILE",
        help="a policy file (TOML, or JSON named *.json): a policy with per-host rules, as written by "
        "crawldedup audit --write-policy; wins over --policy ($CRAWLDEDUP_POLICY_FILE)",
    )


def chosen_policy(name: Optional[str], command: str, file: Optional[str] = None) -> CanonicalPolicy:
    """The policy of ``--policy-file`` (``file``), else of ``--policy`` (``name``), else of
    ``$CRAWLDEDUP_POLICY_FILE``, else of ``$CRAWLDEDUP_POLICY``, else the default.

    :raises CLIError: (exit code 2) for a policy file that cannot be read or a name that names no policy.
    """
    file = file or (None if name else os.environ.get(SETTINGS["policy_file"].variable, "").strip() or None)
    if file:
        try:
            return load_policy_file(file)
        except PolicyFileError as exc:
            raise CLIError(ExitCode.USAGE, f"{exc}; see crawldedup {command} --help") from None
    text = name or os.environ.get(SETTINGS["policy"].variable, "")
    if not text.strip():
        return DEFAULT_POLICY
    try:
        return policy_named(text)
    except ValueError:
        raise CLIError(
            ExitCode.USAGE, f"{SETTINGS['policy'].complaint('policy', text)}; see crawldedup {command} --help"
        ) from None
