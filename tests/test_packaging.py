"""What an installed crawldedup carries: its typing marker, one version, consistent metadata."""

from __future__ import annotations

import re
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
