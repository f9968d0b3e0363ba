"""OpenAPI's common real shapes: Swagger 2.0 read like 3.x, callbacks and webhooks indexed as operations, a
webhooks-only 3.1 spec accepted, and an operation too big for one chunk split with its method, path and
operationId on every part. Every spec is generated here."""

from __future__ import annotations

import json

import pytest

from ingest.chunker import chunk_document
from ingest.document import Heading, ParseError, Unit
from ingest.parsers import parse_document

CONTROL = {
    "doc_code": "ENG-API-971",
    "status": "effective",
    "effective_date": "2026-01-01",
    "owner": "API Lead",
    "department": "engineering",
    "classification": "internal",
    "regulatory_refs": [],
}
INFO = {"title": "Pets API", "version": "2.1", "x-document-control": CONTROL}


def parse(spec: dict) -> object:  # type: ignore[type-arg]
    return parse_document(json.dumps(spec).encode(), "api.json", max_bytes=10**7)


def operations(document) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Operation heading -> its unit's text."""
    found, heading = {}, None
    for block in document.blocks:
        if isinstance(block, Heading) and block.level == 2:
            heading = block.text
        elif isinstance(block, Unit) and heading:
            found[heading] = block.text
    return found


SWAGGER = {
    "swagger": "2.0",
    "info": INFO,
    "host": "api.example.com",
    "basePath": "/v1",
    "schemes": ["https"],
    "securityDefinitions": {"apiKey": {"type": "apiKey", "in": "header", "name": "X-Key", "description": "Key"}},
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "tags": ["Pets"],
                "parameters": [{"name": "limit", "in": "query", "type": "integer", "description": "At most"}],
                "responses": {
                    "200": {
                        "description": "The pets",
                        "schema": {"type": "array", "items": {"$ref": "#/definitions/Pet"}},
                        "examples": {"application/json": [{"name": "Rex"}]},
                    }
                },
            },
            "post": {
                "operationId": "createPet",
                "tags": ["Pets"],
                "parameters": [
                    {"name": "pet", "in": "body", "required": True, "schema": {"$ref": "#/definitions/Pet"}}
                ],
                "responses": {"201": {"description": "Created"}},
            },
        },
        "/pets/{id}/photo": {
            "put": {
                "operationId": "uploadPhoto",
                "tags": ["Pets"],
                "consumes": ["multipart/form-data"],
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "type": "string"},
                    {"name": "caption", "in": "formData", "type": "string", "description": "Shown under it"},
                ],
                "responses": {"204": {"description": "Stored"}},
            }
        },
    },
    "definitions": {
        "Pet": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "description": "What it answers to"}, "age": {"type": "integer"}},
        }
    },
}


def test_a_swagger_2_spec_is_read_like_openapi_3():
    document = parse(SWAGGER)
    found = operations(document)
    assert set(found) == {"GET /pets", "POST /pets", "PUT /pets/{id}/photo"}
    assert "- limit (in query, optional, integer): At most" in found["GET /pets"]
    assert "application/json: array of Pet" in found["GET /pets"]
    assert 'example: [{"name": "Rex"}]' in found["GET /pets"]
    assert "Request body (application/json, required):" in found["POST /pets"]
    assert "- name (string, required): What it answers to" in found["POST /pets"]
    assert "Request body (multipart/form-data):" in found["PUT /pets/{id}/photo"]
    assert "- caption (string): Shown under it" in found["PUT /pets/{id}/photo"]
    overview = " ".join(getattr(b, "text", "") for b in document.blocks[:4])
    assert "https://api.example.com/v1" in overview and "apiKey: apiKey Key" in overview


def test_callbacks_and_webhooks_are_indexed_as_operations():
    spec = {
        "openapi": "3.1.0",
        "info": INFO,
        "paths": {
            "/subscriptions": {
                "post": {
                    "operationId": "subscribe",
                    "tags": ["Events"],
                    "responses": {"201": {"description": "Subscribed"}},
                    "callbacks": {
                        "onEvent": {
                            "{$request.body#/callbackUrl}": {
                                "post": {
                                    "operationId": "deliverEvent",
                                    "summary": "The event, delivered to the subscriber",
                                    "responses": {"200": {"description": "Received"}},
                                }
                            }
                        }
                    },
                }
            }
        },
        "webhooks": {
            "petAdopted": {
                "post": {"operationId": "petAdopted", "summary": "A pet found a home", "responses": {"200": {}}}
            }
        },
    }
    found = operations(parse(spec))
    assert list(found) == [
        "POST /subscriptions",
        "POST callback onEvent: {$request.body#/callbackUrl}",
        "POST webhook petAdopted",
    ]
    assert "operationId: deliverEvent" in found["POST callback onEvent: {$request.body#/callbackUrl}"]
    assert found["POST webhook petAdopted"].startswith("POST webhook petAdopted — A pet found a home")


def test_a_webhooks_only_openapi_3_1_spec_is_accepted():
    spec = {"openapi": "3.1.0", "info": INFO, "webhooks": {"refund": {"post": {"operationId": "refundIssued"}}}}
    document = parse(spec)
    assert Heading(1, "Webhooks") in document.blocks
    assert "operationId: refundIssued" in operations(document)["POST webhook refund"]


def test_a_spec_with_neither_paths_nor_webhooks_says_there_is_nothing_to_index():
    with pytest.raises(ParseError, match="'paths' is missing or empty \\(and there are no webhooks\\)"):
        parse({"openapi": "3.1.0", "info": INFO})


def test_an_operation_too_big_for_one_chunk_has_its_method_path_and_operation_id_on_every_part():
    properties = {f"field_{n}": {"type": "string", "description": f"What field {n} records."} for n in range(700)}
    spec = {
        "openapi": "3.0.3",
        "info": INFO,
        "paths": {
            "/v1/claims": {
                "post": {
                    "operationId": "fileClaim",
                    "summary": "File a claim",
                    "requestBody": {"content": {"application/json": {"schema": {"properties": properties}}}},
                    "responses": {"201": {"description": "Filed"}},
                }
            }
        },
    }
    chunks = [c for c in chunk_document(parse(spec)) if c.section_path.endswith("POST /v1/claims")]
    assert len(chunks) >= 3
    assert all("POST /v1/claims" in c.content.split("\n")[0] for c in chunks)
    assert all("fileClaim" in "\n".join(c.content.split("\n")[:2]) for c in chunks)
    listed = [line.split(" (")[0].strip("- ") for c in chunks for line in c.content.splitlines() if "field_" in line]
    assert listed == [f"field_{n}" for n in range(700)]


def test_response_headers_are_indexed_with_their_type_and_description_in_openapi_3_and_swagger_2():
    header = {"description": "A link to the next page of responses", "schema": {"type": "string"}}
    openapi = {
        "openapi": "3.0.3",
        "info": INFO,
        "paths": {"/pets": {"get": {"responses": {"200": {"description": "Pets", "headers": {"x-next": header}}}}}},
    }
    swagger = {
        "swagger": "2.0",
        "info": INFO,
        "paths": {
            "/pets": {
                "get": {
                    "responses": {
                        "429": {
                            "description": "Slow down",
                            "headers": {"Retry-After": {"type": "integer", "description": "Seconds to wait"}},
                        }
                    }
                }
            }
        },
    }
    assert "header x-next (string): A link to the next page of responses" in operations(parse(openapi))["GET /pets"]
    assert "header Retry-After (integer): Seconds to wait" in operations(parse(swagger))["GET /pets"]


def test_the_description_of_a_request_or_response_body_schema_is_indexed():
    schema = {"description": "subscription information", "properties": {"id": {"type": "string"}}}
    body = {"content": {"application/json": {"schema": {"description": "subscription request", "type": "object"}}}}
    spec = {
        "openapi": "3.0.3",
        "info": INFO,
        "paths": {
            "/streams": {
                "post": {
                    "requestBody": body,
                    "responses": {
                        "201": {"description": "Created", "content": {"application/json": {"schema": schema}}}
                    },
                }
            }
        },
    }
    text = operations(parse(spec))["POST /streams"]
    assert "subscription request" in text and "application/json: object — subscription information" in text
