"""Copying the claims of a namespace into another, in resumable passes: a ``set`` namespace
into any store, or a windowed ``sharded-set`` namespace of the generations layout into one of
the ticks layout (same window, groups and shards).

A pass walks the source namespace (``set``: its claim keys with ``SCAN``, batches of ``batch``
keys, one ``claim_many`` into the target each; ``sharded-set``: its shards in order, the
members of each live generation's sets merged into the target's hashes at the last tick of
their generation) and records its cursor after every batch in the source Redis, under
``<namespace>:migration`` (a hash: ``target``, ``cursor``, ``copied``, ``passes``). A pass
killed at any point resumes from the last recorded cursor: the batch in flight is copied
again, which the target answers as already held, so nothing is lost or counted twice.

``SCAN`` returns every key that exists for the whole pass; a key claimed during the pass may be
missed. So the documented cutover (docs/cli.md, ``crawldedup migrate``) ends with a pass while
no worker claims in the source. Claims leased and not yet done are not copied: their worker may
still release them or let them expire, and a lasting copy would lose those pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, NamedTuple, Optional, Set, Tuple, Union, cast

from .base import ClaimStore

if TYPE_CHECKING:  # their module imports redis-py: imported once a store of it is opened
    from .redis_keys import RedisKeyStore
    from .sharded_set import RedisShardedSetStore

#: Members a sharded-set shard holds at capacity (sharded_set.MEMBERS_PER_SHARD), for the
#: shards of one step: about ``batch`` claims.
_MEMBERS_PER_SHARD = 400

#: Keys per SCAN step and per claim of the target: 10,000 keeps a step near 10 ms of Redis time.
BATCH = 10_000


class MigrationConflict(ValueError):
    """The source namespace records a pass to another target, unfinished."""


class PassResult(NamedTuple):
    """One pass: claims new to the target, claims it already held, leased claims left out, and
    how many passes have completed (this one included)."""

    copied: int
    present: int
    leased: int
    passes: int


class Migration:
    """Copies the claims of ``source`` into ``target``, one pass per :meth:`run_pass`.

    :param source: the ``set`` store of the namespace to copy (one Redis node), or a windowed
        ``sharded-set`` store of the generations layout.
    :param target: the store to copy into, opened for its own namespace (for a ``sharded-set``
        source: a ``sharded-set`` store of the ticks layout, same window, groups and shards).
    :param batch: keys per step (about as many claims per step for a ``sharded-set`` source).
    :raises MigrationConflict: for a ``sharded-set`` target of another layout, window or sharding.
    """

    def __init__(
        self, source: Union[RedisKeyStore, RedisShardedSetStore], target: ClaimStore, batch: int = BATCH
    ) -> None:
        self.source = source
        self.target = target
        if source.strategy == "sharded-set":
            theirs = cast("RedisShardedSetStore", target)
            ours = cast("RedisShardedSetStore", source)
            if target.strategy != "sharded-set" or (
                getattr(theirs, "window_layout", None),
                theirs.window,
                theirs.groups,
                theirs.shards,
            ) != ("ticks", ours.window, ours.groups, ours.shards):
                raise MigrationConflict(
                    f"a sharded-set namespace of the generations layout moves into a sharded-set namespace of the "
                    f"ticks layout with its window, groups and shards, not into {target.description}"
                )
        self.batch = batch
        #: The record of the migration in the source Redis.
        self.record_key = f"{source.namespace}:migration".encode("ascii")
        #: What the record names the target by (no password).
        self.target_name = f"{target.description} (strategy {target.strategy})"

    def record(self) -> Optional[Dict[str, str]]:
        """The migration's record, or None when none was started."""
        stored = self.source.with_retries(lambda: self.source.client.hgetall(self.record_key))
        fields = cast(Dict[bytes, bytes], stored)  # the client returns bytes (no decode_responses)
        return {key.decode(): value.decode() for key, value in fields.items()} or None

    def run_pass(
        self, progress: Callable[[int, int], None] = lambda copied, present: None, restart: bool = False
    ) -> PassResult:
        """Copy every claim key of the source (resuming an interrupted pass), then record the pass done.

        :param progress: called after each batch with the pass's counts so far.
        :param restart: forget an unfinished pass to another target (what it copied stays there).
        :raises MigrationConflict: when a pass to another target is unfinished and not ``restart``.
        :raises StoreUnavailable: when either store stays unreachable (the cursor is kept).
        """
        record = self.record()
        unfinished = record is not None and record["cursor"] != "0"
        if record is not None and record["target"] != self.target_name and unfinished and not restart:
            raise MigrationConflict(
                f"namespace {self.source.namespace!r} is half way through a pass to {record['target']}: "
                f"finish it (run that migration again), or start over with --restart"
            )
        if record is None or record["target"] != self.target_name:
            record = {
                "target": self.target_name,
                "cursor": "0",
                "copied": "0",
                "present": "0",
                "leased": "0",
                "passes": "0",
            }
            self._save(record)
        cursor = int(record["cursor"])
        copied, present, leased = int(record["copied"]), int(record["present"]), int(record["leased"])
        held = self._leased()
        while True:
            cursor, step = self._step(cursor, held)
            copied, present, leased = copied + step[0], present + step[1], leased + step[2]
            record.update(cursor=str(cursor), copied=str(copied), present=str(present), leased=str(leased))
            if cursor == 0:
                record.update(passes=str(int(record["passes"]) + 1), copied="0", present="0", leased="0")
            self._save(record)
            progress(copied, present)
            if cursor == 0:
                return PassResult(copied, present, leased, int(record["passes"]))

    def _step(self, cursor: int, held: Set[bytes]) -> Tuple[int, Tuple[int, int, int]]:
        """One batch from ``cursor``: the next cursor (0: the pass is done) and the batch's claims
        copied, already present, and leased (left out)."""
        if self.source.strategy == "sharded-set":
            source = cast("RedisShardedSetStore", self.source)
            count = max(1, self.batch // _MEMBERS_PER_SHARD)
            rows = source.generation_members(cursor, count)
            moved = cast("RedisShardedSetStore", self.target).merge_generations(rows)
            following = cursor + count
            return (following if following < source.shards else 0), (moved, len(rows) - moved, 0)
        next_cursor, found = cast("RedisKeyStore", self.source).scan_claims(cursor, self.batch)
        keep = [fp for fp in found.as_bytes() if fp not in held]
        won = self.target.claim_many(keep) if keep else []
        return next_cursor, (sum(won), len(won) - sum(won), len(found) - len(keep))

    def _save(self, record: Dict[str, str]) -> None:
        fields: Dict[Any, Any] = dict(record)
        self.source.with_retries(lambda: self.source.client.hset(self.record_key, mapping=fields))

    def _leased(self) -> Set[bytes]:
        """Fingerprints under a lease now (in flight: a few per worker), read once per pass (a
        sharded-set source keeps its leased members apart: none of them is read)."""
        return self.source.leased_ids() if self.source.strategy == "set" else set()
