"""page_text: the visible text of a page, from str or from bytes in any declared or sniffed charset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("selectolax")

from crawldedup.content import decode_html, page_text  # noqa: E402

FROZEN = json.loads((Path(__file__).parent / "data" / "content-v1.json").read_text(encoding="ascii"))


@pytest.mark.parametrize("case", FROZEN["pages"], ids=lambda case: repr(case["html"][:20]))
def test_frozen_pages(case):
    assert page_text(case["html"]) == case["text"]


@pytest.mark.parametrize(
    "hidden",
    [
        "<script>var secret = 1;</script>",
        "<style>.secret{}</style>",
        "<template><p>secret</p></template>",
        "<!-- secret -->",
        "<noscript>secret</noscript>",
        "<svg><text>secret</text></svg>",
        "<nav><a href='/'>secret</a></nav>",
        "<aside>secret</aside>",
        "<footer>secret</footer>",
        "<form><label>secret</label></form>",
        "<button>secret</button>",
    ],
)
def test_drops_what_is_not_the_pages_text(hidden):
    text = page_text(f"<html><head><title>secret</title></head><body><p>kept</p>{hidden}<p>too</p></body></html>")
    assert text == "kept too"


def test_link_text_is_left_out_when_enough_text_remains():
    prose = " ".join(f"word{i}" for i in range(60))
    assert page_text(f"<p>{prose} <a href='/x'>read next</a></p>") == prose
    short = " ".join(f"word{i}" for i in range(10))
    assert page_text(f"<p>{short} <a href='/x'>read next</a></p>") == short + " read next"


def test_collapses_whitespace_and_decodes_entities():
    assert page_text("<p>  a\n\n\tb&nbsp;&amp;  c </p>\n<div>d</div>") == "a b & c d"


def test_bytes_with_a_meta_charset():
    html = "<html><head><meta charset='windows-1251'></head><body>Привет</body></html>".encode("cp1251")
    assert page_text(html) == "Привет"


def test_bytes_with_an_http_equiv_charset():
    html = ('<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"><p>日本語</p>').encode("shift_jis")
    assert page_text(html) == "日本語"


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16"])
def test_a_byte_order_mark_wins_over_everything(codec):
    html = "<meta charset='iso-8859-7'><p>naïve ✓</p>".encode(codec)
    assert page_text(html, encoding="koi8-r") == "naïve ✓"


def test_the_transport_charset_wins_over_meta():
    html = "<meta charset='utf-8'><p>café</p>".encode("latin-1")
    assert page_text(html, encoding="ISO-8859-1") == "café"


def test_latin1_labels_mean_windows_1252():
    assert decode_html(b"<meta charset=latin1>\x93quoted\x94") == "<meta charset=latin1>\u201cquoted\u201d"


def test_sniffs_utf8_then_falls_back_to_windows_1252():
    assert page_text("<p>déjà vu</p>".encode()) == "déjà vu"
    assert page_text("<p>déjà vu</p>".encode("cp1252")) == "déjà vu"


def test_an_unknown_label_is_ignored():
    assert page_text("<meta charset='x-no-such'><p>ünï</p>".encode(), encoding="bogus") == "ünï"


def test_bytes_like_inputs():
    assert page_text(bytearray(b"<p>a b</p>")) == page_text(memoryview(b"<p>a b</p>")) == "a b"


@pytest.mark.parametrize("bad", [None, 3, ["<p>"]])
def test_refuses_what_is_not_html(bad):
    with pytest.raises(TypeError, match="html must be str or bytes"):
        page_text(bad)
