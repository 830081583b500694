"""Worker processes that prepare batches while the main process claims and writes, in input order.

``crawldedup filter --jobs N`` canonicalizes and fingerprints its batches (the per-line work,
nearly nine tenths of a run) in N processes: the main one and N - 1 workers. The main process
claims, writes and commits every batch, one at a time and in input order, as ``--jobs 1`` does,
and prepares a batch itself whenever every worker has its fill: N processes for N cores, so
none takes turns with another (with N workers besides the main process, --jobs 2 spent 13% more
CPU a line than --jobs 1; with N - 1, 8%), and the batches prepared in the main process cross
no pipe. A worker only ever computes: it holds no claim, writes no output and never touches
the state file or the store, so a batch that was prepared but not claimed (the run stopped
first) leaves no trace.

Processes rather than threads: the compiled canonicalizer holds the GIL while it builds Python
strings, so threads would take turns. The bulk of a batch (its lines; its fingerprints and
canonical URLs) crosses through memory the processes share, in one slot per batch in flight,
and only a small message through the pipe: writing large messages through a pipe cost both
sides more than the copy. Each worker has a pipe of its own and up to four batches in hand,
and returns its results in the order it got the batches, so the main process takes them in
input order with no helper thread (a thread there would compete with it for the GIL). The
first batch is prepared in the main process and the workers are forked on the second (a run
of one batch has nothing to share out); they ignore SIGINT, so a Ctrl-C in a terminal, which
reaches the whole process group, stops the run between two batches as with ``--jobs 1``.
"""

from __future__ import annotations

import gc
import math
import mmap
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from collections import deque
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Callable, Deque, Generic, Iterator, List, Optional, Tuple, TypeVar, cast

from ..bloom.writer_lock import forking_readers
from .exits import CLIError, ExitCode

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows)
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")
R = TypeVar("R")

#: Items in flight per worker: one being prepared and three waiting, so that a worker the
#: scheduler sets aside for a moment holds up neither the other workers nor the main process
#: (with one waiting, a quarter of two cores stayed idle: --jobs 2 ran 1.24x --jobs 1 on 10M
#: lines, against 1.6x-1.8x with three; seven gained nothing more).
AHEAD_PER_JOB = 4
#: Bytes a pipe to or from a worker holds (a batch too large for its slot crosses it whole).
PIPE_BYTES = 1 << 20
#: Bytes of shared memory for one batch in flight, each way: a batch of 10,000 frontier lines is
#: about 600 KB, prepared about 800 KB. Only the pages used are ever touched.
SLOT_BYTES = 8 << 20


def available_cores(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The cores this process may keep busy: those it may run on (its CPU affinity, which
    ``taskset`` and ``docker --cpuset-cpus`` set), or fewer under a CPU quota (``docker --cpus``,
    a Kubernetes CPU limit), whose time the extra processes would only share."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover  (no affinity outside Linux)
        cores = os.cpu_count() or 1
    quota = cpu_quota(cgroup_root)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cpu_quota(cgroup_root: str = "/sys/fs/cgroup") -> Optional[float]:
    """The CPUs' worth of time the process's cgroup may use (``cpu.max`` of cgroup v2, or
    ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` of v1), as a container sees its own at the
    root of the mount; None without a quota (or where none can be read)."""
    try:
        with open(os.path.join(cgroup_root, "cpu.max")) as limits:
            quota, _, period = limits.read().strip().partition(" ")
    except OSError:
        try:
            with (
                open(os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us")) as limit,
                open(os.path.join(cgroup_root, "cpu", "cpu.cfs_period_us")) as every,
            ):
                quota, period = limit.read().strip(), every.read().strip()
        except OSError:
            return None
    try:
        share = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):  # "max" (v2) or nothing readable
        return None
    return share if share > 0 else None  # v1 writes -1 for no quota


class _Failed(Exception):
    """What a worker sends back when the function raised: the exception, to raise again."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


#: Blocked across a worker's fork until the worker has set its own handlers: a child starts with
#: the main process's, which would raise KeyboardInterrupt in it when stop() comes at once.
_STOPPING = {signal.SIGINT, signal.SIGTERM}


class _Channel:
    """One direction of a worker's traffic: a pipe for small messages, and shared memory with a
    slot for each item in flight (:data:`AHEAD_PER_JOB`), used in turn.

    An item is pickled (protocol 5) with its large buffers (bytes wrapped in ``PickleBuffer``,
    numpy arrays) out of band: they go into the next slot, and the pipe carries the rest. An
    item whose buffers do not fit goes through the pipe whole. The sender may reuse a slot only
    once the item sent AHEAD_PER_JOB items earlier was taken: the main process sends a task only
    after taking the result of the task sent in that slot before it, and a worker sends a result
    only for a task that came after that one.
    """

    def __init__(self, connection: Connection, memory: Optional[mmap.mmap]) -> None:
        self.connection = connection
        #: The slots (None: everything through the pipe, for a worker that is not forked).
        self.memory = memory
        self._sent = self._received = 0

    def send(self, item: Any) -> None:
        buffers: List[pickle.PickleBuffer] = []
        head = pickle.dumps(item, protocol=5, buffer_callback=buffers.append)
        views = [buffer.raw() for buffer in buffers]
        sizes = [view.nbytes for view in views]
        if self.memory is None or sum(sizes) > SLOT_BYTES:
            self.connection.send_bytes(pickle.dumps((pickle.dumps(item, protocol=5), None), protocol=5))
            return
        at = (self._sent % AHEAD_PER_JOB) * SLOT_BYTES
        for view, size in zip(views, sizes):
            self.memory[at : at + size] = view
            at += size
        self.connection.send_bytes(pickle.dumps((head, sizes), protocol=5))
        self._sent += 1

    def receive(self, *, copy: bool) -> Any:
        """The next item; with ``copy``, its buffers are copied out of the slot (kept past the
        next items), else they are views of the slot (valid until the sender reuses it)."""
        head, sizes = pickle.loads(self.connection.recv_bytes())
        if sizes is None:
            return pickle.loads(head)
        at = (self._received % AHEAD_PER_JOB) * SLOT_BYTES
        self._received += 1
        region = memoryview(cast(mmap.mmap, self.memory))[at : at + sum(sizes)]
        if copy:
            region = memoryview(bytes(region))
        buffers = []
        for size in sizes:
            buffers.append(region[:size])
            region = region[size:]
        return pickle.loads(head, buffers=buffers)

    def close(self) -> None:
        self.connection.close()


def _serve(function: Callable[[Any], Any], tasks: _Channel, results: _Channel, parent: int) -> None:
    """A worker: prepare each task that arrives, until the main process terminates it or is
    gone (killed: nothing else would end a worker waiting for its next task).

    A thread takes the tasks out of the pipe as they come, so the main process never waits to
    send one, whatever the size of a batch, even while this worker waits to send a result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process stops the run between two batches
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the main process's handler: stop() may terminate
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)  # a SIGTERM already sent ends it here
    arrived: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_take_tasks, args=(tasks, arrived, parent), daemon=True).start()
    while True:
        task = arrived.get()
        if task is _ORPHANED:
            return
        try:
            result = function(task)
        except Exception as exc:  # raised again in the main process, as with --jobs 1
            result = _Failed(exc)
        try:
            results.send(result)
        except OSError:  # the main process is gone
            return


#: What the task thread hands over when the main process is gone.
_ORPHANED = object()
#: How often a worker waiting for a task looks whether the main process is still there.
PARENT_CHECK_SECONDS = 1.0


def _take_tasks(tasks: _Channel, arrived: queue.SimpleQueue[Any], parent: int) -> None:
    # The pipe never reaches its end while the main process is killed: the workers forked
    # after this one hold its writing end too. So the parent is looked at while waiting.
    try:
        while True:
            while not tasks.connection.poll(PARENT_CHECK_SECONDS):
                if os.getppid() != parent:
                    arrived.put(_ORPHANED)
                    return
            arrived.put(tasks.receive(copy=False))
    except (EOFError, OSError):
        arrived.put(_ORPHANED)


class _Worker:
    def __init__(self, function: Callable[[Any], Any], context: Any) -> None:
        task_reader, task_writer = context.Pipe(duplex=False)
        result_reader, result_writer = context.Pipe(duplex=False)
        forked = context.get_start_method() == "fork"  # the shared memory is inherited, never pickled
        task_slots, result_slots = (_slots(), _slots()) if forked else (None, None)
        self.tasks, self.results = _Channel(task_writer, task_slots), _Channel(result_reader, result_slots)
        self.process: BaseProcess = context.Process(
            target=_serve,
            args=(function, _Channel(task_reader, task_slots), _Channel(result_writer, result_slots), os.getpid()),
            daemon=True,
            name="crawldedup-job",
        )
        for connection in (task_writer, result_reader):
            _widen(connection)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
        try:
            self.process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        task_reader.close()
        result_writer.close()

    def receive(self) -> Any:
        try:
            result = self.results.receive(copy=True)
        except (EOFError, OSError):
            raise CLIError(ExitCode.IO, "a worker process of --jobs died (killed, or out of memory)") from None
        if isinstance(result, _Failed):
            raise result.error
        return result

    def stop(self) -> None:
        """Terminate the worker: it holds nothing but a batch nobody waits for any more."""
        self.process.terminate()
        self.process.join()
        self.tasks.close()
        self.results.close()


def _slots() -> mmap.mmap:
    """Shared memory for the items in flight one way (anonymous: shared with the processes forked after)."""
    return mmap.mmap(-1, AHEAD_PER_JOB * SLOT_BYTES)


def _widen(connection: Connection) -> None:
    """Let a pipe hold a whole batch (Linux: up to ``/proc/sys/fs/pipe-max-size``, 1 MiB by
    default), so that sending one costs a copy, not a handful of waits for the other side."""
    try:
        fcntl.fcntl(connection.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):  # pragma: no cover  (not Linux, or a lower limit: still correct)
        pass


class _InFlight(Generic[T]):
    """An item handed out: to the worker ``worker``, or (None) prepared here, its result kept."""

    __slots__ = ("item", "worker", "result")

    def __init__(self, item: T, worker: Optional[int], result: Any = None) -> None:
        self.item, self.worker, self.result = item, worker, result


class OrderedWork(Generic[T, R]):
    """Runs ``function`` on items in ``jobs`` processes, this one and ``jobs - 1`` workers, and
    yields the results in the items' order.

    The workers are kept busy first (each with up to :data:`AHEAD_PER_JOB` items); while all
    of them are, this process runs ``function`` on the next item itself rather than wait, so
    ``jobs`` processes share ``jobs`` cores without one more process taking turns with them,
    and the items prepared here cross no pipe. With ``jobs == 1`` the function runs in this
    process, item by item, as it is consumed.

    :param function: what each worker runs on an item (forked with it, never pickled).
    :raises CLIError: (``ExitCode.IO``) when a worker process died (killed, out of memory).
    """

    def __init__(self, function: Callable[[T], R], jobs: int) -> None:
        self.function = function
        self.jobs = jobs
        self._workers: List[_Worker] = []
        self._busy: List[int] = []  # items each worker holds

    def map(self, items: Iterator[T], may_wait: Callable[[], bool] = lambda: False) -> Iterator[Tuple[T, R]]:
        """Yield ``(item, function(item))`` for each item, in order.

        An item that cannot be made (an input that cannot be read), or whose function raised,
        raises only once the items before it were yielded, as it would with ``jobs == 1``.

        :param may_wait: says whether the next item may take a while to come (input still being
            written): the items in flight are yielded first, so they wait for nothing.
        """
        first = next(items, None)
        if first is None:
            return
        yield first, self.function(first)  # a run of one item has nothing to share out
        if self.jobs == 1:
            for item in items:
                yield item, self.function(item)
            return
        ahead: Deque[_InFlight[T]] = deque()  # in input order
        while True:
            while ahead and self._done(ahead[0]):
                yield self._take(ahead)
            if ahead and may_wait():
                while ahead:
                    yield self._take(ahead)
            try:
                item = next(items)
            except StopIteration:
                break
            except CLIError:
                while ahead:
                    yield self._take(ahead)
                raise
            if not self._workers:  # a second item: the workers are worth starting
                self._start()
            worker = min(range(len(self._workers)), key=self._busy.__getitem__)
            if self._busy[worker] < AHEAD_PER_JOB:
                self._send(worker, item)
                ahead.append(_InFlight(item, worker))
            else:  # every worker is busy: this process prepares the item
                while len(ahead) >= self.jobs * AHEAD_PER_JOB:
                    yield self._take(ahead)
                ahead.append(_InFlight(item, None, self._run_here(item)))
        while ahead:
            yield self._take(ahead)

    def _run_here(self, item: T) -> Any:
        try:
            return self.function(item)
        except Exception as exc:  # raised in its turn, as a worker's would be
            return _Failed(exc)

    def _done(self, flight: _InFlight[T]) -> bool:
        """Whether ``flight``'s result can be taken without waiting."""
        return flight.worker is None or self._workers[flight.worker].results.connection.poll(0)

    def _take(self, ahead: Deque[_InFlight[T]]) -> Tuple[T, R]:
        """The oldest item and its result, waiting for its worker if need be."""
        flight = ahead.popleft()
        if flight.worker is None:
            result = flight.result
            if isinstance(result, _Failed):
                raise result.error
        else:
            result = self._workers[flight.worker].receive()
            self._busy[flight.worker] -= 1
        return flight.item, result

    def _send(self, worker: int, item: T) -> None:
        try:
            self._workers[worker].tasks.send(item)
        except OSError:
            raise CLIError(ExitCode.IO, "a worker process of --jobs died (killed, or out of memory)") from None
        self._busy[worker] += 1

    def _start(self) -> None:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else None)
        # The objects made so far stay out of the workers' garbage collections: walking them
        # would copy their pages into each worker (copy on write), batch after batch.
        gc.freeze()
        try:
            with forking_readers():  # the workers leave the state file to this process: it grows
                self._workers = [_Worker(self.function, context) for _ in range(self.jobs - 1)]
        finally:
            gc.unfreeze()
        self._busy = [0] * len(self._workers)

    def close(self) -> None:
        """Stop the workers; a batch one of them is still preparing is dropped."""
        for worker in self._workers:
            worker.stop()
        self._workers, self._busy = [], []

    def __enter__(self) -> OrderedWork[T, R]:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
