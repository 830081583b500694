"""The ``crawldedup`` command: filter a crawl frontier, check canonical forms, audit a fetch log,
inspect and merge filters, check a claim store and report what it holds.

Exit codes (``EXIT_CODES``, also in ``--help`` and docs/cli.md)::

    0    success
    1    canonicalize: at least one line was not an accepted URL; content: at least one page could
         not be checked; doctor: at least one check failed
    2    usage: an unknown option, a bad option value or a bad environment variable
    3    a state or filter file is missing, corrupt or incompatible, merge would overwrite a file,
         or the store's namespace was made by another store kind or canonical policy, does not
         exist (stats, migrate), is half way through a migration elsewhere, or holds a seed that
         is incomplete, of another file or of another window
    4    an input could not be read, or an output could not be written
    5    the claim store (Redis, SQLite) is unavailable after its retries: unreachable, timed out,
         locked
    6    the claim store refused, not retried: a misconfiguration the message names (no RedisBloom
         module, a wrong or missing password, ACL, a read-only replica, maxmemory, not a SQLite
         database)
    130  interrupted by SIGINT (Ctrl-C): the batch in flight was finished and the summary printed
    141  stdout was closed by its reader, such as head (SIGPIPE)
    143  terminated by SIGTERM: the batch in flight was finished and the summary printed

Errors are one line on stderr, ``crawldedup: error: ...``, never a traceback; a usage error
ends with ``see crawldedup COMMAND --help``.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import pickle
import signal
import sys
import textwrap
import time
from functools import partial
from itertools import compress
from typing import IO, Any, List, NamedTuple, NoReturn, Optional, Sequence, SupportsIndex, Tuple, cast

import numpy as np

from .. import __version__
from .._checks import check_error_rate, check_name, check_postgres_url, redis_url_refusal
from .._wording import counted
from ..bloom import FilterFile, FilterFileError, GrowingFilter, LocalFilter, WindowedBloomFilter, open_filter
from ..canonical import (
    Canonicalized,
    CanonicalPolicy,
    InvalidURL,
    canonicalize,
    canonicalize_each,
    canonicalize_many,
    describe_policy,
)
from ..config import SETTINGS, DedupConfig
from ..dedup import Deduplicator, HeldBatch, Prepared, prepare_canonical
from ..dedup.state import state_policy
from ..stores.base import NamespaceConflict, StoreRefused, StoreUnavailable
from ..stores.factory import ALIASES, REDIS_STRATEGIES, STRATEGIES, STRATEGY_CHOICES, strategy_name
from . import content
from ._io import (
    EXIT_CODES,
    EXIT_INVALID,
    EXIT_IO,
    EXIT_OK,
    EXIT_STATE,
    EXIT_STORE,
    EXIT_STORE_REFUSED,
    EXIT_USAGE,
    Block,
    CLIError,
    InputReader,
    Interruptions,
    Output,
    Progress,
    UnwrittenPages,
    as_read,
    decode_lines,
    line_batches,
)
from ._jobs import OrderedWork, available_cores
from ._store_options import DEFAULT_SQLITE, add_policy_option, chosen_policy
from .audit import Audit, render
from .doctor import add_command as add_doctor_command
from .migrate import add_command as add_migrate_command
from .offline import add_command as add_offline_command
from .serve import add_command as add_serve_command
from .stats import add_command as add_stats_command

#: Lines per claim: 10,000 keeps the fixed cost of a call (canonicalize_many, one hash_many, one
#: store round trip) small against the per-line work, and a batch of output is one write.
BATCH_LINES = 10_000
#: A tab separates a base from a relative link on one line (``BASE<TAB>LINK``). A tab can never
#: be part of a URL (browsers and the canonical policy remove it), so the form is unambiguous.
BASE_SEPARATOR = "\t"
#: Pages and spellings per page that ``audit`` shows without --top and --spellings: one screen.
AUDIT_TOP = 20
AUDIT_SPELLINGS = 5
#: Where ``filter`` keeps its state without --state or $CRAWLDEDUP_STATE.
DEFAULT_STATE = "crawldedup.bloom"
#: Where ``filter`` keeps the pages a store kept but that could not be written, without --unwritten.
DEFAULT_UNWRITTEN = "crawldedup.unwritten"


# --------------------------------------------------------------------------- lines to URLs


def _canonicalize_lines(
    lines: List[str], base: Optional[str], policy: CanonicalPolicy, undecodable: bool = False
) -> Canonicalized:
    """Canonicalize lines as read: a ``BASE<TAB>LINK`` line against its own base, any other
    line against ``base``.

    The lines without a tab (nearly all of a frontier) go to one :func:`canonicalize_many` call
    that is all compiled; only the lines with one are split, and grouped by base
    (:func:`canonicalize_each`), in Python.

    :param undecodable: some lines may hold bytes that are not UTF-8 (``InputReader.undecodable``):
        those links and bases are handed over as bytes, so the canonicalizer's reason names the
        byte and its offset as it does for a caller of the API.
    """
    relative = [i for i, line in enumerate(lines) if BASE_SEPARATOR in line]
    if not relative:
        return canonicalize_many(as_read(lines) if undecodable else lines, base=base, policy=policy)
    table = np.array(lines, dtype=object)
    absolute = np.ones(len(lines), dtype=bool)
    absolute[relative] = False
    pairs = [lines[i].partition(BASE_SEPARATOR) for i in relative]
    links, bases = [link for _, _, link in pairs], [page for page, _, _ in pairs]
    plain: List[str] = table[absolute].tolist()
    if undecodable:
        found = canonicalize_many(as_read(plain), base=base, policy=policy)
        joined = canonicalize_each(as_read(links), as_read(bases), policy=policy)
    else:
        found = canonicalize_many(plain, base=base, policy=policy)
        joined = canonicalize_each(links, bases, policy=policy)
    rows = np.flatnonzero(absolute)
    table[rows] = found.urls
    table[relative] = joined.urls
    errors = {int(rows[i]): error for i, error in found.errors.items()}
    errors.update((relative[i], error) for i, error in joined.errors.items())
    return Canonicalized(table.tolist(), dict(sorted(errors.items())))


def _display(name: str) -> str:
    return "<stdin>" if name == "-" else name


def _reason(error: Exception) -> str:
    """An error's message on one line without tabs (the rejects file is tab-separated)."""
    return " ".join(str(error).split())


# --------------------------------------------------------------------------- filter


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
    lines, undecodable = decode_lines(batch.data)
    prepared = prepare_canonical(_canonicalize_lines(lines, batch.base, policy, undecodable))
    errors = prepared.errors
    rejects = [f"{lines[i]}\t{_reason(errors[i])}" for i in sorted(errors)]
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
        self.out = Output(_stdout(), "stdout", until_read=True)  # a page is seen once its line is read
        progress = sys.stderr.isatty() if args.progress is None else args.progress
        self.progress = Progress(sys.stderr, progress, reader.total_bytes)
        self.started = time.monotonic()
        self.lines = 0
        self.invalid = 0
        self.new = 0
        #: Pages of batches given up whose claims the store kept (in the unwritten-pages file).
        self.stranded = 0

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
                self.out.write_lines(cast(List[str], winners))
            except BaseException:
                self._give_back(batch, len(batch.won))
                raise
            batch.commit()
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
        duplicates = self.lines - self.invalid - self.new - self.stranded
        bloom = self.dedup.local_filter
        fill = bloom.fill_ratio
        error_now = bloom.estimated_error_rate
        loss, loss_note = _loss(self.new, error_now, self.dedup)
        if interrupted:
            head = f"crawldedup filter: interrupted by {signal.Signals(interrupted).name} after {seconds:.2f} s, summary so far"
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
        if bloom.grown:
            stages = bloom.stages()
            rows.append(
                f"  filter grew         {counted(len(stages) - 1, 'stage'):>12}   past its capacity of "
                f"{stages[0].capacity:,}: {bloom.capacity:,} items in all, in {bloom.path}.stage1"
                f"{f' .. .stage{len(stages) - 1}' if len(stages) > 2 else ''}"
            )
        if self.dedup.store is not None:
            stats = self.dedup.stats
            rows.append(
                f"  store               {self.dedup.config.strategy:>12}   {self.dedup.store.description}, "
                f"{counted(stats.round_trips, 'round trip')}, {stats.answered_locally:,} answered locally"
            )
        return "\n".join(rows)


def _loss(new: int, error_now: float, dedup: Deduplicator) -> Tuple[str, str]:
    """Pages wrongly dropped as seen, and how that figure was found.

    None with ``--verify-hits`` (the store rechecks every hit); measured when the store checked
    a sample of the local hits; else at most ``new * p / (1 - p)`` with ``p`` the filter's
    false-positive rate at the end of the run (it only grows as the run adds, so every earlier
    lookup had a lower one).
    """
    stats = dedup.stats
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


def _open_deduplicator(args: argparse.Namespace) -> Deduplicator:
    """The Deduplicator for a ``filter`` run: options first, then the environment, then defaults.

    :raises CLIError: for a bad setting (2), a bad state file (3) or an unreachable store (5).
    """
    try:
        config = DedupConfig.from_env()
    except ValueError as exc:  # names the variable
        raise usage_error("filter", str(exc)) from None
    strategy = args.strategy or config.strategy
    state = args.state or config.state_path or DEFAULT_STATE
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
            policy=args.policy,
            postgres_url=args.postgres_url,
        )
    except NamespaceConflict as exc:
        raise CLIError(EXIT_STATE, str(exc)) from None
    except OSError as exc:
        raise _os_error(exc, f"state file {state}") from None
    except FilterFileError as exc:
        raise CLIError(EXIT_STATE, str(exc)) from None
    except ValueError as exc:  # a setting out of range
        raise usage_error("filter", str(exc)) from None


def _os_error(exc: OSError, what: str) -> CLIError:
    """A CLIError for an OSError met while using ``what`` (a state or filter file): a store
    that refused is exit code 6, an unreachable one 5, anything else a state file problem (3)."""
    if isinstance(exc, StoreRefused):
        return CLIError(EXIT_STORE_REFUSED, str(exc))
    if isinstance(exc, StoreUnavailable):
        return CLIError(EXIT_STORE, str(exc))
    return CLIError(EXIT_STATE, f"{what}: {exc.strerror or exc}")


def run_filter(args: argparse.Namespace) -> int:
    """Print the first occurrence of each page; see :func:`build_parser` for the options."""
    reader = InputReader(args.inputs)
    reader.check_readable()
    if args.jobs == 0:
        args.jobs = available_cores()
    rejects = None
    if args.rejects:
        try:
            rejects = Output(open(args.rejects, "wb"), args.rejects)
        except OSError as exc:
            raise CLIError(EXIT_IO, f"cannot write {args.rejects}: {exc.strerror or exc}") from None
    unwritten = UnwrittenPages(args.unwritten or DEFAULT_UNWRITTEN)
    try:
        dedup = _open_deduplicator(args)
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
            raise _os_error(exc, f"state file {dedup.local_filter.path}") from None
        finally:
            report = unwritten.report()
            if report:  # even with --quiet: pages the store keeps but nobody printed
                print(f"crawldedup filter: {report}", file=sys.stderr)
            dedup.close()
    finally:
        if rejects is not None:
            rejects.stream.close()
    return 128 + interrupted if interrupted else EXIT_OK


# --------------------------------------------------------------------------- canonicalize


def run_canonicalize(args: argparse.Namespace) -> int:
    """Print the canonical form of each line; an invalid line prints an empty line.

    The output stays line-aligned with the input (``paste`` them side by side); each invalid
    line's reason goes to stderr as ``NAME:LINE: reason`` and the exit code is 1.
    """
    policy = chosen_policy(args.policy, "canonicalize")
    reader = InputReader(args.inputs)
    reader.check_readable()
    out = Output(_stdout(), "stdout")
    invalid = 0
    for name, first_line, lines in reader.blocks():
        result = _canonicalize_lines(lines, args.base, policy, reader.undecodable)
        errors = result.errors
        out.write_lines([url or "" for url in result.urls])
        for index in sorted(errors):
            print(f"{_display(name)}:{first_line + index}: {_reason(errors[index])}", file=sys.stderr)
        invalid += len(errors)
    return EXIT_INVALID if invalid else EXIT_OK


# --------------------------------------------------------------------------- audit


def run_audit(args: argparse.Namespace) -> int:
    """Report the pages a log of fetched URLs holds more than once, and the spellings that merged."""
    reader = InputReader(args.inputs)
    reader.check_readable()
    audit = Audit(chosen_policy(args.policy, "audit"))
    audit.read(reader)
    top = args.top if args.top is not None or args.json else AUDIT_TOP
    spellings = args.spellings if args.spellings is not None or args.json else AUDIT_SPELLINGS
    report = audit.report(top, spellings)
    text = json.dumps(report, indent=2) + "\n" if args.json else render(report)
    Output(_stdout(), "stdout").write_lines(text.splitlines())
    return EXIT_OK


def _stdout() -> IO[bytes]:
    return sys.stdout.buffer


# --------------------------------------------------------------------------- info and merge


def _open_filter(path: str) -> LocalFilter:
    """Open an existing filter file (plain or windowed) read-only.

    :raises CLIError: (``EXIT_STATE``) a missing, unreadable or invalid file.
    """
    try:
        return open_filter(path, "r")
    except OSError as exc:
        raise _os_error(exc, f"filter file {path}") from None
    except ValueError as exc:  # FilterFileError names the path and the problem
        raise CLIError(EXIT_STATE, str(exc)) from None


def run_info(args: argparse.Namespace) -> int:
    """Print a filter file's parameters and statistics, one ``name  value`` row each."""
    with _open_filter(args.file) as bloom:
        grown = bloom if isinstance(bloom, GrowingFilter) else None
        first = cast(FilterFile, grown.base if grown else bloom)
        size = os.path.getsize(args.file)
        metadata = bloom.metadata.decode("ascii", "backslashreplace") or "(none)"
        windowed = isinstance(first, WindowedBloomFilter)
        slots = f" in each of {first.window.live_count} slots" if isinstance(first, WindowedBloomFilter) else ""
        rows = [
            ("file", args.file),
            ("format", f"crawldedup filter v{first._open_file().header.version}, 64-byte blocks, MurmurHash3 x64-128"),
            ("size", f"{size:,} bytes ({size / 2**20:,.1f} MiB)"),
            ("capacity", f"{first.capacity:,}{' per window' if windowed else ''}"),
            ("error rate", f"{first.error_rate:g}"),
            (
                "bits",
                f"{first.num_bits:,} ({counted(first.num_blocks, 'block')}{slots}, "
                f"{counted(first.num_hashes, 'hash', 'hashes')} per key)",
            ),
            ("bits per item", f"{first.num_bits / first.capacity:.2f} at capacity"),
            ("fill", f"{bloom.fill_ratio:.4%}"),
            ("estimated items", f"{bloom.approx_items:,}"),
            ("error rate now", f"{bloom.estimated_error_rate:.3g}"),
            ("metadata", metadata),
        ]
        try:
            rows.insert(len(rows) - 1, ("policy", describe_policy(state_policy(bloom, args.file))))
        except FilterFileError:  # a filter file that no crawl stamped: no policy to name
            pass
        if isinstance(first, WindowedBloomFilter):
            rows[5:5] = [("window", f"{first.window.describe()} (claims forgotten after it)")] + [
                (
                    f"generation {g.generation}",
                    f"slot {g.slot}, from {_utc(g.starts_at)}, forgotten at "
                    f"{_utc(g.forgotten_at)}, ~{g.approx_items:,} items",
                )
                for g in first.generations()
            ]
        if grown is not None:
            stages = grown.stages()
            rows[4:4] = [
                (
                    "grown",
                    f"{counted(len(stages) - 1, 'stage')} past its capacity: holds "
                    f"{grown.capacity:,} keys in all, {grown.num_bits / 8 / 2**20:,.1f} MiB",
                )
            ] + [
                (
                    f"stage {stage.number}",
                    f"{stage.path}: capacity {stage.capacity:,} at error rate "
                    f"{stage.error_rate:g}, ~{stage.approx_items:,} items, full at {stage.full_at:,}",
                )
                for stage in stages
            ]
    width = max(len(name) for name, _ in rows) + 2
    _stdout().write("".join(f"{name:<{width}}{value}\n" for name, value in rows).encode("utf-8", "backslashreplace"))
    return EXIT_OK


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def run_merge(args: argparse.Namespace) -> int:
    """Write the union of compatible filters to a new file (all or nothing)."""
    if os.path.lexists(args.output) and not args.force:
        raise CLIError(EXIT_STATE, f"{args.output} exists: refusing to overwrite it (use --force to replace it)")
    filters = [_open_filter(path) for path in args.files]
    try:
        for path, bloom in zip(args.files, filters):
            if isinstance(bloom, GrowingFilter):
                raise CLIError(
                    EXIT_STATE,
                    f"cannot merge {path}: it grew past its capacity into "
                    f"{counted(len(bloom.stages()) - 1, 'stage file')} ({path}.stage1 ...), "
                    "and merge takes only filters that never grew",
                )
        plain = cast(List[FilterFile], filters)
        first = plain[0]
        for path, other in zip(args.files[1:], plain[1:]):
            _check_compatible(args.files[0], first, path, other)
        # Built beside the target and renamed into place: a failure leaves no half-merged file.
        directory = os.path.dirname(os.path.abspath(args.output))
        temporary = os.path.join(directory, f".{os.path.basename(args.output)}.{os.getpid()}.merging")
        try:
            merged = first.copy(path=temporary, overwrite=True)
            with merged:
                for other in plain[1:]:
                    merged.union(other)
                merged.flush()
            os.replace(temporary, args.output)
        except OSError as exc:
            raise CLIError(EXIT_IO, f"cannot write {args.output}: {exc.strerror or exc}") from None
        finally:
            if os.path.lexists(temporary):
                os.unlink(temporary)
    finally:
        for bloom in filters:
            bloom.close()
    print(f"crawldedup merge: wrote {args.output} from {counted(len(filters), 'filter')}", file=sys.stderr)
    return EXIT_OK


def _window_of(bloom: FilterFile) -> str:
    return bloom.window.describe() if isinstance(bloom, WindowedBloomFilter) else "none (claims never expire)"


def _check_compatible(first_path: str, first: FilterFile, path: str, other: FilterFile) -> None:
    """Refuse to merge filters of another window, shape or canonical policy.

    :raises CLIError: (``EXIT_STATE``) naming both files and what differs.
    """
    if _window_of(first) != _window_of(other):
        raise CLIError(
            EXIT_STATE,
            f"cannot merge {path} into {first_path}: different recrawl windows "
            f"({_window_of(first)} vs {_window_of(other)})",
        )
    differences = [
        f"{name} {getattr(first, name)!r} vs {getattr(other, name)!r}"
        for name in ("capacity", "error_rate", "num_blocks", "num_hashes", "metadata")
        if getattr(first, name) != getattr(other, name)
    ]
    if differences:
        raise CLIError(
            EXIT_STATE, f"cannot merge {path} into {first_path}: incompatible filters ({'; '.join(differences)})"
        )


# --------------------------------------------------------------------------- arguments


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _jobs(text: str) -> int:
    if text.strip() == "0":
        return 0
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer, or 0 for the cores available, got {text!r}"
        ) from None


def _probability(text: str) -> float:
    try:
        return check_error_rate(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from None


def _days(text: str) -> float:
    setting = SETTINGS["ttl_days"]
    try:
        value = float(text)
        setting.check(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {setting.allowed}, got {text!r}") from None
    return value


def _strategy(text: str) -> str:
    try:
        return strategy_name(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be one of {STRATEGY_CHOICES}, got {text!r}") from None


def _round_name(text: str) -> str:
    try:
        return check_name("a round", text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _redis_url(text: str) -> str:
    refusal = redis_url_refusal(text)
    if refusal:
        raise argparse.ArgumentTypeError(refusal)
    return text


def _postgres_url(text: str) -> str:
    try:
        return check_postgres_url("the value", text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _base_url(text: str) -> str:
    try:
        canonicalize(text)
    except InvalidURL as exc:
        raise argparse.ArgumentTypeError(f"must be an absolute http(s) URL ({exc})") from None
    return text


def usage_error(command: Optional[str], message: str) -> CLIError:
    """A usage error (exit code 2): ``message`` and where the options are explained."""
    return CLIError(EXIT_USAGE, f"{message}; see crawldedup{' ' + command if command else ''} --help")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (a CLIError), not its usage text and exit."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise usage_error(self.prog.partition(" ")[2] or None, message)


class _Formatter(argparse.HelpFormatter):
    """Wraps descriptions as usual, but keeps a text of several lines (the exit codes) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _exit_codes_epilog() -> str:
    rows = [
        textwrap.fill(
            meaning, width=78, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7, break_on_hyphens=False
        )
        for code, meaning in EXIT_CODES
    ]
    return "exit codes:\n" + "\n".join(rows) + "\n\nSee docs/cli.md."


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``crawldedup`` command and its subcommands.

    Its errors raise :class:`CLIError` (exit code 2) instead of exiting.
    """
    epilog = _exit_codes_epilog()
    parser = _Parser(
        prog="crawldedup",
        description="Has this page already been claimed? Deduplicate crawl frontiers by canonical URL.",
        epilog=epilog,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"crawldedup {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    inputs_help = "files of URLs, one per line, plain or gzip (detected); '-' or none: stdin"
    base_help = "resolve relative links against this URL (a line 'BASE<TAB>LINK' carries its own base)"

    filt = commands.add_parser(
        "filter",
        help="print the first occurrence of each page",
        description="Print the first occurrence of each page, remembering pages in a filter file "
        "so that the next run prints only what is new. A summary ends on stderr.",
        epilog=epilog,
        formatter_class=_Formatter,
    )
    filt.add_argument("inputs", nargs="*", metavar="FILE", help=inputs_help)
    filt.add_argument(
        "--state",
        metavar="FILE",
        help=f"filter file, created when missing (default $CRAWLDEDUP_STATE or ./{DEFAULT_STATE})",
    )
    filt.add_argument(
        "--capacity",
        type=_positive_int,
        metavar="N",
        help="URLs a new filter is sized for (default $BLOOM_CAPACITY or 10,000,000)",
    )
    filt.add_argument(
        "--error-rate",
        type=_probability,
        metavar="P",
        help="false-positive rate of a new filter at capacity (default $BLOOM_ERROR_RATE or 0.01)",
    )
    filt.add_argument(
        "--output",
        choices=("canonical", "raw"),
        default="canonical",
        help="print the canonical form (default) or the line as read",
    )
    filt.add_argument("--base", type=_base_url, help=base_help)
    filt.add_argument(
        "--strategy",
        type=_strategy,
        metavar="{" + ",".join(STRATEGIES) + "}",
        help="claim through the local filter alone (default) or a store ($DEDUP_STRATEGY; "
        + ", ".join(f"{alias} is {name}" for alias, name in ALIASES.items())
        + ")",
    )
    filt.add_argument(
        "--redis-url",
        type=_redis_url,
        metavar="URL",
        help=f"Redis of the {', '.join(REDIS_STRATEGIES)} strategies ($REDIS_URL)",
    )
    filt.add_argument(
        "--sqlite",
        metavar="FILE",
        help=f"database of the sqlite strategy (default $CRAWLDEDUP_SQLITE or ./{DEFAULT_SQLITE})",
    )
    filt.add_argument(
        "--postgres-url",
        type=_postgres_url,
        metavar="URL",
        help="database of the postgres strategy, postgresql://user:password@host/db ($CRAWLDEDUP_POSTGRES_URL)",
    )
    filt.add_argument(
        "--ttl-days",
        type=_days,
        metavar="DAYS",
        help="the recrawl window: a page is seen for DAYS, then won again; 0 = for ever "
        "($VISITED_TTL_DAYS, default 30)",
    )
    filt.add_argument(
        "--generations",
        type=_positive_int,
        metavar="G",
        help="generations of the window: a page is won again at most DAYS / G late "
        "($CRAWLDEDUP_GENERATIONS, default 4)",
    )
    filt.add_argument("--namespace", metavar="NAME", help="the crawl's key prefix in the store ($CRAWLDEDUP_NAMESPACE)")
    add_policy_option(filt)
    filt.add_argument(
        "--round",
        type=_round_name,
        metavar="NAME",
        help="a crawl round: a fresh dedup space <namespace>:<NAME> in the store and the state file",
    )
    filt.add_argument(
        "--verify-hits",
        action="store_true",
        help="send the local filter's hits to the store too, so that a false positive loses no page",
    )
    filt.add_argument("--rejects", metavar="FILE", help="write each invalid line there as LINE<TAB>REASON")
    filt.add_argument(
        "--unwritten",
        metavar="FILE",
        help="append there the pages the store keeps although their lines could not be written "
        f"(redisbloom: it cannot take a claim back; default ./{DEFAULT_UNWRITTEN}, created when needed)",
    )
    filt.add_argument(
        "--batch-size",
        type=_positive_int,
        default=BATCH_LINES,
        metavar="N",
        help=f"lines per claim (default {BATCH_LINES:,}); output appears a batch at a time",
    )
    filt.add_argument(
        "--jobs",
        type=_jobs,
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

    canon = commands.add_parser(
        "canonicalize",
        help="print the canonical form of each URL",
        description="Print the canonical form of each line: an empty line for an invalid one, "
        "its reason on stderr, and exit code 1.",
        epilog=epilog,
        formatter_class=_Formatter,
    )
    canon.add_argument("inputs", nargs="*", metavar="FILE", help=inputs_help)
    canon.add_argument("--base", type=_base_url, help=base_help)
    add_policy_option(canon)
    canon.set_defaults(run=run_canonicalize)

    info = commands.add_parser(
        "info",
        help="describe a filter file",
        description="Print a filter file's parameters, size, fill, estimated items and error rate.",
        epilog=epilog,
        formatter_class=_Formatter,
    )
    info.add_argument("file", metavar="FILE")
    info.set_defaults(run=run_info)

    audit = commands.add_parser(
        "audit",
        help="find the pages a log of fetched URLs holds more than once",
        description="Canonicalize a log of fetched URLs as filter does and report each page fetched more "
        "than once: its fetches, the spellings that merged into it, and the rule that merged each. "
        "Invalid lines are counted.",
        epilog=epilog,
        formatter_class=_Formatter,
    )
    audit.add_argument("inputs", nargs="*", metavar="FILE", help=inputs_help)
    audit.add_argument(
        "--top",
        type=_positive_int,
        metavar="N",
        help=f"show the N most-fetched pages (default {AUDIT_TOP}; with --json: all)",
    )
    audit.add_argument(
        "--spellings",
        type=_positive_int,
        metavar="N",
        help=f"show the N most-used spellings of each page (default {AUDIT_SPELLINGS}; with --json: all)",
    )
    audit.add_argument("--json", action="store_true", help="print one JSON document (fields in docs/cli.md)")
    add_policy_option(audit)
    audit.set_defaults(run=run_audit)

    content.add_parser(commands, epilog, _Formatter)

    merge = commands.add_parser(
        "merge",
        help="union compatible filter files",
        description="Write the union of filters of the same capacity, error rate and canonical policy.",
        epilog=epilog,
        formatter_class=_Formatter,
    )
    merge.add_argument("files", nargs="+", metavar="FILE")
    merge.add_argument("-o", "--output", required=True, metavar="OUT", help="filter file to create")
    merge.add_argument("--force", action="store_true", help="replace OUT if it exists")
    merge.set_defaults(run=run_merge)
    add_serve_command(commands, epilog, _Formatter)
    add_doctor_command(commands, epilog, _Formatter)
    add_stats_command(commands, epilog, _Formatter, _round_name)
    add_migrate_command(commands, epilog, _Formatter)
    add_offline_command(commands, epilog, _Formatter)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``crawldedup`` command.

    :param argv: the arguments (``sys.argv[1:]`` when None).
    :returns: the exit code (see the module docstring).
    """
    parser = build_parser()
    try:
        # parse_known_args, so that an unknown option is reported with its subcommand's help.
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            raise usage_error(getattr(args, "command", None), f"unrecognized arguments: {' '.join(unknown)}")
        return args.run(args)
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except CLIError as exc:
        print(f"crawldedup: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (`crawldedup filter | head`): stop quietly, as `cat` would.
        _silence_stdout()
        return 128 + getattr(signal, "SIGPIPE", 13)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover  (no real stdout)
        pass
