"""What an installed crawldedup carries: its typing marker, one version, consistent metadata."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from importlib import metadata, resources
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import crawldedup

# Next to tests/ in the checkout, the sdist, and the copies that scripts/test and cibuildwheel make.
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
CLASSIFIER_VERSION = re.compile(r"^Programming Language :: Python :: (3\.\d+)$")


def _supported_minor_versions() -> list[Version]:
    classifiers = metadata.metadata("crawldedup").get_all("Classifier") or []
    found = [CLASSIFIER_VERSION.match(c) for c in classifiers]
    return sorted(Version(m.group(1)) for m in found if m)


def test_py_typed_marker_is_installed() -> None:
    marker = resources.files("crawldedup") / "py.typed"
    assert marker.is_file(), f"{marker} is missing: type checkers would ignore the package's hints"


def test_version_attribute_matches_the_distribution() -> None:
    assert Version(crawldedup.__version__) == Version(metadata.version("crawldedup"))
    assert "__version__" in crawldedup.__all__


def test_classifiers_cover_exactly_the_supported_pythons() -> None:
    """Each classified 3.N satisfies Requires-Python, and the oldest one is its lower bound."""
    versions = _supported_minor_versions()
    requires = SpecifierSet(metadata.metadata("crawldedup")["Requires-Python"])
    assert versions, "no 'Programming Language :: Python :: 3.N' classifier"
    assert all(v in requires for v in versions), (versions, str(requires))
    assert Version(f"{versions[0].major}.{versions[0].minor - 1}") not in requires, (versions, str(requires))
    assert [v.minor for v in versions] == list(range(versions[0].minor, versions[-1].minor + 1))


def test_running_python_is_supported() -> None:
    running = Version(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert running in SpecifierSet(metadata.metadata("crawldedup")["Requires-Python"])


@pytest.mark.skipif(sys.version_info < (3, 11), reason="reads pyproject.toml with tomllib (Python 3.11+)")
def test_wheels_are_built_for_every_classified_python() -> None:
    """[tool.cibuildwheel] builds one CPython per classifier, and the version has one source."""
    import tomllib

    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert "version" in config["project"]["dynamic"] and "version" not in config["project"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "crawldedup.__version__"}
    built = config["tool"]["cibuildwheel"]["build"]
    expected = [f"cp{v.major}{v.minor}-*" for v in _supported_minor_versions()]
    assert built == expected


SETUP_PY = PYPROJECT.with_name("setup.py")
# Runs setup.py with setup() and cythonize() replaced, so it only reports which extensions it declares.
DECLARED_EXTENSIONS = """
import platform, runpy, sys, types
import setuptools
build = types.ModuleType("Cython.Build")
build.cythonize = lambda modules, **options: modules
sys.modules.update({"Cython": types.ModuleType("Cython"), "Cython.Build": build})
platform.python_implementation = lambda: sys.argv[1]
setuptools.setup = lambda **kwargs: print(sorted(e.name for e in kwargs["ext_modules"]))
runpy.run_path(sys.argv[2], run_name="__main__")
"""


@pytest.mark.skipif(not SETUP_PY.is_file(), reason="setup.py is not next to these tests (a copy of tests/ runs)")
@pytest.mark.parametrize(
    "implementation, no_extensions, compiled",
    [
        ("CPython", None, True),
        ("CPython", "1", False),
        ("PyPy", None, False),
        ("GraalVM", None, False),
    ],
)
def test_setup_py_compiles_extensions_only_for_cpython(implementation, no_extensions, compiled) -> None:
    """An interpreter that never loads the extensions (crawldedup._env) does not build them either."""
    env = {k: v for k, v in os.environ.items() if k != "CRAWLDEDUP_NO_EXTENSIONS"}
    if no_extensions:
        env["CRAWLDEDUP_NO_EXTENSIONS"] = no_extensions
    args = [sys.executable, "-c", DECLARED_EXTENSIONS, implementation, str(SETUP_PY)]
    out = subprocess.run(args, cwd=SETUP_PY.parent, env=env, capture_output=True, text=True, timeout=60, check=True)
    declared = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    every_pyx = sorted(
        ".".join(pyx.relative_to(SETUP_PY.parent / "src").with_suffix("").parts)
        for pyx in SETUP_PY.parent.glob("src/crawldedup/**/*.pyx")
    )
    assert every_pyx and declared == (every_pyx if compiled else []), out.stdout
