"""What the filter benchmarks (growth.py, windowed_ab.py) share: distinct URL keys hashed
in chunks, and a timer in nanoseconds per key."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from crawldedup import bloom

#: Keys hashed per call.
CHUNK = 1 << 20


def hashes_of(prefix: str, start: int, count: int) -> np.ndarray:
    return bloom.hash_many([f"https://{prefix}.example/item/{i}?ref=x" for i in range(start, start + count)])


def many_hashes(prefix: str, n: int) -> np.ndarray:
    return np.concatenate([hashes_of(prefix, start, min(CHUNK, n - start)) for start in range(0, n, CHUNK)])


def timed(step: Callable[[], object], keys: int) -> float:
    """Nanoseconds per key of ``step`` over ``keys`` keys."""
    began = time.perf_counter()
    step()
    return (time.perf_counter() - began) / keys * 1e9
