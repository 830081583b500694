"""Plans: steps written once, without I/O, that a sync and an async caller both drive.

A plan is a generator that yields *requests* (what to send: a pipeline of Redis commands, a
function over a SQLite connection, a batch for a claim store) and receives their replies; what
it returns is the step's answer. This is the sans-I/O style of h11 and hyper-h2: the logic of a
step (what to ask, how to read the answer, what to count) exists once, and only the two small
drivers below differ, one calling ``send`` and the other awaiting it. An error of ``send`` is
thrown into the plan at the ``yield`` that asked, so a plan can handle it (or count it) there.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Awaitable, Callable, Generator, Optional, Tuple, TypeVar

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
#: A step that yields requests, receives replies, and returns its answer.
Plan = Generator[Any, Any, T]
#: How an async driver runs a stretch of a plan: inline, or in a worker thread for a long one.
Resume = Callable[[Callable[[], Tuple[bool, Any]]], Awaitable[Tuple[bool, Any]]]
#: How a store sends two requests as one (:func:`together`): the joint request, and how to split its reply.
Join = Callable[[Any, Any], Tuple[Any, Callable[[Any], Tuple[Any, Any]]]]


def _advance(plan: Plan[Any], reply: Any, error: Optional[BaseException]) -> Tuple[bool, Any]:
    """Run ``plan`` up to its next request: ``(False, request)``, or ``(True, answer)`` at its end.

    StopIteration stays in here: it cannot cross a thread's future.
    """
    try:
        return False, (plan.send(reply) if error is None else plan.throw(error))
    except StopIteration as finished:
        return True, finished.value


def drive(plan: Plan[T], send: Callable[[Any], Any]) -> T:
    """Run ``plan`` to its answer, sending each request it yields through ``send``."""
    reply: Any = None
    error: Optional[BaseException] = None
    while True:
        finished, value = _advance(plan, reply, error)
        if finished:
            return value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = send(value)
        except BaseException as exc:  # the plan decides (it may count it, then re-raise)
            error = exc


async def inline(stretch: Callable[[], Tuple[bool, Any]]) -> Tuple[bool, Any]:
    """Run a stretch of a plan on the event loop (a small batch: cheaper than a thread's hand-off)."""
    return stretch()


class Worker:
    """One thread for the stretches of large batches, shared by a Deduplicator and its store.

    One: the event loop then waits for the GIL behind at most one thread. With a thread per
    stretch (``asyncio.to_thread``), 16 tasks claiming 10,000 URLs each left the loop waiting
    behind a convoy of 16 threads, each holding the GIL for its 5 ms switch interval: a ticker
    lagged up to 190 ms here, against a few ms with one thread (bench/test_bench_async.py).
    """

    def __init__(self) -> None:
        self._executor: Optional[ThreadPoolExecutor] = None

    async def __call__(self, stretch: Callable[[], Tuple[bool, Any]]) -> Tuple[bool, Any]:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="crawldedup-worker")
        return await asyncio.get_running_loop().run_in_executor(self._executor, stretch)

    def close(self) -> None:
        """Let the thread end once its work is done (a later batch starts another)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


async def adrive(plan: Plan[T], send: Callable[[Any], Awaitable[Any]], resume: Resume = inline) -> T:
    """Run ``plan`` to its answer, awaiting ``send`` for each request it yields.

    :param resume: runs each stretch of the plan between two requests (default: inline, on the
        event loop); a large batch's stretches run in a :class:`Worker`.
    """
    reply: Any = None
    error: Optional[BaseException] = None
    while True:
        finished, value = await resume(partial(_advance, plan, reply, error))
        if finished:
            return value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = await send(value)
        except BaseException as exc:  # CancelledError too: the plan counts it, then re-raises
            error = exc


def together(first: Plan[A], second: Plan[B], join: Join) -> Plan[Tuple[A, B]]:
    """Run two plans of one request each as one request (one round trip): ``join(request_a,
    request_b)`` gives the request that carries both and how to split its reply in two. A plan
    that needs no request answers at once; the other then runs alone.

    :raises RuntimeError: when a plan asks for a second request.
    """
    done_a, a = _advance(first, None, None)
    done_b, b = _advance(second, None, None)
    if done_a and done_b:
        return a, b
    if done_a:
        return a, (yield from _resumed(second, b))
    if done_b:
        return (yield from _resumed(first, a)), b
    request, split = join(a, b)
    reply_a, reply_b = split((yield request))
    return _finish(first, reply_a), _finish(second, reply_b)


def _resumed(plan: Plan[T], request: Any) -> Plan[T]:
    """The rest of ``plan``, which already yielded ``request``."""
    return _finish(plan, (yield request))


def _finish(plan: Plan[T], reply: Any) -> T:
    finished, value = _advance(plan, reply, None)
    if not finished:
        plan.close()
        raise RuntimeError("a plan joined with another may send one request only")
    return value  # type: ignore[no-any-return]
