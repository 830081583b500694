"""The exact tier: a Bloom filter in front of sorted runs of 64-bit fingerprints on disk.

The selector of the exact layer: ``ExactFilter`` uses the compiled run kernels
(``_runs_c``) when they are built and allowed (see ``crawldedup._env``), with the compiled
Bloom filter, else the typed pure-Python reference ``_runs_py`` with ``PyBloomFilter``
(``PyExactFilter``); both write the same bytes. The set's logic is in :mod:`.filter` (the
Bloom filter in front) and :mod:`.store` (the runs, their merges and generations); the files in
:mod:`.runs`, :mod:`.log` and :mod:`.format` (documented in ``docs/format.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._env import compiled
from ..bloom import BloomFilter, PyBloomFilter, PyWindowedBloomFilter, WindowedBloomFilter
from ..fingerprints import hash_many, py_hash_many
from . import _runs_py
from .filter import TIER_SUFFIX, ExactFilterBase, tier_directory
from .format import FORMAT_VERSION, ExactFileError
from .runs import Kernels
from .store import DEFAULT_BUFFER_KEYS, RunInfo

__all__ = [
    "DEFAULT_BUFFER_KEYS",
    "ExactFileError",
    "ExactFilter",
    "ExactFilterBase",
    "FORMAT_VERSION",
    "HAS_EXTENSION",
    "KERNELS",
    "Kernels",
    "PY_KERNELS",
    "PyExactFilter",
    "RunInfo",
    "TIER_SUFFIX",
    "tier_directory",
]

#: The reference kernels (numpy).
PY_KERNELS = Kernels(
    _runs_py.sort_keys, _runs_py.encode_run, _runs_py.decode_run, _runs_py.probe_run, _runs_py.merge_runs
)


class PyExactFilter(ExactFilterBase):
    __doc__ = ExactFilterBase.__doc__
    _kernels = PY_KERNELS
    _plain_bloom = PyBloomFilter
    _windowed_bloom = PyWindowedBloomFilter
    _hash_keys = staticmethod(py_hash_many)


_compiled = None if TYPE_CHECKING else compiled("crawldedup.exact._runs_c")
#: True when ``ExactFilter`` runs the compiled kernels.
HAS_EXTENSION = _compiled is not None
if TYPE_CHECKING or _compiled is None:
    ExactFilter = PyExactFilter
    #: The kernels ``ExactFilter`` runs.
    KERNELS = PY_KERNELS
else:
    KERNELS = Kernels(
        _compiled.sort_keys, _compiled.encode_run, _compiled.decode_run, _compiled.probe_run, _compiled.merge_runs
    )

    class ExactFilter(ExactFilterBase):
        __doc__ = ExactFilterBase.__doc__
        _kernels = KERNELS
        _plain_bloom = BloomFilter
        _windowed_bloom = WindowedBloomFilter
        _hash_keys = staticmethod(hash_many)
