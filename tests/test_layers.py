"""The package's layout rules, read from its source: one folder per layer, private names stay home.

- A module never imports a private module (``_x``) of another folder: a folder's private
  modules serve that folder and the folders inside it, so the package root's ``_env`` and
  ``_checks`` serve every layer, while ``stores/`` may not reach into ``bloom/_base``.
- A private name (``_X`` inside a module) is never imported by another module at all.
- A private attribute (``obj._x``, ``obj`` not ``self``, ``cls`` or ``super()``) is used only
  in the folder whose modules define it: what another layer needs of an object is public
  (namedtuple's ``_replace`` and its kin are public API).
- Nothing but a layer's selector (its ``__init__``) imports a twin (``_x_py`` / ``_x_c``).
- A layer (a folder, or a module at the root) imports only layers on the floors below its own
  (:data:`FLOORS`, which docs/architecture.md draws), never one beside it or above.
- No import circle among the package's modules, counting imports inside functions (an import
  put off into a function does not make a circle go away) and leaving out those only the type
  checker runs (``if TYPE_CHECKING``); and every module imports on its own, in a fresh
  interpreter.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

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


#: namedtuple's methods and fields: public API despite the underscore.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_field_defaults", "_make"}
#: What a compiled twin defines (``def``, ``cdef``, ``self._x =``), read without parsing Cython.
_PYX_DEFINES = re.compile(r"(?:\bdef\s+|\bcdef\b[^\n(=]*?\s|self\.)(_\w+)")


def _defined_names(path: Path) -> Set[str]:
    """The private names ``path`` defines: functions, classes, attributes and names it assigns."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":
        return set(_PYX_DEFINES.findall(text))
    names: Set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return {name for name in names if name.startswith("_")}


def _foreign_private_attributes(text: str, defined_here: Set[str]) -> List[str]:
    """``obj._x`` in ``text`` where ``obj`` is not ``self``/``cls``/``super()`` and no module of
    the folder defines ``_x``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        if node.attr in NAMEDTUPLE_API or node.attr in defined_here:
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


_FOLDER_NAMES: Dict[Path, Set[str]] = {}


def _names_of_folder(folder: Path) -> Set[str]:
    if folder not in _FOLDER_NAMES:
        _FOLDER_NAMES[folder] = set().union(*(_defined_names(p) for p in SOURCES if p.parent == folder))
    return _FOLDER_NAMES[folder]


PY_SOURCES = [p for p in SOURCES if p.suffix == ".py"]


@pytest.mark.parametrize("path", PY_SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_attribute_of_another_folder_is_used(path):
    assert _foreign_private_attributes(path.read_text(encoding="utf-8"), _names_of_folder(path.parent)) == []


def test_the_rule_sees_a_private_attribute_of_another_folder():
    """The checker itself: a shell reaching into a store's private method is caught; the same
    call inside the store's folder, on ``self``, or namedtuple's ``_replace`` is not."""
    stores = _names_of_folder(PACKAGE / "stores")
    shell = "def probe(store):\n    return store._exchange(None, None, None, b'')\n"
    assert _foreign_private_attributes(shell, _names_of_folder(PACKAGE / "cli")) == ["line 2: store._exchange"]
    assert _foreign_private_attributes(shell, stores) == []
    assert _foreign_private_attributes("def f(self, x):\n    self._y(x._replace(a=1))\n", set()) == []


def _imported(tree: ast.AST, package: str) -> Iterator[str]:
    """The modules the code of ``tree`` (a module of ``package``) imports, at module level or inside
    functions, leaving out the imports under ``if TYPE_CHECKING``. ``from pkg import name`` gives
    ``"pkg.name|pkg"``: the submodule when ``name`` is one, else the package."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            for other in child.orelse:
                yield from _imported(other, package)
            continue
        if isinstance(child, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - child.level + 1] if child.level else []
            module = ".".join(base + ([child.module] if child.module else []))
            for alias in child.names:
                yield f"{module}.{alias.name}|{module}"
        elif isinstance(child, ast.Import):
            yield from (alias.name for alias in child.names)
        yield from _imported(child, package)


def _import_graph(root: Path, paths: List[Path]) -> Dict[str, Set[str]]:
    """Module -> the modules among ``paths`` (the package at ``root``) it imports; a
    ``from pkg import name`` imports ``pkg.name`` when that is a module, else ``pkg``."""

    def name(path: Path) -> str:
        parts = path.relative_to(root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    known = {name(p) for p in paths}
    graph: Dict[str, Set[str]] = {}
    for path in paths:
        module = name(path)
        package = module if path.stem == "__init__" else module.rpartition(".")[0]
        graph[module] = set()
        if path.suffix != ".py":  # a twin's Python-level imports are its selector's too
            continue
        for imported in _imported(ast.parse(path.read_text(encoding="utf-8")), package):
            submodule, _, package_itself = imported.partition("|")
            target = submodule if submodule in known or not package_itself else package_itself
            if target in known and target != module:
                graph[module].add(target)
    return graph


def _circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    circles: List[List[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return circles


def test_no_import_circle():
    assert _circles(_import_graph(PACKAGE, SOURCES)) == []


def test_the_rule_sees_an_import_circle(tmp_path):
    """The checker itself: the circle of the Redis stores before the registry (``_redis`` ->
    ``factory`` inside a function -> ``redis_keys`` -> ``_redis``) is caught; the same import
    under ``if TYPE_CHECKING`` makes none."""
    folder = tmp_path / "crawldedup" / "stores"
    folder.mkdir(parents=True)
    (folder / "_redis.py").write_text("def conflict():\n    from .factory import STRATEGY_OF_KIND\n")
    (folder / "factory.py").write_text("from .redis_keys import RedisKeyStore\n")
    (folder / "redis_keys.py").write_text("from ._redis import conflict\n")
    paths = sorted(folder.glob("*.py"))
    root = tmp_path / "crawldedup"
    assert _circles(_import_graph(root, paths)) == [
        ["crawldedup.stores._redis", "crawldedup.stores.factory", "crawldedup.stores.redis_keys"]
    ]
    (folder / "_redis.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .factory import STRATEGY_OF_KIND\n"
    )
    assert _circles(_import_graph(root, paths)) == []


#: The floors of the house, from the ground up (docs/architecture.md draws them). A layer is a
#: folder of the package, or a module at its root; a layer imports only layers on floors below
#: its own, never one beside it or above. The ground floor is the root: its helpers, and its face
#: (``__init__``), which loads no layer when imported (its names load on first use), so a layer
#: may take ``__version__`` from it.
FLOORS = (
    ("crawldedup", "_checks", "_env", "_files", "_plans", "_wording"),
    ("canonical", "content", "fingerprints", "windows"),
    ("arrow", "bloom", "stores"),
    ("config", "pages"),
    ("dedup",),
    ("integrations", "metrics"),
    ("offline", "scrapy", "service"),
    ("cli",),
    ("__main__",),
)
FLOOR = {layer: number for number, floor in enumerate(FLOORS) for layer in floor}


def _layer(module: str) -> str:
    """``crawldedup.stores.base`` -> ``stores``; ``crawldedup`` (the root's face) -> ``crawldedup``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _not_downward(graph: Dict[str, Set[str]]) -> List[str]:
    """The imports of ``graph`` from one layer into another on the same floor or above."""
    found = []
    for module, targets in graph.items():
        for target in targets:
            mine, theirs = _layer(module), _layer(target)
            if mine != theirs and FLOOR[theirs] >= FLOOR[mine]:
                found.append(f"{module} (floor {FLOOR[mine]}) imports {target} (floor {FLOOR[theirs]})")
    return sorted(found)


def test_every_layer_has_its_floor():
    layers = {_layer(module) for module in _import_graph(PACKAGE, SOURCES)}
    assert layers - set(FLOOR) == set(), "place each new layer on a floor here and in docs/architecture.md"
    assert set(FLOOR) - layers == set(), "a layer of FLOORS is gone: take it out here and in docs/architecture.md"


def test_a_layer_imports_only_the_floors_below():
    assert _not_downward(_import_graph(PACKAGE, SOURCES)) == []


ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _drawn_floors(text: str) -> Dict[int, Set[str]]:
    """The layers each ``floor N`` line of the drawing names (``x/`` and ``x.py``; ``__init__.py``
    is the root's face), its indented lines included."""
    floors: Dict[int, Set[str]] = {}
    floor = None
    for line in text.splitlines():
        started = re.match(r"floor (\d+) ", line)
        if started:
            floor = int(started.group(1))
        elif not line.startswith(" "):
            floor = None
        if floor is not None:
            names = re.findall(r"([\w]+)(?:/|\.py\b)", line)
            floors.setdefault(floor, set()).update("crawldedup" if n == "__init__" else n for n in names)
    return floors


def test_the_drawing_has_the_floors():
    """docs/architecture.md draws the floors this module holds the code to."""
    probe = "floor 1  a/   b.py     the a layer\n         c/ too\nfloor 0  the root: __init__.py\nafter\n"
    assert _drawn_floors(probe) == {1: {"a", "b", "c"}, 0: {"crawldedup"}}
    assert _drawn_floors(ARCHITECTURE.read_text(encoding="utf-8")) == {
        number: set(floor) for number, floor in enumerate(FLOORS)
    }


def test_the_rule_sees_an_import_beside_or_above():
    """The checker itself: a store importing the pipeline (above) or the filter (beside) is
    caught; the pipeline importing a store, or a store its own folder, is not."""
    assert _not_downward({"crawldedup.stores.base": {"crawldedup.dedup.core", "crawldedup.bloom.format"}}) == [
        "crawldedup.stores.base (floor 2) imports crawldedup.bloom.format (floor 2)",
        "crawldedup.stores.base (floor 2) imports crawldedup.dedup.core (floor 4)",
    ]
    assert _not_downward({"crawldedup.dedup.core": {"crawldedup.stores.base", "crawldedup.dedup.stats"}}) == []
    assert _not_downward({"crawldedup.cli.main": {"crawldedup"}}) == []


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
