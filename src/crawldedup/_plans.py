"""Plans: steps written once, without I/O, that a sync and an async caller both drive.

A plan is a generator that yields *requests* (what to send: a pipeline of Redis commands, a
function over a SQLite connection, a batch for a claim store) and receives their replies; what
it returns is the step's answer. This is the sans-I/O style of h11 and hyper-h2: the logic of a
step (what to ask, how to read the answer, what to count) exists once, and only the two small
drivers below differ, one calling ``send`` and the other awaiting it. An error of ``send`` is
thrown into the plan at the ``yield`` that asked, so a plan can handle it (or count it) there.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Generator, Optional, Tuple, TypeVar

T = TypeVar("T")
#: A step that yields requests, receives replies, and returns its answer.
Plan = Generator[Any, Any, T]
#: How an async driver runs a stretch of a plan: inline, or in a worker thread for a long one.
Resume = Callable[[Callable[[], Tuple[bool, Any]]], Awaitable[Tuple[bool, Any]]]


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


async def _inline(stretch: Callable[[], Tuple[bool, Any]]) -> Tuple[bool, Any]:
    return stretch()


async def adrive(plan: Plan[T], send: Callable[[Any], Awaitable[Any]], resume: Resume = _inline) -> T:
    """Run ``plan`` to its answer, awaiting ``send`` for each request it yields.

    :param resume: runs each stretch of the plan between two requests (default: inline, on the
        event loop); the async Deduplicator runs a large batch's stretches in a worker thread.
    """
    reply: Any = None
    error: Optional[BaseException] = None
    while True:
        sent, thrown = reply, error
        finished, value = await resume(lambda: _advance(plan, sent, thrown))
        if finished:
            return value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = await send(value)
        except BaseException as exc:  # CancelledError too: the plan counts it, then re-raises
            error = exc
