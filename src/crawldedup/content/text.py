"""The text of an HTML page that is the page's own: the input of a content fingerprint.

Parsed by Lexbor (selectolax), about 1.9x as fast as lxml on a 93 KB page with the same
text (docs/content.md). Bytes are decoded first, as a browser would: a byte order mark, then
the charset the caller got from the transport (HTTP ``Content-Type``), then a ``<meta>``
declaration in the first 1024 bytes, then UTF-8 if the bytes are valid UTF-8, else windows-1252.
"""

from __future__ import annotations

import codecs
import re
from typing import Optional, Union

from .._extras import needs_extra

__all__ = ["DROPPED_ELEMENTS", "MIN_WORDS_OUTSIDE_LINKS", "decode_html", "page_text"]

#: Elements whose content is never the page's own text: what a reader does not see, and the
#: template's navigation, side boxes, footers and controls. Part of the content format:
#: changing it bumps CONTENT_FORMAT_VERSION. Comments are never text nodes.
DROPPED_ELEMENTS = (
    "script",
    "style",
    "template",
    "noscript",
    "svg",
    "iframe",
    "nav",
    "aside",
    "footer",
    "form",
    "button",
)
#: Link text (menus, "read next" lists, ads) is left out too, unless fewer than this many words
#: remain without it: a listing page is mostly links, and without them every listing of a site
#: would have one fingerprint.
MIN_WORDS_OUTSIDE_LINKS = 50
#: The HTML standard's prescan looks at the first 1024 bytes for a declared charset.
PRESCAN_BYTES = 1024
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([A-Za-z0-9_:.+-]+)", re.IGNORECASE)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# Labels the HTML standard reads as another encoding than Python's codec of that name would:
# a page that says latin-1 means windows-1252, and a declared UTF-16 in bytes that were read
# as ASCII to find it cannot be UTF-16.
_HTML_ALIASES = {
    "latin1": "cp1252",
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "utf-16": "utf-8",
    "utf-16-le": "utf-8",
    "utf-16-be": "utf-8",
}

HTML = Union[str, bytes, bytearray, memoryview]


def _codec(label: Optional[Union[str, bytes]]) -> Optional[str]:
    """The Python codec for a charset label, or None when the label names none."""
    if label is None:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    try:
        name = codecs.lookup(label.strip()).name
    except LookupError:
        return None
    return _HTML_ALIASES.get(name, name)


def decode_html(html: Union[bytes, bytearray, memoryview], encoding: Optional[str] = None) -> str:
    """Return the text of an HTML document's bytes (undecodable bytes become U+FFFD).

    :param encoding: the charset the transport declared (an HTTP ``Content-Type``), if any;
        a byte order mark overrides it, and it overrides a ``<meta>`` declaration. An unknown
        label is ignored.
    """
    data = bytes(html)
    for bom, bom_codec in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(bom_codec, "replace")
    codec = _codec(encoding)
    if codec is None:
        declared = _META_CHARSET.search(data, 0, PRESCAN_BYTES)
        codec = _codec(declared.group(1)) if declared else None
    if codec is not None:
        return data.decode(codec, "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:  # the HTML standard's fallback where no locale says otherwise
        return data.decode("cp1252", "replace")


def page_text(html: HTML, encoding: Optional[str] = None) -> str:
    """Return the text of an HTML page: its body's visible text nodes, joined by single spaces.

    What a reader does not see is dropped (scripts, styles, templates, ``noscript``, ``svg``
    and ``iframe`` content, comments, markup, the head), and so is the template around the
    page's own text: ``nav``, ``aside``, ``footer``, ``form`` and ``button`` content, and link
    text when at least :data:`MIN_WORDS_OUTSIDE_LINKS` words remain without it. Whitespace is
    collapsed, so two fetches of one page give one text however their markup was indented.
    A tag boundary is a word boundary.

    :param html: the page, as ``str`` or as bytes (decoded by :func:`decode_html`).
    :param encoding: the charset the transport declared, for bytes.
    :raises TypeError: when ``html`` is neither ``str`` nor bytes-like.
    :raises ImportError: when selectolax (``pip install 'crawldedup[content]'``) is missing.
    """
    if not isinstance(html, str):
        if not isinstance(html, (bytes, bytearray, memoryview)):
            raise TypeError(f"html must be str or bytes, got {type(html).__name__}")
        html = decode_html(html, encoding)
    with needs_extra("page_text", "content"):
        from selectolax.lexbor import LexborHTMLParser
    tree = LexborHTMLParser(html)
    tree.strip_tags(list(DROPPED_ELEMENTS))
    body = tree.body
    if body is None:
        return ""
    with_links = body.text(separator=" ")
    tree.strip_tags(["a"])
    without_links = body.text(separator=" ").split()
    return " ".join(without_links if len(without_links) >= MIN_WORDS_OUTSIDE_LINKS else with_links.split())
