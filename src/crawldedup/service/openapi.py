"""The service's OpenAPI 3.1 document, made from the tables the server checks requests with.

Served at ``GET /v1/openapi.json`` and checked into the docs (``docs/openapi.json``; the tests
hold the two equal, validate it, and fuzz the server from it). The request bodies come from
:data:`~.protocol.CALLS` and :data:`~.protocol.STORE_CALLS` (each field's JSON Schema), so the
document cannot drift from what the server accepts; the answers are described here.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Mapping

from .. import __version__
from ..stores.service import StoreStep
from .protocol import CALLS, STORE_CALLS, Call

_BOOLEANS = {"type": "array", "items": {"type": "boolean"}}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_BASE64 = {"type": "string", "contentEncoding": "base64"}
_LEASE_TOKEN = {"type": "string", "description": "the lease token that names the caller's leases"}
_ONE_OR_MANY = {"oneOf": [{"type": "boolean"}, _BOOLEANS]}

#: Each call's answer (200): the fields of its JSON object.
ANSWERS: Dict[str, Mapping[str, Any]] = {
    "seen_keys": {"seen": _ONE_OR_MANY},
    "claim_keys": {"first_seen": _ONE_OR_MANY},
    "claim_batch": {
        "won": _BOOLEANS,
        "canonical": {"type": "array", "items": {"type": ["string", "null"]}},
        "errors": {"type": "object", "additionalProperties": {"type": "string"}},
        "lease_token": _LEASE_TOKEN,
    },
    "seen": {"seen": _BOOLEANS},
    "done": {"done": _BOOLEANS},
    "release": {"released": _BOOLEANS},
    "renew": {"renewed": _BOOLEANS},
    "expired": {"urls": _STRINGS},
    "claim_final": {"won": _BOOLEANS, "lease_token": _LEASE_TOKEN},
    "seen_through_redirects": {"seen": _BOOLEANS},
    StoreStep.OPEN: {"strategy": {"type": "string"}, "supports_leases": {"type": "boolean"}},
    StoreStep.CLAIM: {"won": _BOOLEANS, "present": _BOOLEANS, "held": {"type": "array", "items": {"type": "integer"}}},
    StoreStep.ALIASES: {"found": _BOOLEANS, "finals": _BASE64},
    StoreStep.SETTLE: {"answers": _BOOLEANS},
    StoreStep.EXPIRED: {"urls": _STRINGS},
}
#: The answer fields a call may leave out.
_OPTIONAL = {"lease_token"}

#: Every error: its status and when (docs/service.md, "Status codes").
ERRORS = {
    "400": "The request is malformed or a field is refused",
    "401": "The bearer token is missing or wrong",
    "408": "The request was not received within the read timeout",
    "409": "Another namespace or canonical policy; or, for a lease call, leases the caller does not hold "
    "(the answers are in the body beside the error)",
    "413": "The body, or a batch in it, is over its limit",
    "414": "The request target is over its limit",
    "431": "The request line and headers are over their limits",
    "503": "The store cannot answer, or the service is at its limit (Retry-After says when to try again)",
}


@functools.lru_cache(maxsize=1)
def openapi_document() -> Dict[str, Any]:
    """The OpenAPI 3.1 document of every path the service answers."""
    paths: Dict[str, Any] = {}
    for name, call in CALLS.items():
        paths[call.path] = {"post": _operation(name, call, ANSWERS[name])}
    for step, call in STORE_CALLS.items():
        paths[call.path] = {"post": _operation(f"store_{step.value}", call, ANSWERS[step])}
    health = {
        "type": "object",
        "required": ["status"],
        "properties": {
            "status": {"type": "string", "enum": ["ok", "unavailable"]},
            "strategy": {"type": "string"},
            "namespace": {"type": "string"},
            "policy": {"type": "string"},
            "filter_fill": {"type": "number"},
            "filter_items": {"type": "integer"},
            "filter_capacity": {"type": "integer"},
            "store": {"type": "string"},
        },
    }
    paths["/healthz"] = {
        "get": {
            "operationId": "healthz",
            "summary": "Whether the store answers (the status alone without the token, under --open-healthz)",
            "responses": {
                "200": _json("The store answers", health),
                "503": _json("The store does not answer", health),
                **_errors(),
            },
        }
    }
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "summary": "The Prometheus metrics",
            "responses": {"200": {"description": "Prometheus text format", "content": {"text/plain": {}}}, **_errors()},
        }
    }
    paths["/v1/openapi.json"] = {
        "get": {
            "operationId": "openapi",
            "summary": "This document",
            "responses": {"200": _json("The OpenAPI document", {"type": "object"}), **_errors()},
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "crawldedup serve",
            "version": __version__,
            "description": "The fingerprint service: one dedup answer for every crawler (docs/service.md).",
        },
        "paths": paths,
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "string"}},
                }
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }


def _operation(name: str, call: Call, answer: Mapping[str, Any]) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "type": "object",
        "properties": {field.name: dict(field.schema) for field in call.fields},
        "additionalProperties": False,
    }
    required = [field.name for field in call.fields if field.required]
    if required:
        body["required"] = required
    if call.single_or_batch:
        body["oneOf"] = [{"required": ["url_fp"]}, {"required": ["url_fps"]}]
    answer_schema = {
        "type": "object",
        "properties": dict(answer),
        "required": [field for field in answer if field not in _OPTIONAL],
    }
    return {
        "operationId": name,
        "summary": call.summary,
        "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
        "responses": {"200": _json("Answered", answer_schema), **_errors()},
    }


def _json(description: str, schema: Mapping[str, Any]) -> Dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": dict(schema)}}}


def _errors() -> Dict[str, Any]:
    return {
        status: _json(description, {"$ref": "#/components/schemas/Error"}) for status, description in ERRORS.items()
    }
