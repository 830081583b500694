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
from ..stores.base import MAX_EXPIRED_LIMIT, MAX_LEASE_SECONDS, NamespaceConflict, StoreUnavailable
from ..stores.service import Settle, StoreStep
from .limits import Limits

#: Most URLs or keys in one request.
MAX_BATCH = Limits.max_batch
#: JSON values a body may hold per item of a batch, counted (by its commas) before it is parsed:
#: a body of ``[{},{},...]`` would otherwise become 24 times its size in Python objects.
VALUES_PER_ITEM = 4
#: Seconds a client is told to wait after a 503 (the store's own retries already took up to ~2 s).
RETRY_AFTER_SECONDS = 1


class BadRequest(ValueError):
    """A request the server refuses as it is (400 unless ``status`` says otherwise); the message is one line."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Unauthorized(PermissionError):
    """A request without the service's bearer token, or with another one (401)."""


class ServiceBusy(Exception):
    """Every store connection stayed in use for the whole wait: the service is at its limit (503, Retry-After)."""


class Field(NamedTuple):
    """One field of a request body: its name, what it must be (for messages), whether a value is
    that, for a list whether all its items are (one call for the whole list), and its JSON
    Schema (the OpenAPI document's, :mod:`.openapi`)."""

    name: str
    allowed: str
    check: Callable[[Any], bool]
    required: bool = False
    items: Optional[Callable[[List[Any]], bool]] = None
    schema: Mapping[str, Any] = {}

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


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _strings(values: List[Any]) -> bool:
    return all_of(str, values)


def _chains(values: List[Any]) -> bool:
    """Each item a URL, or a list of URLs (a fetch chain, first requested first)."""
    return all(isinstance(value, str) or (isinstance(value, list) and all_of(str, value)) for value in values)


def _keys(values: List[Any]) -> bool:
    return all_of(str, values) and all(values)  # strings, none of them empty


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_SECONDS = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_LEASE_SECONDS}
_URLS = Field("urls", "a list of strings", _is_list, required=True, items=_strings, schema=_STRINGS)
_LEASE = Field("lease", "a number of seconds", is_number, schema=_SECONDS)
_URL_FP = Field("url_fp", "a non-empty string", _is_key, schema={"type": "string", "minLength": 1})
_URL_FPS = Field(
    "url_fps",
    "a list of non-empty strings",
    _is_list,
    items=_keys,
    schema={"type": "array", "items": {"type": "string", "minLength": 1}},
)
_LIMIT = Field(
    "limit", "an integer", is_integer, schema={"type": "integer", "minimum": 1, "maximum": MAX_EXPIRED_LIMIT}
)
#: A client's secret naming its leases (docs/service.md, "Leases"): 16 to 64 bytes as hex digits.
_LEASE_TOKEN = Field(
    "lease_token",
    "16 to 64 bytes as hex digits",
    lambda value: isinstance(value, str) and 32 <= len(value) <= 128 and _is_hex(value),
    schema={"type": "string", "pattern": "^([0-9a-fA-F]{2}){16,64}$"},
)


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


class Call(NamedTuple):
    """One call of the service: where it is, what its body holds, and the field of its answer."""

    path: str
    fields: Tuple[Field, ...]
    answer: str
    #: The seed's calls take one key (``url_fp``) or a batch (``url_fps``), and answer in kind.
    single_or_batch: bool = False
    #: A lease call: answered 409 with its answers when any lease is not the caller's.
    settles: bool = False
    #: What the call does (the OpenAPI document's summary).
    summary: str = ""


#: Client method name -> its call. The server routes ``path`` to the handler of the same name.
CALLS: Dict[str, Call] = {
    "seen_keys": Call(
        "/is_seen", (_URL_FP, _URL_FPS), "seen", single_or_batch=True, summary="Whether keys were claimed"
    ),
    "claim_keys": Call(
        "/mark_seen", (_URL_FP, _URL_FPS), "first_seen", single_or_batch=True, summary="Claim keys as they are"
    ),
    "claim_batch": Call(
        "/v1/claim",
        (_URLS, _LEASE, Field("base", "a string", _is_string, schema=_STRING), _LEASE_TOKEN),
        "won",
        summary="Claim URLs (canonicalized by the service), leased for a time when given a lease",
    ),
    "seen": Call("/v1/seen", (_URLS,), "seen", summary="Whether URLs were claimed (claims nothing)"),
    "done": Call(
        "/v1/done",
        (_URLS, _LEASE_TOKEN._replace(required=True)),
        "done",
        settles=True,
        summary="Make the caller's leases lasting",
    ),
    "release": Call(
        "/v1/release",
        (_URLS, _LEASE_TOKEN._replace(required=True)),
        "released",
        settles=True,
        summary="Free the caller's leases",
    ),
    "renew": Call(
        "/v1/renew",
        (_URLS, _LEASE._replace(required=True), _LEASE_TOKEN._replace(required=True)),
        "renewed",
        settles=True,
        summary="Move the deadline of the caller's leases",
    ),
    "expired": Call(
        "/v1/expired",
        (_LIMIT, _LEASE, _LEASE_TOKEN),
        "urls",
        summary="Hand back expired leases, once each (leased to the caller when given a lease)",
    ),
    "claim_final": Call(
        "/v1/claim_final",
        (
            _URLS._replace(name="final_urls"),
            Field(
                "requested",
                "a list of strings or of lists of strings",
                _is_list,
                required=True,
                items=_chains,
                schema={"type": "array", "items": {"oneOf": [_STRING, _STRINGS]}},
            ),
            _LEASE,
            _LEASE_TOKEN,
        ),
        "won",
        summary="Claim the final pages of redirected fetches and record their requested URLs as aliases",
    ),
    "seen_through_redirects": Call(
        "/v1/seen_through_redirects",
        (_URLS,),
        "seen",
        summary="Whether URLs redirect to a claimed page (claims nothing)",
    ),
}
#: Path -> client method name of the call there.
CALL_AT: Dict[str, str] = {call.path: name for name, call in CALLS.items()}


_FINGERPRINTS = "base64 of 16-byte fingerprints"
_BASE64 = {"type": "string", "contentEncoding": "base64"}
#: Every store call names the namespace and policy it opened (a service checks them each time).
_OPENED = (
    Field("namespace", "a string", _is_string, required=True, schema=_STRING),
    Field("policy", "a string", _is_string, required=True, schema=_STRING),
)
_TOKEN = Field("token", "a string of hex digits", _is_string, schema={"type": "string", "pattern": "^[0-9a-fA-F]*$"})
#: The calls of the ``service`` store (:mod:`crawldedup.stores.service`): step -> its call. Their
#: answers are objects of several fields, checked by that store.
STORE_CALLS: Dict[StoreStep, Call] = {
    StoreStep.OPEN: Call("/v1/store/open", _OPENED, "strategy", summary="Open the service's store"),
    StoreStep.CLAIM: Call(
        "/v1/store/claim",
        (
            *_OPENED,
            Field("claims", _FINGERPRINTS, _is_string, required=True, schema=_BASE64),
            Field("reads", _FINGERPRINTS, _is_string, required=True, schema=_BASE64),
            Field(
                "lease",
                "an object with owner, seconds and urls",
                _is_object,
                schema={
                    "type": "object",
                    "properties": {"owner": _STRING, "seconds": _SECONDS, "urls": _STRINGS},
                    "required": ["owner", "seconds", "urls"],
                    "additionalProperties": False,
                },
            ),
            _LEASE_TOKEN,
            _TOKEN,
            Field(
                "aliases",
                "an object with requested, finals and capacity",
                _is_object,
                schema={
                    "type": "object",
                    "properties": {"requested": _BASE64, "finals": _BASE64, "capacity": {"type": "integer"}},
                    "required": ["requested", "finals", "capacity"],
                    "additionalProperties": False,
                },
            ),
        ),
        "won",
        summary="Claim and read fingerprints in the service's store",
    ),
    StoreStep.ALIASES: Call(
        "/v1/store/aliases",
        (*_OPENED, Field("fingerprints", _FINGERPRINTS, _is_string, required=True, schema=_BASE64)),
        "found",
        summary="Read the alias map",
    ),
    StoreStep.SETTLE: Call(
        "/v1/store/settle",
        (
            *_OPENED,
            Field(
                "action",
                "one of " + ", ".join(action.value for action in Settle),
                lambda value: value in Settle.__members__.values(),
                required=True,
                schema={"type": "string", "enum": [action.value for action in Settle]},
            ),
            Field("fingerprints", _FINGERPRINTS, _is_string, required=True, schema=_BASE64),
            Field("owner", "a string", _is_string, required=True, schema=_STRING),
            _LEASE,
            _LEASE_TOKEN._replace(required=True),
            _TOKEN,
        ),
        "answers",
        settles=True,
        summary="Settle the caller's leases",
    ),
    StoreStep.EXPIRED: Call(
        "/v1/store/expired",
        (
            *_OPENED,
            _LIMIT._replace(required=True),
            Field("owner", "a string", _is_string, schema=_STRING),
            _LEASE,
            _LEASE_TOKEN,
        ),
        "urls",
        summary="Hand back expired leases",
    ),
}
#: Path -> step of the store call there.
STORE_CALL_AT: Dict[str, StoreStep] = {call.path: step for step, call in STORE_CALLS.items()}


def parse_body(call: Call, body: bytes, max_batch: int = MAX_BATCH) -> Dict[str, Any]:
    """The fields of a request's body, each checked; a seed call's single key (``url_fp``) is
    also given as a batch of one (``url_fps``).

    :raises BadRequest: naming what is wrong (400), or a batch over ``max_batch`` items (413).
    """
    if not body:
        raise BadRequest("the body is empty: send a JSON object")
    values = body.count(b",") + 1
    if values > VALUES_PER_ITEM * max_batch:
        raise BadRequest(
            f"the body holds more than {VALUES_PER_ITEM * max_batch:,} JSON values ({values:,} commas): "
            f"a call takes at most {max_batch:,} items",
            status=413,
        )
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
    for name, value in fields.items():
        if isinstance(value, list) and len(value) > max_batch:
            raise BadRequest(f"{name} must hold at most {max_batch:,} items, got {len(value):,}", status=413)
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
    or a service at its limit 503 with ``Retry-After``.
    """
    if isinstance(error, BadRequest):
        return error.status
    if isinstance(error, Unauthorized):
        return 401
    if isinstance(error, NamespaceConflict):
        return 409
    if isinstance(error, (StoreUnavailable, ServiceBusy)):
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
    :raises NamespaceConflict: for a 409 (but a lease call's, which holds its answers).
    :raises PermissionError: for a 401.
    :raises ServiceError: for any other status, or a body that is not the expected JSON.
    """
    try:
        fields = orjson.loads(body)
    except orjson.JSONDecodeError:
        fields = None
    if not isinstance(fields, dict):
        raise ServiceError(status, f"{where} answered {len(body)} bytes that are not a JSON object")
    call = CALLS[name]
    if call.answer in fields and (status == 200 or (status == 409 and call.settles)):
        return fields  # a 409 of a lease call: some leases are not the caller's, its answers say which
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
