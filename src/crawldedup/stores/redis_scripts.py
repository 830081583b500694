"""Scripts sent by their SHA1 digest (``EVALSHA``) instead of their text.

A claim pipeline holds one script call per group: sent as ``EVAL``, each carries the script's
text (some 4 KB), which the client packs and the server reads and hashes again, call after
call. ``EVALSHA`` names a script the server already holds (every script it ran by ``EVAL`` or
``SCRIPT LOAD``); a server that does not hold it (restarted, failed over to a replica, or after
``SCRIPT FLUSH``) answers ``NOSCRIPT`` and runs nothing, so exactly those commands are sent
again with the text, which the server then keeps. A store sends a script by text until the
server answered one call of it: its first calls are as they were (docs/stores.md, "Scripts by
digest").
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, List, Sequence, Set, Tuple, Union

from redis.exceptions import NoScriptError

Command = Tuple[Any, ...]


@functools.lru_cache(maxsize=256)
def script_sha(script: Union[str, bytes]) -> str:
    """The SHA1 digest by which Redis names ``script`` (hex, as ``SCRIPT LOAD`` answers)."""
    return hashlib.sha1(script.encode("utf-8") if isinstance(script, str) else script).hexdigest()


def by_sha(commands: Sequence[Command], held: Set[str]) -> List[Command]:
    """``commands`` with each ``EVAL`` of a script whose digest is in ``held`` as its ``EVALSHA``."""
    return [
        ("EVALSHA", script_sha(command[1]), *command[2:])
        if command[0] == "EVAL" and script_sha(command[1]) in held
        else command
        for command in commands
    ]


def learn_held(held: Set[str], sent: Sequence[Command], replies: Sequence[Any]) -> None:
    """Add to ``held`` the digests of the scripts sent by text that the server answered (it keeps them)."""
    for command, reply in zip(sent, replies):
        if command[0] == "EVAL" and not isinstance(reply, Exception):
            held.add(script_sha(command[1]))


def not_held(replies: Sequence[Any]) -> List[int]:
    """The positions of the replies that say the server does not hold the script (it ran nothing)."""
    return [position for position, reply in enumerate(replies) if isinstance(reply, NoScriptError)]


def raise_first_error(replies: Sequence[Any], but_not_held: bool = False) -> None:
    """Raise the first error among a pipeline's replies, as a pipeline that raises on errors does
    (``but_not_held``: but a ``NOSCRIPT``, which is sent again).

    :raises redis.exceptions.RedisError: the first error reply.
    """
    for reply in replies:
        if isinstance(reply, Exception) and not (but_not_held and isinstance(reply, NoScriptError)):
            raise reply
