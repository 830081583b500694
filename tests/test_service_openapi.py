"""The service's OpenAPI 3.1 document: the one served equals the one in docs/, a validator
accepts it, and schemathesis fuzzes a real server from it (no 5xx, every answer as documented)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from conftest import ServeProcess
from hypothesis import HealthCheck, given, settings

from crawldedup.service.openapi import openapi_document

schemathesis = pytest.importorskip("schemathesis", reason="the test extra brings schemathesis")
openapi_spec_validator = pytest.importorskip("openapi_spec_validator", reason="the test extra brings it")

DOCUMENT = Path(__file__).resolve().parents[1] / "docs" / "openapi.json"
#: Requests per operation: the fuzz is a smoke test of the whole surface, kept short for CI.
EXAMPLES = 12


@pytest.fixture(scope="module")
def server(redis_server) -> Iterator[ServeProcess]:
    with ServeProcess(
        ["--strategy", "set", "--redis-url", redis_server.url, "--namespace", "fuzz", "--capacity", "100000"]
    ) as serve:
        yield serve
    assert "Traceback" not in serve.stderr, serve.stderr


def test_the_document_in_the_docs_is_the_one_served(server):
    with urllib.request.urlopen(server.url + "/v1/openapi.json", timeout=30) as response:
        served = json.loads(response.read())
    assert served == openapi_document() == json.loads(DOCUMENT.read_text()), (
        "docs/openapi.json is out of date: python -c 'import json; from crawldedup.service.openapi import "
        "openapi_document as d; print(json.dumps(d(), indent=2))' > docs/openapi.json"
    )


def test_the_document_is_valid_openapi_3_1():
    openapi_spec_validator.validate(openapi_document())
    assert openapi_document()["openapi"].startswith("3.1")
    paths = openapi_document()["paths"]
    assert {"/v1/claim", "/v1/store/claim", "/healthz", "/metrics", "/v1/openapi.json"} <= set(paths)


CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
)


def test_fuzzed_requests_get_no_5xx_and_documented_answers(server):
    schema = schemathesis.openapi.from_dict(openapi_document())
    checks = tuple(getattr(schemathesis.checks, name) for name in CHECKS)
    failures = []
    statuses = []
    for operation in schema.get_all_operations():
        operation = operation.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case) -> None:
            response = case.call(base_url=server.url, timeout=30)
            statuses.append(response.status_code)
            assert response.status_code < 500, (case.path, response.status_code, response.text[:300])
            try:
                case.validate_response(response, checks=checks)
            except AssertionError as failed:
                failures.append(f"{case.method} {case.path}: {failed}")

        fuzz()
    assert not failures, "\n".join(failures[:10])
    assert len(statuses) >= len(openapi_document()["paths"]) and 200 in statuses, statuses
