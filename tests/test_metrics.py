"""crawldedup.metrics: a running Deduplicator's counters, scraped over HTTP and parsed by
prometheus_client's own parser, equal its stats; multiprocess mode adds up the processes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    import prometheus_client  # noqa: F401  (under CI the test extra installs it: a missing one is a failure)
else:
    pytest.importorskip("prometheus_client", reason="pip install 'crawldedup[metrics]'")

from prometheus_client import CollectorRegistry  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from crawldedup import Deduplicator, DedupStats  # noqa: E402
from crawldedup.bloom.sizing import expected_false_positive_rate  # noqa: E402
from crawldedup.metrics import COUNTER_NAMES, LATENCY_BUCKETS_SECONDS, METRICS, DedupMetrics  # noqa: E402

WORKER = Path(__file__).parent / "workers" / "metrics_worker.py"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
#: The names operators' dashboards are written against.
DOCUMENTED = {
    "crawldedup_urls_total",
    "crawldedup_won_total",
    "crawldedup_local_hits_total",
    "crawldedup_false_hits_total",
    "crawldedup_store_round_trips_total",
    "crawldedup_store_latency_seconds",
    "crawldedup_filter_fill_ratio",
    "crawldedup_filter_false_positive_ratio",
}

Samples = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


def parse(text: str) -> Tuple[Samples, Dict[str, str]]:
    """Every sample by (name, labels), and every family's type, as prometheus_client parses them."""
    samples: Samples = {}
    types: Dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples, types


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, tuple(sorted(labels.items()))]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        assert reply.status == 200
        return reply.read().decode("utf-8")


def assert_counters_equal(samples: Samples, stats: DedupStats, namespace: str) -> None:
    for field in dataclasses.fields(DedupStats):
        scraped = value(samples, f"{COUNTER_NAMES[field.name]}_total", crawl_namespace=namespace)
        assert scraped == getattr(stats, field.name), field.name


def test_every_documented_name_is_exposed_with_its_type_and_help():
    names = {name for name, _, _ in METRICS}
    assert DOCUMENTED <= names
    assert {f"{name}_total" for name in COUNTER_NAMES.values()} <= names
    registry = CollectorRegistry()
    metrics = DedupMetrics(registry)
    with Deduplicator("local", capacity=1_000) as dedup:
        metrics.attach(dedup)
        dedup.claim_many(["https://a.example/1"])
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain")
    families = {family.name: family for family in text_string_to_metric_families(body.decode("utf-8"))}
    for name, kind, help_text in METRICS:
        family = families[name.removesuffix("_total")]
        assert (family.type, family.documentation) == (kind, help_text)
        assert "`" not in help_text and help_text, name


def test_docs_list_every_metric_as_the_code_names_it():
    rows = [line.split(" | ") for line in DOCS.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    documented = [(name.strip("|` "), kind, text.rstrip(" |")) for name, kind, text in rows]
    assert documented == list(METRICS)


def test_a_second_set_of_metrics_on_one_registry_is_refused():
    registry = CollectorRegistry()
    DedupMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        DedupMetrics(registry)


def test_scraped_counters_of_a_running_deduplicator_equal_its_stats(redis_url, tmp_path):
    """Two workers share a store; one is scraped while it claims, from a thread, and at the end
    every counter equals its stats, the histogram counts its round trips, the gauges its filter."""
    pages = [f"https://shop.example/item/{i}?utm_source=x" for i in range(6_000)]
    registry = CollectorRegistry()
    metrics = DedupMetrics(registry)
    with (
        Deduplicator(
            "set",
            redis_url=redis_url,
            namespace="scraped",
            state=tmp_path / "a.bloom",
            capacity=20_000,
            sample_rate=1.0,
            local_tier="bloom",
        ) as dedup,
        Deduplicator("set", redis_url=redis_url, namespace="scraped", capacity=20_000) as other,
    ):
        other.claim_many(pages[::3])
        dedup.claim_many(pages[:500])  # counted before the metrics are attached: still scraped
        metrics.attach(dedup)
        timed_before = dedup.stats.round_trips  # round trips made before attach were never timed
        server, thread = metrics.start_http_server(0)
        try:
            port = server.server_port

            def claim_all() -> None:
                for start in range(0, len(pages), 250):
                    dedup.claim_many(pages[start : start + 250])
                dedup.claim_many(pages[:1_000])  # local hits, every one sampled
                dedup.claim_many(["not a url", "https://shop.example/item/1"])

            worker = threading.Thread(target=claim_all)
            worker.start()
            seen: List[float] = []
            while worker.is_alive():
                seen.append(value(parse(scrape(port))[0], "crawldedup_urls_total", crawl_namespace="scraped"))
            worker.join()
            assert seen == sorted(seen)  # a counter scraped mid-run never goes back
            samples, types = parse(scrape(port))
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
        stats = dedup.stats
        assert_counters_equal(samples, stats, "scraped")
        assert stats.lost > 0 and stats.sampled_hits > 0 and stats.invalid == 1 and stats.round_trips > 0
        timed = stats.round_trips - timed_before
        assert (
            timed > 0 and value(samples, "crawldedup_store_latency_seconds_count", crawl_namespace="scraped") == timed
        )
        assert value(samples, "crawldedup_store_latency_seconds_sum", crawl_namespace="scraped") > 0
        buckets = [
            value(samples, "crawldedup_store_latency_seconds_bucket", crawl_namespace="scraped", le=str(bound))
            for bound in LATENCY_BUCKETS_SECONDS
        ]
        assert buckets == sorted(buckets) and buckets[-1] <= timed
        local = dedup.local_filter
        assert (
            value(samples, "crawldedup_filter_fill_ratio", crawl_namespace="scraped")
            == local.approx_items / local.capacity
        )
        assert value(samples, "crawldedup_filter_false_positive_ratio", crawl_namespace="scraped") == pytest.approx(
            expected_false_positive_rate(local.approx_items, local.base.num_blocks, local.base.num_hashes)
        )
        assert types["crawldedup_store_latency_seconds"] == "histogram"


def test_deduplicators_of_one_namespace_add_up_and_namespaces_stay_apart():
    registry = CollectorRegistry()
    metrics = DedupMetrics(registry)
    with (
        Deduplicator("local", namespace="a") as first,
        Deduplicator("local", namespace="a") as second,
        Deduplicator("local", namespace="b") as third,
    ):
        for dedup, count in ((first, 10), (second, 20), (third, 40)):
            metrics.attach(dedup)
            dedup.claim_many([f"https://a.example/{i}" for i in range(count)])
        samples, _ = parse(metrics.exposition()[0].decode("utf-8"))
        assert value(samples, "crawldedup_won_total", crawl_namespace="a") == first.stats.won + second.stats.won == 30
        assert value(samples, "crawldedup_won_total", crawl_namespace="b") == third.stats.won == 40


def test_gauges_are_read_when_scraped_from_the_fullest_filter_of_the_namespace():
    """Counting reads no filter: a scrape reads the namespace's filters then, and shows the
    fullest, even when a less full one counted last; closed, a filter stays as last read."""
    registry = CollectorRegistry()
    metrics = DedupMetrics(registry)
    with (
        Deduplicator("local", namespace="g", capacity=10_000) as fuller,
        Deduplicator("local", namespace="g", capacity=10_000) as emptier,
    ):
        metrics.attach(fuller)
        metrics.attach(emptier)
        fuller.claim_many([f"https://a.example/{i}" for i in range(2_000)])
        emptier.claim_many([f"https://b.example/{i}" for i in range(100)])  # counted last
        fill = fuller.local_filter.approx_items / fuller.local_filter.capacity
        assert fill > emptier.local_filter.approx_items / emptier.local_filter.capacity
        samples, _ = parse(metrics.exposition()[0].decode("utf-8"))
        assert value(samples, "crawldedup_filter_fill_ratio", crawl_namespace="g") == fill
        assert value(samples, "crawldedup_filter_false_positive_ratio", crawl_namespace="g") == pytest.approx(
            fuller.local_filter.expected_error_rate
        )
    samples, _ = parse(metrics.exposition()[0].decode("utf-8"))
    assert value(samples, "crawldedup_filter_fill_ratio", crawl_namespace="g") == fill


def test_the_exact_tiers_gauge_is_the_chance_of_a_64_bit_collision():
    registry = CollectorRegistry()
    metrics = DedupMetrics(registry)
    with Deduplicator("exact", namespace="x", capacity=10_000) as dedup:
        metrics.attach(dedup)
        dedup.claim_many([f"https://a.example/{i}" for i in range(2_000)])
        samples, _ = parse(metrics.exposition()[0].decode("utf-8"))
        rate = value(samples, "crawldedup_filter_false_positive_ratio", crawl_namespace="x")
        assert rate == pytest.approx(dedup.local_filter.expected_error_rate)
        assert 0 < rate < dedup.local_filter.bloom.expected_error_rate * 2_000 / 2**63
    assert value(samples, "crawldedup_filter_fill_ratio", crawl_namespace="x") == 2_000 / 10_000


def test_multiprocess_mode_adds_up_every_process(redis_url, tmp_path, monkeypatch):
    """Three processes claim the same 3,000 pages twice under PROMETHEUS_MULTIPROC_DIR: the scrape's
    counters are the sums of their stats, and exactly one process won each page."""
    directory = tmp_path / "prometheus"
    directory.mkdir()
    pages = 3_000
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    outs = [tmp_path / f"worker{w}.json" for w in range(3)]
    workers = [
        subprocess.Popen([sys.executable, str(WORKER), str(w), str(pages), str(out), redis_url], env=env)
        for w, out in enumerate(outs)
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0]
    reports = [json.loads(out.read_text(encoding="ascii")) for out in outs]
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    samples, _ = parse(DedupMetrics(CollectorRegistry()).exposition()[0].decode("utf-8"))
    for field in dataclasses.fields(DedupStats):
        total = sum(report["stats"][field.name] for report in reports)
        assert value(samples, f"{COUNTER_NAMES[field.name]}_total", crawl_namespace="mp") == total, field.name
    assert value(samples, "crawldedup_won_total", crawl_namespace="mp") == pages
    assert value(samples, "crawldedup_store_latency_seconds_count", crawl_namespace="mp") == sum(
        report["stats"]["round_trips"] for report in reports
    )
    assert value(samples, "crawldedup_filter_fill_ratio", crawl_namespace="mp") == max(
        report["fill"] for report in reports
    )


def test_attaching_while_threads_claim_misses_nothing_and_counts_nothing_twice():
    registry = CollectorRegistry()
    metrics = DedupMetrics(registry)
    with Deduplicator("local", namespace="race", capacity=200_000) as dedup:

        def claim(worker: int) -> None:
            for start in range(0, 20_000, 100):
                dedup.claim_many([f"https://a.example/{worker}/{i}" for i in range(start, start + 100)])

        threads = [threading.Thread(target=claim, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        while dedup.stats.urls == 0:
            pass
        metrics.attach(dedup)
        attached_at = dedup.stats.urls
        for thread in threads:
            thread.join()
        samples, _ = parse(metrics.exposition()[0].decode("utf-8"))
        assert 0 < attached_at < 80_000  # attached mid-run
        assert_counters_equal(samples, dedup.stats, "race")
