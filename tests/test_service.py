"""``crawldedup serve``, tested by running it: real server processes, a real Redis and Redis Cluster.

The seed's two calls; every bad request answered with its status and a one-line reason; the
token; leases with a client killed
mid-lease; Redis killed and restarted under a client; SIGTERM answering what is in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import LosingProxy, ServeProcess

from crawldedup import (
    DEFAULT_POLICY,
    POLICY_V1,
    AsyncServiceClient,
    CanonicalPolicy,
    Deduplicator,
    NamespaceConflict,
    ServiceClient,
    StoreUnavailable,
    canonicalize,
)
from crawldedup.bloom import open_filter
from crawldedup.stores.base import RetryPolicy

#: The race and the outage need nothing of the twins the rest of the suite does not test
#: already (the server calls the same Deduplicator): they run once, with the compiled ones.
compiled_only = pytest.mark.skipif(
    os.environ.get("CRAWLDEDUP_NO_EXTENSIONS") == "1", reason="the service's races run once, in the compiled run"
)


def post(
    url: str, path: str, body: bytes, headers: Optional[Dict[str, str]] = None, method: str = "POST"
) -> Tuple[int, Dict[str, str], bytes]:
    """One plain HTTP request (urllib: nothing of the package's client), its status, headers, body."""
    request = urllib.request.Request(
        url + path,
        data=body if method == "POST" else None,
        method=method,
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def call(url: str, path: str, fields: Any, **kwargs: Any) -> Tuple[int, Any]:
    status, _, body = post(url, path, json.dumps(fields).encode(), **kwargs)
    return status, json.loads(body)


@pytest.fixture(scope="module")
def service(redis_server) -> Iterator[ServeProcess]:
    """One server on the session's Redis (``set`` store) for the tests that only call it; each
    test claims keys of its own (a fresh prefix), so that they do not meet."""
    with ServeProcess(
        ["--strategy", "set", "--redis-url", redis_server.url, "--namespace", "svc", "--capacity", "1000000"]
    ) as server:
        yield server
    assert "Traceback" not in server.stderr


@pytest.fixture
def prefix() -> str:
    return uuid.uuid4().hex


# --------------------------------------------------------------------------- the seed's calls


def test_the_seeds_two_calls(service, prefix):
    key = f"{prefix}-page"
    assert call(service.url, "/is_seen", {"url_fp": key}) == (200, {"seen": False})
    assert call(service.url, "/mark_seen", {"url_fp": key}) == (200, {"first_seen": True})
    assert call(service.url, "/mark_seen", {"url_fp": key}) == (200, {"first_seen": False})
    assert call(service.url, "/is_seen", {"url_fp": key}) == (200, {"seen": True})


def test_the_seeds_calls_in_batches(service, prefix):
    keys = [f"{prefix}-{i}" for i in range(5)]
    assert call(service.url, "/mark_seen", {"url_fps": keys[:3]}) == (200, {"first_seen": [True] * 3})
    status, answer = call(service.url, "/mark_seen", {"url_fps": keys})
    assert (status, answer) == (200, {"first_seen": [False, False, False, True, True]})
    assert call(service.url, "/is_seen", {"url_fps": keys[::-1] + [f"{prefix}-new"]}) == (
        200,
        {"seen": [True] * 5 + [False]},
    )


def test_a_key_is_not_a_url(service, prefix):
    url = f"https://{prefix}.example/a"
    assert call(service.url, "/mark_seen", {"url_fp": url}) == (200, {"first_seen": True})
    status, answer = call(service.url, "/v1/claim", {"urls": [url]})
    assert status == 200 and answer["won"] == [True], "a key and a page never share a claim"


def test_claim_canonicalizes_and_names_refusals(service, prefix):
    urls = [
        f"HTTPS://{prefix}.Example:443/p?b=2&a=1&utm_source=x",
        f"https://{prefix}.example/p?a=1&b=2",
        "mailto:someone@example.org",
        "/relative",
    ]
    status, answer = call(service.url, "/v1/claim", {"urls": urls})
    assert status == 200
    assert answer["won"] == [True, False, False, False]
    assert answer["canonical"][:2] == [canonicalize(urls[1])] * 2
    assert answer["canonical"][2:] == [None, None]
    assert set(answer["errors"]) == {"2", "3"} and all("\n" not in reason for reason in answer["errors"].values())
    status, answer = call(service.url, "/v1/claim", {"urls": ["/relative"], "base": f"https://{prefix}.example/"})
    assert (status, answer["won"], answer["canonical"]) == (200, [True], [f"https://{prefix}.example/relative"])
    assert call(service.url, "/v1/seen", {"urls": [urls[0], f"https://{prefix}.example/other"]}) == (
        200,
        {"seen": [True, False]},
    )


def test_the_clients_call_it_as_a_deduplicator(service, prefix):
    urls = [f"https://{prefix}.example/{i}" for i in range(3)]
    with ServiceClient(service.url) as client:
        assert client.claim_many(urls[:2]) == [True, True]
        assert client.claim(urls[0]) is False
        batch = client.claim_batch([urls[2], "no url"])
        assert batch.won == [True, False] and batch.canonical == [urls[2], None] and set(batch.errors) == {1}
        assert client.claim_keys([f"{prefix}-k"]) == [True]
        assert client.seen_keys([f"{prefix}-k", f"{prefix}-j"]) == [True, False]
        with pytest.raises(ValueError, match="url_fps must be a list of non-empty strings"):
            client.claim_keys([""])

    async def use() -> Tuple[List[bool], List[bool]]:
        async with AsyncServiceClient(service.url) as client:
            won = await client.claim_many([*urls, f"https://{prefix}.example/new"])
            return won, await client.seen(urls)

    assert asyncio.run(use()) == ([False, False, False, True], [True] * 3)


def test_healthz_and_metrics(service, prefix):
    call(service.url, "/mark_seen", {"url_fp": prefix})
    status, health = call(service.url, "/healthz", None, method="GET")
    assert status == 200 and health["status"] == "ok" and health["strategy"] == "set"
    assert 0 < health["filter_fill"] < 1 and health["filter_capacity"] == 1_000_000
    status, headers, text = post(service.url, "/metrics", b"", method="GET")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    lines = text.decode().splitlines()
    assert any(line.startswith('crawldedup_http_requests_total{call="claim_keys",code="200"}') for line in lines)
    assert any(line.startswith("crawldedup_http_request_duration_seconds_bucket") for line in lines)
    won = [line for line in lines if line.startswith('crawldedup_won_total{crawl_namespace="svc"}')]
    assert won and float(won[0].split()[-1]) >= 1, "the Deduplicator's counters are there too"


# --------------------------------------------------------------------------- bad requests

#: The start of a store call's body: the namespace and policy the ``service`` fixture serves.
OPENED = b'{"namespace": "svc", "policy": "%s", ' % DEFAULT_POLICY.digest.encode()

BAD_REQUESTS = [
    pytest.param("/mark_seen", b"{", 400, "the body is not JSON", id="malformed-json"),
    pytest.param("/mark_seen", b"\xff\xfe", 400, "the body is not JSON", id="not-utf8"),
    pytest.param("/mark_seen", b"", 400, "the body is empty", id="empty-body"),
    pytest.param("/mark_seen", b"[1, 2]", 400, "must be a JSON object, got a list", id="not-an-object"),
    pytest.param(
        "/mark_seen", b'{"url_fp": 7}', 400, "url_fp must be a non-empty string, got a number", id="wrong-type"
    ),
    pytest.param("/mark_seen", b'{"url_fp": ""}', 400, "got an empty string", id="empty-key"),
    pytest.param("/is_seen", b'{"url_fps": ["a", null]}', 400, "got null at position 1", id="null-in-list"),
    pytest.param("/mark_seen", b'{"url_fp": "a", "ttl": 3}', 400, "unknown field 'ttl'", id="unknown-field"),
    pytest.param("/mark_seen", b"{}", 400, "give exactly one of url_fp", id="no-key"),
    pytest.param("/mark_seen", b'{"url_fp": "a", "url_fps": ["b"]}', 400, "give exactly one of", id="both-forms"),
    pytest.param(
        "/v1/claim", b'{"urls": "https://a.example/"}', 400, "urls must be a list of strings", id="urls-a-string"
    ),
    pytest.param("/v1/claim", b"{}", 400, "missing field 'urls'", id="missing-urls"),
    pytest.param(
        "/v1/claim", b'{"urls": [], "lease": true}', 400, "lease must be a number of seconds", id="lease-bool"
    ),
    pytest.param("/v1/claim", b'{"urls": ["https://a.example/"], "lease": -1}', 400, "lease must be", id="lease-range"),
    pytest.param("/v1/claim", b'{"urls": ["x"], "base": "not a base"}', 400, "", id="bad-base"),
    pytest.param("/v1/renew", b'{"urls": []}', 400, "missing field 'lease'", id="renew-no-lease"),
    pytest.param("/v1/expired", b'{"limit": 0}', 400, "limit must be an integer in [1, 1000000]", id="limit-range"),
    pytest.param("/v1/expired", b'{"limit": 1.5}', 400, "limit must be an integer", id="limit-float"),
    pytest.param(
        "/v1/claim", b'{"urls": [' + b'"a",' * 100_000 + b'"a"]}', 413, "at most 100,000 items", id="too-many-urls"
    ),
    pytest.param(
        "/v1/store/claim",
        OPENED + b'"claims": "", "reads": "", "aliases": {"requested": ""}}',
        400,
        "aliases must be an object with requested, finals",
        id="aliases-fields",
    ),
    pytest.param(
        "/v1/store/claim",
        OPENED + b'"claims": "", "reads": "", "aliases": {"requested": "AAAA", "finals": "", "capacity": 1}}',
        400,
        "aliases.requested must be base64 of 16-byte fingerprints",
        id="aliases-bytes",
    ),
    pytest.param(
        "/v1/store/claim",
        OPENED + b'"claims": "", "reads": "", "aliases": {"requested": "", "finals": "", "capacity": 0}}',
        400,
        "max_aliases must be an integer in",
        id="aliases-capacity",
    ),
    pytest.param("/v1/store/aliases", OPENED[:-2] + b"}", 400, "missing field 'fingerprints'", id="aliases-read-field"),
    pytest.param("/v1/nothing", b"{}", 404, "no such call", id="unknown-path"),
    pytest.param("/mark_seen", b'{"url_fp": "' + b"[" * 100_000 + b'"}', 200, "", id="brackets-in-a-key"),
    pytest.param(
        "/is_seen",
        b'{"url_fps": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        400,
        ("depth limit exceeded", "got a list at position 0"),
        id="deep-nesting",
    ),  # orjson 3.10+ limits the depth
]


@pytest.mark.parametrize("path, body, status, reason", BAD_REQUESTS)
def test_every_bad_request_gets_its_status_and_one_line(service, path, body, status, reason):
    got, headers, answer = post(service.url, path, body)
    assert got == status, answer[:300]
    fields = json.loads(answer)
    if status != 200:
        reasons = reason if isinstance(reason, tuple) else (reason,)
        assert any(text in fields["error"] for text in reasons) and "\n" not in fields["error"]
    assert "Traceback" not in service.stderr


def test_a_body_over_the_limit_gets_413_before_it_is_sent(service):
    host, port = service.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            b"POST /mark_seen HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n{" % (17 << 20)
        )
        answer = b""
        while b"}" not in answer:
            chunk = sock.recv(65536)
            assert chunk, f"the connection closed after {answer!r}"
            answer += chunk
    head, _, body = answer.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 413 ") and "at most 16,777,216 bytes" in json.loads(body)["error"]


def test_a_wrong_method_gets_405_with_allow(service):
    status, headers, _ = post(service.url, "/mark_seen", b"", method="GET")
    assert status == 405 and headers["allow"] == "POST"
    status, headers, _ = post(service.url, "/healthz", b"{}")
    assert status == 405 and headers["allow"] == "GET"


def test_leases_need_a_store_with_leases(redis_server, tmp_path):
    with ServeProcess(["--strategy", "local"]) as server:
        status, answer = call(server.url, "/v1/claim", {"urls": ["https://a.example/"], "lease": 5})
        assert status == 400 and "set or sharded-set" in answer["error"]


# --------------------------------------------------------------------------- safe by default


def test_another_address_needs_a_token(tmp_path):
    refused = subprocess.run(
        [sys.executable, "-m", "crawldedup", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--token-file" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_the_token_is_required_and_compared(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-value\n")
    with ServeProcess(["--host", "0.0.0.0", "--token-file", str(token_file)]) as server:
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "s3cret-token-value"}):
            status, response_headers, _ = post(url, "/mark_seen", b'{"url_fp": "a"}', headers=headers)
            assert status == 401 and response_headers["www-authenticate"].startswith("Bearer")
        status, _, body = post(
            url, "/mark_seen", b'{"url_fp": "a"}', headers={"authorization": "Bearer s3cret-token-value"}
        )
        assert (status, json.loads(body)) == (200, {"first_seen": True})
        with ServiceClient(url, token="s3cret-token-value") as client:
            assert client.claim_keys(["a", "b"]) == [False, True]
        with ServiceClient(url, token="wrong") as client, pytest.raises(PermissionError):
            client.claim_keys(["a"])
        # The service strategy carries the token as the URL's password; this service has no store.
        with pytest.raises(NamespaceConflict, match="keeps no store"):
            Deduplicator("service", service_url=url.replace("http://", "http://:s3cret-token-value@"))
        with pytest.raises(ValueError, match="needs its bearer token"):
            Deduplicator("service", service_url=url)


# --------------------------------------------------------------------------- DEDUP_STRATEGY=service


def test_the_cli_uses_a_service_by_configuration_alone(service, prefix, tmp_path):
    urls = [f"https://{prefix}.example/p/{i}" for i in range(50)]
    frontier = tmp_path / "frontier.txt"
    frontier.write_text("\n".join(urls + [u.replace("https://", "HTTPS://") for u in urls]) + "\n")
    env = {
        **os.environ,
        "DEDUP_STRATEGY": "service",
        "CRAWLDEDUP_SERVICE_URL": service.url,
        "CRAWLDEDUP_NAMESPACE": "svc",
    }
    outputs = []
    for run in range(2):  # a fresh state file each time: only the service remembers
        done = subprocess.run(
            [sys.executable, "-m", "crawldedup", "filter", "--state", str(tmp_path / f"{run}.bloom"), str(frontier)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.split())
    assert outputs == [urls, []]
    with ServiceClient(service.url) as client:
        assert client.seen(urls) == [True] * len(urls), "the service's store holds what the CLI claimed"


def test_a_deduplicator_through_the_service_store_leases_and_reads(service, prefix):
    urls = [f"https://{prefix}.example/{i}" for i in range(20)]
    with (
        Deduplicator("service", service_url=service.url, namespace="svc", capacity=10_000) as first,
        Deduplicator("service", service_url=service.url, namespace="svc", capacity=10_000) as second,
    ):
        assert first.claim_many(urls[:10], lease=30) == [True] * 10
        assert second.claim_many(urls) == [False] * 10 + [True] * 10
        assert second.done(urls[:10]) == [False] * 10, "a lease belongs to its owner, through the service too"
        assert first.done(urls[:10]) == [True] * 10
        assert second.seen(urls) == [True] * 20
    with ServiceClient(service.url) as client:
        assert client.claim_many(urls) == [False] * 20


def test_the_service_store_refuses_another_namespace_or_policy(service):
    with pytest.raises(NamespaceConflict, match="serves namespace 'svc'"):
        Deduplicator("service", service_url=service.url, namespace="other")
    policy = CanonicalPolicy(keep_fragment=True)
    with pytest.raises(NamespaceConflict, match="canonical policy"):
        Deduplicator("service", service_url=service.url, namespace="svc", policy=policy)


def test_serve_policy_v1_continues_a_policy_1_crawl(redis_url):
    """``serve --policy v1`` serves a crawl begun before policy 2: its clients pass POLICY_V1,
    and a client of the default policy is refused, naming both policies and the way on."""
    with ServeProcess(
        ["--strategy", "set", "--redis-url", redis_url, "--namespace", "old", "--policy", "v1"]
    ) as server:
        with ServiceClient(server.url) as client:
            assert client.claim_many(["http://0x7f.1/a", "http://127.0.0.1/a"]) == [True, True], (
                "policy 1 keeps 0x7f.1 as written"
            )
        with pytest.raises(NamespaceConflict) as refused:
            Deduplicator("service", service_url=server.url, namespace="old")
        assert f"canonical policy 1 ({POLICY_V1.digest})" in str(refused.value)
        assert "--policy v1" in str(refused.value)


def test_the_service_store_needs_a_service_with_leases(tmp_path):
    with ServeProcess(["--strategy", "sqlite", "--sqlite", str(tmp_path / "c.sqlite")]) as server:
        with pytest.raises(ValueError, match="sqlite store, which holds no leases"):
            Deduplicator("service", service_url=server.url)


def test_the_service_store_of_an_unreachable_service_is_unavailable():
    with pytest.raises(StoreUnavailable, match="service store http://127.0.0.1:9"):
        Deduplicator("service", service_url="http://127.0.0.1:9", retry=RetryPolicy(retries=1, backoff_seconds=0.01))


# --------------------------------------------------------------------------- SIGTERM


def test_sigterm_answers_what_is_in_flight_flushes_and_exits_0(tmp_path):
    state = tmp_path / "state.bloom"
    server = ServeProcess(["--strategy", "local", "--state", str(state), "--capacity", "100000"]).start()
    keys = [f"k{i}" for i in range(50_000)]
    answers: List[Any] = []

    def claim() -> None:
        answers.append(call(server.url, "/mark_seen", {"url_fps": keys}))

    thread = threading.Thread(target=claim)
    thread.start()
    time.sleep(0.05)  # the request is on its way (if not, it is answered before the stop anyway)
    code = server.stop(signal.SIGTERM)
    thread.join(30)
    assert code == 0, server.stderr
    assert "Traceback" not in server.stderr and "stopped" in server.stderr
    status, answer = answers[0]
    # All new, but the local strategy's filter (1% at capacity) takes a few for seen.
    assert status == 200 and len(answer["first_seen"]) == len(keys) and sum(answer["first_seen"]) > 0.99 * len(keys)
    with open_filter(state) as local:  # flushed and closed: the keys are in the file
        assert local.approx_items > 45_000


# --------------------------------------------------------------------------- leases


@compiled_only
def test_a_client_killed_mid_lease_loses_no_page(redis_url, tmp_path):
    pages = [f"https://lease.example/p/{i}" for i in range(2_000)]
    with ServeProcess(["--strategy", "set", "--redis-url", redis_url, "--namespace", "leases"]) as server:
        killed = subprocess.Popen(
            [sys.executable, "-c", _LEASE_AND_HANG, server.url, json.dumps(pages)], stdout=subprocess.PIPE, text=True
        )
        assert killed.stdout is not None
        with killed.stdout:
            printed = json.loads(killed.stdout.readline())
        killed.kill()
        killed.wait()
        won_by_killed, leased_at = printed["won"], printed["leased_at"]
        assert len(won_by_killed) == len(pages)
        with ServiceClient(server.url) as client:
            answers = client.claim_many(pages)
            if time.time() < leased_at + LEASE_SECONDS:
                assert answers == [False] * len(pages), "the leases are still open"
            # Answered after the leases passed (a loaded machine), a page is won here instead of handed back.
            won_again = [page for page, won in zip(pages, answers) if won]
            deadline = time.monotonic() + 60
            handed_back: List[str] = []
            while len(handed_back) + len(won_again) < len(pages) and time.monotonic() < deadline:
                handed_back += client.expired(limit=500, lease=30)
                time.sleep(0.1)
            assert sorted(handed_back + won_again) == sorted(pages), "every lease of the killed client comes back once"
            assert client.done(handed_back) == [True] * len(handed_back)
            assert client.claim_many(pages) == [False] * len(pages)
            assert client.expired() == []


#: The lease the killed client takes: usually still open when the test claims the pages again.
LEASE_SECONDS = 4
_LEASE_AND_HANG = f"""
import json, sys, time
from crawldedup import ServiceClient
client = ServiceClient(sys.argv[1])
pages = json.loads(sys.argv[2])
leased_at = time.time()  # no lease passes before this time plus the lease
batch = client.claim_batch(pages, lease={LEASE_SECONDS})
won = [url for url, won in zip(batch.canonical, batch.won) if won]
print(json.dumps({{"won": won, "leased_at": leased_at}}), flush=True)
time.sleep(600)
"""


# --------------------------------------------------------------------------- a store outage


def test_the_service_strategy_through_lost_replies(redis_url):
    """The service applies a request and its reply is lost on the way back (a proxy cuts the
    connection): the client's retry carries the same token, so the service's store answers it
    as it was applied, for a claim, a leased claim and its done. Nothing is won twice or lost."""
    pages = [f"https://lost.example/p/{i}" for i in range(300)]
    retry = RetryPolicy(retries=2, backoff_seconds=0.01, max_backoff_seconds=0.05)
    with ServeProcess(["--strategy", "set", "--redis-url", redis_url, "--namespace", "lost"]) as server:
        proxy = LosingProxy(int(server.url.rsplit(":", 1)[1]))
        try:
            settings = {"service_url": f"http://127.0.0.1:{proxy.port}", "namespace": "lost", "retry": retry}
            with Deduplicator("service", **settings) as worker:
                proxy.lose_next_reply()
                assert worker.claim_many(pages[:200]) == [True] * 200, "the retry lost its own wins"
                proxy.lose_next_reply()
                assert worker.claim_many(pages[200:], lease=60) == [True] * 100, "the retry lost its own leases"
                proxy.lose_next_reply()
                assert worker.done(pages[200:]) == [True] * 100, "the retry was refused its own done"
                assert proxy.replies_lost == 3 and worker.stats.failed_batches == 0
            with Deduplicator("service", service_url=server.url, namespace="lost") as other:
                assert other.claim_many(pages) == [False] * len(pages), "a page was won twice"
                assert other.expired(1_000) == [], "a lease was left open"
        finally:
            proxy.close()
        assert "Traceback" not in server.stderr


@compiled_only
def test_redis_killed_and_restarted_503_then_nothing_lost(redis_server, redis_url):
    pages = [f"https://outage.example/p/{i}" for i in range(3_000)]
    with ServeProcess(["--strategy", "set", "--redis-url", redis_url, "--namespace", "outage"]) as server:
        no_retry = RetryPolicy(retries=0)
        with ServiceClient(server.url, retry=no_retry) as client:
            won = client.claim_many(pages[:1_000])
            redis_server.stop()
            status, headers, body = post(server.url, "/v1/claim", json.dumps({"urls": pages[1_000:2_000]}).encode())
            assert status == 503 and int(headers["retry-after"]) >= 1 and "unavailable" in json.loads(body)["error"]
            status, _, _ = post(server.url, "/healthz", b"", method="GET")
            assert status == 503
            with pytest.raises(StoreUnavailable):
                client.claim_many(pages[1_000:2_000])
            redis_server.start()
            won += client.claim_many(pages[1_000:])
        assert won == [True] * len(pages), "every page is won once the store is back"
        with ServiceClient(server.url) as client:
            assert client.claim_many(pages) == [False] * len(pages)
            assert client.seen(pages) == [True] * len(pages)
        assert "Traceback" not in server.stderr


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_serving_in_process_gives_the_signal_handlers_back(loop, monkeypatch):
    # The serve loop takes SIGTERM and SIGINT while it runs; afterwards the process's own
    # handlers are back (uvloop's remove_signal_handler alone leaves its own on SIGINT).
    from crawldedup.service import server

    if loop == "uvloop":
        pytest.importorskip("uvloop")
    else:
        monkeypatch.setattr(server, "new_event_loop", asyncio.new_event_loop)

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    before = signal.signal(signal.SIGTERM, mine)
    try:
        during = []

        async def main(stop: server.Stop) -> None:
            during.append(signal.getsignal(signal.SIGINT))

        server.run(main)
        assert during and during[0] is not signal.default_int_handler  # the loop's, while it ran
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)
