"""Prometheus metrics of Deduplicators (``pip install 'crawldedup[metrics]'``, prometheus_client).

::

    metrics = DedupMetrics()            # once per process, on prometheus_client's default registry
    metrics.attach(dedup)               # any number of Deduplicators
    body, content_type = metrics.exposition()   # what GET /metrics answers, or:
    server, _ = metrics.start_http_server(9108)  # a thread serving them

Every counter of :class:`~crawldedup.DedupStats` is a Prometheus counter named
``crawldedup_<field>_total`` (``round_trips`` is ``crawldedup_store_round_trips_total``),
labelled ``crawl_namespace`` with the Deduplicator's namespace; :data:`METRICS` lists them all. The values come
from the Deduplicator's own counters (:meth:`~crawldedup.Deduplicator.watch_stats`), so a
scrape equals ``dedup.stats``, including what was counted before :meth:`DedupMetrics.attach`.
Deduplicators of one namespace add up, as the processes of one crawl do.

Multiprocess mode: set ``PROMETHEUS_MULTIPROC_DIR`` (an empty directory) in every process
before it imports prometheus_client; :meth:`DedupMetrics.exposition` then reads every
process's files (counters and the histogram add up; the gauges show the fullest filter among
the processes alive). As prometheus_client documents, a server that forks workers calls
``prometheus_client.multiprocess.mark_process_dead(pid)`` when one exits.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Tuple
from wsgiref.simple_server import WSGIServer

from ._extras import needs_extra

with needs_extra("crawldedup.metrics", "metrics"):
    from prometheus_client import (
        CONTENT_TYPE_LATEST,
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        generate_latest,
        start_http_server,
    )
    from prometheus_client.multiprocess import MultiProcessCollector
    from prometheus_client.registry import REGISTRY

from .dedup.state import LocalState
from .dedup.stats import DedupStats, StatsListener

__all__ = ["LABEL", "LATENCY_BUCKETS_SECONDS", "METRICS", "DedupMetrics"]

PREFIX = "crawldedup"
#: Upper bounds of the store-latency histogram, in seconds: a batch of 1,000 claims takes
#: 2-10 ms on loopback Redis (docs/performance.md); retries with backoff reach seconds.
LATENCY_BUCKETS_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Counters whose Prometheus name says more than the field's.
_RENAMED = {"round_trips": "store_round_trips"}
_IVAR = re.compile(r":ivar (\w+): (.*?)(?=\n\s*:ivar |\Z)", re.S)
_ROLE = re.compile(r":\w+:`~?([^`]+)`|``([^`]+)``")


def _counter_help() -> Dict[str, str]:
    """Each DedupStats field's description, from its docstring (one place documents the counters)."""
    described = {
        name: " ".join(_ROLE.sub(lambda m: m.group(1) or m.group(2), text).split())
        for name, text in _IVAR.findall(DedupStats.__doc__ or "")
    }
    return {
        field.name: described[field.name][:1].upper() + described[field.name][1:]
        for field in dataclasses.fields(DedupStats)
    }


_COUNTER_HELP = _counter_help()
#: Prometheus name of each DedupStats counter (without ``_total``, which the exposition adds).
COUNTER_NAMES: Dict[str, str] = {field: f"{PREFIX}_{_RENAMED.get(field, field)}" for field in _COUNTER_HELP}
LATENCY = f"{PREFIX}_store_latency_seconds"
FILL = f"{PREFIX}_filter_fill_ratio"
#: A probability, so a ratio in Prometheus's naming (a ``_rate`` reads as per second).
ERROR_RATE = f"{PREFIX}_filter_false_positive_ratio"
#: The label of every series: not ``namespace``, which Kubernetes' service discovery attaches to
#: each target (Prometheus would rename ours ``exported_namespace``).
LABEL = "crawl_namespace"
#: Every metric: its name as exposed, its type and what it counts.
METRICS: Tuple[Tuple[str, str, str], ...] = (
    *((f"{name}_total", "counter", _COUNTER_HELP[field]) for field, name in COUNTER_NAMES.items()),
    (LATENCY, "histogram", "Time of a claim round trip to the store, its retries included."),
    (FILL, "gauge", "URLs the local filter holds (its approximate count) over its capacity."),
    (
        ERROR_RATE,
        "gauge",
        "The chance that the local filter takes a new page for a seen one, at its count (with the exact tier, "
        "that of a 64-bit collision: about 0).",
    ),
)
_HELP = {name: text for name, _, text in METRICS}


class Watched(Protocol):
    """What :meth:`DedupMetrics.attach` needs of a Deduplicator."""

    namespace: str
    local_filter: LocalState

    def watch_stats(self, listener: StatsListener) -> None: ...


class DedupMetrics:
    """The Prometheus metrics (:data:`METRICS`) of the Deduplicators attached, labelled by namespace.

    Make one per process and registry: a second one on the same registry raises ``ValueError``
    (prometheus_client's duplicated timeseries).

    :param registry: where the metrics are registered (default: prometheus_client's ``REGISTRY``).
    """

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        self.registry = registry if registry is not None else REGISTRY
        labels = (LABEL,)
        self._counters = {
            field: Counter(name, _COUNTER_HELP[field], labels, registry=self.registry)
            for field, name in COUNTER_NAMES.items()
        }
        self._latency = Histogram(
            LATENCY, _HELP[LATENCY], labels, buckets=LATENCY_BUCKETS_SECONDS, registry=self.registry
        )
        self._fill = Gauge(FILL, _HELP[FILL], labels, multiprocess_mode="livemax", registry=self.registry)
        self._error_rate = Gauge(
            ERROR_RATE, _HELP[ERROR_RATE], labels, multiprocess_mode="livemax", registry=self.registry
        )
        #: One process (no PROMETHEUS_MULTIPROC_DIR): each namespace's filters, read when scraped.
        self._filters: Optional[Dict[str, List[_Filter]]] = None if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else {}

    def attach(self, dedup: Watched) -> None:
        """Count ``dedup``'s statistics from now on, starting with its totals so far (the latency
        histogram starts empty: round trips made before are not timed)."""
        namespace = dedup.namespace
        fill, error_rate = self._fill.labels(namespace), self._error_rate.labels(namespace)
        local = _Filter(dedup.local_filter)
        if self._filters is None:  # each process writes its own gauges: after every count
            gauges: Optional[Tuple[Gauge, Gauge]] = (fill, error_rate)
        else:  # read when scraped: the fullest filter of the namespace
            gauges = None
            filters = self._filters.setdefault(namespace, [])
            if not filters:
                fill.set_function(_fullest(filters, lambda f: f.fill))
                error_rate.set_function(_fullest(filters, lambda f: f.error_rate))
            filters.append(local)
        dedup.watch_stats(
            _Listener(
                {field: counter.labels(namespace) for field, counter in self._counters.items()},
                self._latency.labels(namespace),
                local,
                gauges,
            )
        )

    def scrape_registry(self) -> CollectorRegistry:
        """What a scrape reads: :attr:`registry`, or in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``
        set) the files of every process."""
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return self.registry
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return registry

    def exposition(self) -> Tuple[bytes, str]:
        """The metrics in Prometheus's text format, and its content type (what GET /metrics answers)."""
        return generate_latest(self.scrape_registry()), CONTENT_TYPE_LATEST

    def start_http_server(self, port: int, addr: str = "127.0.0.1") -> Tuple[WSGIServer, threading.Thread]:
        """Serve the metrics on ``addr:port`` from a daemon thread (port 0: a free one, see
        ``server.server_port``); ``server.shutdown()`` stops it."""
        return start_http_server(port, addr, registry=self.scrape_registry())


class _Filter:
    """A Deduplicator's local filter as the gauges show it: read from its count (no scan of its
    bits), and once it is closed, as it was last read."""

    def __init__(self, local_filter: LocalState) -> None:
        self.local_filter = local_filter
        self.fill = self.error_rate = 0.0
        self.read()

    def read(self) -> _Filter:
        try:
            self.fill = self.local_filter.approx_items / self.local_filter.capacity
            self.error_rate = self.local_filter.expected_error_rate
        except ValueError:  # closed (perhaps by another thread while a scrape reads it)
            pass
        return self


def _fullest(filters: List[_Filter], value: Callable[[_Filter], float]) -> Callable[[], float]:
    """A gauge's function: ``value`` of the fullest of ``filters``, read now."""
    return lambda: value(max((f.read() for f in filters), key=lambda f: f.fill))


class _Listener:
    """One Deduplicator's side of :class:`DedupMetrics`: its namespace's series and its filter.

    :param gauges: the fill and error-rate gauges to set after every count (multiprocess mode,
        where each process writes its own), or None when they are read as they are scraped: a
        count then costs no reading of the filter (three reads a batch took 0.1-0.5 ms of the
        2.4-3.9 ms of CPU of a 1,000-URL claim, docs/metrics.md).
    """

    def __init__(
        self,
        counters: Mapping[str, Counter],
        latency: Histogram,
        local_filter: _Filter,
        gauges: Optional[Tuple[Gauge, Gauge]],
    ) -> None:
        self.counters = counters
        self.latency = latency
        self.local_filter = local_filter
        self.gauges = gauges

    def counted(self, deltas: Mapping[str, int]) -> None:
        for field, delta in deltas.items():
            if delta:
                self.counters[field].inc(delta)
        if self.gauges is not None:
            fill, error_rate = self.gauges
            self.local_filter.read()
            fill.set(self.local_filter.fill)
            error_rate.set(self.local_filter.error_rate)

    def store_call(self, seconds: float) -> None:
        self.latency.observe(seconds)
