"""The alias map of redirects: requested URL -> final URL, by fingerprint, bounded, per namespace.

After a fetch that was redirected, :meth:`Deduplicator.claim_final
<crawldedup.dedup.Deduplicator.claim_final>` claims the final page and records each requested
URL's fingerprint with the final page's (an *alias*), in the same round trip, so that
:meth:`~crawldedup.dedup.Deduplicator.seen_through_redirects` answers a later link to the
requested URL without fetching it. Every store keeps the map in its own layout (docs/stores.md,
"Aliases"); what they share is here: the batch to record, the stamp that ages an alias with the
recrawl window, and the bound.

An alias is stamped with the window's generation when it is recorded (-1 without a window) and
read as absent once that generation is forgotten, like a claim of that generation. A map holds at
most ``capacity`` aliases (the writer's :attr:`Aliases.capacity`): a new alias recorded into a
full map replaces an old one (which one is the store's choice, documented with its layout).
Losing an alias loses no page: its requested URL is then fetched again and its final page
answered by its claim.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

from .._checks import integer_in
from ..fingerprints import Fingerprints
from ..windows import Clock, Window

#: Default bound of a namespace's alias map (about 100 MB in Redis: docs/stores.md, "Aliases").
DEFAULT_MAX_ALIASES = 1_000_000
#: Largest bound a Deduplicator may set.
MAX_ALIASES_LIMIT = 2**32
#: The stamp of an alias recorded without a window: it never ages.
TIMELESS = -1


class Aliases(NamedTuple):
    """A batch of aliases to record: ``requested[i]`` led to ``finals[i]``; the map's bound."""

    requested: Fingerprints
    finals: Fingerprints
    capacity: int


class AliasesUnsupported(NotImplementedError):
    """The store keeps no alias map (a :class:`~crawldedup.stores.base.ClaimStore` subclass that
    does not write one: every store of crawldedup does)."""


def unsupported(strategy: str) -> AliasesUnsupported:
    """The error of a store without an alias map, naming the stores that keep one."""
    return AliasesUnsupported(
        f"the {strategy} store keeps no alias map of redirects: claim_final and seen_through_redirects need "
        f"a store that does (local, set, sharded-set, redisbloom, sqlite, postgres, service)"
    )


def check_max_aliases(value: int) -> int:
    """Validate the bound of an alias map.

    :raises ValueError: unless it is an integer in [1, 2**32].
    """
    return integer_in("max_aliases", value, 1, MAX_ALIASES_LIMIT)


def stamp(window: Optional[Window], clock: Clock) -> int:
    """The stamp of an alias recorded now: the window's current generation, or :data:`TIMELESS`."""
    return window.generation(clock()) if window is not None else TIMELESS


def oldest_live(window: Optional[Window], clock: Clock) -> int:
    """The oldest stamp still read now (every stamp without a window)."""
    return window.oldest_live(clock()) if window is not None else TIMELESS


def live_finals(values: Sequence[Optional[bytes]], oldest: int) -> List[Optional[bytes]]:
    """Stored alias values (16 fingerprint bytes, then the stamp in decimal ASCII) as final
    fingerprints, None where absent or stamped before ``oldest``."""
    finals: List[Optional[bytes]] = []
    for value in values:
        finals.append(value[:16] if value is not None and int(value[16:]) >= oldest else None)
    return finals
