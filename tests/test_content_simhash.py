"""SimHash of texts: both twins agree, the frozen corpus pins the format, the policy checks its fields."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawldedup import content
from crawldedup.content import DEFAULT_CONTENT_POLICY, ContentPolicy, _simhash_py, words

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

FROZEN = json.loads((Path(__file__).parent / "data" / "content-v1.json").read_text(encoding="ascii"))


def _implementations() -> list:
    implementations = [pytest.param(_simhash_py, id="py")]
    if content.HAS_EXTENSION:
        from crawldedup.content import _simhash_c

        implementations.append(pytest.param(_simhash_c, id="cy", marks=pytest.mark.cython))
    return implementations


@pytest.fixture(params=_implementations())
def impl(request: pytest.FixtureRequest):
    """Each SimHash twin in turn, as a module with ``simhash`` and ``simhash_many``."""
    return request.param


def _policy(shingle_words: int) -> ContentPolicy:
    return ContentPolicy(shingle_words=shingle_words)


def test_extension_loaded():
    if os.environ.get("CRAWLDEDUP_REQUIRE_EXTENSIONS"):
        assert content.HAS_EXTENSION


def test_default_policy_digest_is_frozen():
    """The digest names the format: a change here is a change of every stored fingerprint."""
    assert DEFAULT_CONTENT_POLICY.digest == "c8cc57516fad35c6"
    assert [p["digest"] for p in FROZEN["policies"]] == [_policy(p["shingle_words"]).digest for p in FROZEN["policies"]]


@pytest.mark.parametrize("case", FROZEN["texts"], ids=lambda case: repr(case["text"][:24]))
def test_frozen_corpus(impl, case):
    got = [f"{impl.simhash(case['text'], _policy(p['shingle_words'])):016x}" for p in FROZEN["policies"]]
    assert got == case["simhash"]


def test_simhash_many_equals_simhash(impl):
    texts = [case["text"] for case in FROZEN["texts"]]
    many = impl.simhash_many(texts, _policy(3))
    assert many.dtype == np.uint64 and many.tolist() == [impl.simhash(t, _policy(3)) for t in texts]
    assert impl.simhash_many(iter([]), None).shape == (0,)


_ALPHABET = st.sampled_from(
    list(
        "abcXYZ09 _-.,;\n\t\u00a0\u00e9\u00df\u0130\u0131\u00bd\u00b2\u0915\u093f\u094d\u0301"
        "\u65e5\u672c\ud800\U0001f600\U0001d400\u2003\u0345"
    )
)


@pytest.mark.skipif(not content.HAS_EXTENSION, reason="the compiled twin is not built")
@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(), st.text(alphabet=_ALPHABET)), shingle_words=st.integers(1, 5))
def test_twins_agree(text, shingle_words):
    from crawldedup.content import _simhash_c

    policy = _policy(shingle_words)
    assert _simhash_c.simhash(text, policy) == _simhash_py.simhash(text, policy)


# Each bound of the ASCII word characters and its neighbours (the compiled twin tests ranges).
_ASCII_ALPHABET = st.sampled_from(list("/09:@AZ[`az{_ .,\n\x00\x7f"))


@pytest.mark.skipif(not content.HAS_EXTENSION, reason="the compiled twin is not built")
@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(st.text(alphabet=st.characters(max_codepoint=127)), st.text(alphabet=_ASCII_ALPHABET, max_size=300)),
    shingle_words=st.integers(1, 5),
)
def test_twins_agree_on_ascii(text, shingle_words):
    """An ASCII text takes the compiled twin's own path: folded eight characters at a time,
    its words found 64 at a time."""
    from crawldedup.content import _simhash_c

    policy = _policy(shingle_words)
    assert _simhash_c.simhash(text, policy) == _simhash_py.simhash(text, policy)


@pytest.mark.skipif(not content.HAS_EXTENSION, reason="the compiled twin is not built")
def test_twins_agree_across_blocks_and_hash_tails():
    """Words on each side of the 8- and 64-character steps of the ASCII path, and shingles of
    each tail length of the hash's 16-byte blocks, beside runs of digits that are dropped."""
    from crawldedup.content import _simhash_c

    texts = []
    for length in (1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65):
        word = ("Ab9" * 22)[:length]
        texts += [" " * offset + word + " 2026 " + word.lower() + ",1x" for offset in range(130)]
        texts.append(word + "7" * (64 - length) + " " + word)  # a word ending a block exactly
    assert _simhash_c.simhash_many(texts).tolist() == _simhash_py.simhash_many(texts).tolist()
    assert _simhash_c.simhash_many(texts, _policy(1)).tolist() == _simhash_py.simhash_many(texts, _policy(1)).tolist()


@pytest.mark.skipif(not content.HAS_EXTENSION, reason="the compiled twin is not built")
def test_twins_agree_on_runs_outside_ascii():
    """The compiled twin folds a run holding a character outside ASCII alone: at each offset of
    the 64-character steps, in texts of each kind, where folding changes the run's length (and
    its bytes: U+0390 folds to three two-byte characters), beside runs of digits; and where
    such runs are dense, the rest of the text at once."""
    from crawldedup.content import _simhash_c

    texts = []
    for odd in (
        "\u00e9",
        "\u00a0",
        "\u2019",
        "\u0130",
        "\u00df",
        "\u212a",
        "\U0001d400",
        "\u0663\u0664",
        "\u0390" * 300,
        "\ufb03" * 300,
    ):
        texts += [
            "Ab " * (offset // 3) + "x" * (offset % 3) + odd + "Yz 12 " + "long" * 20 + odd + "End"
            for offset in range(70)
        ]
    # Dense runs outside ASCII: the rest of the text is folded in one call, from a run's start.
    dense = "Привет, МИР 12 ΣΑΣ straße ok \u0663 "
    texts += [dense * 30, "Ascii words 7 " * 40 + dense * 10 + "Then ASCII 1x " * 20]
    texts += ["x" * offset + " " + dense * 3 for offset in range(70)]
    assert _simhash_c.simhash_many(texts).tolist() == _simhash_py.simhash_many(texts).tolist()
    assert _simhash_c.simhash_many(texts, _policy(1)).tolist() == _simhash_py.simhash_many(texts, _policy(1)).tolist()


def test_a_text_without_words_is_zero(impl):
    assert impl.simhash("") == 0
    assert impl.simhash(" -- ,, __ \n") == 0


def test_case_and_spacing_do_not_count(impl):
    assert impl.simhash("Hello,   World\n") == impl.simhash("hello world") == impl.simhash("HELLO - WORLD!")


def test_words_are_folded_alphanumeric_runs_with_their_marks():
    assert words("Straße İstanbul snake_case x²  हिन्दी") == [
        "strasse",
        "i\u0307stanbul",
        "snake",
        "case",
        "x²",
        "हिन्दी",
    ]


def test_runs_of_digits_are_no_words(impl):
    assert words("Updated 2026-11-05 14:00, 1234 comments ३४ x2 ²") == ["updated", "comments", "x2", "²"]
    assert impl.simhash("Updated 2026-11-05, 1234 comments") == impl.simhash("Updated 2025-01-31, 7 comments")


def test_shingles_see_word_order(impl):
    one, two = _policy(1), _policy(2)
    assert impl.simhash("alpha beta gamma", one) == impl.simhash("gamma beta alpha", one)
    assert impl.simhash("alpha beta gamma", two) != impl.simhash("gamma beta alpha", two)


def test_fewer_words_than_a_shingle_are_one_shingle(impl):
    assert impl.simhash("two words", _policy(5)) == impl.simhash("two words", _policy(2))


@pytest.mark.parametrize("bad", [b"bytes", None, 42])
def test_refuses_what_is_not_text(impl, bad):
    with pytest.raises(TypeError, match="text must be a str"):
        impl.simhash(bad)
    with pytest.raises(TypeError, match="text must be a str"):
        impl.simhash_many([bad])


def test_simhash_many_refuses_a_single_string(impl):
    with pytest.raises(TypeError, match="single str"):
        impl.simhash_many("abc")


@pytest.mark.parametrize("value, error", [(0, ValueError), (17, ValueError), (True, TypeError), (2.0, TypeError)])
def test_policy_checks_shingle_words(value, error):
    with pytest.raises(error, match="shingle_words"):
        ContentPolicy(shingle_words=value)


def test_policies_differ_by_digest():
    assert len({_policy(n).digest for n in range(1, 17)}) == 16
