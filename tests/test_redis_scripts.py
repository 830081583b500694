"""The Redis stores name their scripts by digest (``EVALSHA``) and send a script's text only to a
server that does not hold it (``NOSCRIPT``: restarted, failed over, ``SCRIPT FLUSH``): each
command runs once, none is lost, and the claims answer as before."""

from __future__ import annotations

import asyncio
import random
from typing import Any, Dict, List, Set

import pytest
import redis
from redis.exceptions import ResponseError

from crawldedup.stores._redis import Replicated, connect
from crawldedup.stores.aio import AsyncClaimStore
from crawldedup.stores.factory import open_store
from crawldedup.stores.redis_scripts import by_sha, learn_held, script_sha
from crawldedup.windows import Window

pytestmark = pytest.mark.redis

#: Two scripts with an effect that counts how often each ran.
COUNT_A = "return redis.call('INCR', KEYS[1])"
COUNT_B = "return redis.call('INCRBY', KEYS[1], 1000)"


def _store(redis_url: str, strategy: str, namespace: str, asynchronous: bool = False, **extra: Any) -> Any:
    return open_store(
        strategy,
        namespace=namespace,
        policy_digest="0123456789abcdef",
        redis_url=redis_url,
        capacity=100_000,
        error_rate=0.01,
        asynchronous=asynchronous,
        **extra,
    )


def _fingerprints(count: int, seed: int) -> List[bytes]:
    """``count`` fingerprints spread over every group (a group is a script call of a batch)."""
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(count)]


def _calls(client: redis.Redis) -> Dict[str, int]:
    """Calls of EVAL and EVALSHA since the last CONFIG RESETSTAT (failed ones included)."""
    stats = client.info("commandstats")
    return {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("eval", "evalsha")}


def test_the_digest_is_the_one_the_server_names() -> None:
    client_digest = script_sha(COUNT_A)
    assert client_digest == script_sha(COUNT_A.encode()) and len(client_digest) == 40
    commands = [("EVAL", COUNT_A, 1, "k"), ("EVAL", COUNT_B, 1, "k"), ("GET", "k")]
    assert by_sha(commands, set()) == commands, "a script the server has not answered goes by text"
    assert by_sha(commands, {client_digest}) == [("EVALSHA", client_digest, 1, "k"), *commands[1:]]
    held: Set[str] = set()
    learn_held(held, commands, [1, ResponseError("NOPERM"), b"1"])
    assert held == {client_digest}, "a script refused is not held"


@pytest.mark.parametrize(
    "strategy, window",
    [("set", None), ("set", Window(3_600, 4)), ("sharded-set", None), ("sharded-set", Window(3_600, 4))],
    ids=["set", "set-windowed", "sharded-set", "ticks"],
)
def test_scripts_go_by_digest_once_the_server_holds_them(redis_url: str, strategy: str, window: Any) -> None:
    admin = connect(redis_url)
    store = _store(redis_url, strategy, f"digest-{strategy}-{window is not None}", window=window)
    with store:
        store.claim_many(_fingerprints(1, 1))  # opened, its scripts held
        admin.config_resetstat()
        batches = [_fingerprints(200, b) for b in range(2, 7)]
        for batch in batches:
            assert store.claim_many(batch) == [True] * 200
        calls = _calls(admin)
        assert calls["eval"] == 0 and calls["evalsha"] >= len(batches), calls
        admin.script_flush()
        admin.config_resetstat()
        fresh = _fingerprints(200, 9)
        assert store.claim_many(fresh + batches[0]) == [True] * 200 + [False] * 200
        calls = _calls(admin)
        # Each script call of the batch once by digest (NOSCRIPT), then once by text.
        assert calls["eval"] >= 1 and calls["evalsha"] >= calls["eval"], calls
        admin.config_resetstat()
        assert store.claim_many(batches[1]) == [False] * 200
        assert _calls(admin)["eval"] == 0
    admin.close()


def _flushed_between_batches(redis_url: str, strategy: str, asynchronous: bool) -> List[List[bool]]:
    """Answers of three batches of one worker and one of another, the scripts flushed before each."""
    admin = connect(redis_url)
    urls = _fingerprints(3_000, 30)
    batches = [urls[:1_000], urls[500:2_000], urls[1_500:3_000]]

    async def run_async() -> List[List[bool]]:
        async with AsyncClaimStore(_store(redis_url, strategy, f"flushed-a-{strategy}", True)) as store:
            answers = []
            for batch in batches:
                admin.script_flush()
                answers.append(await store.claim_many(batch))
        async with AsyncClaimStore(_store(redis_url, strategy, f"flushed-a-{strategy}", True)) as other:
            admin.script_flush()
            answers.append(await other.claim_many(urls))
        return answers

    try:
        if asynchronous:
            return asyncio.run(run_async())
        answers = []
        with _store(redis_url, strategy, f"flushed-{strategy}") as store:
            for batch in batches:
                admin.script_flush()
                answers.append(store.claim_many(batch))
        with _store(redis_url, strategy, f"flushed-{strategy}") as other:
            admin.script_flush()
            answers.append(other.claim_many(urls))
        return answers
    finally:
        admin.close()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
def test_a_flushed_script_cache_loses_no_page_and_wins_none_twice(
    redis_url: str, strategy: str, asynchronous: bool
) -> None:
    first, second, third, other = _flushed_between_batches(redis_url, strategy, asynchronous)
    assert first == [True] * 1_000
    assert second == [False] * 500 + [True] * 1_000
    assert third == [False] * 500 + [True] * 1_000
    assert other == [False] * 3_000, f"{sum(other)} pages won twice"


def _counted(client: redis.Redis, *keys: str) -> List[int]:
    return [int(client.get(key) or 0) for key in keys]


def _forget_b(admin: redis.Redis, scratch: str) -> None:
    """The server holds A's script, not B's."""
    admin.script_flush()
    admin.eval(COUNT_A, 1, scratch)


def test_only_the_commands_without_their_script_are_sent_again(redis_url: str) -> None:
    """The store sent both scripts before; the server forgot B's: B's command is sent again with
    its text, A's are not (each ran once), for a pipeline and a replicated one, and an error
    reply is still raised."""
    admin = connect(redis_url)
    store = _store(redis_url, "set", "again")
    with store:
        assert store._send([("EVAL", COUNT_A, 1, "again:scratch"), ("EVAL", COUNT_B, 1, "again:scratch")])
        for request_of in (list, lambda commands: Replicated(commands, 0, 100)):
            admin.delete("again:a", "again:b")
            _forget_b(admin, "again:scratch")
            admin.config_resetstat()
            commands = [
                ("EVAL", COUNT_A, 1, "again:a"),
                ("EVAL", COUNT_B, 1, "again:b"),
                ("EVAL", COUNT_A, 1, "again:a"),
            ]
            reply = store._send(request_of(commands))
            replies = reply[0] if isinstance(reply, tuple) else reply
            assert replies == [1, 1000, 2] and _counted(admin, "again:a", "again:b") == [2, 1000]
            assert _calls(admin) == {"eval": 1, "evalsha": 3}
            if isinstance(reply, tuple):
                assert reply[1] == [0, 0], "each pipeline's WAIT counted"
        admin.script_flush()
        failing = [("EVAL", COUNT_A, 1, "again:a"), ("EVAL", "return redis.error_reply('no way')", 0)]
        with pytest.raises(ResponseError, match="no way"):
            store._send(failing)
        assert _counted(admin, "again:a") == [3], "the commands before the error ran once"
    admin.close()


def test_the_async_channel_sends_again_only_the_commands_without_their_script(redis_url: str) -> None:
    admin = connect(redis_url)
    commands = [("EVAL", COUNT_B, 1, "again-async:b"), ("EVAL", COUNT_A, 1, "again-async:a")]

    async def run() -> Any:
        store = _store(redis_url, "set", "again-async", True)
        async with AsyncClaimStore(store):
            await store._asend(
                [("EVAL", COUNT_A, 1, "again-async:scratch"), ("EVAL", COUNT_B, 1, "again-async:scratch")]
            )
            _forget_b(admin, "again-async:scratch")
            plain = await store._asend(commands)
            _forget_b(admin, "again-async:scratch")
            return plain, await store._asend(Replicated(commands, 0, 100))

    admin.delete("again-async:a", "again-async:b")
    plain, replicated = asyncio.run(run())
    assert plain == [1000, 1] and replicated == ([2000, 2], [0, 0])
    assert _counted(admin, "again-async:a", "again-async:b") == [2, 2000]
    admin.close()


def test_a_cluster_node_without_the_scripts_gets_their_text(redis_cluster: Any) -> None:
    """One node of three forgot the scripts: its groups' calls are sent again, the others' not;
    the claims of a worker and of another answer as without the flush."""
    redis_cluster.flush()
    nodes = [redis.Redis(port=port) for port in redis_cluster.ports]
    urls = _fingerprints(2_000, 20)
    with _store(redis_cluster.url, "sharded-set", "cluster-scripts") as store:
        assert store.claim_many(urls[:1_000]) == [True] * 1_000
        nodes[1].script_flush()
        for node in nodes:
            node.config_resetstat()
        assert store.claim_many(urls) == [False] * 1_000 + [True] * 1_000
        evals = [_calls(node)["eval"] for node in nodes]
        assert evals[1] >= 1 and evals[0] == evals[2] == 0, evals
    with _store(redis_cluster.url, "sharded-set", "cluster-scripts") as other:
        nodes[2].script_flush()
        assert other.claim_many(urls) == [False] * 2_000
    for node in nodes:
        node.close()
