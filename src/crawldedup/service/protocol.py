"""The fingerprint service's wire format, shared by the server and its clients (no I/O here).

Every call is ``POST <path>`` with a JSON object, answered by a JSON object: ``200`` with the
answer, or an error status with ``{"error": "<one line>"}``. This module holds the one table of
calls (:data:`CALLS`: path, fields, the field of the answer), the checks of a request's body
(the server's side), how a client builds a body and reads an answer, and the one table of
statuses (:func:`status_of` for the server, :func:`raise_for` for the clients).
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

import orjson

from .._checks import is_integer, is_number
from ..canonical import InvalidURL
from ..stores.base import NamespaceConflict, StoreUnavailable

#: Largest request body: 16 MiB holds 100,000 URLs of 160 bytes.
MAX_BODY_BYTES = 16 << 20
#: Most URLs or keys in one request.
MAX_BATCH = 100_000
#: Seconds a client is told to wait after a 503 (the store's own retries already took up to ~2 s).
RETRY_AFTER_SECONDS = 1


class BadRequest(ValueError):
    """A request the server refuses as it is (400 unless ``status`` says otherwise); the message is one line."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Unauthorized(PermissionError):
    """A request without the service's bearer token, or with another one (401)."""


class Field(NamedTuple):
    """One field of a request body: its name, what it must be (for messages), whether a value is
    that, and for a list, whether all its items are (one call for the whole list)."""

    name: str
    allowed: str
    check: Callable[[Any], bool]
    required: bool = False
    items: Optional[Callable[[List[Any]], bool]] = None

    def refusal(self, value: Any) -> Optional[str]:
        """``<name> must be <allowed>, got <what>`` when ``value`` is not allowed, else None."""
        if not self.check(value):
            return f"{self.name} must be {self.allowed}, got {_json_type(value)}"
        if self.items is not None and not self.items(value):
            position = next(position for position, item in enumerate(value) if not self.items([item]))
            return f"{self.name} must be {self.allowed}, got {_json_type(value[position])} at position {position}"
        return None


def all_of(kind: type, values: List[Any]) -> bool:
    """Whether every item of ``values`` is a ``kind``: a loop in C, not a Python call per item
    (parse_body of a 1,000-URL claim took 118 us with one, 51 us with this, 34 of them orjson's)."""
    return all(map(isinstance, values, repeat(kind)))


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _is_string(value: Any) -> bool:
    return isinstance(value, str)


def _is_key(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _strings(values: List[Any]) -> bool:
    return all_of(str, values)


def _chains(values: List[Any]) -> bool:
    """Each item a URL, or a list of URLs (a fetch chain, first requested first)."""
    return all(isinstance(value, str) or (isinstance(value, list) and all_of(str, value)) for value in values)


def _keys(values: List[Any]) -> bool:
    return all_of(str, values) and all(values)  # strings, none of them empty


_URLS = Field("urls", "a list of strings", _is_list, required=True, items=_strings)
_LEASE = Field("lease", "a number of seconds", is_number)
_URL_FP = Field("url_fp", "a non-empty string", _is_key)
_URL_FPS = Field("url_fps", "a list of non-empty strings", _is_list, items=_keys)


class Call(NamedTuple):
    """One call of the service: where it is, what its body holds, and the field of its answer."""

    path: str
    fields: Tuple[Field, ...]
    answer: str
    #: The seed's calls take one key (``url_fp``) or a batch (``url_fps``), and answer in kind.
    single_or_batch: bool = False


#: Client method name -> its call. The server routes ``path`` to the handler of the same name.
CALLS: Dict[str, Call] = {
    "seen_keys": Call("/is_seen", (_URL_FP, _URL_FPS), "seen", single_or_batch=True),
    "claim_keys": Call("/mark_seen", (_URL_FP, _URL_FPS), "first_seen", single_or_batch=True),
    "claim_batch": Call("/v1/claim", (_URLS, _LEASE, Field("base", "a string", _is_string)), "won"),
    "seen": Call("/v1/seen", (_URLS,), "seen"),
    "done": Call("/v1/done", (_URLS,), "done"),
    "release": Call("/v1/release", (_URLS,), "released"),
    "renew": Call("/v1/renew", (_URLS, _LEASE._replace(required=True)), "renewed"),
    "expired": Call("/v1/expired", (Field("limit", "an integer", is_integer), _LEASE), "urls"),
    "claim_final": Call(
        "/v1/claim_final",
        (
            _URLS._replace(name="final_urls"),
            Field("requested", "a list of strings or of lists of strings", _is_list, required=True, items=_chains),
            _LEASE,
        ),
        "won",
    ),
    "seen_through_redirects": Call("/v1/seen_through_redirects", (_URLS,), "seen"),
}
#: Path -> client method name of the call there.
CALL_AT: Dict[str, str] = {call.path: name for name, call in CALLS.items()}


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


_OWNER = Field("owner", "a string", _is_string)
_TOKEN = Field("token", "a string of hex digits", _is_string)
_FINGERPRINTS = "base64 of 16-byte fingerprints"
#: The calls of the ``service`` store (:mod:`crawldedup.stores.service`): step -> its call. Their
#: answers are objects of several fields, checked by that store.
STORE_CALLS: Dict[str, Call] = {
    "open": Call(
        "/v1/store/open",
        (
            Field("namespace", "a string", _is_string, required=True),
            Field("policy", "a string", _is_string, required=True),
        ),
        "strategy",
    ),
    "claim": Call(
        "/v1/store/claim",
        (
            Field("claims", _FINGERPRINTS, _is_string, required=True),
            Field("reads", _FINGERPRINTS, _is_string, required=True),
            Field("lease", "an object with owner, seconds and urls", _is_object),
            _TOKEN,
            Field("aliases", "an object with requested, finals and capacity", _is_object),
        ),
        "won",
    ),
    "aliases": Call("/v1/store/aliases", (Field("fingerprints", _FINGERPRINTS, _is_string, required=True),), "found"),
    "settle": Call(
        "/v1/store/settle",
        (
            Field(
                "action",
                "one of done, release, renew",
                lambda value: value in ("done", "release", "renew"),
                required=True,
            ),
            Field("fingerprints", _FINGERPRINTS, _is_string, required=True),
            _OWNER._replace(required=True),
            _LEASE,
            _TOKEN,
        ),
        "answers",
    ),
    "expired": Call(
        "/v1/store/expired", (Field("limit", "an integer", is_integer, required=True), _OWNER, _LEASE), "urls"
    ),
}
#: Path -> step of the store call there.
STORE_CALL_AT: Dict[str, str] = {call.path: step for step, call in STORE_CALLS.items()}


def parse_body(call: Call, body: bytes, max_batch: int = MAX_BATCH) -> Dict[str, Any]:
    """The fields of a request's body, each checked; a seed call's single key (``url_fp``) is
    also given as a batch of one (``url_fps``).

    :raises BadRequest: naming what is wrong (400), or a batch over ``max_batch`` items (413).
    """
    if not body:
        raise BadRequest("the body is empty: send a JSON object")
    try:
        fields = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {' '.join(str(exc).split())}") from None
    if not isinstance(fields, dict):
        raise BadRequest(f"the body must be a JSON object, got {_json_type(fields)}")
    allowed = {field.name: field for field in call.fields}
    for name, value in fields.items():
        field = allowed.get(name)
        if field is None:
            raise BadRequest(f"unknown field {name!r} (allowed: {', '.join(allowed)})")
        refusal = field.refusal(value)
        if refusal:
            raise BadRequest(refusal)
    for field in call.fields:
        if field.required and field.name not in fields:
            raise BadRequest(f"missing field {field.name!r}")
    if call.single_or_batch:
        if ("url_fp" in fields) == ("url_fps" in fields):
            raise BadRequest("give exactly one of url_fp (one key) and url_fps (a list of keys)")
        if "url_fp" in fields:
            fields["url_fps"] = [fields["url_fp"]]
    for name in ("urls", "url_fps"):
        if len(fields.get(name, ())) > max_batch:
            raise BadRequest(f"{name} must hold at most {max_batch:,} items, got {len(fields[name]):,}", status=413)
    return fields


def _json_type(value: Any) -> str:
    """What a JSON value is, for a message (never the value itself: it may be large)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    return "a list" if isinstance(value, list) else "an object"


def answer_body(call: Call, fields: Mapping[str, Any], answer: Any, **extra: Any) -> Dict[str, Any]:
    """The response object of ``call``: the answer under its name (one value for a seed call
    given one key), and the ``extra`` fields."""
    if call.single_or_batch and "url_fp" in fields:
        answer = answer[0]
    return {call.answer: answer, **extra}


# --------------------------------------------------------------------------- statuses


def status_of(error: BaseException) -> Optional[int]:
    """The status the server answers ``error`` with; None for an error that is the server's own bug.

    The one table: a request the client can correct is 400 (413 when too large), a missing or
    wrong token 401, a namespace or policy that does not match 409, a store that cannot answer
    503 with ``Retry-After``.
    """
    if isinstance(error, BadRequest):
        return error.status
    if isinstance(error, Unauthorized):
        return 401
    if isinstance(error, NamespaceConflict):
        return 409
    if isinstance(error, StoreUnavailable):
        return 503
    if isinstance(error, (ValueError, TypeError)):
        return 400  # a Deduplicator's check of an argument: a lease out of range, a refused base (InvalidURL)
    return None


def error_body(error: BaseException) -> bytes:
    """``{"error": "<the error on one line>"}``."""
    return orjson.dumps({"error": " ".join(str(error).split())})


class ServiceError(Exception):
    """An answer of the service that is neither a result nor one of the errors it names (a proxy's page, a 500)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def request_body(name: str, **fields: Any) -> Tuple[str, bytes]:
    """The path and JSON body of client method ``name``'s call; fields left as None are left out."""
    call = CALLS[name]
    return call.path, orjson.dumps({key: value for key, value in fields.items() if value is not None})


def read_answer(name: str, status: int, body: bytes, where: str) -> Dict[str, Any]:
    """The fields of a 200 answer to client method ``name``'s call.

    :param where: the service's address, for messages.
    :raises StoreUnavailable: for a 503 (the store or the server could not answer; nothing was recorded).
    :raises ValueError: for a 400 or a 413 (the request as sent is refused).
    :raises NamespaceConflict: for a 409.
    :raises PermissionError: for a 401.
    :raises ServiceError: for any other status, or a body that is not the expected JSON.
    """
    try:
        fields = orjson.loads(body)
    except orjson.JSONDecodeError:
        fields = None
    if not isinstance(fields, dict):
        raise ServiceError(status, f"{where} answered {len(body)} bytes that are not a JSON object")
    if status == 200 and CALLS[name].answer in fields:
        return fields
    message = str(fields.get("error", f"no answer in {sorted(fields)}"))
    if status == 503:
        raise StoreUnavailable(where, 1, message)
    if status in (400, 413):
        raise ValueError(message)
    if status == 409:
        raise NamespaceConflict(message)
    if status == 401:
        raise Unauthorized(f"{where}: {message}")
    raise ServiceError(status, message)


def invalid_urls(errors: Mapping[str, str]) -> Dict[int, InvalidURL]:
    """A ``/v1/claim`` answer's ``errors`` (position as text -> reason) as a ClaimBatch holds them."""
    return {int(position): InvalidURL(reason) for position, reason in errors.items()}


def listed(values: List[Any]) -> List[bool]:
    """A list of booleans from an answer, checked (a proxy's answer could hold anything)."""
    if not isinstance(values, list) or not all_of(bool, values):
        raise ServiceError(200, "the answer is not a list of booleans")
    return values
