"""The local state file of a crawl: a Bloom filter stamped with the canonical policy and namespace."""

from __future__ import annotations

from typing import Optional

from .._checks import PathArg
from ..bloom import BloomFilter, FilterFileError
from ..canonical import DEFAULT_POLICY, CanonicalPolicy

#: First word of the metadata that stamps a local state file.
STATE_STAMP = b"crawldedup-state/1"


def _stamp(policy_digest: str, namespace: Optional[str]) -> bytes:
    words = [STATE_STAMP, b"policy=" + policy_digest.encode("ascii")]
    if namespace is not None:
        words.append(b"namespace=" + namespace.encode("ascii"))
    return b" ".join(words)


def _check_stamp(bloom: BloomFilter, path: PathArg, policy_digest: str, namespace: Optional[str]) -> None:
    words = bloom.metadata.split(b" ")
    if words[0] != STATE_STAMP:
        raise FilterFileError(f"{path}: not a crawldedup state file (its metadata has no {STATE_STAMP.decode()} stamp)")
    stamp = dict(word.decode("ascii", "replace").partition("=")[::2] for word in words[1:])
    if stamp.get("policy") != policy_digest:
        raise FilterFileError(
            f"{path}: stamped with canonical policy {stamp.get('policy')}, this crawl uses policy {policy_digest}"
        )
    if namespace is not None and stamp.get("namespace", namespace) != namespace:
        raise FilterFileError(
            f"{path}: belongs to namespace {stamp['namespace']!r}, this crawl uses namespace {namespace!r}"
        )


def open_state(
    path: Optional[PathArg],
    capacity: int,
    error_rate: float,
    policy: Optional[CanonicalPolicy] = None,
    *,
    namespace: Optional[str] = None,
) -> BloomFilter:
    """Open the local filter file of a crawl, or create it stamped with the canonical policy.

    An existing file keeps its own capacity and error rate.

    :param path: the state file; None gives an anonymous in-memory filter.
    :param capacity: URLs a new filter is sized for.
    :param error_rate: false-positive rate of a new filter.
    :param policy: the canonical policy in force (default :data:`~crawldedup.DEFAULT_POLICY`).
    :param namespace: when given, also stamped, and an existing file must carry the same one
        (a state file must not follow a crawl into its next round).
    :raises FilterFileError: for a file stamped with another policy or namespace (naming both),
        an unstamped file, or one that is not a valid filter.
    :raises ValueError: for a capacity or error rate out of range.
    """
    digest = (policy or DEFAULT_POLICY).digest
    stamp = _stamp(digest, namespace)
    if path is None:
        return BloomFilter(capacity, error_rate, metadata=stamp)
    try:
        return BloomFilter(capacity, error_rate, path=path, metadata=stamp)
    except FileExistsError:
        pass
    bloom = BloomFilter.open(path, "r+")
    try:
        _check_stamp(bloom, path, digest, namespace)
    except BaseException:
        bloom.close()
        raise
    return bloom
