"""Scrapy integration: a dupefilter backed by the :class:`~crawldedup.Deduplicator`.

Enable it in a Scrapy project with ``DUPEFILTER_CLASS = "crawldedup.scrapy.DupeFilter"``;
settings are described in docs/scrapy.md. This is the only module that imports Scrapy
(``pip install crawldedup[scrapy]``); ``import crawldedup`` never does.

What a request is keyed by:

- a GET request without a body: its URL, canonicalized by the Deduplicator's policy
  (:meth:`~crawldedup.Deduplicator.claim_batch`); a redirect hop by the rule that a fetch chain
  owns one claim (:meth:`~crawldedup.Deduplicator.claim_final`): a hop to another spelling of
  the page its chain holds goes on, a hop to another page claims that page;
- any other request (another method, or a body): a digest of the method, the canonical URL
  and the body, the key ``method-body:<32 hex>``;
- a request whose URL the policy refuses (``data:``, ``mailto:``...) or that carries
  ``meta["verbatim_url"]``: Scrapy's own request fingerprint (the crawler's
  ``REQUEST_FINGERPRINTER_CLASS``), the key ``scrapy:<hex>``.

Keys are claimed with :meth:`~crawldedup.Deduplicator.claim_keys`: not canonicalized, in a
fingerprint space of their own, so they never meet a page's URL; the local filter, the store
and the state file are the same as for URLs.

:class:`ContentMiddleware`, a downloader middleware, checks what each HTML response holds
(:meth:`~crawldedup.Deduplicator.check_content`) and tags it, or drops it when its content is
unchanged or a duplicate (``CRAWLDEDUP_CONTENT_DROP``).

:class:`RedirectMiddleware`, a downloader middleware beside Scrapy's own redirect middleware,
looks requests up in the alias map of redirects, and applies the chain rule where crawldedup's
dupefilter does not (another dupefilter, ``dont_filter`` requests).

Under scrapy-redis's Scheduler (several processes sharing one queue), the dupefilter is built by
:meth:`DupeFilter.from_spider` and closed with the spider.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Union

from .._extras import needs_extra

with needs_extra("crawldedup.scrapy", "scrapy"):
    from scrapy import signals
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.exceptions import IgnoreRequest
    from scrapy.http import HtmlResponse
    from scrapy.utils.job import job_dir
    from scrapy.utils.misc import load_object
    from scrapy.utils.request import RequestFingerprinter, referer_str

from .._checks import integer_in
from ..canonical import (
    DEFAULT_POLICY,
    POLICIES,
    CanonicalPolicy,
    InvalidURL,
    canonicalize,
    load_policy_file,
    policy_named,
)
from ..config import SETTINGS as CONFIG_SETTINGS
from ..config import DedupConfig
from ..content import page_text, simhash
from ..content.index_format import MAX_DISTANCE
from ..dedup import Deduplicator
from ..pages import DUPLICATE, VERDICTS
from ..stores.aliases import DEFAULT_MAX_ALIASES, check_max_aliases
from ..stores.base import StoreUnavailable

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol

__all__ = [
    "CONTENT_META_KEY",
    "ContentMiddleware",
    "DupeFilter",
    "PAGES_FILE_NAME",
    "REDIRECT_MIDDLEWARE",
    "RedirectMiddleware",
    "SETTINGS",
    "STATE_FILE_NAME",
    "STATS_SYNC_EVERY",
    "deduplicator_from_settings",
]

# The documented logger name: the adapter moved into integrations/, its log did not.
logger = logging.getLogger("crawldedup.scrapy")

#: Name of the local filter's file inside ``JOBDIR`` when ``CRAWLDEDUP_STATE`` is not set.
STATE_FILE_NAME = "crawldedup.bloom"
#: Hex digits of the method-and-body digest: 128 bits, as wide as the fingerprints.
BODY_DIGEST_HEX = 32
#: Scrapy setting -> Deduplicator setting (a :class:`~crawldedup.config.DedupConfig` field).
SETTINGS: Dict[str, str] = {
    "CRAWLDEDUP_STRATEGY": "strategy",
    "CRAWLDEDUP_REDIS_URL": "redis_url",
    "CRAWLDEDUP_NAMESPACE": "namespace",
    "CRAWLDEDUP_STATE": "state_path",
    "CRAWLDEDUP_CAPACITY": "capacity",
    "CRAWLDEDUP_ERROR_RATE": "error_rate",
    "CRAWLDEDUP_TTL_DAYS": "ttl_days",
    "CRAWLDEDUP_SQLITE": "sqlite_path",
    "CRAWLDEDUP_SERVICE_URL": "service_url",
    "CRAWLDEDUP_DURABILITY": "durability",
    "CRAWLDEDUP_DURABLE_REPLICAS": "durable_replicas",
    "CRAWLDEDUP_DURABLE_TIMEOUT": "durable_timeout",
    "CRAWLDEDUP_POSTGRES_URL": "postgres_url",
    "CRAWLDEDUP_LOCAL_TIER": "local_tier",
}
#: Requests between two copies of the Deduplicator's counters into Scrapy's stats (the last
#: copy is made at close): copying them on every request took about 20% of request_seen,
#: as each call to Scrapy's stats collector goes through a wrapper.
STATS_SYNC_EVERY = 1024
#: Deduplicator counters copied into Scrapy's stats (``crawldedup/<name>``).
_MIRRORED_STATS = ("local_hits", "answered_locally", "round_trips", "sampled_hits", "false_hits", "redirected_known")


def _policy_from_setting(value: Any, settings: BaseSettings) -> CanonicalPolicy:
    """``CRAWLDEDUP_POLICY``: a CanonicalPolicy, a policy's name (``v1``, ``v2``, ``v3``), or a dict
    (or its JSON text) of fields to change in the named policy of its ``version`` (default 3:
    ``{"version": 1, ...}`` changes policy 1's)."""
    path = settings.get("CRAWLDEDUP_POLICY_FILE")
    if path:  # a policy file (docs/canonical-policy.md) wins, as --policy-file does
        return load_policy_file(path)
    if value is None or value == "":
        return DEFAULT_POLICY
    if isinstance(value, CanonicalPolicy):
        return value
    if isinstance(value, str) and value.strip().lower() in POLICIES:
        return policy_named(value)
    try:
        overrides = settings.getdict("CRAWLDEDUP_POLICY")
    except ValueError as exc:
        raise ValueError(
            f"CRAWLDEDUP_POLICY must be a CanonicalPolicy, one of {', '.join(POLICIES)} or a dict of its "
            f"fields, got {value!r} ({exc})"
        ) from None
    names = {f.name for f in dataclasses.fields(CanonicalPolicy)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(
            f"CRAWLDEDUP_POLICY: unknown field(s) {', '.join(unknown)}; the fields are {', '.join(sorted(names))}"
        )
    try:
        # The named policy of the version asked for, so that {"version": 2} is policy 2 whole.
        version = overrides.get("version", DEFAULT_POLICY.version)
        base = next((policy for policy in POLICIES.values() if policy.version == version), DEFAULT_POLICY)
        return dataclasses.replace(base, **overrides)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"CRAWLDEDUP_POLICY: {exc}") from None


def _config_from_settings(settings: BaseSettings, spider_name: Optional[str]) -> DedupConfig:
    """The Deduplicator's settings: Scrapy's ``CRAWLDEDUP_*`` settings over the environment's
    variables of the same names, each checked by DedupConfig and named if wrong."""
    environment = DedupConfig.from_env()
    in_environment = {field for field, setting in CONFIG_SETTINGS.items() if setting.find(os.environ)}
    values: Dict[str, Any] = {}
    for setting, field in SETTINGS.items():
        value = settings.get(setting)
        if value is None or value == "":
            continue
        try:
            if isinstance(value, str):
                value = CONFIG_SETTINGS[field].read(field, value)  # read as its environment variable is
            DedupConfig(**{field: value})
        except ValueError as exc:
            raise ValueError(f"{setting}: {exc}") from None
        values[field] = value
    given = set(values) | in_environment
    if "namespace" not in given and spider_name:
        values["namespace"] = f"scrapy:{spider_name}"
    if "state_path" not in given:
        jobdir = job_dir(settings)
        if jobdir:
            values["state_path"] = os.fspath(Path(jobdir) / STATE_FILE_NAME)
    try:
        return dataclasses.replace(environment, **values)
    except ValueError as exc:
        raise ValueError(f"{exc} (the default namespace is scrapy:<spider name>; set CRAWLDEDUP_NAMESPACE)") from None


def deduplicator_from_settings(settings: BaseSettings, spider_name: Optional[str] = None) -> Deduplicator:
    """A Deduplicator configured by Scrapy settings (the ``CRAWLDEDUP_*`` ones, and ``JOBDIR``).

    :param settings: the crawler's settings.
    :param spider_name: gives the default namespace ``scrapy:<spider_name>``.
    :raises ValueError: for a setting that cannot be parsed or is out of range, naming it.
    :raises TypeError: for a ``CRAWLDEDUP_POLICY`` field of the wrong type.
    :raises FilterFileError: for a state file of another policy or namespace.
    :raises NamespaceConflict: for a store namespace of another policy or store kind.
    :raises StoreUnavailable: when the store cannot be reached.
    """
    policy = _policy_from_setting(settings.get("CRAWLDEDUP_POLICY"), settings)
    config = _config_from_settings(settings, spider_name)
    try:
        verify_hits = settings.getbool("CRAWLDEDUP_VERIFY_HITS")
    except ValueError as exc:
        raise ValueError(f"CRAWLDEDUP_VERIFY_HITS: {exc}, got {settings.get('CRAWLDEDUP_VERIFY_HITS')!r}") from None
    return Deduplicator(config=config, policy=policy, verify_hits=verify_hits, max_aliases=_max_aliases(settings))


def _max_aliases(settings: BaseSettings) -> int:
    """``CRAWLDEDUP_MAX_ALIASES``: the bound of the alias map of redirects."""
    try:
        return check_max_aliases(settings.getint("CRAWLDEDUP_MAX_ALIASES", DEFAULT_MAX_ALIASES))
    except ValueError as exc:
        raise ValueError(f"CRAWLDEDUP_MAX_ALIASES: {exc}") from None


class DupeFilter(BaseDupeFilter):
    """Scrapy's dupefilter contract on top of a :class:`~crawldedup.Deduplicator`.

    ``request_seen`` is True for a request that this crawl (or, with a shared store, any
    worker of it) already claimed. Scrapy's scheduler never asks about ``dont_filter``
    requests. Duplicates are logged like Scrapy's ``RFPDupeFilter`` does.

    :param deduplicator: where requests are claimed; closed by :meth:`close`.
    :param stats: Scrapy's stats collector, which receives the ``crawldedup/...`` counters.
    :param debug: log every filtered request (``DUPEFILTER_DEBUG``), not only the first.
    :param fingerprinter: keys the requests the policy refuses (default: Scrapy's own).
    """

    def __init__(
        self,
        deduplicator: Deduplicator,
        *,
        stats: Optional[StatsCollector] = None,
        debug: bool = False,
        fingerprinter: Optional[RequestFingerprinterProtocol] = None,
    ) -> None:
        self.deduplicator = deduplicator
        self.stats = stats
        self.debug = debug
        self.fingerprinter = fingerprinter if fingerprinter is not None else RequestFingerprinter()
        self.logdupes = True
        self._seen = 0
        self._cleared = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DupeFilter:
        """Build the filter from the crawler's settings (see :func:`deduplicator_from_settings`)."""
        spider_name = getattr(crawler.spidercls, "name", None)
        dupefilter = cls(
            deduplicator_from_settings(crawler.settings, spider_name),
            stats=crawler.stats,
            debug=crawler.settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
        )
        _DEDUPLICATORS[crawler] = dupefilter.deduplicator  # RedirectMiddleware claims in the same one
        return dupefilter

    @classmethod
    def from_spider(cls, spider: Spider) -> DupeFilter:
        """Build the filter for ``spider``, as scrapy-redis's Scheduler does: from its crawler's
        settings, closed when the spider closes (that scheduler never closes its dupefilter)."""
        dupefilter = cls.from_crawler(spider.crawler)
        spider.crawler.signals.connect(dupefilter.close, signal=signals.spider_closed)
        return dupefilter

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DupeFilter:
        """Build the filter from settings alone (a scheduler that knows no crawler): no stats, the
        namespace of ``CRAWLDEDUP_NAMESPACE``; close it with :meth:`close`."""
        return cls(deduplicator_from_settings(settings), debug=settings.getbool("DUPEFILTER_DEBUG"))

    def clear(self) -> None:
        """What scrapy-redis's Scheduler calls to start over (``SCHEDULER_PERSIST = False``): the
        claims are kept, so that no page another worker holds is fetched again; delete the
        namespace (``crawldedup migrate`` or the store's admin) to start a crawl over."""
        if not self._cleared:
            self._cleared = True
            logger.warning(
                "crawldedup: the scheduler asked to clear the dupefilter; the claims of %s are kept "
                "(a crawl shared by several processes must keep them: set SCHEDULER_PERSIST = True)",
                self.deduplicator,
            )

    def open(self) -> None:
        logger.info("crawldedup: filtering duplicate requests with %r", self.deduplicator)

    def request_seen(self, request: Request) -> bool:
        """Claim the request; True when it was claimed before (a duplicate), False when new.

        When the store stays unreachable (after its bounded retries), the request is let
        through unclaimed rather than dropped: it may be fetched twice, it is never lost. Each
        such request is logged at ERROR and counted as ``crawldedup/store_errors``.
        """
        try:
            won = self._claim(request)
        except StoreUnavailable as exc:
            # Raising here would make Scrapy drop the request (and the rest of its callback's output).
            logger.error("crawldedup: %s; %s goes through unclaimed and may be fetched twice", exc, request)
            if self.stats is not None:
                self.stats.inc_value("crawldedup/store_errors")
            return False
        self._count(won)
        return not won

    def _claim(self, request: Request) -> bool:
        """Plain GETs by canonical URL (``claim_batch``), every other request by its key (``claim_keys``)."""
        if request.method == "GET" and not request.body and not request.meta.get("verbatim_url"):
            hops = redirect_hops(request)
            if hops and _valid(request.url, self.deduplicator.policy):
                # A fetch chain owns one claim: a hop to the page its chain holds goes on, a hop to
                # another page claims it (``claim_final`` before the fetch, not after).
                return self.deduplicator.claim_final([request.url], requested=[hops])[0]
            batch = self.deduplicator.claim_batch([request.url])
            if batch.canonical[0] is not None:
                return batch.won[0]
            self._note_refused(request, batch.errors[0])
            key = self._fingerprint_key(request)
        else:
            key = self._key(request)
        return self.deduplicator.claim_keys([key])[0]

    def _key(self, request: Request) -> str:
        """The key of a request that is not a plain GET (see the module's docstring)."""
        if request.meta.get("verbatim_url"):
            return self._fingerprint_key(request)
        try:
            canonical = canonicalize(request.url, policy=self.deduplicator.policy)
        except InvalidURL as exc:
            self._note_refused(request, exc)
            return self._fingerprint_key(request)
        digest = hashlib.sha256(f"{request.method}\0{canonical}\0".encode())
        digest.update(request.body)
        return f"method-body:{digest.hexdigest()[:BODY_DIGEST_HEX]}"

    def _fingerprint_key(self, request: Request) -> str:
        return f"scrapy:{self.fingerprinter.fingerprint(request).hex()}"

    def _note_refused(self, request: Request, reason: InvalidURL) -> None:
        if self.stats is not None:
            self.stats.inc_value("crawldedup/invalid")
        logger.debug("crawldedup: %s keyed by its Scrapy fingerprint: the URL policy refuses it (%s)", request, reason)

    def _count(self, won: bool) -> None:
        if self.stats is None:
            return
        self._seen += 1
        self.stats.inc_value("crawldedup/new" if won else "crawldedup/filtered")
        if self._seen % STATS_SYNC_EVERY == 0:
            self._sync_stats()

    def _sync_stats(self) -> None:
        """Copy the Deduplicator's counters into Scrapy's stats."""
        if self.stats is None:
            return
        dedup_stats = self.deduplicator.stats
        self.stats.set_value("crawldedup/seen", self._seen)
        for name in _MIRRORED_STATS:
            self.stats.set_value(f"crawldedup/{name}", getattr(dedup_stats, name))
        self.stats.set_value("crawldedup/sent_to_store", dedup_stats.store_claims + dedup_stats.store_reads)

    def log(self, request: Request, spider: Spider) -> None:
        """Log a filtered request at DEBUG: the first one, or every one with ``DUPEFILTER_DEBUG``."""
        if self.debug:
            logger.debug(
                "Filtered duplicate request: %(request)s (referer: %(referer)s)",
                {"request": request, "referer": referer_str(request)},
                extra={"spider": spider},
            )
        elif self.logdupes:
            logger.debug(
                "Filtered duplicate request: %(request)s - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
                extra={"spider": spider},
            )
            self.logdupes = False
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")

    def close(self, reason: str) -> None:
        """Close the Deduplicator (flushing the state file); ``reason`` is Scrapy's finish reason."""
        self._sync_stats()
        if self.stats is not None:  # once, at the end: both scan the filter's bits
            local_filter = self.deduplicator.local_filter
            self.stats.set_value("crawldedup/filter_fill_ratio", local_filter.fill_ratio)
            self.stats.set_value("crawldedup/filter_estimated_error_rate", local_filter.estimated_error_rate)
        logger.info("crawldedup: closing (%s): %s", reason, self.deduplicator.stats)
        self.deduplicator.close()

    def __repr__(self) -> str:
        return f"<DupeFilter {self.deduplicator!r}>"


#: Name of the content pages' journal inside ``JOBDIR`` (``local`` strategy) when
#: ``CRAWLDEDUP_CONTENT_PAGES`` is not set.
PAGES_FILE_NAME = "crawldedup.pages"
#: Where :class:`ContentMiddleware` puts each checked response's
#: :class:`~crawldedup.pages.PageCheck`: ``response.meta[CONTENT_META_KEY]``.
CONTENT_META_KEY = "crawldedup_content"
#: Verdicts that ``CRAWLDEDUP_CONTENT_DROP`` may name.
_DROPPABLE = tuple(v for v in VERDICTS if v != "invalid")


class ContentMiddleware:
    """A downloader middleware that says what each HTML response holds, and may drop it.

    Each response that is HTML with status 200 is fingerprinted (:func:`~crawldedup.content.page_text`,
    :func:`~crawldedup.content.simhash`) and checked by
    :meth:`~crawldedup.Deduplicator.check_content` under its final URL: the
    :class:`~crawldedup.pages.PageCheck` goes into ``response.meta["crawldedup_content"]``, and
    a response whose verdict ``CRAWLDEDUP_CONTENT_DROP`` names is dropped (``IgnoreRequest``:
    its callback never runs, so its links are not followed). Counted in the stats as
    ``crawldedup/content/<verdict>`` and ``crawldedup/content/dropped``. Settings in docs/scrapy.md.

    When the store stays unreachable, the response goes on untagged (logged at ERROR, counted
    as ``crawldedup/content/store_errors``): a page is never dropped without an answer.

    :param deduplicator: whose :meth:`~crawldedup.Deduplicator.check_content` is used; closed
        with the spider.
    :param drop: the verdicts whose responses are dropped.
    """

    def __init__(
        self,
        deduplicator: Deduplicator,
        *,
        drop: FrozenSet[str] = frozenset(),
        stats: Optional[StatsCollector] = None,
    ) -> None:
        self.deduplicator = deduplicator
        self.drop = drop
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentMiddleware:
        """Build the middleware from the crawler's settings: the ``CRAWLDEDUP_*`` ones of the
        dupefilter (its store and namespace; never its state file) and the ``CRAWLDEDUP_CONTENT_*`` ones.

        :raises ValueError: for a setting out of range, naming it.
        """
        settings = crawler.settings
        config = _config_from_settings(settings, getattr(crawler.spidercls, "name", None))
        pages: Optional[str] = settings.get("CRAWLDEDUP_CONTENT_PAGES") or None
        jobdir = job_dir(settings)
        if pages is None and jobdir:
            pages = os.fspath(Path(jobdir) / PAGES_FILE_NAME)
        drop = frozenset(settings.getlist("CRAWLDEDUP_CONTENT_DROP"))
        if not drop <= set(_DROPPABLE):
            raise ValueError(
                f"CRAWLDEDUP_CONTENT_DROP must name verdicts among {', '.join(_DROPPABLE)}, got {sorted(drop)!r}"
            )
        try:
            distance = integer_in("k", settings.getint("CRAWLDEDUP_CONTENT_DISTANCE", 3), 1, MAX_DISTANCE)
        except ValueError as exc:
            raise ValueError(f"CRAWLDEDUP_CONTENT_DISTANCE: {exc}") from None
        deduplicator = Deduplicator(
            config=dataclasses.replace(config, state_path=None),  # the dupefilter's file stays its own
            policy=_policy_from_setting(settings.get("CRAWLDEDUP_POLICY"), settings),
            content_distance=distance,
            pages_path=pages,
        )
        middleware = cls(deduplicator, drop=drop, stats=crawler.stats)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def process_response(
        self, request: Request, response: Response, spider: Optional[Spider] = None
    ) -> Union[Request, Response]:
        """Tag an HTML response with its content verdict; drop it when its verdict is in :attr:`drop`.

        :raises IgnoreRequest: for a dropped response.
        """
        if not isinstance(response, HtmlResponse) or response.status != 200:
            return response
        try:
            check = self.deduplicator.check_content([response.url], [simhash(page_text(response.text))])[0]
        except StoreUnavailable as exc:
            logger.error("crawldedup: %s; %s goes on without a content check", exc, response)
            self._count("store_errors")
            return response
        request.meta[CONTENT_META_KEY] = check  # response.meta is its request's
        self._count(check.verdict)
        if check.verdict in self.drop:
            self._count("dropped")
            other = f" of {check.duplicate_of}" if check.verdict == DUPLICATE else ""
            raise IgnoreRequest(f"crawldedup: content {check.verdict}{other}: {response.url}")
        return response

    def _count(self, name: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"crawldedup/content/{name}")

    def spider_closed(self) -> None:
        """Close the Deduplicator (the pages' journal is synced)."""
        self.deduplicator.close()

    def __repr__(self) -> str:
        return f"<ContentMiddleware drop={sorted(self.drop)} {self.deduplicator!r}>"


#: The path that enables :class:`RedirectMiddleware` in ``DOWNLOADER_MIDDLEWARES``; its
#: documented order is 540: after Scrapy's redirect (600), meta refresh (580) and retry (550)
#: middlewares have handled a response, so that it sees final responses only.
REDIRECT_MIDDLEWARE = "crawldedup.scrapy.RedirectMiddleware"
#: The Deduplicator of each crawler's DupeFilter, for its RedirectMiddleware (made before it).
_DEDUPLICATORS: weakref.WeakKeyDictionary[Crawler, Deduplicator] = weakref.WeakKeyDictionary()


def _valid(url: str, policy: CanonicalPolicy) -> bool:
    """Whether the policy accepts ``url`` (a refused one is keyed by Scrapy's fingerprint)."""
    try:
        canonicalize(url, policy=policy)
    except InvalidURL:
        return False
    return True


def redirect_hops(request: Request) -> List[str]:
    """The URLs that answered ``request``'s chain with HTTP redirects (301, 302, 303, 307, 308),
    first to last: the run of HTTP redirects that ends at it. A meta refresh is left alone: it
    is a link of its page, so a chain starts after it."""
    reasons = request.meta.get("redirect_reasons") or []
    urls = request.meta.get("redirect_urls") or []
    http = 0
    for reason in reversed(reasons):
        if not isinstance(reason, int):
            break
        http += 1
    return list(urls[len(urls) - http :]) if http else []


class RedirectMiddleware:
    """A downloader middleware that processes each page once, whichever redirects led to it.

    Enable it beside Scrapy's own redirect middleware::

        DOWNLOADER_MIDDLEWARES = {"crawldedup.scrapy.RedirectMiddleware": 540}

    A fetch chain owns one claim (:meth:`~crawldedup.Deduplicator.claim_final`): a redirect to
    another spelling of the page the chain holds (a slash added or removed by the server,
    tracking parameters stripped) is never dropped; a redirect to another page claims that page,
    and a chain that lands on a page another request holds is dropped.

    - With crawldedup's dupefilter, the dupefilter applies the rule to every redirect hop before
      its fetch, so no page body is fetched twice; this middleware then adds the lookup below.
    - With another dupefilter, this middleware claims the end of each HTTP redirect chain
      (``redirect_urls`` of 301, 302, 303, 307, 308) in a Deduplicator of its own, made from the
      same settings, and drops a response whose page another chain holds (``IgnoreRequest``);
      so do requests the dupefilter never saw (``dont_filter``).
    - With ``CRAWLDEDUP_REDIRECT_LOOKUP`` (default on), a request that is no hop is dropped
      before its fetch when the alias map knows it leads to a claimed page
      (:meth:`~crawldedup.Deduplicator.seen_through_redirects`): one read per request.
    - A meta refresh is left alone (a link of its page, claimed as one by the dupefilter).

    When the store stays unreachable, the response goes on (logged at ERROR, counted as
    ``crawldedup/redirect/store_errors``): a page is never dropped without an answer.
    Counted in Scrapy's stats: ``crawldedup/redirect/new``, ``/duplicate`` and ``/known_alias``.
    """

    def __init__(self, crawler: Crawler, *, lookup: bool = True, own: Optional[Deduplicator] = None) -> None:
        self.crawler = crawler
        self.lookup = lookup
        self.stats = crawler.stats
        self._own = own

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedirectMiddleware:
        """Build it from the crawler's settings (``CRAWLDEDUP_REDIRECT_LOOKUP``, ``CRAWLDEDUP_MAX_ALIASES``
        and, without crawldedup's dupefilter, the ``CRAWLDEDUP_*`` ones of a Deduplicator).

        :raises ValueError: for a setting out of range, naming it.
        """
        settings = crawler.settings
        try:
            lookup = settings.getbool("CRAWLDEDUP_REDIRECT_LOOKUP", True)
        except ValueError as exc:
            raise ValueError(f"CRAWLDEDUP_REDIRECT_LOOKUP: {exc}") from None
        _max_aliases(settings)  # checked now, used by whichever Deduplicator claims
        own = None
        if not issubclass(load_object(settings["DUPEFILTER_CLASS"]), DupeFilter):
            own = deduplicator_from_settings(settings, getattr(crawler.spidercls, "name", None))
        middleware = cls(crawler, lookup=lookup, own=own)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    @property
    def deduplicator(self) -> Deduplicator:
        """Where final pages are claimed: the dupefilter's Deduplicator, or this middleware's own."""
        return self._own if self._own is not None else _DEDUPLICATORS[self.crawler]

    def process_request(self, request: Request, spider: Optional[Spider] = None) -> None:
        """Drop a request that the alias map knows leads to a page processed already.

        :raises IgnoreRequest: for such a request.
        """
        if not self.lookup or request.method != "GET" or redirect_hops(request):
            return
        try:
            known = self.deduplicator.seen_through_redirects([request.url])[0]
        except StoreUnavailable as exc:
            logger.error("crawldedup: %s; %s goes on without its redirects looked up", exc, request)
            self._count("store_errors")
            return
        if known:
            self._count("known_alias")
            raise IgnoreRequest(f"crawldedup: {request.url} redirects to a page processed already")

    def process_response(
        self, request: Request, response: Response, spider: Optional[Spider] = None
    ) -> Union[Request, Response]:
        """Claim the end of a redirect chain that no crawldedup dupefilter claimed; drop the response
        when another chain holds its page.

        :raises IgnoreRequest: for a page processed already.
        """
        hops = redirect_hops(request)
        if not hops or (self._own is None and not request.dont_filter):
            return response  # crawldedup's dupefilter claimed every hop of the chain before its fetch
        try:
            won = self.deduplicator.claim_final([response.url], requested=[hops])[0]
        except StoreUnavailable as exc:
            logger.error("crawldedup: %s; %s goes on unclaimed and may be processed twice", exc, response)
            self._count("store_errors")
            return response
        self._count("new" if won else "duplicate")
        if not won:
            raise IgnoreRequest(f"crawldedup: {response.url}, reached from {hops[0]}, was processed already")
        return response

    def _count(self, name: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"crawldedup/redirect/{name}")

    def spider_closed(self) -> None:
        """Close this middleware's own Deduplicator (the dupefilter closes its own)."""
        if self._own is not None:
            self._own.close()

    def __repr__(self) -> str:
        return f"<RedirectMiddleware lookup={self.lookup} {self.deduplicator!r}>"
