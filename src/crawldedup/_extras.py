"""The optional extras (pyproject.toml's ``[project.optional-dependencies]``) and the one way a
feature says that the extra it needs is missing: an ``ImportError`` naming the missing package
and the line that installs it, ``pip install 'crawldedup[EXTRA]'``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

#: What every message about a missing extra holds (:func:`is_missing_extra` finds it there).
INSTALL = "pip install 'crawldedup[{extra}]'"


def missing_extra(feature: str, extra: str, package: str) -> ImportError:
    """The ImportError of ``feature`` without ``package``, of the extra ``extra``."""
    return ImportError(f"{feature} needs {package}: {INSTALL.format(extra=extra)}", name=package)


@contextmanager
def needs_extra(feature: str, extra: str) -> Iterator[None]:
    """Import in the block what ``feature`` needs of the extra ``extra``: a package that is
    missing is :func:`missing_extra`'s ImportError (a module of crawldedup itself stays as it is)."""
    try:
        yield
    except ImportError as exc:
        package = (exc.name or "").partition(".")[0]  # the missing package, as the import names it
        if not package or package == "crawldedup":
            raise
        raise missing_extra(feature, extra, package) from None


def is_missing_extra(exc: BaseException) -> bool:
    """Whether ``exc`` is the ImportError of a missing extra (it says how to install it)."""
    return isinstance(exc, ImportError) and INSTALL.partition("{")[0] in str(exc)
