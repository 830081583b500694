"""Policy 3's reading of a host (docs/canonical-policy.md, "Policy 3"): the URL Standard's
domain to ASCII, UTS #46 ToASCII with CheckHyphens=false, CheckBidi=true, CheckJoiners=true,
UseSTD3ASCIIRules=false, Transitional_Processing=false and VerifyDnsLength=false.

It is built on the ``idna`` package's UTS #46 mapping table and its checks of joiners (CONTEXTJ)
and bidirectional text (RFC 5893), which are those of UTS #46 §4.1; what the package does not
offer with these flags (the processing steps of §4 and §4.1's criteria without the hyphen rules
and the length checks) is written here. Only the reference calls it, for a host that is not
plain ASCII or holds an A-label: the compiled fast path keeps every other host.
"""

from __future__ import annotations

import unicodedata

import idna
from idna.core import check_bidi, uts46_remap, valid_contextj

__all__ = ["DomainError", "domain_to_ascii"]

_ACE = "xn--"
# The URL Standard's forbidden domain code points (host parser, after domain to ASCII).
_FORBIDDEN = frozenset("\x00\t\n\r #/:<>?@[\\]^|%\x7f" + "".join(chr(c) for c in range(0x20)))


class DomainError(ValueError):
    """A domain that the URL Standard's domain to ASCII (or its host parser) refuses."""


def _valid_label(label: str, position: int) -> None:
    """UTS #46 §4.1 for one Unicode label, non-transitional, CheckHyphens=false, CheckJoiners."""
    if unicodedata.normalize("NFC", label) != label:
        raise DomainError(f"label {position + 1} is not in Unicode normalization form C")
    if label[:4].lower() == _ACE:
        raise DomainError(f"label {position + 1} begins with 'xn--' once decoded")
    if unicodedata.category(label[0])[0] == "M":
        raise DomainError(f"label {position + 1} begins with a combining mark (U+{ord(label[0]):04X})")
    try:
        # Each code point valid or a deviation (kept, non-transitional): mapping a valid label
        # changes nothing, and anything else raises or changes it.
        if uts46_remap(label, std3_rules=False, transitional=False) != label:
            raise DomainError(f"label {position + 1} holds a code point that UTS #46 maps")
    except idna.IDNAError as exc:
        raise DomainError(f"label {position + 1}: {exc}") from None
    for index, char in enumerate(label):
        if char in "\u200c\u200d" and not valid_contextj(label, index):
            raise DomainError(f"label {position + 1}: a joiner (U+{ord(char):04X}) out of its context (CONTEXTJ)")


def _decoded(label: str, position: int) -> str:
    """An A-label's Unicode form (UTS #46 §4, step 4.1)."""
    if not label.isascii():
        raise DomainError(f"label {position + 1} begins with 'xn--' and holds non-ASCII characters")
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except (UnicodeError, ValueError, IndexError, OverflowError):
        raise DomainError(f"label {position + 1} is no valid Punycode") from None
    if not decoded:
        raise DomainError(f"label {position + 1} is empty once decoded")
    if decoded.isascii():
        raise DomainError(f"label {position + 1} decodes to ASCII only")
    return decoded


def domain_to_ascii(domain: str) -> str:
    """The ASCII form of ``domain`` (already percent-decoded), lowercase, as browsers write it.

    Empty labels and long labels are kept (VerifyDnsLength=false); a trailing dot stays.

    :raises DomainError: when the URL Standard refuses the domain, with the reason.
    """
    if domain.isascii():
        # The URL Standard's fast path: an ASCII domain is lowercased, its A-labels unchecked.
        result = domain.lower()
    else:
        result = _to_ascii(domain)
    if not result:
        raise DomainError("the domain is empty once mapped")
    bad = next((char for char in result if char in _FORBIDDEN), None)
    if bad is not None:
        raise DomainError(f"the domain holds a forbidden domain code point (U+{ord(bad):04X})")
    return result


def _to_ascii(domain: str) -> str:
    """UTS #46 ToASCII with the URL Standard's flags."""
    try:
        mapped = uts46_remap(domain, std3_rules=False, transitional=False)
    except idna.IDNAError as exc:
        raise DomainError(str(exc)) from None
    labels = mapped.split(".")
    unicode_labels = []
    for position, label in enumerate(labels):
        if label[:4].lower() == _ACE:
            label = _decoded(label.lower(), position)
        if label:
            _valid_label(label, position)
        unicode_labels.append(label)
    if any(unicodedata.bidirectional(char) in ("R", "AL", "AN") for label in unicode_labels for char in label):
        for position, label in enumerate(unicode_labels):
            try:
                if label and not check_bidi(label, check_ltr=True):
                    raise DomainError(f"label {position + 1} breaks the bidi rule (RFC 5893)")
            except idna.IDNAError as exc:
                raise DomainError(f"label {position + 1} breaks the bidi rule (RFC 5893): {exc}") from None
    out = []
    for label in unicode_labels:
        if label.isascii():
            out.append(label)
        else:
            out.append(_ACE + label.encode("punycode").decode("ascii"))
    return ".".join(out)
