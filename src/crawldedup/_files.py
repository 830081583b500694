"""Files written whole or mapped: space reserved before a mapping writes it, files replaced whole
(written beside, synced, renamed over the old one, the rename synced)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Iterable, Union

__all__ = ["replace_file", "reserve_space", "sync_directory", "sync_tree"]


def reserve_space(fd: int, size: int, path: str, what: str = "the filter file") -> None:
    """Make the file ``size`` bytes long, zeros past its end, with its blocks allocated now, so
    that a full disk is an OSError here and not a SIGBUS later.

    A mapped file is written through the mapping: on a sparse file the disk space is taken page
    by page on first write, and a write the file system cannot back kills the process with
    SIGBUS. Where ``posix_fallocate`` is missing (macOS, Windows) the file stays sparse.

    :param what: what the file is, for the message.
    :raises OSError: naming ``path``, when the file system cannot hold ``size`` bytes (ENOSPC,
        EDQUOT, EFBIG).
    """
    try:
        os.ftruncate(fd, size)
        if hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):  # else: no fallocate on this file system
                    raise
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror} (reserving {size:,} bytes for {what})", path) from None


def replace_file(path: Path, parts: Iterable[Union[bytes, memoryview]], *, sync: bool = True) -> None:
    """Make ``path`` hold ``parts``, so that a crash at any point leaves the old file or the new one.

    :param sync: make the new file and its name durable (fsync) before returning; without it a
        process crash still leaves one whole file, but a power loss may leave the old one.
    :raises OSError: when the file cannot be written (the old one stays, no temporary is left).
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as file:
            for part in parts:
                file.write(part)
            file.flush()
            if sync:
                os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if sync:
        sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover  (Windows)
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_tree(path: Path) -> None:
    """Flush a file, or a directory with everything in it, to disk, and the directory above."""
    for item in [*(path.rglob("*") if path.is_dir() else [])]:
        if item.is_file():
            with open(item, "rb") as file:
                os.fsync(file.fileno())
        else:
            sync_directory(item)
    if path.is_file():
        with open(path, "rb") as file:
            os.fsync(file.fileno())
    else:
        sync_directory(path)
    sync_directory(path.parent)
