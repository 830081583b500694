"""The content fingerprint's format: how a page's text becomes the shingles a SimHash counts.

Stored fingerprints are only comparable when they were made under one policy, so the policy
has a digest (like :attr:`crawldedup.canonical.CanonicalPolicy.digest`) that a store or an
index file can stamp. The rules are documented in ``docs/content.md``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Dict

from .._checks import is_integer

__all__ = ["CONTENT_FORMAT_VERSION", "DEFAULT_CONTENT_POLICY", "ContentPolicy", "FINGERPRINT_BITS"]

#: Bumped whenever page_text's rules, the word split, the case folding, the shingle hash or the
#: bit vote change in a way that gives equal policies different fingerprints. Part of every digest.
CONTENT_FORMAT_VERSION = 1
FINGERPRINT_BITS = 64
#: The rules a policy's fields do not vary, named in the digest so that the document says
#: everything a fingerprint depends on.
_FIXED_RULES = {
    "text": "body text nodes outside script style template noscript svg iframe nav aside footer form button, "
    "and outside links unless fewer than 50 words remain, joined by spaces",
    "fold": "str.casefold of the whole text, then the split",
    "words": "maximal runs of str.isalnum() or category M characters, except those all str.isdecimal()",
    "shingle": "shingle_words consecutive words joined by one space, UTF-8",
    "hash": "MurmurHash3 x64-128 seed 0, first little-endian 64-bit half",
    "vote": "bit i set when more than half of the shingles set it",
}
#: A shingle of more words than this would make each fingerprint a hash of phrases, not text.
MAX_SHINGLE_WORDS = 16


@dataclass(frozen=True)
class ContentPolicy:
    """The parameters of a content fingerprint (docs/content.md, "The format").

    :param shingle_words: words per shingle (1 to 16): each run of this many consecutive
        words is one feature of the SimHash. A text of fewer words is one shingle. Two, the
        default, separated distinct articles on one template best in docs/content.md's
        measurement (single words: 96% recall but 2% precision at k = 3; two: 42% and 100%).
    :raises TypeError: when ``shingle_words`` is not an int.
    :raises ValueError: when ``shingle_words`` is out of range.
    """

    shingle_words: int = 2

    def __post_init__(self) -> None:
        if not is_integer(self.shingle_words):
            raise TypeError(f"shingle_words must be an int, got {type(self.shingle_words).__name__}")
        if not 1 <= self.shingle_words <= MAX_SHINGLE_WORDS:
            raise ValueError(f"shingle_words must be in [1, {MAX_SHINGLE_WORDS}], got {self.shingle_words}")

    @property
    def digest(self) -> str:
        """16 lowercase hex characters naming this policy, stable across processes, versions and machines.

        The first 64 bits of SHA-256 over a canonical JSON form of every field, the fixed rules
        and :data:`CONTENT_FORMAT_VERSION`: fingerprints are comparable when digests are equal.
        """
        document: Dict[str, object] = {
            "content_format": CONTENT_FORMAT_VERSION,
            "bits": FINGERPRINT_BITS,
            "rules": _FIXED_RULES,
        }
        for f in fields(self):
            document[f.name] = getattr(self, f.name)
        blob = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(blob.encode("ascii")).hexdigest()[:16]


#: The policy of docs/content.md; its digest is pinned in the tests (a format).
DEFAULT_CONTENT_POLICY = ContentPolicy()
