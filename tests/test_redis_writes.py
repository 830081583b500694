"""How the Redis stores write a batch: each pipeline in one write, and the run lengths of the
groups' claims found for all groups at once."""

from __future__ import annotations

import random
import socket
from typing import Any, List, Tuple

import numpy as np
import pytest

from crawldedup.stores._redis import connect, run_lengths
from crawldedup.stores.factory import open_store


def _one_segment(runs: np.ndarray, start: int, count: int) -> bytes:
    """The lengths of the runs of ``runs[start : start + count]``, one segment at a time."""
    lengths: List[int] = []
    for position in range(start, start + count):
        if position == start or runs[position] != runs[position - 1]:
            lengths.append(0)
        lengths[-1] += 1
    return np.array(lengths, dtype="<u4").tobytes()


def test_run_lengths_are_each_segments_own() -> None:
    rng = random.Random(35)
    for _ in range(500):
        size = rng.randrange(0, 40)
        runs = np.array(sorted(rng.randrange(0, 6) for _ in range(size)), dtype=np.uint64)
        if rng.random() < 0.5:
            runs = np.array([rng.randrange(0, 3) for _ in range(size)], dtype=np.uint64)
        cuts = sorted(rng.randrange(0, size + 1) for _ in range(2 * rng.randrange(0, 6)))
        segments: List[Tuple[int, int]] = [(a, b - a) for a, b in zip(cuts[::2], cuts[1::2])]
        assert run_lengths(runs, segments) == [_one_segment(runs, a, n) for a, n in segments]
        assert run_lengths(None, segments) == [b""] * len(segments)


def test_a_run_across_two_segments_is_two_runs() -> None:
    runs = np.array([7, 7, 7, 7, 8, 8], dtype=np.uint64)
    assert run_lengths(runs, [(0, 2), (2, 0), (2, 3), (5, 1)]) == [
        np.array([2], dtype="<u4").tobytes(),
        b"",
        np.array([2, 1], dtype="<u4").tobytes(),
        np.array([1], dtype="<u4").tobytes(),
    ]


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """The sizes of the writes to sockets from now on."""
    writes: List[int] = []
    sendall = socket.socket.sendall

    def counted(sock: socket.socket, data: Any, *args: Any) -> None:
        writes.append(len(data))
        sendall(sock, data, *args)

    monkeypatch.setattr(socket.socket, "sendall", counted)
    return writes


def test_a_pipeline_of_long_commands_is_one_write(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client = connect(redis_url)
    try:
        client.ping()
        writes = _count_writes(monkeypatch)
        pipe = client.pipeline(transaction=False)
        for i in range(5):
            pipe.set(f"long:{i}", b"x" * 10_000)
        pipe.get("long:3")
        replies = pipe.execute()
        assert replies == [True] * 5 + [b"x" * 10_000]
        assert len(writes) == 1 and writes[0] > 50_000
    finally:
        client.close()


def test_a_claim_call_of_every_group_is_one_write(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(
        "set",
        namespace="one-write",
        policy_digest="0123456789abcdef",
        redis_url=redis_url,
        capacity=1_000,
        error_rate=0.01,
    )
    with store:
        fingerprints = [bytes([i]) * 16 for i in range(200)]  # spread over the groups: a script call each
        store.claim_many(fingerprints[:1])
        writes = _count_writes(monkeypatch)
        assert store.claim_many(fingerprints) == [False] + [True] * 199
        assert len(writes) == 1
        assert store.claim_many(fingerprints) == [False] * 200


def test_a_cluster_nodes_pipeline_is_one_write(redis_cluster_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client = connect(redis_cluster_url)
    try:
        client.ping()
        writes = _count_writes(monkeypatch)
        pipe = client.pipeline(transaction=False)
        for i in range(5):
            pipe.set(f"{{one-node}}:long:{i}", b"x" * 10_000)  # one hash tag: one node
        pipe.get("{one-node}:long:3")
        assert pipe.execute() == [True] * 5 + [b"x" * 10_000]
        assert len([size for size in writes if size > 1_000]) == 1
    finally:
        client.close()
