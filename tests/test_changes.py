"""The changelog's fragments (changes/README.md): names towncrier reads, and user-sized."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CHANGES = ROOT / "changes"
TOWNCRIER = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["towncrier"]
TYPES = [kind["directory"] for kind in TOWNCRIER["type"]]
#: "A sentence or two": the longest fragment, in words.
MOST_WORDS = 70
FRAGMENTS = sorted(path for path in CHANGES.glob("*") if path.name not in TOWNCRIER.get("ignore", []))


def fragment_problem(name: str, text: str) -> str:
    """Why a fragment breaks changes/README.md's rules, or ''."""
    if not re.fullmatch(rf"\d+\.({'|'.join(TYPES)})(\.\d+)?\.md", name):
        return f"{name}: not <issue>.<type>.md with a type of {', '.join(TYPES)}"
    words = len(text.split())
    if words > MOST_WORDS:
        return (
            f"{name}: {words} words; a fragment is a sentence or two (at most {MOST_WORDS} words), figures go to docs/"
        )
    return ""


def test_the_fragments_are_found():
    assert (CHANGES / "README.md").exists() and FRAGMENTS, f"no fragments in {CHANGES}"


@pytest.mark.parametrize("fragment", FRAGMENTS, ids=[path.name for path in FRAGMENTS])
def test_a_fragment_is_user_sized(fragment: Path):
    assert fragment_problem(fragment.name, fragment.read_text(encoding="utf-8")) == ""


def test_the_rules_can_fail():
    assert "type" in fragment_problem("31.misc-stores.md", "One sentence.")
    assert "words" in fragment_problem("31.feature.md", "word " * (MOST_WORDS + 1))
    assert fragment_problem("31.feature.2.md", "Added a page.") == ""
