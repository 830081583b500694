"""Files replaced whole: written beside, synced, renamed over the old one, the rename synced."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Union

__all__ = ["replace_file", "sync_tree"]


def replace_file(path: Path, parts: Iterable[Union[bytes, memoryview]]) -> None:
    """Make ``path`` hold ``parts``, so that a crash at any point leaves the old file or the new one.

    :raises OSError: when the file cannot be written (the old one stays, no temporary is left).
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as file:
            for part in parts:
                file.write(part)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
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
            _sync_directory(item)
    if path.is_file():
        with open(path, "rb") as file:
            os.fsync(file.fileno())
    else:
        _sync_directory(path)
    _sync_directory(path.parent)
