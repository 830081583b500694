"""Policy 2's reading of a URL (docs/canonical-policy.md, "Policy 2"): the WHATWG URL Standard's
basic URL parser for the special schemes, up to the parts that policy 1's rules then normalize.

:func:`split` cuts a URL into the parts policy 1 cuts by RFC 3986 (scheme, authority, path,
query, fragment), reading slashes and backslashes as browsers do; :func:`special_host` reads a
host's percent-escapes; :func:`ipv4` is WHATWG's IPv4 parser. Only the reference
(``_canonical_py``) calls them: the compiled fast path declines every input where the two
readings could differ.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple
from urllib.parse import unquote_to_bytes

__all__ = ["SPECIAL_SCHEMES", "ends_in_a_number", "ipv4", "special_host", "split"]

#: (scheme, authority, path, query, fragment) as policy 1's RFC 3986 split returns them: None
#: for a part that is absent, so that the same resolution code serves both readings.
Parts = Tuple[Optional[str], Optional[str], str, Optional[str], Optional[str]]

#: The special schemes of the URL Standard that a policy may admit (``file`` is left to policy 1).
SPECIAL_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp"})

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# The authority of a special URL ends at the first of these; "\" is "/" there.
_AUTHORITY_END_RE = re.compile(r"[/\\?#]")
_DIGITS = {8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _slash(text: str, index: int) -> bool:
    return index < len(text) and text[index] in "/\\"


def _rest(text: str, scheme: Optional[str], start: int, authority: Optional[str]) -> Parts:
    """Path (with "\\" as "/"), query and fragment of ``text[start:]``."""
    fragment: Optional[str] = None
    query: Optional[str] = None
    hash_at = text.find("#", start)
    end = len(text)
    if hash_at >= 0:
        fragment, end = text[hash_at + 1 :], hash_at
    question = text.find("?", start, end)
    if question >= 0:
        query, end = text[question + 1 : end], question
    return scheme, authority, text[start:end].replace("\\", "/"), query, fragment


def _after_slashes(text: str, scheme: Optional[str], start: int) -> Parts:
    """Every "/" and "\\" from ``start`` skipped, then the authority and the rest."""
    while _slash(text, start):
        start += 1
    found = _AUTHORITY_END_RE.search(text, start)
    end = found.start() if found is not None else len(text)
    return _rest(text, scheme, end, text[start:end])


def split(text: str, base_scheme: Optional[str]) -> Optional[Parts]:
    """The parts of a URL with a special scheme, or of a reference to a base with one.

    :param base_scheme: the base's scheme (lowercase), or None without a base.
    :returns: the parts, or None when neither the URL nor its base has a special scheme (policy
        1's reading then applies).
    """
    found = _SCHEME_RE.match(text)
    if found is not None:
        scheme = found.group(1).lower()
        if scheme not in SPECIAL_SCHEMES:
            return None
        start = found.end()
        if scheme != base_scheme or (_slash(text, start) and _slash(text, start + 1)):
            return _after_slashes(text, found.group(1), start)
        # WHATWG's one exception: the same scheme as the base, without "//", is relative to it.
        text = text[start:]
    elif base_scheme not in SPECIAL_SCHEMES:
        return None
    if _slash(text, 0) and _slash(text, 1):
        return _after_slashes(text, None, 0)
    return _rest(text, None, 0, None)


def special_host(host: str) -> str:
    """A host of a special URL percent-decoded as UTF-8, as the URL Standard's host parser does.

    :raises UnicodeDecodeError: when the decoded bytes are not UTF-8.
    """
    if "%" not in host:
        return host
    return unquote_to_bytes(host).decode("utf-8")


def _number(part: str) -> Optional[int]:
    """WHATWG's IPv4 number parser: decimal, ``0x`` hexadecimal or leading-``0`` octal; None on failure."""
    if not part:
        return None
    radix = 10
    if len(part) >= 2 and part[0] == "0" and part[1] in "xX":
        part, radix = part[2:], 16
        if not part:
            return 0
    elif len(part) >= 2 and part[0] == "0":
        part, radix = part[1:], 8
    digits = _DIGITS[radix]
    if any(ch not in digits for ch in part):
        return None
    return int(part, radix)


def ends_in_a_number(host: str) -> bool:
    """Whether an ASCII host is to be read as IPv4: its last label (after one trailing dot is
    removed) is all ASCII digits, or an IPv4 number (``0x`` and hex digits)."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    if last and last.isascii() and last.isdigit():
        return True
    return len(last) >= 2 and last[0] == "0" and last[1] in "xX" and _number(last) is not None


def ipv4(host: str) -> Optional[str]:
    """WHATWG's IPv4 parser on a host that :func:`ends_in_a_number`: the dotted quad, or None
    when it is no address (``256.256.256.256``, ``1.2.3.4.5``, ``foo.09``, ``0x100000000``)."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        return None
    numbers: List[int] = []
    for part in parts:
        number = _number(part)
        if number is None:
            return None
        numbers.append(number)
    if any(number > 255 for number in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    address = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        address += number * 256 ** (3 - index)
    return ".".join(str((address >> shift) & 255) for shift in (24, 16, 8, 0))
