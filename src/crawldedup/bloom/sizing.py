"""Sizing of the blocked Bloom filter from its exact false-positive rate.

A key lands in one 512-bit block; the number of keys per block is Poisson(n / num_blocks).
A block holding ``l`` keys has had ``k * l`` probes thrown at its 512 bits (with replacement),
so its number of set bits ``s`` follows the occupancy distribution, and an absent key that
lands there is a false positive with probability ``(s / 512) ** k``. Hence::

    FP(n, B, k) = sum_l Poisson(l; n / B) * sum_s P(s set bits | k * l probes) * (s / 512) ** k

``docs/format.md`` derives it; ``choose_shape`` picks the fewest blocks that meet the target.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .format import BLOCK_BITS, MAX_NUM_BLOCKS, MAX_NUM_HASHES

#: Size for 0.9 x the requested rate: 1,000,000 absent probes at 0.1% have a standard
#: deviation of ~3% of the count, so the measured rate stays under the target by > 3 sigma.
SIZING_MARGIN = 0.9
#: At least one bit per key, also for error rates where the optimum is less (p > 0.62).
MIN_BITS_PER_ITEM = 1.0


@functools.lru_cache(maxsize=64)
def _block_false_positive_table(num_hashes: int, max_load: int) -> np.ndarray:
    """P(false positive | l keys in the block) for l = 0 .. max_load."""
    set_bits = np.arange(BLOCK_BITS + 1)
    stay = set_bits / BLOCK_BITS  # a probe hits an already-set bit
    hit_all = stay**num_hashes  # all k query probes hit set bits
    occupancy = np.zeros(BLOCK_BITS + 1)
    occupancy[0] = 1.0
    table = np.zeros(max_load + 1)
    for load in range(1, max_load + 1):
        for _ in range(num_hashes):
            moved = occupancy[:-1] * (1.0 - stay[:-1])
            occupancy = occupancy * stay
            occupancy[1:] += moved
        table[load] = occupancy @ hit_all
    return table


def _max_load(mean_load: float) -> int:
    # Poisson tail beyond mean + 10 sd + 20 is below 1e-20 for every mean used here.
    return int(math.ceil(mean_load + 10.0 * math.sqrt(mean_load) + 20.0))


def _poisson_mix(table: np.ndarray, mean_load: float) -> float:
    loads = np.arange(len(table))
    log_factorials = np.concatenate(([0.0], np.cumsum(np.log(loads[1:]))))
    pmf = np.exp(loads * math.log(mean_load) - mean_load - log_factorials)
    return float(pmf @ table)


def expected_false_positive_rate(num_items: int, num_blocks: int, num_hashes: int) -> float:
    """Return the exact false-positive rate of a blocked filter holding ``num_items`` keys."""
    if num_items <= 0:
        return 0.0
    mean_load = num_items / num_blocks
    return _poisson_mix(_block_false_positive_table(num_hashes, _max_load(mean_load)), mean_load)


def _fewest_blocks(capacity: int, target: float, num_hashes: int, min_blocks: int) -> int:
    table = _block_false_positive_table(num_hashes, _max_load(capacity / min_blocks))

    def good(blocks: int) -> bool:
        return _poisson_mix(table, capacity / blocks) <= target

    low, high = min_blocks, min_blocks
    while not good(high):
        low, high = high + 1, high * 2
        if high > 64 * MAX_NUM_BLOCKS:
            return high
    while low < high:
        middle = (low + high) // 2
        if good(middle):
            high = middle
        else:
            low = middle + 1
    return low


@functools.lru_cache(maxsize=256)
def choose_shape(capacity: int, error_rate: float) -> tuple[int, int]:
    """Return ``(num_blocks, num_hashes)``: the smallest filter whose exact FP rate at
    ``capacity`` keys is at most ``SIZING_MARGIN * error_rate``.

    :raises ValueError: when the filter would need more than ``MAX_NUM_BLOCKS`` blocks.
    """
    bits_per_item = max(-math.log(error_rate) / math.log(2) ** 2, MIN_BITS_PER_ITEM)
    min_blocks = max(1, math.ceil(capacity * bits_per_item / BLOCK_BITS))
    best_k = max(1, round(-math.log2(error_rate)))
    candidates = []
    for num_hashes in range(max(1, best_k - 3), min(MAX_NUM_HASHES, best_k + 4) + 1):
        blocks = _fewest_blocks(capacity, SIZING_MARGIN * error_rate, num_hashes, min_blocks)
        candidates.append((blocks, num_hashes))
    num_blocks, num_hashes = min(candidates)
    if num_blocks > MAX_NUM_BLOCKS:
        raise ValueError(
            f"capacity {capacity} at error_rate {error_rate!r} needs {num_blocks} blocks, "
            f"more than the {MAX_NUM_BLOCKS} a filter can hold"
        )
    return num_blocks, num_hashes


@functools.lru_cache(maxsize=256)
def items_within(num_blocks: int, num_hashes: int, target: float, limit: int) -> int:
    """Return the most keys (at most ``limit``) a filter of this shape holds with its exact
    false-positive rate still at most ``target``: where a growing filter starts a new stage."""
    table = _block_false_positive_table(num_hashes, _max_load(limit / num_blocks))
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if _poisson_mix(table, middle / num_blocks) <= target:
            low = middle
        else:
            high = middle - 1
    return low
