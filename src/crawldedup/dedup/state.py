"""The local state file of a crawl: a Bloom filter stamped with the canonical policy and namespace."""

from __future__ import annotations

from typing import Dict, Optional

from .._checks import PathArg
from ..bloom import BloomFilter, FilterFileError, GrowingFilter, LocalFilter, WindowedBloomFilter, open_filter_file
from ..canonical import DEFAULT_POLICY, CanonicalPolicy, policy_conflict
from ..windows import Clock, Window, system_clock

#: First word of the metadata that stamps a local state file.
STATE_STAMP = b"crawldedup-state/1"


def _stamp(policy_digest: str, namespace: Optional[str]) -> bytes:
    words = [STATE_STAMP, b"policy=" + policy_digest.encode("ascii")]
    if namespace is not None:
        words.append(b"namespace=" + namespace.encode("ascii"))
    return b" ".join(words)


def _read_stamp(bloom: LocalFilter, path: PathArg) -> Dict[str, str]:
    words = bloom.metadata.split(b" ")
    if words[0] != STATE_STAMP:
        raise FilterFileError(f"{path}: not a crawldedup state file (its metadata has no {STATE_STAMP.decode()} stamp)")
    return dict(word.decode("ascii", "replace").partition("=")[::2] for word in words[1:])


def state_policy(bloom: LocalFilter, path: PathArg) -> str:
    """The canonical policy digest a state file is stamped with.

    :raises FilterFileError: for a file without a crawldedup stamp.
    """
    return _read_stamp(bloom, path).get("policy", "")


def _check_stamp(bloom: GrowingFilter, path: PathArg, policy_digest: str, namespace: Optional[str]) -> None:
    stamp = _read_stamp(bloom, path)
    if stamp.get("policy") != policy_digest:
        raise FilterFileError(f"{path}: made with {policy_conflict(stamp.get('policy', '?'), policy_digest)}")
    if namespace is not None and stamp.get("namespace", namespace) != namespace:
        raise FilterFileError(
            f"{path}: belongs to namespace {stamp['namespace']!r}, this crawl uses namespace {namespace!r}"
        )


def _check_window(bloom: GrowingFilter, path: PathArg, window: Optional[Window]) -> None:
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
) -> GrowingFilter:
    """Open the local filter file of a crawl, or create it stamped with the canonical policy.

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
    :raises TypeError: for a path that is not a ``str`` or path-like object.
    :raises FilterFileError: for a file stamped with another policy or namespace (naming both),
        made for another window (or none), an unstamped file, or one that is not a valid filter.
    :raises ValueError: for a capacity or error rate out of range.
    """
    digest = (policy or DEFAULT_POLICY).digest
    stamp = _stamp(digest, namespace)
    try:
        if window is not None:
            return GrowingFilter(
                WindowedBloomFilter(capacity, error_rate, window, path=path, metadata=stamp, clock=clock)
            )
        return GrowingFilter(BloomFilter(capacity, error_rate, path=path, metadata=stamp))
    except FileExistsError:
        assert path is not None
    bloom = GrowingFilter(open_filter_file(path, "r+", clock=clock))
    try:
        _check_stamp(bloom, path, digest, namespace)
        _check_window(bloom, path, window)
    except BaseException:
        bloom.close()
        raise
    return bloom
