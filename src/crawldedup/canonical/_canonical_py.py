"""Canonicalizes URLs to docs/canonical-policy.md: the typed pure-Python reference.

``crawldedup._canonical_c`` (``_canonical_c.pyx``) is a compiled fast path in front of it: it
answers the common URL in C and hands every other input to this module, which stays the one
implementation of every rule; :mod:`crawldedup.canonical` picks the build. Rule numbers in
comments refer to docs/canonical-policy.md.

Speed notes: the common URL is already clean ASCII, so each part is first checked with one
precompiled regex and only rewritten when that check fails; hosts (and their ports) repeat
across a crawl, so their processing, IDNA included, is cached; every rewrite is linear in
the length of the part (splits, ``str.translate`` tables and one-pass regex substitutions),
so a URL made of escapes or holding thousands of parameters costs no more than its length.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union
from urllib.parse import unquote_to_bytes

import idna

from .._checks import ColumnBytes, Offsets, check_batch, check_offsets
from . import _domain, _whatwg
from .policy import DEFAULT_POLICY, Canonicalized, CanonicalPolicy, InvalidURL
from .rules import host_of

__all__ = ["canonicalize", "canonicalize_many"]

URLInput = Union[str, bytes]
# (scheme, authority, path, query) of an accepted base, as written after the input rules.
_BaseParts = Tuple[str, str, str, Optional[str]]

# Rule 1: the ASCII whitespace stripped from both ends, then tab/CR/LF removed anywhere.
_STRIP_CHARS = " \t\n\r\f\v"
_DROP_TAB_CR_LF = str.maketrans("", "", "\t\r\n")
# One search finds every input that needs a closer look (tab/CR/LF to remove, or a character
# that is refused); the clean common case pays for this single scan only.
_SUSPECT_RE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
_REFUSED_RE = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# Policy 2, rule 1: C0 controls and space stripped from both ends (as browsers do); a control
# left inside is encoded in the path, query and fragment and refused in the scheme and host
# by their own rules, so only an unpaired surrogate is refused up front.
_C0_AND_SPACE = "".join(chr(code) for code in range(0x21))
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# By policy version: (characters stripped from the ends, characters refused anywhere).
_INPUT_RULES = {
    1: (_STRIP_CHARS, _REFUSED_RE),
    2: (_C0_AND_SPACE, _SURROGATE_RE),
    3: (_C0_AND_SPACE, _SURROGATE_RE),
}

# Rule 2: only a leading "scheme%3A%2F%2F" marks a wrapped URL.
_WRAPPED_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*%3[Aa]%2[Ff]%2[Ff]")

# RFC 3986 appendix B, with the scheme group held to the scheme syntax of §3.1, so that a
# first segment such as "1http:" is a relative path and not a scheme.
_URI_RE = re.compile(r"(?:([A-Za-z][A-Za-z0-9+.\-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)

# Policy 2: an absolute URL of a special scheme written "scheme://host" without a backslash is
# cut the same way by both readings, so the common URL keeps RFC 3986's one regex.
_PLAIN_SPECIAL_RE = re.compile(r"(?:[Hh][Tt][Tt][Pp][Ss]?|[Ww][Ss][Ss]?|[Ff][Tt][Pp])://[^/]")

_DEFAULT_PORTS: Dict[str, int] = {"http": 80, "https": 443, "ftp": 21, "ws": 80, "wss": 443}

_HOST_CHARS_RE = re.compile(r"[a-z0-9_.\-]+\Z")
# Policy 2: a label that starts with "xn--" (an A-label), which UTS #46 checks.
_A_LABEL_RE = re.compile(r"(?:\A|\.)[Xx][Nn]--")
_HOST_BAD_CHAR_RE = re.compile(r"[^a-z0-9_.\-]")
# Policy 3: an ASCII host may hold what the URL Standard allows, every printable character but
# its forbidden domain code points (# % / : < > ? @ [ \ ] ^ |).
_DOMAIN_CHARS_RE = re.compile(r"[a-z0-9_.\-!\"$&'()*+,;=`{}~]+\Z")
_DOMAIN_BAD_CHAR_RE = re.compile(r"[^a-z0-9_.\-!\"$&'()*+,;=`{}~]")
_MAX_LABEL = 63

UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
_HEX_DIGITS = "0123456789ABCDEFabcdef"
# Rule 7 (RFC 3986 §6.2.2): every two-hex-digit escape, mapped to its normal form: the
# character itself when unreserved, else the escape with uppercase hex.
_ESCAPES: Dict[str, str] = {}
for _hi in _HEX_DIGITS:
    for _lo in _HEX_DIGITS:
        _char = chr(int(_hi + _lo, 16))
        _ESCAPES[_hi + _lo] = _char if _char in UNRESERVED else "%" + (_hi + _lo).upper()
del _hi, _lo, _char

# Characters a path may hold raw: pchar and "/" (RFC 3986 §3.3). Everything else (space,
# non-ASCII, '"<>\^`{|}[]') is written as UTF-8 escapes; "%" is handled as escapes first.
_PATH_CLEAN_RE = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/]*\Z")
_PATH_UNSAFE_RE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]+")
# Rule 9: a kept fragment follows the path's rules, with "?" raw and "#" escaped.
_FRAGMENT_UNSAFE_RE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/%?]+")
_LOWER_ESCAPE_RE = re.compile(r"%[0-9a-f]{2}")

# Rule 8: a query pair made of unreserved characters only is already in its canonical form.
_CLEAN_PAIR_RE = re.compile(r"[A-Za-z0-9\-._~]*(?:=[A-Za-z0-9\-._~]*)?\Z")
_CLEAN_QUERY_RE = re.compile(r"[A-Za-z0-9\-._~=&]*\Z")
_QUERY_SEPARATORS_RE = re.compile(r"[&;]")
# Form re-encoding of one byte (held as a latin-1 character): unreserved raw, space "+",
# every other byte "%XX" with uppercase hex.
_FORM_ENCODE = {b: f"%{b:02X}" for b in range(256) if chr(b) not in UNRESERVED}
_FORM_ENCODE[0x20] = "+"


def _show(text: object, limit: int = 80) -> str:
    """A short repr for error messages (a rejected input can be a megabyte long)."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 5] + "...'"


def _read(url: object, policy: CanonicalPolicy, what: str) -> str:
    """Applies rules 1 and 2: type, UTF-8, stripping, length, control characters, unwrapping."""
    if type(url) is str:
        # Fast path for the common input: nothing to remove, refuse or unwrap.
        text = url.strip(_INPUT_RULES[policy.version][0])
        if text and len(text) <= policy.max_length and "%3" not in text and _SUSPECT_RE.search(text) is None:
            return text
    elif isinstance(url, bytes):
        try:
            text = url.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidURL(
                f"{what} is not valid UTF-8: byte 0x{url[exc.start]:02X} at offset {exc.start} of {_show(url)}"
            ) from None
    elif isinstance(url, str):
        text = str(url)
    else:
        raise TypeError(f"{what} must be str or bytes, got {type(url).__name__}")
    text = _check_text(text, policy, what)
    if "%3" in text and _WRAPPED_RE.match(text) is not None:
        raw = unquote_to_bytes(text)
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidURL(
                f"wrapped {what} decodes to bytes that are not UTF-8 (byte 0x{raw[exc.start]:02X}): {_show(text)}"
            ) from None
        text = _check_text(decoded, policy, f"unwrapped {what}")
    return text


def _check_text(text: str, policy: CanonicalPolicy, what: str) -> str:
    strip, refused_re = _INPUT_RULES[policy.version]
    text = text.strip(strip)
    if len(text) > policy.max_length:
        raise InvalidURL(f"{what} too long: {len(text)} characters, max_length is {policy.max_length}")
    if _SUSPECT_RE.search(text) is not None:
        text = text.translate(_DROP_TAB_CR_LF)
        refused = refused_re.search(text)
        if refused is not None:
            code = ord(refused.group())
            kind = "an unpaired surrogate" if 0xD800 <= code <= 0xDFFF else "a control character"
            raise InvalidURL(f"{what} holds {kind} (U+{code:04X}) at position {refused.start()}: {_show(text)}")
    if not text:
        raise InvalidURL(f"{what} is empty")
    return text


def _percent_encode_run(match: re.Match[str]) -> str:
    return "".join([f"%{b:02X}" for b in match.group().encode("utf-8")])


def _normalize_escapes(text: str, unsafe_re: re.Pattern[str]) -> str:
    """Normalizes escapes (RFC 3986 §6.2.2; a stray "%" becomes %25), then encodes what may not be raw."""
    if "%" in text:
        parts = text.split("%")
        out = [parts[0]]
        for part in parts[1:]:
            escape = _ESCAPES.get(part[:2])
            if escape is None:
                out.append("%25")
                out.append(part)
            else:
                out.append(escape)
                out.append(part[2:])
        text = "".join(out)
    return unsafe_re.sub(_percent_encode_run, text)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute path, in one pass over its segments."""
    segments = path.split("/")
    last = len(segments) - 1
    out: List[str] = []
    for index in range(1, last + 1):
        segment = segments[index]
        if segment == "..":
            if out:
                out.pop()
            if index == last:
                out.append("")
        elif segment == ".":
            if index == last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


def _canonical_path(path: str, policy: CanonicalPolicy) -> str:
    """Rule 7."""
    if not path:
        return "/"
    if _PATH_CLEAN_RE.match(path) is None:
        path = _normalize_escapes(path, _PATH_UNSAFE_RE)
    if "/." in path:
        path = _remove_dot_segments(path)
    if policy.strip_trailing_slash and len(path) > 1 and path[-1] == "/":
        path = path.rstrip("/") or "/"
    if policy.lowercase_path:
        path = path.lower()
        if "%" in path:
            path = _LOWER_ESCAPE_RE.sub(_upper_match, path)
    return path


def _upper_match(match: re.Match[str]) -> str:
    return match.group().upper()


def _form_decode(text: str) -> bytes:
    return unquote_to_bytes(text.replace("+", " "))


def _form_encode(data: bytes) -> str:
    return data.decode("latin-1").translate(_FORM_ENCODE)


def _canonical_query(query: str, policy: CanonicalPolicy) -> str:
    """Rule 8: split, drop empties and tracking keys, re-encode as form data, sort."""
    if policy.semicolon_separator:
        parts = _QUERY_SEPARATORS_RE.split(query)
    else:
        parts = query.split("&")
    filters = policy.filters_query
    keep_keys = policy.query_keep_keys
    drop_keys = policy.query_drop_keys
    drop_starts = policy.query_drop_starts
    # One scan of the whole query usually proves every pair clean, sparing a check per pair.
    all_clean = _CLEAN_QUERY_RE.match(query) is not None
    # Pairs are held as "key\0value": no encoded key holds a byte below "%" (0x25), so sorting
    # these strings is sorting by (key, value), and string sorts are several times faster
    # than tuple sorts (415 ns against about 120 ns for two pairs, measured with timeit).
    pairs: List[str] = []
    for part in parts:
        if not part or part == "=":
            continue
        key, _, value = part.partition("=")
        if (all_clean and "=" not in value) or _CLEAN_PAIR_RE.match(part) is not None:
            folded = key.lower()
        else:
            key_bytes = _form_decode(key)
            folded = key_bytes.lower().decode("latin-1")
            key = _form_encode(key_bytes)
            value = _form_encode(_form_decode(value))
        if filters and folded not in keep_keys and (folded in drop_keys or folded.startswith(drop_starts)):
            continue
        pairs.append(key + "\0" + value)
    if len(pairs) > 1:
        pairs.sort()
    return "&".join(pairs).replace("\0", "=")


@lru_cache(maxsize=1 << 14)
def canonical_authority(
    authority: str,
    scheme: str,
    out_scheme: str,
    strip_www: bool,
    keep_userinfo: bool,
    whatwg: bool = False,
    domains: bool = False,
) -> str:
    """Rules 5 and 6 for one authority; cached because a crawl sees few hosts many times.

    :param whatwg: the host of a special URL under policy 2 or 3: percent-decoded first, and
        read as an IPv4 address when its last label is a number.
    :param domains: the host of a special URL under policy 3: converted by the URL Standard's
        domain to ASCII, empty and long labels kept.
    """
    at = authority.rfind("@")
    userinfo = authority[:at] if at >= 0 else ""
    hostport = authority[at + 1 :]
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            raise InvalidURL(f"unbalanced '[' in host {_show(hostport)}")
        host = _canonical_ipv6(hostport[1:close])
        rest = hostport[close + 1 :]
        if rest and rest[0] != ":":
            raise InvalidURL(f"only ':port' may follow an IPv6 literal, got {_show(rest)} in {_show(hostport)}")
        port = rest[1:] if rest else ""
    else:
        colon = hostport.rfind(":")
        if colon >= 0:
            host, port = hostport[:colon], hostport[colon + 1 :]
        else:
            host, port = hostport, ""
        host = _canonical_name(host, strip_www, whatwg, whatwg and domains)
    if port:
        port = _canonical_port(port, scheme, out_scheme)
    if keep_userinfo and userinfo:
        userinfo = _normalize_escapes(userinfo, _PATH_UNSAFE_RE)
        if userinfo != ":":
            return userinfo + "@" + host + port
    return host + port


def _canonical_port(port: str, scheme: str, out_scheme: str) -> str:
    """Rule 6: ':port' in plain decimal, or '' for an empty or default port."""
    if not (port.isascii() and port.isdigit()):
        raise InvalidURL(f"port must be ASCII digits in 0-65535, got {_show(port)}")
    digits = port.lstrip("0") or "0"
    if len(digits) > 5 or int(digits) > 65535:
        raise InvalidURL(f"port must be in 0-65535, got {_show(port)}")
    number = int(digits)
    if number == _DEFAULT_PORTS.get(scheme) or number == _DEFAULT_PORTS.get(out_scheme):
        return ""
    return ":" + digits


def _canonical_ipv6(literal: str) -> str:
    """Rule 5: a bracketed IPv6 literal, validated and written in RFC 5952 form."""
    if "%" in literal:
        raise InvalidURL(f"IPv6 zone identifiers are not accepted, got [{_show(literal)[1:-1]}]")
    try:
        if not literal.isascii():
            raise ValueError(literal)
        address = ipaddress.IPv6Address(literal)
    except ValueError:
        raise InvalidURL(f"not a valid IPv6 address: [{_show(literal)[1:-1]}]") from None
    mapped = address.ipv4_mapped
    if mapped is not None:
        # RFC 5952 §5: an IPv4-mapped address keeps its dotted quad.
        return f"[::ffff:{mapped}]"
    return f"[{address.compressed}]"


def _canonical_name(host: str, strip_www: bool, whatwg: bool, domains: bool) -> str:
    """Rule 5 for a registered name or IPv4 literal: lowercase, or UTS #46 when non-ASCII.

    Under policy 2 (``whatwg``), percent-decoded first (rule 4) and read as IPv4 (rule 5).
    Under policy 3 (``domains``), a non-ASCII host goes through the URL Standard's domain to
    ASCII, an ASCII one is lowercased (A-labels unchecked, as the Standard does), and empty or
    long labels stay.
    """
    if whatwg:
        try:
            host = _whatwg.special_host(host)
        except UnicodeDecodeError:
            raise InvalidURL(f"host {_show(host)} percent-decodes to bytes that are not UTF-8") from None
    if host.isascii() and (domains or not (whatwg and _A_LABEL_RE.search(host) is not None)):
        name = host.lower()
    elif domains:
        try:
            name = _domain.domain_to_ascii(host)
        except _domain.DomainError as exc:
            raise InvalidURL(f"host {_show(host)} fails the URL Standard's domain to ASCII (UTS #46): {exc}") from None
    else:
        # Policy 2 reads an ASCII host with an A-label through UTS #46 too, as WHATWG does, so
        # that a label that is no valid Punycode ("xn--") is refused.
        try:
            # idna's UTS #46 processing is non-transitional ("faß" stays "faß" before Punycode).
            name = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            raise InvalidURL(f"host {_show(host)} fails IDNA (UTS #46): {exc}") from None
    if whatwg and name and _whatwg.ends_in_a_number(name):
        address = _whatwg.ipv4(name)
        if address is None:
            raise InvalidURL(
                f"host {_show(host)} ends in a number but is no IPv4 address (WHATWG: at most four "
                "parts, each decimal, 0x hexadecimal or 0 octal, within range)"
            )
        return address
    if name.endswith(".") and not (domains and name.endswith("..")):
        # One trailing dot goes; a host ending in an empty label is kept as the Standard writes it.
        name = name[:-1]
    if not name:
        raise InvalidURL(f"empty host in {_show(host)}")
    if domains:
        if _DOMAIN_CHARS_RE.match(name) is None:
            bad = _DOMAIN_BAD_CHAR_RE.search(name)
            shown = bad.group() if bad is not None else name
            raise InvalidURL(f"host holds {shown!r}, a forbidden domain code point (URL Standard), in {_show(host)}")
    elif _HOST_CHARS_RE.match(name) is None:
        bad = _HOST_BAD_CHAR_RE.search(name)
        shown = bad.group() if bad is not None else name
        raise InvalidURL(f"host may hold letters, digits, '-', '_' and '.' only, got {shown!r} in {_show(host)}")
    labels = name.split(".")
    for label in () if domains else labels:
        if not label:
            raise InvalidURL(f"empty label in host {_show(host)}")
        if len(label) > _MAX_LABEL:
            raise InvalidURL(f"host label longer than {_MAX_LABEL} characters ({len(label)}) in {_show(host)}")
    if strip_www and labels[0] == "www" and len(labels) > 2:
        while labels[0] == "www" and len(labels) > 2:
            del labels[0]
        name = ".".join(labels)
    return name


@lru_cache(maxsize=256)
def _base_parts(base: URLInput, policy: CanonicalPolicy) -> _BaseParts:
    """Validates a base as an accepted absolute URL and returns its parts for resolution."""
    try:
        _canonicalize(base, None, policy)
    except InvalidURL as exc:
        raise InvalidURL(f"base is not an accepted absolute URL: {exc}") from None
    scheme, authority, path, query, _ = _split(_read(base, policy, "base"), None, policy)
    assert scheme is not None and authority is not None  # an accepted URL has both
    return scheme, authority, path, query


def _split(text: str, base: Optional[_BaseParts], policy: CanonicalPolicy) -> _whatwg.Parts:
    """(scheme, authority, path, query, fragment): read as browsers do under policy 2 when the
    URL or its base has a special scheme, else by RFC 3986 (appendix B)."""
    if policy.version >= 2 and ("\\" in text or _PLAIN_SPECIAL_RE.match(text) is None):
        parts = _whatwg.split(text, None if base is None else base[0].lower())
        if parts is not None:
            return parts
    return _URI_RE.match(text).groups()  # type: ignore[union-attr, return-value]


def _canonicalize(url: object, base: Optional[_BaseParts], policy: CanonicalPolicy) -> str:
    text = _read(url, policy, "URL")
    scheme, authority, path, query, fragment = _split(text, base, policy)
    if scheme is None:
        # Rule 3: RFC 3986 §5.2.2, strict; dot segments are removed later, with the path's own rules.
        if base is None:
            raise InvalidURL(f"no scheme in {_show(text)} and no base to resolve it against")
        scheme = base[0]
        if authority is None:
            authority = base[1]
            if not path:
                path = base[2]
                if query is None:
                    query = base[3]
            elif path[0] != "/":
                base_path = base[2]
                path = base_path[: base_path.rfind("/") + 1] + path if base_path else "/" + path
    scheme = scheme.lower()
    if scheme not in policy.schemes:
        raise InvalidURL(f"scheme {scheme!r} is not accepted (policy.schemes: {', '.join(sorted(policy.schemes))})")
    if authority is None:
        raise InvalidURL(f"no host in {_show(text)} (expected {scheme}://host)")
    out_scheme = "https" if policy.merge_schemes and scheme == "http" else scheme
    whatwg = policy.version >= 2 and scheme in _whatwg.SPECIAL_SCHEMES
    authority = canonical_authority(
        authority, scheme, out_scheme, policy.strip_www, policy.keep_userinfo, whatwg, policy.version >= 3
    )
    if policy.host_rules:
        policy = policy.for_host(host_of(authority))
    result = out_scheme + "://" + authority + _canonical_path(path, policy)
    if query:
        query = _canonical_query(query, policy)
        if query:
            result += "?" + query
    if fragment and policy.keep_fragment:
        result += "#" + _normalize_escapes(fragment, _FRAGMENT_UNSAFE_RE)
    return result


def _check_policy(policy: Optional[CanonicalPolicy]) -> CanonicalPolicy:
    if policy is None:
        return DEFAULT_POLICY
    if not isinstance(policy, CanonicalPolicy):
        raise TypeError(f"policy must be a CanonicalPolicy or None, got {type(policy).__name__}")
    return policy


def check_base(base: object, policy: CanonicalPolicy) -> Optional[_BaseParts]:
    if base is None:
        return None
    if not isinstance(base, (str, bytes)):
        raise TypeError(f"base must be str or bytes, got {type(base).__name__}")
    return _base_parts(base, policy)


def canonicalize(url: URLInput, base: Optional[URLInput] = None, policy: Optional[CanonicalPolicy] = None) -> str:
    """Returns the one ASCII string that every spelling of ``url``'s page maps to.

    :param url: the URL, as ``str`` or UTF-8 ``bytes``; may be relative when ``base`` is given.
    :param base: an accepted absolute URL that relative references resolve against (RFC 3986 §5.2).
    :param policy: the rules to apply; :data:`DEFAULT_POLICY` when ``None``.
    :returns: ``scheme://host[:port]path[?query][#fragment]``, pure ASCII and idempotent.
    :raises InvalidURL: the URL or the base is not accepted; the message names the problem.
    :raises TypeError: ``url`` or ``base`` is not ``str``/``bytes``, or ``policy`` not a policy.
    """
    if policy is None:
        policy = DEFAULT_POLICY
    else:
        policy = _check_policy(policy)
    return _canonicalize(url, None if base is None else check_base(base, policy), policy)


def canonicalize_many(
    urls: Iterable[URLInput], base: Optional[URLInput] = None, policy: Optional[CanonicalPolicy] = None
) -> Canonicalized:
    """Canonicalizes a batch without stopping at a bad URL.

    :param urls: an iterable of URLs (``str`` or ``bytes``), not a single string.
    :param base: as for :func:`canonicalize`, validated once for the whole batch.
    :param policy: as for :func:`canonicalize`.
    :returns: ``Canonicalized(urls, errors)``: ``urls[i]`` is the canonical string or ``None``,
        and ``errors[i]`` the :class:`InvalidURL` saying why (an item of the wrong type is
        recorded there too, chained to the ``TypeError``).
    :raises InvalidURL: the base is not accepted (nothing could be resolved against it).
    :raises TypeError: ``urls`` is a single ``str``/``bytes`` or not iterable; ``base`` or
        ``policy`` has the wrong type.
    """
    policy = _check_policy(policy)
    check_batch("urls", urls, "URLs")
    base_parts = check_base(base, policy)
    results: List[Optional[str]] = []
    errors: Dict[int, InvalidURL] = {}
    for index, url in enumerate(urls):
        try:
            results.append(_canonicalize(url, base_parts, policy))
        except InvalidURL as exc:
            results.append(None)
            errors[index] = exc
        except TypeError as exc:
            results.append(None)
            error = InvalidURL(str(exc))
            error.__cause__ = exc
            errors[index] = error
    return Canonicalized(results, errors)


def buffer_rows(offsets: Offsets, data: bytes) -> List[Union[str, bytes]]:
    """The rows of a text column laid out as Arrow lays one out: row ``i`` is
    ``data[offsets[i]:offsets[i + 1]]``, as a ``str``, or as ``bytes`` when it is not valid UTF-8
    (so that :func:`canonicalize` names its problem as for any such bytes)."""
    rows: List[Union[str, bytes]] = []
    for start, stop in zip(offsets[:-1], offsets[1:]):
        raw = data[start:stop]
        try:
            rows.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            rows.append(raw)
    return rows


def canonicalize_buffers(
    offsets: Offsets,
    data: ColumnBytes,
    runs: Optional[Sequence[Tuple[int, Optional[URLInput]]]] = None,
    policy: Optional[CanonicalPolicy] = None,
) -> Tuple[List[int], bytes, Dict[int, InvalidURL]]:
    """Canonicalize the rows of a text column given as its offsets and UTF-8 bytes (Arrow's
    layout of a ``string`` or ``large_string`` array), each row as :func:`canonicalize` would.

    :param offsets: ``n + 1`` ascending offsets into ``data``.
    :param runs: None (no base), or ``(stop, base)`` pairs in row order: the rows before ``stop``
        (from the previous pair's ``stop``) resolve against ``base`` (None: no base); the last
        ``stop`` is ``n``. A refused base is the error of each of its rows.
    :returns: ``(offsets, data, errors)`` of the canonical strings (ASCII; a refused row is
        empty) and the :class:`InvalidURL` of each refused row.
    :raises ValueError: for offsets that do not ascend within ``data``, or runs that do not end
        at ascending rows up to the last.
    """
    raw = bytes(data)
    check_offsets(offsets, len(raw))
    rows = buffer_rows(offsets, raw)
    canonical: List[str] = []
    errors: Dict[int, InvalidURL] = {}
    start = 0
    for stop, base in runs if runs is not None else [(len(rows), None)]:
        if not start <= stop <= len(rows):
            raise ValueError(f"runs must end at ascending rows up to {len(rows)}, got {stop}")
        try:
            found = canonicalize_many(rows[start:stop], base, policy)
        except InvalidURL as exc:
            errors.update((row, exc) for row in range(start, stop))
            canonical.extend("" for _ in range(start, stop))
        else:
            canonical.extend(url or "" for url in found.urls)
            errors.update((start + row, error) for row, error in found.errors.items())
        start = stop
    if start != len(rows):
        raise ValueError(f"runs must end at the last row ({len(rows)}), got {start}")
    out_offsets = [0]
    for url in canonical:
        out_offsets.append(out_offsets[-1] + len(url))
    return out_offsets, "".join(canonical).encode("ascii"), errors
