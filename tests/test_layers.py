"""The package's layout rules, read from its source: one folder per layer, private names stay home.

- A module never imports a private module (``_x``) of another folder: a folder's private
  modules serve that folder and the folders inside it, so the package root's ``_env`` and
  ``_checks`` serve every layer, while ``stores/`` may not reach into ``bloom/_base``.
- A private name (``_X`` inside a module) is never imported by another module at all.
- Nothing but a layer's selector (its ``__init__``) imports a twin (``_x_py`` / ``_x_c``).
- Every module imports on its own, in a fresh interpreter (an import cycle shows up there).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

import crawldedup

PACKAGE = Path(crawldedup.__file__).resolve().parent
SOURCES = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")])


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path) -> str:
    name = _module_name(path)
    return name if path.stem == "__init__" else name.rpartition(".")[0]


def _imports(path: Path) -> Iterator[Tuple[int, str, List[str]]]:
    """(line, absolute module, names) for each ``from X import names`` and ``import X``."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":  # only the Python-level imports; cimports are C declarations
        text = "\n".join(
            line for line in text.splitlines() if line.startswith(("from ", "import ")) and " cimport " not in line
        )
    package = _package_of(path)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def _owner(module: str) -> str:
    """The folder (package) whose private member ``module`` is, or '' when it is public."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return ""


def _is_module(module: str) -> bool:
    where = PACKAGE.parent / module.replace(".", "/")
    return where.is_dir() or any(where.with_suffix(suffix).exists() for suffix in (".py", ".pyx"))


def _crosses(importer_package: str, owner: str) -> bool:
    """True when a module of ``importer_package`` may not use what is private to ``owner``."""
    return importer_package != owner and not importer_package.startswith(owner + ".")


def test_sources_are_found():
    assert len(SOURCES) > 20 and any(p.suffix == ".pyx" for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_name_of_another_folder_is_imported(path):
    package = _package_of(path)
    crossings = []
    for line, module, names in _imports(path):
        if not module.startswith("crawldedup"):
            continue
        owner = _owner(module)
        if owner and _crosses(package, owner):
            crossings.append(f"line {line}: private module {module}")
        for name in names:
            if not name.startswith("_") or name.startswith("__"):
                continue
            target = f"{module}.{name}"
            if _is_module(target):  # ``from pkg import _mod``: private to pkg
                if _crosses(package, module):
                    crossings.append(f"line {line}: private module {target}")
            else:  # a private name is its module's own, whoever asks
                crossings.append(f"line {line}: private name {target}")
    assert crossings == []


TWINS = [p for p in SOURCES if p.stem.endswith(("_py", "_c"))]


def test_every_layer_with_a_compiled_twin_has_both():
    pairs = {p.stem.rsplit("_", 1)[0]: set() for p in TWINS}
    for p in TWINS:
        pairs[p.stem.rsplit("_", 1)[0]].add(p.stem.rsplit("_", 1)[1])
    assert pairs and all(kinds == {"py", "c"} for kinds in pairs.values()), pairs


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_a_selector_imports_a_twin(path):
    twins = {_module_name(p) for p in TWINS}
    found = []
    for line, module, names in _imports(path):
        targets = [module] + [f"{module}.{name}" for name in names]
        for target in targets:
            if target in twins and (path.stem != "__init__" or _package_of(path) != target.rpartition(".")[0]):
                # The compiled twin may lean on its own reference (declared surface only).
                if not (
                    path.stem.endswith("_c")
                    and target.endswith("_py")
                    and target.rpartition(".")[0] == _package_of(path)
                ):
                    found.append(f"line {line}: {target}")
    assert found == []


def test_the_rule_sees_a_crossing():
    """The checker itself: a private import across folders is caught, one inside a folder is not."""
    assert _crosses("crawldedup.stores", _owner("crawldedup.bloom._base"))
    assert not _crosses("crawldedup.bloom", _owner("crawldedup.bloom._base"))
    assert not _crosses("crawldedup.stores", _owner("crawldedup._checks"))
    assert _owner("crawldedup.bloom.format") == ""


ENGINE_INTEGRATIONS = {f"crawldedup.integrations.{name}" for name in ("dask", "duckdb", "polars", "ray", "spark")}
MODULES = sorted({_module_name(p) for p in SOURCES if p.suffix == ".py"} - {"crawldedup.__main__"})


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_on_its_own(module):
    if module.startswith("crawldedup.integrations.scrapy") or module == "crawldedup.scrapy":
        pytest.importorskip("scrapy")
    if module == "crawldedup.metrics":
        pytest.importorskip("prometheus_client")
    if module.startswith(("crawldedup.arrow", "crawldedup.offline")) or module in ENGINE_INTEGRATIONS:
        pytest.importorskip("pyarrow")  # the arrow extra; each engine itself is imported on first use
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
