"""The local Bloom filter: a blocked bit array in a memory-mapped file, plain or windowed.

The selector of the filter layer: ``BloomFilter`` is the compiled twin
(``_bloom_c.CBloomFilter``) when it is built and allowed (see ``crawldedup._env``), else the
typed pure-Python reference ``PyBloomFilter`` (``_bloom_py``); both write the same bytes.
``WindowedBloomFilter`` (:mod:`.windowed`) forgets keys after a recrawl window; it probes with
the same twin's kernels. ``GrowingFilter`` (:mod:`.growing`) adds stages to either kind when it
is full. Nothing but this module imports a twin. ``hash_many`` is the fingerprints layer's
(:mod:`crawldedup.fingerprints`), named here too for the code that imported it from here. The file format is in
``docs/format.md`` and :mod:`.format`; sizing in :mod:`.sizing`; the mapped file in
:mod:`.storage`; the writers' locks in :mod:`.writer_lock`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from .._checks import PathArg
from .._env import compiled
from ..fingerprints import hash_many
from ..windows import Clock, system_clock
from . import _bloom_py
from ._bloom_py import PyBloomFilter
from .format import FilterFileError, FilterKindError
from .growing import GrowingFilter, Stage
from .windowed import Generation, WindowedFilterBase

__all__ = [
    "BloomFilter",
    "FilterFileError",
    "FilterKindError",
    "Generation",
    "GrowingFilter",
    "HAS_EXTENSION",
    "FilterFile",
    "LocalFilter",
    "PyBloomFilter",
    "PyWindowedBloomFilter",
    "Stage",
    "WindowedBloomFilter",
    "hash_many",
    "open_filter",
    "open_filter_file",
]


class PyWindowedBloomFilter(WindowedFilterBase):
    __doc__ = WindowedFilterBase.__doc__
    _contains_kernel = staticmethod(_bloom_py.windowed_contains)
    _add_kernel = staticmethod(_bloom_py.windowed_add)


_compiled = None if TYPE_CHECKING else compiled("crawldedup.bloom._bloom_c")
#: True when ``BloomFilter`` and ``WindowedBloomFilter`` are the compiled twin's.
HAS_EXTENSION = _compiled is not None
if TYPE_CHECKING or _compiled is None:
    BloomFilter = PyBloomFilter
    WindowedBloomFilter = PyWindowedBloomFilter
else:
    _compiled.document_like(PyBloomFilter)  # the reference's docstrings: one documented API
    BloomFilter = _compiled.CBloomFilter

    class WindowedBloomFilter(WindowedFilterBase):
        __doc__ = WindowedFilterBase.__doc__
        _contains_kernel = staticmethod(_compiled.windowed_contains)
        _add_kernel = staticmethod(_compiled.windowed_add)
        _hash_keys = staticmethod(hash_many)


#: A filter file of either kind: plain (claims never expire) or windowed.
FilterFile = Union[BloomFilter, WindowedBloomFilter]
#: The local filter of a crawl: a filter file, or one that has grown stages.
LocalFilter = Union[BloomFilter, WindowedBloomFilter, GrowingFilter]


def open_filter(path: PathArg, mode: str = "r", *, clock: Clock = system_clock) -> LocalFilter:
    """Open a filter file of either kind: a plain filter (format v1) or a windowed one (v2),
    as a ``GrowingFilter`` with its stages when it has grown (v3).

    :param clock: the time source of a windowed filter.
    :raises ValueError: for a mode other than ``"r"`` and ``"r+"``.
    :raises FilterFileError: when the path is missing, a directory or not a valid filter, or a
        stage of a grown one is.
    :raises BlockingIOError: with ``"r+"``, when other writers cannot share the file.
    """
    bloom = open_filter_file(path, mode, clock=clock)
    return GrowingFilter(bloom) if bloom.mapped_file().header.stages else bloom


def open_filter_file(path: PathArg, mode: str = "r", *, clock: Clock = system_clock) -> FilterFile:
    """Open one filter file of either kind (a grown one's first stage alone).

    :raises ValueError: for a mode other than ``"r"`` and ``"r+"``.
    :raises FilterFileError: when the path is missing, a directory or not a valid filter.
    :raises BlockingIOError: with ``"r+"``, when other writers cannot share the file.
    """
    try:
        return BloomFilter.open(path, mode)
    except FilterKindError:
        return WindowedBloomFilter.open(path, mode, clock=clock)
