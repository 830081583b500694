"""``crawldedup serve`` under attack: each attack against a real server on a real Redis, bounded in time and count.

For each: the server's peak resident memory stays within :data:`RSS_BUDGET_MIB` of the idle
server's (``VmHWM`` of /proc, read after the attack), a normal client is answered while the
attack runs, and slow or idle connections are closed by the configured timeouts (small ones
here: closure is awaited by polling with a generous bound, never timed). Then the busy store
(1,000 concurrent keep-alive clients, no 5xx), leases that only their client settles (no page
won twice), and one error format.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import time
from typing import Any, AsyncIterator, Coroutine, Dict, Iterable, Iterator, List, Optional, Tuple

import pytest
from conftest import ServeProcess

from crawldedup import DEFAULT_POLICY, Deduplicator, ServiceClient

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the server's RSS from /proc")

#: Most the server's peak RSS may grow over the idle server's under any attack.
RSS_BUDGET_MIB = 200
#: The timeouts the servers here are given (seconds): small, so that the attacks end soon.
READ_TIMEOUT = 2
KEEP_ALIVE = 2
#: Longest any wait below polls before it fails (closure is expected within the timeouts above).
BOUND = 60.0


def memory(pid: int) -> Tuple[float, float]:
    """Resident and peak resident memory of ``pid``, in MiB."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status.read().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def address(server: ServeProcess) -> Tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def raw(server: ServeProcess, data: bytes, timeout: float = 30) -> Tuple[int, Dict[str, str], Any]:
    """Send ``data`` on a new connection; the status, headers and JSON body of the answer."""
    with socket.create_connection(address(server), timeout=timeout) as sock:
        sock.sendall(data)
        return read_response(sock)


def read_response(sock: socket.socket) -> Tuple[int, Dict[str, str], Any]:
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    json_body = headers.get("content-type") == "application/json"
    return int(lines[0].split()[1]), headers, json.loads(body) if json_body else body


def normal_claim(server: ServeProcess, prefix: str, token: bytes = b"") -> None:
    """A normal client is answered: a claim of new pages, all won."""
    urls = [f"https://{prefix}.example/{i}" for i in range(20)]
    body = json.dumps({"urls": urls}).encode()
    authorization = b"Authorization: Bearer %s\r\n" % token if token else b""
    status, headers, answer = raw(
        server,
        b"POST /v1/claim HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s" % (authorization, len(body), body),
    )
    assert (status, answer["won"]) == (200, [True] * 20), answer


def wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, f"not within {BOUND:g} s: {what}"
        time.sleep(0.05)


@pytest.fixture
def serve(redis_url) -> Iterator[Any]:
    """A fresh server per attack (its peak RSS is its own), idle RSS measured after a first claim."""
    started: List[ServeProcess] = []

    def start(*extra: str, descriptors: Optional[int] = None) -> ServeProcess:
        server = ServeProcess(
            [
                "--strategy",
                "set",
                "--redis-url",
                redis_url,
                "--namespace",
                "attacks",
                "--read-timeout",
                str(READ_TIMEOUT),
                "--keep-alive",
                str(KEEP_ALIVE),
                *extra,
            ],
            descriptors=descriptors,
        ).start()
        started.append(server)
        token = b"t0ken-of-the-service" if "--token-file" in extra else b""
        normal_claim(server, f"warm-{time.monotonic_ns()}", token)
        assert server.process is not None
        server.idle_rss = memory(server.process.pid)[0]  # type: ignore[attr-defined]
        return server

    yield start
    for server in started:
        server.stop()
        assert "Traceback" not in server.stderr, server.stderr


def assert_memory_bounded(server: ServeProcess) -> float:
    """The peak RSS grew at most :data:`RSS_BUDGET_MIB` over the idle server's; the growth, in MiB."""
    assert server.process is not None
    _, peak = memory(server.process.pid)
    grown = peak - server.idle_rss  # type: ignore[attr-defined]
    assert grown <= RSS_BUDGET_MIB, f"peak RSS {peak:.0f} MiB, {grown:.0f} MiB over the idle server"
    print(f"peak RSS {peak:.0f} MiB, +{grown:.0f} MiB over the idle server's {server.idle_rss:.0f}")  # type: ignore[attr-defined]
    return grown


# --------------------------------------------------------------------------- what one connection sends


@pytest.mark.parametrize("token", [False, True], ids=["open", "token"])
def test_a_gibibyte_of_headers_is_refused_at_the_limit(serve, token, tmp_path):
    extra: List[str] = []
    if token:
        (tmp_path / "token").write_text("t0ken-of-the-service\n")
        extra = ["--token-file", str(tmp_path / "token")]
    server = serve(*extra)
    sent = 0
    with socket.create_connection(address(server), timeout=30) as sock:
        sock.sendall(b"POST /v1/claim HTTP/1.1\r\nHost: x\r\n")
        line = b"X-Filler: " + b"a" * 4_000 + b"\r\n"
        try:
            while sent < 1 << 30:  # 1 GiB at most: the server refuses long before
                sock.sendall(line)
                sent += len(line)
                if sent == 2 * len(line):  # mid-attack
                    normal_claim(server, f"headers-{token}", b"t0ken-of-the-service" if token else b"")
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, headers, body = read_response(sock)
    assert (status, headers["content-type"]) == (431, "application/json") and "at most 16,384 bytes" in body["error"]
    assert sent < 4 << 20, f"{sent:,} bytes of headers were read"
    assert_memory_bounded(server)


def test_too_many_headers_and_a_long_target(serve):
    server = serve()
    status, _, body = raw(server, b"GET /healthz HTTP/1.1\r\n" + b"A: b\r\n" * 1_000 + b"\r\n")
    assert status == 431 and "at most 100 headers" in body["error"]
    status, _, body = raw(server, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 414 and "at most 8,192 bytes" in body["error"]
    assert_memory_bounded(server)


def test_a_16_mib_body_of_empty_objects_is_refused_before_it_is_parsed(serve):
    server = serve()
    items = b"{}," * ((16 << 20) // 3 - 10)
    body = b'{"url_fps": [' + items[:-1] + b"]}"
    status, _, answer = raw(
        server, b"POST /is_seen HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    assert status == 413 and "JSON values" in answer["error"]
    grown = assert_memory_bounded(server)
    assert grown < 100, f"{grown:.0f} MiB for a 16 MiB body"


def test_parser_errors_are_json(serve):
    server = serve()
    for request in (
        b"NOT HTTP AT ALL\r\n\r\n",
        b"POST /v1/claim HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
    ):
        status, headers, body = raw(server, request)
        assert status == 400 and headers["content-type"] == "application/json" and body["error"], request
    normal_claim(server, "parser")


# --------------------------------------------------------------------------- many connections


Stream = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


@contextlib.asynccontextmanager
async def connections(server: ServeProcess, count: int) -> AsyncIterator[List[Stream]]:
    """``count`` connections to ``server``, every one closed on the way out, also when the attack
    failed (a socket left open would be blamed on a later test)."""
    host, port = address(server)
    results = await asyncio.gather(*(asyncio.open_connection(host, port) for _ in range(count)), return_exceptions=True)
    opened = [result for result in results if not isinstance(result, BaseException)]
    try:
        for result in results:
            if isinstance(result, BaseException):
                raise result
        yield opened
    finally:
        for _, writer in opened:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for _, writer in opened), return_exceptions=True)


@contextlib.asynccontextmanager
async def running(coroutines: Iterable[Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
    """The ``coroutines`` as tasks, cancelled and awaited on the way out."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


#: What :func:`closed` gives for a connection the server reset (its last bytes may be lost then).
RESET = b"reset"


async def closed(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before it closed the connection (polled with a generous bound)."""
    try:
        return await asyncio.wait_for(reader.read(), BOUND)
    except ConnectionError:  # the client was still sending when the server closed: a reset
        return RESET  # or a broken pipe, as the kernel's timing has it


def test_slowloris_and_idle_connections_are_closed_by_the_timeouts(serve):
    """200 connections sending a header byte at a time and 300 sending nothing: each is closed
    (408 for a request begun) by the read timeout, while a normal client is answered."""
    server = serve()

    async def drip(writer: asyncio.StreamWriter) -> None:
        try:
            while not writer.is_closing():
                writer.write(b"X")
                await writer.drain()
                await asyncio.sleep(0.2)
        except (ConnectionError, OSError):
            pass

    async def attack() -> Tuple[List[bytes], List[bytes]]:
        async with connections(server, 200) as slow, connections(server, 300) as idle:
            for _, writer in slow:
                writer.write(b"POST /v1/claim HTTP/1.1\r\nHost: x\r\n")
            async with running(drip(writer) for _, writer in slow):
                await asyncio.get_running_loop().run_in_executor(None, normal_claim, server, "slowloris")
                slow_ends = await asyncio.gather(*(closed(reader) for reader, _ in slow))
                idle_ends = await asyncio.gather(*(closed(reader) for reader, _ in idle))
        return slow_ends, idle_ends

    slow_ends, idle_ends = asyncio.run(attack())
    assert all(end.startswith(b"HTTP/1.1 408 ") or end == RESET for end in slow_ends), {end[:40] for end in slow_ends}
    assert idle_ends == [b""] * 300, "an idle connection is closed without an answer"
    assert_memory_bounded(server)


def test_idle_kept_alive_connections_are_closed(serve):
    server = serve()
    with socket.create_connection(address(server), timeout=BOUND) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(sock)[0] == 200
        assert sock.recv(1) == b"", "the kept-alive connection is closed after --keep-alive"


def test_unfinished_bodies_of_40_connections_wait_for_the_budget(serve):
    """40 connections each send 15 MiB of a 16 MiB body and stop: the bytes held across them stay
    within --max-buffered-bytes (the rest waits in the kernel), each is closed by the read timeout."""
    server = serve()

    head = b"POST /v1/claim HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (16 << 20)
    chunk = b" " * (1 << 20)

    async def send(writer: asyncio.StreamWriter) -> None:
        writer.write(head)
        try:
            for _ in range(15):
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), 5)  # a paused connection takes no more
        except (ConnectionError, OSError, asyncio.TimeoutError):
            pass

    async def attack() -> List[bytes]:
        async with connections(server, 40) as bodies, running(send(writer) for _, writer in bodies):
            await asyncio.sleep(0.5)
            await asyncio.get_running_loop().run_in_executor(None, normal_claim, server, "bodies")
            return await asyncio.gather(*(closed(reader) for reader, _ in bodies))

    ends = asyncio.run(attack())
    assert all(end in (b"", RESET) or end.startswith(b"HTTP/1.1 408 ") for end in ends)
    assert_memory_bounded(server)


def test_a_burst_of_300_connections_waits_in_the_backlog_of_a_stopped_server(serve):
    """The server listens with its backlog of 2,048, not the event loop's own 100: while it is
    stopped (SIGSTOP), the kernel completes 300 handshakes and holds them; once it goes on, each is
    answered."""
    server = serve("--read-timeout", str(BOUND))  # the requests wait for the accept, not the timer
    assert server.process is not None
    sockets: List[socket.socket] = []
    try:
        server.process.send_signal(signal.SIGSTOP)
        try:
            for _ in range(300):
                # Past the backlog the kernel drops the handshake: the connect would wait for ever.
                sockets.append(socket.create_connection(address(server), timeout=BOUND))
        except socket.timeout:
            pytest.fail(f"connection {len(sockets) + 1} found no room in the backlog")
        finally:
            server.process.send_signal(signal.SIGCONT)
        for sock in sockets:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert [read_response(sock)[0] for sock in sockets] == [200] * 300
    finally:
        for sock in sockets:
            sock.close()


def test_past_max_connections_503_with_retry_after(serve):
    server = serve("--max-connections", "50")

    async def attack() -> Tuple[int, Dict[str, str], Any]:
        async with connections(server, 50) as held:
            await asyncio.sleep(0.2)
            answer = await asyncio.get_running_loop().run_in_executor(
                None, raw, server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            await asyncio.gather(*(closed(reader) for reader, _ in held))  # the read timeout frees them
        return answer

    status, headers, body = asyncio.run(attack())
    assert status == 503 and int(headers["retry-after"]) >= 1 and "50 connections" in body["error"]
    normal_claim(server, "after-the-flood")


def test_256_descriptors_and_300_idle_connections_lock_no_client_out(serve):
    """Under ``ulimit -n 256`` the server takes fewer connections (it says so) and answers the rest
    503 with Retry-After: a client is answered throughout, and served once the idle ones are closed."""
    server = serve(descriptors=256)
    assert "--max-connections lowered to" in server.stderr

    async def attack() -> List[int]:
        async with connections(server, 300) as flood:
            # Each probe is answered at once; the first ones may come before the server has accepted
            # the whole flood from its backlog, so the probes go on until one meets the limit.
            statuses: List[int] = []
            deadline = time.monotonic() + BOUND
            while 503 not in statuses and time.monotonic() < deadline:
                answer = await asyncio.get_running_loop().run_in_executor(
                    None, raw, server, b"GET /healthz HTTP/1.1\r\n\r\n"
                )
                statuses.append(answer[0])
                if answer[0] == 503:
                    assert int(answer[1]["retry-after"]) >= 1
                else:
                    await asyncio.sleep(0.05)
            await asyncio.gather(*(closed(reader) for reader, _ in flood))
        return statuses

    statuses = asyncio.run(attack())
    assert statuses[-1] == 503 and set(statuses) <= {200, 503}, statuses
    normal_claim(server, "descriptors")


# --------------------------------------------------------------------------- a busy store


def test_1000_concurrent_keep_alive_clients_get_no_5xx(serve):
    """More clients than the store's connections (100): they wait their turn, none is told the store failed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    # A turn is waited for (the default is the documented 5 s); and the timeouts are long here, so
    # that a client the loaded test process answers late is not closed by them.
    server = serve("--store-wait", "60", "--read-timeout", str(BOUND), "--keep-alive", str(BOUND))

    async def client(i: int) -> List[int]:
        async with connections(server, 1) as [(reader, writer)]:
            statuses = []
            for round_ in range(3):
                body = json.dumps({"urls": [f"https://c{i}.example/{round_}/{k}" for k in range(10)]}).encode()
                writer.write(b"POST /v1/claim HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                statuses.append(int(head.split()[1]))
        return statuses

    async def clients() -> List[int]:
        return [status for statuses in await asyncio.gather(*(client(i) for i in range(1_000))) for status in statuses]

    statuses = asyncio.run(clients())
    assert statuses == [200] * 3_000, {status: statuses.count(status) for status in set(statuses)}
    assert_memory_bounded(server)


# --------------------------------------------------------------------------- leases belong to their client


def test_a_client_cannot_settle_another_clients_leases(serve, redis_url):
    server = serve()
    pages = [f"https://leased.example/p/{i}" for i in range(100)]
    with ServiceClient(server.url) as owner, ServiceClient(server.url) as intruder, ServiceClient(server.url) as third:
        assert owner.claim_many(pages, lease=60) == [True] * 100
        assert intruder.release(pages) == [False] * 100
        assert intruder.done(pages) == [False] * 100
        assert intruder.renew(pages, 1) == [False] * 100
        assert third.claim_many(pages) == [False] * 100, "a page was won twice"
        assert owner.renew(pages, 60) == [True] * 100 and owner.done(pages) == [True] * 100
    status, headers, body = raw(
        server,
        b"POST /v1/release HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
        % (len(json.dumps({"urls": pages[:3]})), json.dumps({"urls": pages[:3]}).encode()),
    )
    assert status == 400 and "lease_token" in body["error"]
    # Through the store calls: another client's Deduplicator cannot settle them either.
    more = [f"https://leased.example/q/{i}" for i in range(100)]
    with (
        Deduplicator("service", service_url=server.url, namespace="attacks", worker_id="w1") as first,
        Deduplicator("service", service_url=server.url, namespace="attacks", worker_id="w1") as same_id,
    ):
        assert first.claim_many(more, lease=60) == [True] * 100
        assert same_id.release(more) == [False] * 100, "a worker id alone does not own a lease"
        assert same_id.claim_many(more) == [False] * 100
        assert first.done(more) == [True] * 100
    with socket.create_connection(address(server), timeout=30) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        text = b""
        while b"crawldedup_http_lease_conflicts_total" not in text or not text.endswith(b"\n"):
            chunk = sock.recv(65536)
            assert chunk, "no lease conflicts counted"
            text += chunk
    conflicts = [
        line for line in text.decode().splitlines() if line.startswith("crawldedup_http_lease_conflicts_total")
    ]
    assert sum(float(line.split()[-1]) for line in conflicts) >= 400, conflicts


def test_leases_survive_a_restart_of_the_service(serve):
    """A lease is its client's lease token's, on any server of the store and after a restart."""
    server = serve()
    pages = [f"https://restart.example/p/{i}" for i in range(50)]
    with ServiceClient(server.url) as client:
        assert client.claim_many(pages, lease=60) == [True] * 50
        token = client.lease_token
    server.stop()
    server.start()  # on another port
    with ServiceClient(server.url) as stranger:
        assert stranger.done(pages) == [False] * 50
    with ServiceClient(server.url, lease_token=token) as client:
        assert client.done(pages) == [True] * 50


def test_store_calls_check_the_namespace_policy_and_batch(serve):
    server = serve()
    opened = {"namespace": "attacks", "policy": DEFAULT_POLICY.digest}
    other = json.dumps({**opened, "namespace": "other", "claims": "", "reads": ""}).encode()
    status, _, body = raw(
        server, b"POST /v1/store/claim HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(other), other)
    )
    assert status == 409 and "serves namespace 'attacks'" in body["error"]
    import base64

    big = json.dumps({**opened, "claims": base64.b64encode(bytes(16 * 100_001)).decode(), "reads": ""}).encode()
    status, _, body = raw(
        server, b"POST /v1/store/claim HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big)
    )
    assert status == 413 and "at most 100,000 fingerprints" in body["error"]


def test_bearer_in_any_case_and_an_open_healthz(serve, tmp_path):
    (tmp_path / "token").write_text("t0ken-of-the-service\n")
    server = serve("--token-file", str(tmp_path / "token"), "--open-healthz")
    for scheme in (b"Bearer", b"bearer", b"BEARER"):
        assert (
            raw(server, b"GET /metrics HTTP/1.1\r\nAuthorization: %s t0ken-of-the-service\r\n\r\n" % scheme)[0] == 200
        )
    assert raw(server, b"GET /metrics HTTP/1.1\r\n\r\n")[0] == 401
    status, _, body = raw(server, b"GET /healthz HTTP/1.1\r\n\r\n")
    assert (status, body) == (200, {"status": "ok"}), "a probe sees the status alone"
    status, _, body = raw(server, b"GET /healthz HTTP/1.1\r\nAuthorization: Bearer t0ken-of-the-service\r\n\r\n")
    assert status == 200 and body["namespace"] == "attacks"
