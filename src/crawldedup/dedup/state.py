"""The local state of a crawl: a Bloom filter stamped with the canonical policy and namespace,
alone (the ``bloom`` tier) or in front of the exact tier beside it (``exact``)."""

from __future__ import annotations

import os
from typing import Dict, Optional, Union

from .._checks import PathArg
from ..bloom import BloomFilter, FilterFileError, GrowingFilter, LocalFilter, WindowedBloomFilter, open_filter_file
from ..bloom.format import HEADER_BYTES, Header
from ..canonical import DEFAULT_POLICY, CanonicalPolicy, policy_conflict
from ..config import BLOOM_TIER, EXACT_TIER
from ..exact import ExactFilter, ExactFilterBase
from ..windows import Clock, Window, system_clock

#: First word of the metadata that stamps a local state file.
STATE_STAMP = b"crawldedup-state/1"
#: The local state of a crawl: the Bloom filter alone, or in front of the exact tier.
LocalState = Union[GrowingFilter, ExactFilterBase]


def _stamp(policy_digest: str, namespace: Optional[str], tier: str) -> bytes:
    words = [STATE_STAMP, b"policy=" + policy_digest.encode("ascii")]
    if namespace is not None:
        words.append(b"namespace=" + namespace.encode("ascii"))
    if tier == EXACT_TIER:  # a state file without the word is the Bloom filter alone, as before
        words.append(b"tier=" + tier.encode("ascii"))
    return b" ".join(words)


def _words(metadata: bytes, path: PathArg) -> Dict[str, str]:
    words = metadata.split(b" ")
    if words[0] != STATE_STAMP:
        raise FilterFileError(f"{path}: not a crawldedup state file (its metadata has no {STATE_STAMP.decode()} stamp)")
    return dict(word.decode("ascii", "replace").partition("=")[::2] for word in words[1:])


def _read_stamp(bloom: Union[LocalFilter, ExactFilterBase], path: PathArg) -> Dict[str, str]:
    return _words(bloom.metadata, path)


def state_tier(path: PathArg) -> str:
    """The tier an existing state file was made with: ``exact`` or ``bloom``.

    :raises FilterFileError: for a file that is missing, not a filter or not a state file.
    """
    return _stamp_on_disk(path).get("tier", BLOOM_TIER)


def _stamp_on_disk(path: PathArg) -> Dict[str, str]:
    """The stamp of a state file, read from its header alone.

    :raises FilterFileError: for a file that is missing, not a filter or not a state file.
    """
    try:
        with open(path, "rb") as file:
            page = file.read(HEADER_BYTES)
            size = os.fstat(file.fileno()).st_size
    except FileNotFoundError:
        raise FilterFileError(f"{os.fspath(path)}: no such file") from None
    except IsADirectoryError:
        raise FilterFileError(f"{os.fspath(path)}: is a directory, not a filter file") from None
    return _words(Header.unpack(page, os.fspath(path), size).metadata, path)


def state_policy(bloom: Union[LocalFilter, ExactFilterBase], path: PathArg) -> str:
    """The canonical policy digest a state file is stamped with.

    :raises FilterFileError: for a file without a crawldedup stamp.
    """
    return _read_stamp(bloom, path).get("policy", "")


def _check_stamp(stamp: Dict[str, str], path: PathArg, policy_digest: str, namespace: Optional[str]) -> None:
    if stamp.get("policy") != policy_digest:
        raise FilterFileError(f"{path}: made with {policy_conflict(stamp.get('policy', '?'), policy_digest)}")
    if namespace is not None and stamp.get("namespace", namespace) != namespace:
        raise FilterFileError(
            f"{path}: belongs to namespace {stamp['namespace']!r}, this crawl uses namespace {namespace!r}"
        )


def _check_window(bloom: LocalState, path: PathArg, window: Optional[Window]) -> None:
    has = bloom.window
    if has == window:
        return
    if has is None:
        raise FilterFileError(
            f"{path}: made without a recrawl window (its claims never expire), this crawl "
            f"forgets claims after {window and window.describe()}: set ttl_days to 0 to keep "
            "using the file, or start a new state file"
        )
    wanted = f"forgets claims after {window.describe()}" if window else "keeps claims for ever (ttl_days 0)"
    raise FilterFileError(
        f"{path}: made for a recrawl window of {has.describe()}, this crawl {wanted}: "
        "start a new state file, or use the settings it was made with"
    )


def open_state(
    path: Optional[PathArg],
    capacity: int,
    error_rate: float,
    policy: Optional[CanonicalPolicy] = None,
    *,
    namespace: Optional[str] = None,
    window: Optional[Window] = None,
    clock: Clock = system_clock,
    tier: Optional[str] = EXACT_TIER,
) -> LocalState:
    """Open the local state of a crawl, or create it stamped with the canonical policy.

    An existing file keeps its own capacity and error rate (and the stages it grew); its window
    must be ``window``. The filter grows a stage whenever it is full (:mod:`crawldedup.bloom.growing`).

    :param path: the state file; None gives an anonymous in-memory filter.
    :param capacity: URLs a new filter is sized for.
    :param error_rate: false-positive rate of a new filter.
    :param policy: the canonical policy in force (default :data:`~crawldedup.DEFAULT_POLICY`).
    :param namespace: when given, also stamped, and an existing file must carry the same one
        (a state file must not follow a crawl into its next round).
    :param window: the recrawl window: a windowed filter forgets claims after it; None (claims
        never expire) gives a plain filter.
    :param clock: the time source of a windowed filter.
    :param tier: ``exact`` (an :class:`~crawldedup.exact.ExactFilter`: the Bloom filter in front
        of the exact tier in ``path + ".exact"``), ``bloom`` (the Bloom filter alone), or None:
        ``exact`` for a new state, an existing one's own.
    :raises TypeError: for a path that is not a ``str`` or path-like object.
    :raises FilterFileError: for a file stamped with another policy or namespace (naming both),
        made for another window (or none) or tier, an unstamped file, or one that is not a
        valid filter.
    :raises ExactFileError: for an exact tier that is missing or damaged (naming the file).
    :raises ValueError: for a capacity or error rate out of range.
    """
    digest = (policy or DEFAULT_POLICY).digest
    made = tier or EXACT_TIER
    stamp = _stamp(digest, namespace, made)
    try:
        if made == EXACT_TIER:
            return ExactFilter(capacity, error_rate, path, window=window, clock=clock, metadata=stamp)
        if window is not None:
            return GrowingFilter(
                WindowedBloomFilter(capacity, error_rate, window, path=path, metadata=stamp, clock=clock)
            )
        return GrowingFilter(BloomFilter(capacity, error_rate, path=path, metadata=stamp))
    except FileExistsError:
        assert path is not None
    found = _stamp_on_disk(path)
    _check_stamp(found, path, digest, namespace)
    found_tier = found.get("tier", BLOOM_TIER)
    if tier is not None and found_tier != tier:
        raise FilterFileError(_tier_conflict(path, found_tier, tier))
    state: LocalState = (
        ExactFilter.open(path, "r+", clock=clock)
        if found_tier == EXACT_TIER
        else GrowingFilter(open_filter_file(path, "r+", clock=clock))
    )
    try:
        _check_window(state, path, window)
    except BaseException:
        state.close()
        raise
    return state


def _tier_conflict(path: PathArg, found: str, wanted: str) -> str:
    if found == BLOOM_TIER:
        return (
            f"{os.fspath(path)}: made with the Bloom filter alone (strategy local, or local_tier bloom), "
            "which cannot confirm its hits: start a new state file for the exact tier, or keep this "
            "one with strategy local (local_tier bloom with a store)"
        )
    return (
        f"{os.fspath(path)}: made with the exact tier ({os.fspath(path)}.exact beside it): open it with "
        "strategy exact (local_tier exact with a store); the Bloom filter alone would leave its tier behind"
    )
