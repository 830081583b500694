"""The servers' URLs: Redis (one node, a cluster's node, Sentinels), PostgreSQL, and hiding
their passwords. Checked in the one message style of :mod:`crawldedup._checks`; importing
this module imports no server client.
"""

from __future__ import annotations

import re
from typing import List, NamedTuple, Optional, Tuple
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from .._checks import WrongType, complaint

_QUERY_PASSWORD = re.compile(r"((?:^|&)(?:sentinel_)?password=)[^&]*")
#: The scheme of a Redis whose primary Sentinels name (see :func:`parse_sentinel_url`).
SENTINEL_SCHEME = "redis+sentinel://"
#: The schemes redis-py connects with, and Sentinel's.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://", SENTINEL_SCHEME)
#: A Sentinel's port when its URL gives none.
SENTINEL_PORT = 26379
REDIS_URL_RULE = f"a URL starting with {', '.join(REDIS_SCHEMES)}"


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``: in the user info, and in a ``password=``
    query argument (redis-py reads one there too)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{netloc.rsplit('@', 1)[1]}"
    query = _QUERY_PASSWORD.sub(r"\1***", parts.query)
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


class SentinelURL(NamedTuple):
    """What a ``redis+sentinel://`` URL names: its Sentinels, the service (master name) they
    watch, the database and the primary's credentials."""

    sentinels: List[Tuple[str, int]]
    service: str
    db: int
    username: Optional[str]
    password: Optional[str]
    #: The Sentinels' own credentials (``?sentinel_username=...&sentinel_password=...``).
    sentinel_username: Optional[str] = None
    sentinel_password: Optional[str] = None


def parse_sentinel_url(url: str) -> SentinelURL:
    """Read ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]
    [?sentinel_username=USER&sentinel_password=PASSWORD]``.

    The convention of the Redis-Sentinel-Url package, kept by LangChain, RedisVL and Prefect:
    comma-separated Sentinels (port 26379 when omitted), then the service name the Sentinels
    monitor, then the database (default 0). The user and password are the primary's (and its
    replicas'); the Sentinels' own, when they ask for one (``requirepass`` in their
    configuration), are the query arguments ``sentinel_username`` and ``sentinel_password``
    (Prefect's names), the only ones taken.

    :raises ValueError: naming what is wrong (the password never shown).
    """
    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - {"sentinel_username", "sentinel_password"})
    if unknown or parts.fragment:
        raise ValueError(
            f"a redis+sentinel URL takes no query arguments but sentinel_username and "
            f"sentinel_password, got {', '.join(unknown) or 'a #fragment'}"
        )
    hosts = parts.netloc.rpartition("@")[2]
    sentinels = []
    for host in hosts.split(","):
        name, colon, port = host.rpartition(":") if ":" in host else (host, "", "")
        if not name or (colon and not (port.isdigit() and 0 < int(port) < 65536)):
            raise ValueError(f"each Sentinel must be host[:port] with a port in [1, 65535], got {host!r}")
        sentinels.append((name, int(port) if colon else SENTINEL_PORT))
    path = [piece for piece in parts.path.split("/") if piece]
    if not path or len(path) > 2:
        raise ValueError(
            "give the service name the Sentinels monitor, and optionally the database: "
            "redis+sentinel://host:port[,host:port...]/SERVICE[/DB]"
        )
    if len(path) == 2 and not path[1].isdigit():
        raise ValueError(f"the database must be a number, got {path[1]!r}")
    return SentinelURL(
        sentinels,
        unquote(path[0]),
        int(path[1]) if len(path) == 2 else 0,
        unquote(parts.username) if parts.username else None,
        unquote(parts.password) if parts.password is not None else None,
        options.get("sentinel_username") or None,
        options.get("sentinel_password"),
    )


def redis_url_refusal(url: object) -> Optional[str]:
    """``must be a URL starting with ..., got '<url>': <what is wrong>`` (the password hidden),
    or None for a URL redis-py can connect with."""
    if not isinstance(url, str):
        return f"must be {REDIS_URL_RULE}, got {type(url).__name__}"
    problem = _redis_url_problem(url)
    return None if problem is None else f"must be {REDIS_URL_RULE}, got {redact_url(url)!r}: {problem}"


def check_redis_url(name: str, url: str) -> str:
    """A Redis URL that redis-py can connect with (see :func:`redis_url_refusal`).

    :param name: what the URL is called where it was given (a parameter, a variable).
    :raises ValueError: ``<name> must be ..., got ...: <what is wrong>``, the password hidden.
    """
    refusal = redis_url_refusal(url)
    if refusal:
        raise ValueError(f"{name} {refusal}")
    return url


#: The schemes of libpq's connection URLs.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
POSTGRES_URL_RULE = f"a URL starting with {' or '.join(POSTGRES_SCHEMES)}"


def check_postgres_url(name: str, url: str) -> str:
    """A PostgreSQL connection URL (``postgresql://user:password@host:port/database``).

    :raises ValueError: ``<name> must be ..., got ...``, the password hidden.
    """
    if not isinstance(url, str):
        raise WrongType(complaint(name, POSTGRES_URL_RULE, url))
    if not url.startswith(POSTGRES_SCHEMES):
        raise ValueError(complaint(name, POSTGRES_URL_RULE, redact_url(url)))
    try:
        _ = urlsplit(url).port  # parsing the port is the check
    except ValueError:
        raise ValueError(complaint(name, POSTGRES_URL_RULE + " and a port in [1, 65535]", redact_url(url))) from None
    return url


def _redis_url_problem(url: str) -> Optional[str]:
    """What makes ``url`` unusable, in a few words, or None."""
    parts = urlsplit(url)
    if not url.startswith(REDIS_SCHEMES):
        return f"unknown scheme {parts.scheme + '://' if parts.scheme else '(none)'}"
    if url.startswith(SENTINEL_SCHEME):
        try:
            parse_sentinel_url(url)
        except ValueError as exc:
            return str(exc)
        return None
    try:
        port = parts.port
    except ValueError:
        return f"the port must be a number in [1, 65535], got {parts.netloc.rpartition(':')[2]!r}"
    if port == 0:
        return "the port must be a number in [1, 65535], got 0"
    database = parts.path.strip("/")
    if parts.scheme != "unix" and database and not database.isdigit():
        return f"the database must be a number, got {database!r}"
    # What else redis-py refuses (query arguments such as socket_timeout or db): its own parser,
    # imported here so that checking settings that name no Redis imports no redis-py.
    from redis.connection import parse_url

    try:
        parse_url(url)
    except ValueError as exc:
        return str(exc).rstrip(".")
    return None
