"""``crawldedup filter``: print the first occurrence of each page of a crawl frontier.

Lines are read in batches (:mod:`._io`), prepared (canonicalized and fingerprinted) in this
process or in ``--jobs`` workers (:mod:`._jobs`), then held, written and committed one batch at
a time in input order (:class:`FilterRun`), so that a page is seen only once its line is written.
One run at a time writes a state file (:class:`~crawldedup.dedup.state_lock.StateLock`).
"""

from __future__ import annotations

import argparse
import operator
import os
import pickle
import signal
import sys
import time
from functools import partial
from itertools import compress
from typing import Any, List, NamedTuple, Optional, SupportsIndex, Tuple

from .._wording import counted, sized
from ..canonical import CanonicalPolicy
from ..config import BLOOM_TIER, LOCAL_TIERS, SETTINGS, DedupConfig
from ..dedup import Deduplicator, HeldBatch, Prepared, prepare_canonical
from ..dedup.held import HOLD_SECONDS
from ..dedup.state import state_tier
from ..dedup.state_lock import StateLock
from ..exact import ExactFilterBase
from ..stores.base import StoreUnavailable
from ..stores.factory import ALIASES, EXACT, LOCAL, STRATEGIES
from ._args import (
    BASE_HELP,
    INPUTS_HELP,
    base_url,
    days,
    file_path,
    jobs,
    namespace_name,
    positive_int,
    probability,
    round_name,
    seconds,
    strategy,
)
from ._io import (
    IDLE_SECONDS,
    Block,
    InputReader,
    Interruptions,
    Output,
    Progress,
    UnwrittenPages,
    decode_lines,
    line_batches,
)
from ._jobs import OrderedWork, available_cores
from ._lines import canonicalize_lines, reason, stdout
from ._store_options import DEFAULT_SQLITE, add_location_options, add_policy_option, chosen_policy
from .exits import CLIError, ExitCode, error_for, usage_error, using

#: Lines per claim: 10,000 keeps the fixed cost of a call (canonicalize_many, one hash_many, one
#: store round trip) small against the per-line work, and a batch of output is one write.
BATCH_LINES = 10_000
#: Where ``filter`` keeps its state without --state or $CRAWLDEDUP_STATE.
DEFAULT_STATE = "crawldedup.bloom"
#: Where ``filter`` keeps the pages a store kept but that could not be written, without --unwritten.
DEFAULT_UNWRITTEN = "crawldedup.unwritten"


class LineBatch(NamedTuple):
    """One batch of ``filter``'s input: its lines as read (bytes, joined by newlines; in a
    ``--jobs`` worker, a view of the shared memory they came through), and how to read them."""

    data: Block
    base: Optional[str]
    #: Whether the main process needs the lines back (``--output raw`` prints them).
    keep_lines: bool

    def __reduce_ex__(self, protocol: SupportsIndex) -> Tuple[Any, Tuple[Any, ...]]:
        # Protocol 5 lets the lines travel out of band: through the shared memory of --jobs.
        data = pickle.PickleBuffer(self.data) if operator.index(protocol) >= 5 else bytes(self.data)
        return LineBatch, (data, self.base, self.keep_lines)


class PreparedLines(NamedTuple):
    """A batch of lines canonicalized and fingerprinted (:func:`prepare_lines`)."""

    prepared: Prepared
    #: The lines (with ``keep_lines``), else None.
    lines: Optional[List[str]]
    #: ``LINE<TAB>REASON`` of each invalid line, in order (the ``--rejects`` file's lines).
    rejects: List[str]


def prepare_lines(batch: LineBatch, policy: CanonicalPolicy) -> PreparedLines:
    """Decode a batch of lines and canonicalize and fingerprint them (``BASE<TAB>LINK`` lines
    against their own base) with the run's canonical policy: the work of a ``--jobs`` worker."""
    block = decode_lines(batch.data)
    lines = block.lines
    prepared = prepare_canonical(canonicalize_lines(block, batch.base, policy))
    errors = prepared.errors
    shown = {row: f"{head}..." for row, (head, _) in block.too_long.items()}  # the head of a line too long
    rejects = [f"{shown.get(i, lines[i])}\t{reason(errors[i])}" for i in sorted(errors)]
    return PreparedLines(prepared, lines if batch.keep_lines else None, rejects)


class FilterRun:
    """One ``filter`` run: reads lines, claims them in batches, writes the winners and the rejects.

    A page becomes seen only once its line is written: each batch is held
    (:meth:`Deduplicator.hold_batch`), its lines written and flushed, and only then committed;
    a batch whose write fails is abandoned, its pages handed back to the store, or, where the
    store cannot take them back (``redisbloom``), kept in the unwritten-pages file.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        dedup: Deduplicator,
        reader: InputReader,
        rejects: Optional[Output],
        interruptions: Interruptions,
        unwritten: UnwrittenPages,
    ) -> None:
        self.args = args
        self.dedup = dedup
        self.reader = reader
        self.rejects = rejects
        self.interruptions = interruptions
        self.unwritten = unwritten
        self.out = Output(stdout(), "stdout", until_read=True)  # a page is seen once its line is read
        progress = sys.stderr.isatty() if args.progress is None else args.progress
        self.progress = Progress(sys.stderr, progress, reader.total_bytes)
        self.started = time.monotonic()
        self.lines = 0
        self.invalid = 0
        self.new = 0
        #: Pages of batches given up whose claims the store kept (in the unwritten-pages file).
        self.stranded = 0
        #: Pages written whose commit the store never confirmed, and until when its leases hold them.
        self.held: Optional[Tuple[int, float]] = None

    def run(self) -> None:
        """Claim every line of the inputs, a batch at a time, in input order; with ``--jobs``
        above 1, worker processes prepare batches ahead beside this one (:mod:`._jobs`)."""
        keep_lines = self.args.output == "raw"
        batches = (
            LineBatch(data, self.args.base, keep_lines)
            for data in line_batches(self.reader.raw_blocks(), self.args.batch_size)
        )
        with OrderedWork(partial(prepare_lines, policy=self.dedup.policy), self.args.jobs) as work:
            for _, prepared in work.map(batches, self.reader.may_wait):
                self._claim(prepared)
                self.progress.update(self.lines, self.reader.bytes_read)

    def _claim(self, batch_lines: PreparedLines) -> None:
        # Held, printed, committed and counted as one step: a signal waits for its end, so no
        # page is seen without being printed.
        with self.interruptions.deferred():
            batch = self.dedup.hold_prepared(batch_lines.prepared)
            if batch_lines.lines is None:
                winners = batch.won_canonical()
            else:
                winners = list(compress(batch_lines.lines, batch.won))
            try:
                self.out.write_lines(winners)
            except BaseException:
                self._give_back(batch, len(batch.won))
                raise
            try:
                batch.commit()
            except StoreUnavailable:
                if batch.held_until is not None:
                    self.held = (len(batch.won_canonical()), batch.held_until)
                raise
            if self.rejects is not None and batch_lines.rejects:
                self.rejects.write_lines(batch_lines.rejects)
            self.lines += len(batch.won)
            self.invalid += len(batch.errors)
            self.new += len(winners)

    def _give_back(self, batch: HeldBatch, lines: int) -> None:
        """Abandon a batch that could not be written. Its pages go back to the store, to be
        printed by a later run; those the store keeps (``redisbloom``) go to the unwritten-pages
        file, and the batch counts as read, its pages as unwritten."""
        stranded = batch.abandon()
        if stranded:
            self.unwritten.keep(stranded)
            self.lines += lines
            self.invalid += len(batch.errors)
            self.stranded += len(stranded)

    def summary(self, interrupted: Optional[int]) -> str:
        """The end-of-run report for stderr (one screen)."""
        seconds = time.monotonic() - self.started
        rate = self.lines / seconds if seconds > 0 else 0.0
        duplicates = self.lines - self.invalid - self.new - self.stranded - self.dedup.stats.held
        bloom = self.dedup.local_filter
        fill = bloom.fill_ratio
        error_now = bloom.estimated_error_rate
        loss, loss_note = _loss(self.new, error_now, self.dedup)
        if interrupted:
            name = signal.Signals(interrupted).name
            head = f"crawldedup filter: interrupted by {name} after {seconds:.2f} s, summary so far"
        else:
            head = f"crawldedup filter: done in {seconds:.2f} s"
        rejects = f"   written to {self.args.rejects}" if self.args.rejects and self.invalid else ""
        rows = [
            head,
            f"  lines read          {self.lines:>12,}   {rate:,.0f} lines/s",
            f"  invalid             {self.invalid:>12,}{rejects}",
            f"  duplicates dropped  {duplicates:>12,}",
            f"  new                 {self.new:>12,}",
            *([f"  unwritten           {self.stranded:>12,}   kept in {self.unwritten.path}"] if self.stranded else []),
            f"  false-positive loss {loss:>12}   {loss_note}",
            f"  filter fill         {fill:>12.2%}   ~{bloom.approx_items:,} of {counted(bloom.capacity, 'item')} "
            f"at {bloom.error_rate * 100:g}% error, {bloom.path}",
        ]
        if isinstance(bloom, ExactFilterBase):
            pages = len(bloom)
            rows.append(
                f"  exact tier          {pages:>12,}   pages in {counted(len(bloom.runs()), 'run')}, in "
                f"{bloom.directory}; {sized(bloom.nbytes)} with the filter"
            )
        if bloom.grown:
            stages = bloom.stages()
            rows.append(
                f"  filter grew         {counted(len(stages) - 1, 'stage'):>12}   past its capacity of "
                f"{stages[0].capacity:,}: {bloom.capacity:,} items in all, in {bloom.path}.stage1"
                f"{f' .. .stage{len(stages) - 1}' if len(stages) > 2 else ''}"
            )
        held = self.dedup.stats.held
        if held:
            rows.append(
                f"  held by leases      {held:>12,}   pages another run or worker holds (a filter run's hold "
                f"ends within {HOLD_SECONDS:g} s: a run after {_clock_time(time.time() + HOLD_SECONDS)} wins "
                "those it left)"
            )
        if self.dedup.store is not None:
            stats = self.dedup.stats
            rows.append(
                f"  store               {self.dedup.config.strategy:>12}   {self.dedup.store.description}, "
                f"{counted(stats.round_trips, 'round trip')}, {stats.answered_locally:,} answered locally"
            )
        return "\n".join(rows)


def _clock_time(seconds: float) -> str:
    """A time of day for a user, local time: ``14:03:27``."""
    return time.strftime("%H:%M:%S", time.localtime(seconds))


def _loss(new: int, error_now: float, dedup: Deduplicator) -> Tuple[str, str]:
    """Pages wrongly dropped as seen, and how that figure was found.

    None with ``--verify-hits`` (the store rechecks every hit); measured when the store checked
    a sample of the local hits; else at most ``new * p / (1 - p)`` with ``p`` the filter's
    false-positive rate at the end of the run (it only grows as the run adds, so every earlier
    lookup had a lower one).
    """
    stats = dedup.stats
    if isinstance(dedup.local_filter, ExactFilterBase):
        return (
            "0",
            f"pages (the exact tier confirms every hit of the filter; chance that a new page's 64 bits "
            f"meet a held one's: {error_now:.2g})",
        )
    if dedup.verify_hits:
        return (
            "0",
            f"pages (every local hit verified in the store; {counted(stats.false_hits, 'false positive')} caught)",
        )
    if stats.false_hit_rate is not None:
        return (
            f"~{stats.false_hit_rate * stats.local_hits:,.1f}",
            f"pages (measured: {stats.false_hits:,} of {counted(stats.sampled_hits, 'sampled local hit')} "
            f"{'was' if stats.false_hits == 1 else 'were'} new)",
        )
    bound = new * error_now / (1 - error_now) if error_now < 1 else float(new)
    return (
        "< 0.1" if bound < 0.1 else f"<= {bound:,.1f}",
        f"pages (estimate; filter false-positive rate now {error_now:.2g})",
    )


def _filter_config(args: argparse.Namespace) -> Tuple[DedupConfig, str]:
    """The environment's settings for a ``filter`` run, and its state file.

    :raises CLIError: for a bad environment variable (2).
    """
    try:
        config = DedupConfig.from_env()
    except ValueError as exc:  # names the variable
        raise usage_error("filter", str(exc)) from None
    return config, args.state or config.state_path or DEFAULT_STATE


def _lock_state(state: str) -> StateLock:
    """Hold the state file for this run: one run at a time writes it.

    :raises CLIError: (3) naming the process that holds it, or why the lock cannot be made.
    """
    with using(f"state file {state}"):
        return StateLock(state)


def _open_deduplicator(args: argparse.Namespace, config: DedupConfig, state: str) -> Deduplicator:
    """The Deduplicator for a ``filter`` run: options first, then the environment, then defaults.

    :raises CLIError: for a bad setting (2), a bad state file (3) or an unreachable store (5).
    """
    strategy = args.strategy or _default_strategy(config, state)
    try:
        return Deduplicator(
            strategy,
            config=config,
            state=state,
            redis_url=args.redis_url,
            namespace=args.namespace,
            capacity=args.capacity,
            error_rate=args.error_rate,
            verify_hits=args.verify_hits,
            crawl_round=args.round,
            ttl_days=args.ttl_days,
            generations=args.generations,
            sqlite_path=args.sqlite or config.sqlite_path or (DEFAULT_SQLITE if strategy == "sqlite" else None),
            policy=chosen_policy(args.policy, "filter", args.policy_file),
            postgres_url=args.postgres_url,
            service_url=args.service_url,
            local_tier=args.local_tier,
        )
    except (OSError, ValueError) as exc:
        error = error_for(exc, f"state file {state}")
        if error is None:  # a setting out of range, naming it
            raise usage_error("filter", str(exc)) from None
        raise error from None


def _default_strategy(config: DedupConfig, state: str) -> str:
    """The strategy without --strategy: $CRAWLDEDUP_STRATEGY's, else ``exact``, but ``local`` to go
    on with a state file made by the Bloom filter alone (the summary then says what it may lose)."""
    found = SETTINGS["strategy"].find(os.environ)
    if found is not None and found[1].strip():
        return config.strategy
    try:
        if os.path.exists(state) and state_tier(state) == BLOOM_TIER:
            return LOCAL
    except ValueError:  # not a state file: opening it says so
        pass
    return EXACT


def _check_not_an_input(path: str, inputs: List[str], option: str) -> None:
    """Refuse an output that is one of the inputs: opening it would empty that input first.

    :raises CLIError: (2) naming both.
    """
    for name in inputs:
        if name != "-" and os.path.exists(path) and os.path.exists(name) and os.path.samefile(path, name):
            raise usage_error("filter", f"{option} {path} is the input {name}: writing it would empty it first")


def run_filter(args: argparse.Namespace) -> int:
    """Print the first occurrence of each page; see :func:`build_parser` for the options."""
    reader = InputReader(args.inputs, idle_seconds=args.flush_after)
    reader.check_readable()
    if args.jobs == 0:
        args.jobs = available_cores()
    rejects = None
    if args.rejects:
        _check_not_an_input(args.rejects, args.inputs, "--rejects")
        with using(f"cannot write {args.rejects}", ExitCode.IO):
            rejects = Output(open(args.rejects, "wb"), args.rejects)
    unwritten = UnwrittenPages(args.unwritten or DEFAULT_UNWRITTEN)
    config, state = _filter_config(args)
    try:
        lock = _lock_state(state)
        try:
            dedup = _open_deduplicator(args, config, state)
        except BaseException:
            lock.release()
            raise
        try:
            with Interruptions() as interruptions:
                job = FilterRun(args, dedup, reader, rejects, interruptions, unwritten)
                interrupted, failure = None, None
                try:
                    job.run()
                except KeyboardInterrupt:
                    interrupted = interruptions.signum or signal.SIGINT
                except CLIError as exc:  # an output that cannot be written, an input that cannot be read
                    failure = exc
                finally:
                    interruptions.settle()
                    job.progress.clear()
                if failure is None:
                    try:  # on disk before the state file is closed
                        job.out.sync()
                    except CLIError as exc:
                        failure = exc
                if failure is not None:  # one line, as every error (the batches written are committed)
                    raise failure
                if not args.quiet:
                    print(job.summary(interrupted), file=sys.stderr)
        except BrokenPipeError:
            raise
        except OSError as exc:  # StoreUnavailable is a ConnectionError
            error = error_for(exc, f"state file {dedup.local_filter.path}")
            assert error is not None  # every OSError has a line
            if isinstance(exc, StoreUnavailable) and job.held is not None:
                pages, until = job.held
                error = CLIError(
                    error.exit_code,
                    f"{error}; {counted(pages, 'page')} of the last batch, written, stay held by this run's "
                    f"leases until {_clock_time(until)} (a run after then prints them again)",
                )
            raise error from None
        finally:
            report = unwritten.report()
            if report:  # even with --quiet: pages the store keeps but nobody printed
                print(f"crawldedup filter: {report}", file=sys.stderr)
            dedup.close()
            lock.release()
    finally:
        if rejects is not None:
            rejects.stream.close()
    return 128 + interrupted if interrupted else ExitCode.OK


def add_command(commands: Any, epilog: str, formatter: type) -> None:
    """Add ``filter`` to the ``crawldedup`` command's subcommands."""
    filt = commands.add_parser(
        "filter",
        help="print the first occurrence of each page",
        description="Print the first occurrence of each page, remembering pages in a filter file "
        "so that the next run prints only what is new. A summary ends on stderr.",
        epilog=epilog,
        formatter_class=formatter,
    )
    filt.add_argument("inputs", nargs="*", metavar="FILE", help=INPUTS_HELP)
    filt.add_argument(
        "--state",
        type=file_path,
        metavar="FILE",
        help="the state file, a Bloom filter (with the exact tier, the pages' fingerprints in FILE.exact "
        f"beside it), created when missing (default $CRAWLDEDUP_STATE or ./{DEFAULT_STATE})",
    )
    filt.add_argument(
        "--capacity",
        type=positive_int,
        metavar="N",
        help="URLs a new filter is sized for (default $CRAWLDEDUP_CAPACITY or 10,000,000)",
    )
    filt.add_argument(
        "--error-rate",
        type=probability,
        metavar="P",
        help="false-positive rate of a new filter at capacity (default $CRAWLDEDUP_ERROR_RATE or 0.01)",
    )
    filt.add_argument(
        "--output",
        choices=("canonical", "raw"),
        default="canonical",
        help="print the canonical form (default) or the line as read",
    )
    filt.add_argument("--base", type=base_url, help=BASE_HELP)
    filt.add_argument(
        "--strategy",
        type=strategy,
        metavar="{" + ",".join(STRATEGIES) + "}",
        help="exact: the state file alone decides, a Bloom filter in front of the pages' fingerprints "
        "beside it, no page lost (the default, but a state file made by local goes on with local); local: "
        "the Bloom filter alone, a false positive loses its page (up to --error-rate of the new pages); "
        "or a store ($CRAWLDEDUP_STRATEGY; " + ", ".join(f"{alias} is {name}" for alias, name in ALIASES.items()) + ")",
    )
    filt.add_argument(
        "--local-tier",
        choices=LOCAL_TIERS,
        help="with a store, what answers before it: exact (a hit of the filter is confirmed beside the "
        "state file: no round trip, no page lost) or bloom (the filter alone: each false positive "
        "loses its page, up to --error-rate of the new pages) ($CRAWLDEDUP_LOCAL_TIER; default exact "
        "for a new state file, an existing one's own)",
    )
    add_location_options(filt)
    filt.add_argument(
        "--ttl-days",
        type=days,
        metavar="DAYS",
        help="the recrawl window: a page is seen for DAYS, then won again; 0 = for ever "
        "($CRAWLDEDUP_TTL_DAYS, default 30)",
    )
    filt.add_argument(
        "--generations",
        type=positive_int,
        metavar="G",
        help="generations of the window: a page is won again at most DAYS / G late "
        "($CRAWLDEDUP_GENERATIONS, default 4)",
    )
    filt.add_argument(
        "--namespace",
        type=namespace_name,
        metavar="NAME",
        help="the crawl's key prefix in the store ($CRAWLDEDUP_NAMESPACE)",
    )
    add_policy_option(filt)
    filt.add_argument(
        "--round",
        type=round_name,
        metavar="NAME",
        help="a crawl round: a fresh dedup space <namespace>:<NAME> in the store and the state file",
    )
    filt.add_argument(
        "--verify-hits",
        action="store_true",
        help="send the local filter's hits to the store too (with --local-tier bloom: then no false "
        "positive loses a page; the exact tier loses none without it)",
    )
    filt.add_argument(
        "--rejects", type=file_path, metavar="FILE", help="write each invalid line there as LINE<TAB>REASON"
    )
    filt.add_argument(
        "--unwritten",
        type=file_path,
        metavar="FILE",
        help="append there the pages the store keeps although their lines could not be written "
        f"(redisbloom: it cannot take a claim back; default ./{DEFAULT_UNWRITTEN}, created when needed)",
    )
    filt.add_argument(
        "--batch-size",
        type=positive_int,
        default=BATCH_LINES,
        metavar="N",
        help=f"lines per claim (default {BATCH_LINES:,}); output appears a batch at a time",
    )
    filt.add_argument(
        "--flush-after",
        type=seconds,
        default=IDLE_SECONDS,
        metavar="SECONDS",
        help="when a pipe has been silent this long, claim and write the lines read so far as a "
        f"batch (default {IDLE_SECONDS:g}: a crawler still writing links gets its pages back at once)",
    )
    filt.add_argument(
        "--jobs",
        type=jobs,
        default=0,
        metavar="N",
        help="processes that canonicalize and fingerprint batches, the main one among them, which "
        "also claims and writes them in input order (default 0: the cores available, here "
        f"{available_cores()}; 1: all in one process, for a machine other jobs keep busy)",
    )
    filt.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    filt.add_argument("-q", "--quiet", action="store_true", help="no summary")
    filt.set_defaults(run=run_filter)
