"""The local Bloom filter: a blocked bit array in a memory-mapped file.

The selector of the filter layer: ``BloomFilter`` is the compiled twin
(``_bloom_c.CBloomFilter``) when it is built and allowed (see ``crawldedup._env``), else the
typed pure-Python reference ``PyBloomFilter`` (``_bloom_py``); both write the same bytes.
Nothing but this module imports a twin. The file format is in ``docs/format.md`` and
:mod:`.format`; sizing in :mod:`.sizing`; the mapped file in :mod:`.storage`; the writers'
locks in :mod:`.writer_lock`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._env import compiled
from ..fingerprints import hash_many
from ._bloom_py import PyBloomFilter
from .format import FilterFileError

__all__ = ["BloomFilter", "FilterFileError", "HAS_EXTENSION", "PyBloomFilter", "hash_many"]

_compiled = None if TYPE_CHECKING else compiled("crawldedup.bloom._bloom_c")
#: True when ``BloomFilter`` and ``hash_many`` are the compiled twin's.
HAS_EXTENSION = _compiled is not None
if TYPE_CHECKING or _compiled is None:
    BloomFilter = PyBloomFilter
else:
    _compiled.document_like(PyBloomFilter)  # the reference's docstrings: one documented API
    BloomFilter = _compiled.CBloomFilter
    hash_many = _compiled.hash_many
