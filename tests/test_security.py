"""Security: file permissions, secrets in messages and logs, TLS and ACL users, and scripts that never hold data.

- A new filter file gets ``0o666`` minus the umask, like ``open(path, "w")``: never wider.
- The Redis password of a URL never appears in a ``repr``, an exception (its chain included),
  a log record, or the command's stderr.
- ``rediss://`` with redis-py's TLS options (``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``,
  ``ssl_cert_reqs``) in the URL, against a redis-server started here with ``--tls-port`` and a
  CA made here with the openssl command; ACL users (``ACL SETUSER``) as ``redis://user:pass@``.
- Claims pass data to server-side scripts only as KEYS and ARGV: URLs and fingerprints full
  of Lua syntax and quotes claim correctly, and the server's script cache does not grow.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Iterator, List, Optional
from urllib.parse import quote

import pytest
import redis
from conftest import _free_ports

from crawldedup import DEFAULT_POLICY, BloomFilter, Deduplicator, StoreUnavailable, canonicalize
from crawldedup.dedup import open_state
from crawldedup.stores import RedisKeyStore, RedisShardedSetStore, RetryPolicy
from crawldedup.stores.urls import redact_url

#: A password with characters that URLs must escape; it appears percent-encoded in URLs.
SECRET = "Sup3r:s3cret@pass/word"
ENCODED = quote(SECRET, safe="")
#: Fast failures: the tests below wait for "unavailable" many times.
RETRY = RetryPolicy(retries=1, backoff_seconds=0.01, max_backoff_seconds=0.02)
POLICY_DIGEST = "0123456789abcdef"
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="umask and file modes are POSIX")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def assert_no_secret(*texts: object) -> None:
    for text in texts:
        shown = str(text)
        assert SECRET not in shown and ENCODED not in shown, f"the password leaked: {shown[:500]}"


def full_text(exc: BaseException) -> str:
    """Everything a traceback would print: message, repr, and every chained exception."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) + repr(exc)


# ----- file permissions ---------------------------------------------------------------------------------


@pytest.fixture(params=[0o077, 0o022], ids=["umask077", "umask022"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


@posix_only
def test_new_filter_files_follow_the_umask(bloom_cls, umask, tmp_path):
    expected = 0o666 & ~umask
    with bloom_cls(1000, 0.01, tmp_path / "new.bloom") as bf:
        assert mode_of(tmp_path / "new.bloom") == expected
        bf.copy(tmp_path / "copy.bloom").close()
    assert mode_of(tmp_path / "copy.bloom") == expected
    bloom_cls(1000, 0.01, tmp_path / "new.bloom", overwrite=True).close()
    assert mode_of(tmp_path / "new.bloom") == expected
    open_state(tmp_path / "state.bloom", 1000, 0.01).close()
    assert mode_of(tmp_path / "state.bloom") == expected
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


@posix_only
def test_an_existing_file_keeps_its_mode(umask, tmp_path):
    path = tmp_path / "kept.bloom"
    BloomFilter(1000, 0.01, path).close()
    path.chmod(0o600)
    with BloomFilter.open(path, "r+") as bf:
        bf.add("x")
    assert mode_of(path) == 0o600


@posix_only
@pytest.mark.parametrize("mask", [0o077, 0o022], ids=["umask077", "umask022"])
def test_the_command_follows_the_umask(mask, tmp_path):
    child = (
        "import os, sys; os.umask(int(sys.argv[1], 8)); from crawldedup.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    command = [sys.executable, "-c", child, oct(mask)[2:]]
    run = subprocess.run(
        [*command, "filter", "--state", "s.bloom", "--capacity", "1000", "-q"],
        input=b"https://a.example/\n",
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    merged = subprocess.run(
        [*command, "merge", "s.bloom", "s.bloom", "-o", "m.bloom"], capture_output=True, cwd=tmp_path, timeout=60
    )
    assert merged.returncode == 0, merged.stderr
    for name in ("s.bloom", "m.bloom"):
        assert mode_of(tmp_path / name) == 0o666 & ~mask, name


# ----- the password never leaks (no server needed) --------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"redis://crawler:{ENCODED}@127.0.0.1:{{port}}/0",
        f"redis://:{ENCODED}@127.0.0.1:{{port}}/0",
        f"redis://crawler@127.0.0.1:{{port}}/0?password={ENCODED}",
        f"rediss://crawler:{ENCODED}@127.0.0.1:{{port}}/0?ssl_cert_reqs=none",
        f"redis+sentinel://crawler:{ENCODED}@127.0.0.1:{{port}},localhost:{{port}}/crawl/0",
        f"redis+sentinel://127.0.0.1:{{port}}/crawl/0?sentinel_password={ENCODED}",
    ],
    ids=["user-password", "password-only", "password-in-query", "tls", "sentinel", "sentinel-password"],
)
@pytest.mark.parametrize("strategy", ["set", "sharded-set", "bloom"])
def test_unreachable_store_errors_and_logs_hide_the_password(url, strategy, caplog):
    url = url.format(port=closed_port())
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreUnavailable) as raised:
        Deduplicator(strategy, redis_url=url, namespace="secret", capacity=1000, retry=RETRY)
    assert "127.0.0.1" in str(raised.value)  # the store is named...
    assert_no_secret(full_text(raised.value), raised.value.store, raised.value.reason)  # ...without its password
    assert_no_secret(*(record.getMessage() for record in caplog.records))
    assert_no_secret(redact_url(url))


def test_a_bad_redis_url_setting_hides_the_password():
    from crawldedup.config import DedupConfig

    with pytest.raises(ValueError, match="REDIS_URL") as raised:
        DedupConfig.from_env({"REDIS_URL": f"http://crawler:{ENCODED}@cache.internal:6379/0"})
    assert_no_secret(full_text(raised.value))
    with pytest.raises(ValueError, match="service name") as raised:
        DedupConfig.from_env({"REDIS_URL": f"redis+sentinel://crawler:{ENCODED}@cache.internal:26379"})
    assert_no_secret(full_text(raised.value))


@pytest.mark.parametrize(
    "args, env, code",
    [
        (["--strategy", "set", "--redis-url", f"redis://crawler:{ENCODED}@127.0.0.1:{{port}}/0"], {}, 5),
        (["--strategy", "sharded-set"], {"REDIS_URL": f"redis://crawler:{ENCODED}@127.0.0.1:{{port}}/0"}, 5),
        (["--strategy", "set"], {"REDIS_URL": f"redis://127.0.0.1:{{port}}/0?password={ENCODED}"}, 5),
        (["--strategy", "set"], {"REDIS_URL": f"tcp://crawler:{ENCODED}@127.0.0.1:{{port}}/0"}, 2),
    ],
    ids=["option", "environment", "query", "bad-scheme"],
)
def test_the_command_never_prints_the_password(args, env, code, tmp_path):
    port = str(closed_port())
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "crawldedup",
            "filter",
            "--state",
            "s.bloom",
            "--capacity",
            "1000",
            *(a.replace("{port}", port) for a in args),
        ],
        input=b"https://a.example/\n",
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, **{k: v.replace("{port}", port) for k, v in env.items()}},
    )
    assert result.returncode == code, result.stderr
    assert result.stderr.startswith(b"crawldedup: error: ")
    assert_no_secret(result.stderr.decode(), result.stdout.decode())


# ----- a server of our own: TLS on one port, plain text on another, ACL users ------------------------------


class SecureRedis:
    """redis-server with ``--tls-port`` (client certificates required) beside a plain loopback port."""

    def __init__(self, binary: str, module: Optional[str], certs: Path) -> None:
        self.binary, self.module, self.certs = binary, module, certs
        self.port, self.tls_port = _free_ports(2)  # distinct, outside the ephemeral range (conftest.py)
        self.workdir = certs / "data"
        self.workdir.mkdir()
        self.process: Optional[subprocess.Popen] = None

    def tls_options(self, client_cert: bool = True, ca: bool = True) -> str:
        """redis-py's TLS options as URL query arguments."""
        options = {"ssl_cert_reqs": "required"}
        if ca:
            options["ssl_ca_certs"] = str(self.certs / "ca.crt")
        if client_cert:
            options.update(ssl_certfile=str(self.certs / "client.crt"), ssl_keyfile=str(self.certs / "client.key"))
        return "&".join(f"{k}={quote(v, safe='/')}" for k, v in options.items())

    def start(self, timeout: float = 10.0) -> None:
        certs = self.certs
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--tls-port",
            str(self.tls_port),
            "--bind",
            "127.0.0.1",
            "--tls-cert-file",
            str(certs / "server.crt"),
            "--tls-key-file",
            str(certs / "server.key"),
            "--tls-ca-cert-file",
            str(certs / "ca.crt"),
            "--tls-auth-clients",
            "yes",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
        ]
        if self.module:
            args += ["--loadmodule", self.module]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        admin = self.admin()
        deadline = time.monotonic() + timeout
        while True:
            try:
                admin.ping()
                break
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.process.kill()
                    error = self.process.communicate(timeout=10)[1].decode(errors="replace")[-500:]
                    self.stop()
                    message = f"redis-server with --tls-port did not start (built without TLS?): {error}"
                    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                        pytest.fail(message)
                    pytest.skip(message)
                time.sleep(0.05)
        admin.close()

    def admin(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=1)

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=10)
            self.process.stderr.close()
            self.process = None


def make_certificates(directory: Path) -> None:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, signed by the CA."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make test certificates")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True, timeout=60)

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=crawldedup test CA")
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, extra in (("server", ["-extfile", "server.ext"]), ("client", [])):
        run("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN=crawldedup test {name}")
        run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            *extra,
        )


@pytest.fixture(scope="module")
def secure_redis(redis_server, tmp_path_factory) -> Iterator[SecureRedis]:
    """Module-wide TLS server; ``redis_server`` only supplies the binaries (and the ``redis`` mark)."""
    certs = tmp_path_factory.mktemp("tls")
    make_certificates(certs)
    server = SecureRedis(redis_server.binary, redis_server.module, certs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def acl_user(secure_redis) -> Iterator[str]:
    """A user ``crawler`` with the password SECRET and no admin commands; deleted afterwards."""
    admin = secure_redis.admin()
    admin.flushall()
    admin.execute_command("ACL", "SETUSER", "crawler", "reset", "on", f">{SECRET}", "~*", "+@all", "-@dangerous")
    try:
        yield "crawler"
    finally:
        admin.execute_command("ACL", "DELUSER", "crawler")
        admin.close()


def claim_twice(strategy: str, url: str, **kwargs) -> List[bool]:
    pages = [f"https://tls.example/p/{i}" for i in range(50)]
    with Deduplicator(strategy, redis_url=url, namespace="tls", capacity=1000, retry=RETRY, **kwargs) as first:
        won = first.claim_many(pages)
        assert_no_secret(repr(first), first.store.description, repr(first.store))
    with Deduplicator(strategy, redis_url=url, namespace="tls", capacity=1000, retry=RETRY) as second:
        won += second.claim_many(pages)  # another worker: every page already claimed
    return won


@pytest.mark.parametrize("strategy", ["set", "sharded-set", "bloom"])
def test_tls_with_client_certificate_and_acl_user(secure_redis, acl_user, strategy):
    if strategy == "bloom" and secure_redis.module is None:
        pytest.skip("RedisBloom (redisbloom.so) not found")
    url = f"rediss://{acl_user}:{ENCODED}@127.0.0.1:{secure_redis.tls_port}/0?{secure_redis.tls_options()}"
    assert claim_twice(strategy, url) == [True] * 50 + [False] * 50
    assert secure_redis.admin().dbsize() > 1  # the claims are on this server


def test_tls_client_given_as_a_redis_py_client(secure_redis, acl_user):
    client = redis.Redis(
        host="127.0.0.1",
        port=secure_redis.tls_port,
        username=acl_user,
        password=SECRET,
        ssl=True,
        ssl_ca_certs=str(secure_redis.certs / "ca.crt"),
        ssl_certfile=str(secure_redis.certs / "client.crt"),
        ssl_keyfile=str(secure_redis.certs / "client.key"),
    )
    store = RedisKeyStore(client=client, namespace="tls-client", policy_digest=DEFAULT_POLICY.digest, retry=RETRY)
    with store, Deduplicator(store=store, namespace="tls-client", capacity=1000) as dedup:
        fingerprints = [bytes([i]) * 16 for i in range(10)]
        assert store.claim_many(fingerprints) == [True] * 10
        assert store.claim_many(fingerprints) == [False] * 10
        assert_no_secret(repr(store), repr(dedup))


@pytest.mark.parametrize(
    "url_options, problem",
    [
        ("plain", "a plain-text client on the TLS port"),
        ("no-ca", "a server certificate from an unknown CA"),
        ("no-client-cert", "no client certificate"),
    ],
)
def test_tls_refusals_are_store_unavailable(secure_redis, acl_user, url_options, problem):
    if url_options == "plain":
        url = f"redis://{acl_user}:{ENCODED}@127.0.0.1:{secure_redis.tls_port}/0?socket_timeout=2"
    else:
        options = secure_redis.tls_options(client_cert=url_options != "no-client-cert", ca=url_options != "no-ca")
        if url_options == "no-ca":  # the system's CAs do not know ours
            options = options.replace(f"ssl_ca_certs={quote(str(secure_redis.certs / 'ca.crt'), safe='/')}&", "")
        url = f"rediss://{acl_user}:{ENCODED}@127.0.0.1:{secure_redis.tls_port}/0?{options}"
    with pytest.raises(StoreUnavailable) as raised:
        RedisKeyStore(url, namespace="refused", policy_digest=POLICY_DIGEST, retry=RETRY)
    assert_no_secret(full_text(raised.value))
    assert secure_redis.admin().dbsize() == 0, f"{problem} wrote to the server"


def test_acl_user_over_plain_text(secure_redis, acl_user):
    url = f"redis://{acl_user}:{ENCODED}@127.0.0.1:{secure_redis.port}/0"
    assert claim_twice("set", url) == [True] * 50 + [False] * 50
    user = redis.Redis.from_url(url)
    with pytest.raises(redis.exceptions.NoPermissionError):  # the ACL applies: no admin commands
        user.config_get("maxmemory")
    user.close()


def test_wrong_password_and_revoked_user(secure_redis, acl_user, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = f"redis://{acl_user}:{quote('not-' + SECRET, safe='')}@127.0.0.1:{secure_redis.port}/0"
    with pytest.raises(StoreUnavailable) as raised:
        Deduplicator("set", redis_url=wrong, namespace="acl", capacity=1000, retry=RETRY)
    assert "127.0.0.1" in str(raised.value)
    url = f"redis://{acl_user}:{ENCODED}@127.0.0.1:{secure_redis.port}/0"
    with Deduplicator("set", redis_url=url, namespace="acl", capacity=1000, retry=RETRY) as dedup:
        assert dedup.claim_many(["https://acl.example/1"]) == [True]
        admin = secure_redis.admin()
        admin.execute_command("ACL", "SETUSER", acl_user, "resetpass", ">another-password")
        admin.execute_command("CLIENT", "KILL", "USER", acl_user)
        with pytest.raises(StoreUnavailable) as revoked:
            dedup.claim_many(["https://acl.example/2"])
        assert_no_secret(full_text(revoked.value), repr(dedup))
    assert_no_secret(*(record.getMessage() for record in caplog.records))


def test_scrapy_dupefilter_logs_hide_the_password(secure_redis, acl_user, caplog):
    scrapy = pytest.importorskip("scrapy", reason="Scrapy is not installed: pip install crawldedup[scrapy]")
    from crawldedup.scrapy import DupeFilter

    caplog.set_level(logging.DEBUG)
    url = f"redis://{acl_user}:{ENCODED}@127.0.0.1:{secure_redis.port}/0"
    dupefilter = DupeFilter(
        Deduplicator("set", redis_url=url, namespace="scrapy", capacity=1000, retry=RETRY), debug=True
    )
    dupefilter.open()
    assert dupefilter.request_seen(scrapy.Request("https://shop.example/1")) is False
    assert dupefilter.request_seen(scrapy.Request("https://shop.example/1?utm_source=x")) is True
    admin = secure_redis.admin()
    admin.execute_command("ACL", "SETUSER", acl_user, "resetpass", ">another-password")
    admin.execute_command("CLIENT", "KILL", "USER", acl_user)
    assert dupefilter.request_seen(scrapy.Request("https://shop.example/2")) is False  # let through, logged
    dupefilter.close("finished")
    messages = [record.getMessage() for record in caplog.records]
    assert any("goes through unclaimed" in m for m in messages), messages
    assert any("127.0.0.1" in m for m in messages), messages
    assert_no_secret(repr(dupefilter), *messages)


# ----- untrusted data never becomes script code ---------------------------------------------------------

#: URLs a hostile page could link to, made of Lua and Redis syntax, quotes and brackets.
HOSTILE_URLS = [
    "http://example.com/']]);redis.call('FLUSHALL');--",
    'http://example.com/"..redis.call("FLUSHALL").."?q=\'end\' --[[ ]]',
    "http://example.com/x?k=]]..redis.call('SET','pwned','1')..[[&v=\\\\\"",
    "http://example.com/%27%29%3Bredis.call%28%27FLUSHALL%27%29%3B--",
    "http://example.com/\u2019)); os.exit() --?a=${jndi:ldap://x}",
]
#: Fingerprints are raw bytes: 16 of them can be Lua syntax too.
HOSTILE_FINGERPRINTS = [b"']]);redis.call(", b'"));FLUSHALL --"', b"\x00\r\n*1\r\n$8\r\nFLUSH", b"return 1 end --x"]


def cached_scripts(client: redis.Redis) -> int:
    return int(client.info("memory")["number_of_cached_scripts"])


@pytest.mark.parametrize("strategy", ["set", "sharded-set", "bloom"])
def test_hostile_urls_are_data_not_code(redis_url, redis_server, strategy):
    if strategy == "bloom" and not redis_server.has_bloom:
        pytest.skip("RedisBloom (redisbloom.so) not found")
    admin = redis_server.client()
    with Deduplicator(strategy, redis_url=redis_url, namespace="lua", capacity=1000, retry=RETRY) as dedup:
        assert dedup.claim_many(["https://benign.example/1"]) == [True]
        assert dedup.store.contains_many([bytes(16)]) == [False]  # the scripts are loaded by now
        scripts = cached_scripts(admin)
        keys = sum(1 for k in admin.scan_iter() if b":receipt:" not in k)
        canonical = [canonicalize(u) for u in HOSTILE_URLS]
        assert len(set(canonical)) == len(HOSTILE_URLS)
        assert dedup.claim_many(HOSTILE_URLS) == [True] * len(HOSTILE_URLS)
        assert dedup.claim_many(HOSTILE_URLS) == [False] * len(HOSTILE_URLS)
        store = dedup.store
        assert store.claim_many(HOSTILE_FINGERPRINTS) == [True] * len(HOSTILE_FINGERPRINTS)
        assert store.claim_many(HOSTILE_FINGERPRINTS) == [False] * len(HOSTILE_FINGERPRINTS)
        assert store.contains_many(HOSTILE_FINGERPRINTS) == [True] * len(HOSTILE_FINGERPRINTS)
        assert dedup.claim_many(["https://benign.example/1"]) == [False]  # nothing was flushed
        assert cached_scripts(admin) == scripts, "a claim made a new script"
        assert admin.get("pwned") is None
        if strategy == "set":  # one key per claim: exactly the new ones were written (and receipts)
            claim_keys = [k for k in admin.scan_iter() if b":receipt:" not in k]
            assert len(claim_keys) == keys + len(HOSTILE_URLS) + len(HOSTILE_FINGERPRINTS)
    admin.close()


@pytest.mark.parametrize(
    "store_cls, extra",
    [
        (RedisKeyStore, {}),
        (RedisShardedSetStore, {"capacity": 1000}),
    ],
)
def test_namespaces_cannot_carry_syntax(redis_url, store_cls, extra):
    for namespace in ["a'}; redis.call('FLUSHALL') --", "x{y}", "sp ace", "new\nline", ""]:
        with pytest.raises(ValueError, match="namespace must be"):
            store_cls(redis_url, namespace=namespace, policy_digest=POLICY_DIGEST, **extra)
    with pytest.raises(ValueError, match="policy_digest"):
        store_cls(redis_url, namespace="ok", policy_digest="')) --", **extra)
