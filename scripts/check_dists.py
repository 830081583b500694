"""Checks the sdist and the wheel built from it: the sources they need, no generated C, metadata.

Usage: check_dists.py ROOT SDIST WHEEL

Fails when the sdist misses a source the extensions compile from or ships generated C, or when
the wheel lacks a compiled extension, the typing marker, package data (the stores' Lua) or a
metadata field the index shows.
"""

from __future__ import annotations

import email.parser
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

COMPILED_FROM = (".pyx", ".pxd", ".pxi", ".h", ".c", ".cpp")
#: Files the package reads at run time (importlib.resources): both distributions must ship them.
PACKAGE_DATA = (".lua",)
SDIST_NEEDS = ("pyproject.toml", "setup.py", "src/crawldedup/py.typed")
METADATA_FIELDS = ("Summary", "Requires-Python", "Description-Content-Type", "Project-URL", "Classifier")


def tracked_sources(root: Path) -> list[str]:
    """The files under src/ that git tracks, or every file there outside a git checkout."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "--", "src"], capture_output=True, text=True)
    if listed.returncode == 0:
        return listed.stdout.split()
    return [str(p.relative_to(root)) for p in (root / "src").rglob("*") if p.is_file()]


def sdist_problems(sdist: str, sources: list[str]) -> tuple[list[str], set[str], set[str]]:
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    compiled_from = {s for s in sources if s.endswith(COMPILED_FROM)}
    problems = []
    for pyx in (s for s in sources if s.endswith(".pyx")):
        for generated_name in (pyx[:-4] + ".c", pyx[:-4] + ".cpp"):
            if generated_name in compiled_from:
                problems.append(f"{generated_name} is generated from {pyx}: remove it from git")
    problems += [f"sdist lacks {s}" for s in sorted(compiled_from - names)]
    generated = {n for n in names if n.endswith((".c", ".cpp", ".so", ".pyd"))} - compiled_from
    problems += [f"sdist ships a generated or binary file {n} (the build must make it)" for n in sorted(generated)]
    problems += [f"sdist lacks {needed}" for needed in SDIST_NEEDS if needed not in names]
    problems += [f"sdist lacks {s}" for s in sources if s.endswith(PACKAGE_DATA) and s not in names]
    return problems, names, compiled_from


def wheel_problems(root: Path, wheel: str, sources: list[str]) -> tuple[list[str], email.message.Message, list[str]]:
    version = re.search(r'^__version__ = "([^"]+)"', (root / "src/crawldedup/__init__.py").read_text(), re.M)
    with zipfile.ZipFile(wheel) as whl:
        members = whl.namelist()
        meta_name = next(n for n in members if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(whl.read(meta_name).decode())
    problems = [] if "crawldedup/py.typed" in members else ["wheel lacks crawldedup/py.typed"]
    extensions = [n for n in members if n.endswith((".so", ".pyd"))]
    data = [s[len("src/") :] for s in sources if s.endswith(PACKAGE_DATA)]
    problems += [f"wheel lacks {name} (package data)" for name in data if name not in members]
    for pyx in (s for s in sources if s.endswith(".pyx")):
        module = pyx[len("src/") : -len(".pyx")]
        if not any(n.startswith(module + ".") for n in extensions):
            problems.append(f"wheel holds no compiled {module} (from {pyx})")
    if not version or meta["Version"] != version.group(1):
        problems.append(f"wheel version {meta['Version']!r} differs from __version__ in __init__.py")
    problems += [f"wheel METADATA lacks {field}" for field in METADATA_FIELDS if not meta.get(field)]
    if not str(meta.get_payload()).strip():
        problems.append("wheel METADATA has no long description (README)")
    return problems, meta, extensions


def main(root: Path, sdist: str, wheel: str) -> None:
    sources = tracked_sources(root)
    problems, names, compiled_from = sdist_problems(sdist, sources)
    more, meta, extensions = wheel_problems(root, wheel, sources)
    if problems + more:
        sys.exit("\n".join(problems + more))
    print(f"sdist: {len(names)} files, compiles from {', '.join(sorted(compiled_from)) or 'nothing'}")
    print(f"wheel: {meta['Name']} {meta['Version']}, extensions {', '.join(extensions)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
