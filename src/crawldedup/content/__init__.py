"""Content fingerprints (docs/content.md): page text -> 64-bit SimHash -> near-duplicate index.

What a URL cannot tell: a page whose URL stays while its content changes, and one content
under many URLs. The selector of the content layer: :func:`simhash` and :func:`simhash_many`
are those of the compiled ``_simhash_c`` when it is built (and ``CRAWLDEDUP_NO_EXTENSIONS`` is
not set), else those of the typed reference ``_simhash_py``; both give the same values.
Nothing but this module imports a twin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._env import compiled
from ._simhash_py import simhash, simhash_many, words
from .index import Matches, NearDuplicateIndex
from .index_format import INDEX_FORMAT_VERSION, IndexFileError
from .policy import CONTENT_FORMAT_VERSION, DEFAULT_CONTENT_POLICY, FINGERPRINT_BITS, ContentPolicy
from .text import DROPPED_ELEMENTS, decode_html, page_text

__all__ = [
    "CONTENT_FORMAT_VERSION",
    "DEFAULT_CONTENT_POLICY",
    "DROPPED_ELEMENTS",
    "FINGERPRINT_BITS",
    "HAS_EXTENSION",
    "INDEX_FORMAT_VERSION",
    "ContentPolicy",
    "IndexFileError",
    "Matches",
    "NearDuplicateIndex",
    "decode_html",
    "page_text",
    "simhash",
    "simhash_many",
    "words",
]

_compiled = None if TYPE_CHECKING else compiled("crawldedup.content._simhash_c")
#: True when simhash() and simhash_many() are the compiled twin's.
HAS_EXTENSION = _compiled is not None
if not TYPE_CHECKING and _compiled is not None:
    simhash = _compiled.simhash
    simhash_many = _compiled.simhash_many
