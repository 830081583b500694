"""Checks which twins an installed crawldedup loads: every compiled one, or none.

Usage: python check_twins.py compiled|pure

``compiled`` (run with CRAWLDEDUP_REQUIRE_EXTENSIONS=1) imports each compiled module the package
holds and fails unless every layer uses its compiled twin; ``pure`` fails unless every layer
uses its pure-Python twin (after CRAWLDEDUP_NO_EXTENSIONS=1, or an install without a compiler).
"""

import importlib
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

import crawldedup
from crawldedup import bloom


def has_twins(package: pkgutil.ModuleInfo) -> bool:
    """Whether a subpackage holds a pure-Python twin (``_<name>_py``), read from its files: a
    layer of an extra (``service``) needs its extra to import, and has no twins."""
    path = Path(crawldedup.__file__).parent / package.name
    return package.ispkg and any(
        m.name.startswith("_") and m.name.endswith("_py") for m in pkgutil.iter_modules([str(path)])
    )


def layers_with_twins() -> dict[str, ModuleType]:
    """Each layer (subpackage) with twins, and its selector, which says the twin it chose (``HAS_EXTENSION``)."""
    found = {}
    for info in filter(has_twins, pkgutil.iter_modules(crawldedup.__path__)):
        layer = importlib.import_module(f"crawldedup.{info.name}")
        if not hasattr(layer, "HAS_EXTENSION"):
            sys.exit(f"crawldedup.{info.name} holds twins but its selector sets no HAS_EXTENSION")
        found[info.name] = layer
    return found


def compiled_modules() -> list[str]:
    root = Path(crawldedup.__file__).parent
    libraries = sorted(f for f in root.rglob("*") if f.suffix in (".so", ".pyd"))
    return [".".join(("crawldedup", *lib.relative_to(root).parent.parts, lib.name.split(".")[0])) for lib in libraries]


def main(expected: str) -> None:
    if expected not in ("compiled", "pure"):
        sys.exit(f"usage: check_twins.py compiled|pure, got {expected!r}")
    want_compiled = expected == "compiled"
    layers = layers_with_twins()
    wrong = [name for name, layer in layers.items() if layer.HAS_EXTENSION is not want_compiled]
    if not layers or wrong:
        sys.exit(f"the {expected} twin is not the one loaded for: {', '.join(wrong)}")
    if want_compiled:
        for module in compiled_modules():
            print("compiled module loaded:", importlib.import_module(module).__name__)
    print(f"{expected} twins selected in {', '.join(layers)}; BloomFilter is {bloom.BloomFilter.__module__}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) == 2 else "")
