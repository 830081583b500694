"""The fingerprint layer: 128 bits that name a page, the same in every process and on every host.

MurmurHash3 x64-128 (seed 0) of the canonical string's UTF-8 bytes, as two little-endian uint64
halves ``(h1, h2)``; :func:`fingerprint` is the same 16 bytes. The selector of the layer:
:func:`hash_many` and :func:`hash_buffers` (a column's keys in Arrow's layout) are the
compiled twin's (``_fingerprints_c``, hashing without the GIL) when it is built and allowed
(see ``crawldedup._env``), else the typed reference's (``_fingerprints_py``, over mmh3);
:data:`py_hash_many` always names the reference's. Nothing but this
module imports a twin. A batch's rows travel as :class:`Fingerprints` (:mod:`.batch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._env import compiled
from ._fingerprints_py import Key, fingerprint, hash_buffers, hash_many, hash_one, key_bytes
from .batch import FINGERPRINT_BYTES, Fingerprints, multiply_shift, take_rows

__all__ = [
    "FINGERPRINT_BYTES",
    "FINGERPRINT_ID",
    "HAS_EXTENSION",
    "Fingerprints",
    "Key",
    "fingerprint",
    "hash_buffers",
    "hash_many",
    "hash_one",
    "key_bytes",
    "multiply_shift",
    "py_hash_many",
    "take_rows",
]

#: Name of the fingerprint function, recorded with each namespace.
FINGERPRINT_ID = "murmur3-x64-128"
#: The reference's batch hash: what the pure-Python twins of other layers hash with.
py_hash_many = hash_many

_compiled = None if TYPE_CHECKING else compiled("crawldedup.fingerprints._fingerprints_c")
#: True when :func:`hash_many` and :func:`hash_buffers` (a column's keys in Arrow's layout) are the compiled twin's.
HAS_EXTENSION = _compiled is not None
if not TYPE_CHECKING and _compiled is not None:
    hash_many = _compiled.hash_many
    hash_buffers = _compiled.hash_buffers
