"""OpenAPI 3.x and Swagger 2.0 (YAML or JSON): an overview section, then one section per operation,
`$ref`s resolved. Callbacks (3.x) and webhooks (3.1) are operations too: an API's outgoing calls are as
much its contract as its incoming ones.

Each operation is one Unit (method, path, parameters, request body, responses, examples), so it is
one chunk unless it is longer than the table limit; then each part names its method, path and operationId.
A Swagger 2.0 operation is first put in the 3.x shape (body and form parameters as a request body, response
schemas under their media type), so both read the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from ingest.document import Block, HeaderError, Heading, Paragraph, ParsedDocument, ParseError, Unit
from ingest.header import build_header
from ingest.parsers.budget import Deadline
from ingest.parsers.markdown import markdown_blocks
from ingest.parsers.text import decode_text, load_json, load_yaml, yaml_problem

METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")
MAX_DEPTH = 4
MAX_EXAMPLE_CHARS = 600


def parse_openapi(data: bytes, *, is_json: bool, deadline: Deadline | None = None) -> ParsedDocument:
    text = decode_text(data)
    try:
        spec = load_json(text) if is_json else load_yaml(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; correct it there"
        ) from None
    except yaml.YAMLError as exc:
        # Found walking it: "not valid YAML: while parsing a flow sequence" said neither where nor what.
        raise ParseError(f"not valid YAML {yaml_problem(exc)}; correct it there") from None
    if not isinstance(spec, dict):
        raise ParseError("not an OpenAPI document: the file holds no mapping of fields")
    swagger = str(spec.get("swagger", "")).startswith("2.")
    if not swagger and not str(spec.get("openapi", "")).startswith("3."):
        raise ParseError(
            "not an OpenAPI 3.x or Swagger 2.0 document: the top-level 'openapi' field must say 3.0.x or 3.1.x "
            "(or 'swagger' 2.0)"
        )
    info = spec.get("info")
    if not isinstance(info, dict):
        raise ParseError("invalid OpenAPI document: 'info' is missing")
    control = info.get("x-document-control")
    if not isinstance(control, dict):
        raise HeaderError(
            "no header block: an OpenAPI document carries it in info.x-document-control "
            "(doc_code, status, effective_date, owner, department, classification, regulatory_refs); "
            "see docs/header-block.md"
        )
    header = build_header({**control, "title": info.get("title"), "version": info.get("version")})
    paths = spec.get("paths")
    webhooks = spec.get("webhooks") if not swagger else None
    has_paths = isinstance(paths, dict) and bool(paths)
    has_webhooks = isinstance(webhooks, dict) and bool(webhooks)
    if not has_paths and not has_webhooks:
        raise ParseError(
            "invalid OpenAPI document: 'paths' is missing or empty (and there are no webhooks); there is nothing "
            "to index"
        )

    resolver = _Resolver(spec)
    blocks: list[Block] = [Heading(1, "Overview")]
    if info.get("description"):
        blocks.extend(markdown_blocks(str(info["description"])))
    servers = [f"- {s.get('url')}: {s.get('description', '')}".rstrip(": ") for s in spec.get("servers") or []]
    if swagger and spec.get("host"):
        schemes_used = spec.get("schemes") or ["https"]
        servers = [f"- {scheme}://{spec['host']}{spec.get('basePath', '')}" for scheme in schemes_used]
    if servers:
        blocks.append(Paragraph("Servers:\n" + "\n".join(servers)))
    schemes = spec.get("securityDefinitions") if swagger else (spec.get("components") or {}).get("securitySchemes")
    schemes = schemes if isinstance(schemes, dict) else {}
    if schemes:
        lines = [
            f"- {name}: {resolver.resolve(s).get('type', '')} {resolver.resolve(s).get('description', '')}"
            for name, s in schemes.items()
        ]
        blocks.append(Paragraph("Authentication:\n" + "\n".join(line.rstrip() for line in lines)))

    operations = 0
    current_tag = None
    found = _operations(paths, resolver) if isinstance(paths, dict) else []
    found += _operations(webhooks, resolver, webhook=True) if isinstance(webhooks, dict) else []
    found += [callback for *_, operation in found for callback in _callbacks(operation, resolver)]
    order = {tag: i for i, tag in enumerate(dict.fromkeys(t for t, *_ in found))}
    for tag, method, path, operation in sorted(found, key=lambda op: order[op[0]]):  # by tag, in file order
        if deadline is not None:  # the first check follows the file's loading
            deadline.check("OpenAPI", f"operation {operations + 1} of {len(found)}")
        if swagger:
            operation = _from_swagger(operation, spec, resolver)
        if tag != current_tag:
            blocks.append(Heading(1, tag))
            current_tag = tag
        blocks.append(Heading(2, f"{method.upper()} {path}"))
        text = _render_operation(method, path, operation, resolver)
        blocks.append(Unit(text, lead=_lead(method, path, operation)))
        operations += 1
    if operations == 0:
        raise ParseError("invalid OpenAPI document: no operation (get, post, ...) under 'paths' or 'webhooks'")
    return ParsedDocument(header=header, blocks=blocks, source_format="openapi")


def _operations(
    paths: dict[str, Any], resolver: _Resolver, *, webhook: bool = False
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(tag, method, path, operation) in file order; a webhook's "path" is `webhook <name>`."""
    found = []
    for path, item in paths.items():
        item = resolver.resolve(item)
        where = "webhooks" if webhook else "paths"
        if not isinstance(item, dict):
            raise ParseError(f"invalid OpenAPI document: {where}['{path}'] is not an object")
        shared = item.get("parameters") or []
        for method in METHODS:
            operation = item.get(method)
            if isinstance(operation, dict):
                operation = {**operation, "parameters": [*shared, *(operation.get("parameters") or [])]}
                tags = operation.get("tags") or ["Webhooks" if webhook else "Operations"]
                found.append((str(tags[0]), method, f"webhook {path}" if webhook else str(path), operation))
    return found


def _callbacks(operation: dict[str, Any], resolver: _Resolver) -> list[tuple[str, str, str, dict[str, Any]]]:
    """An operation's callbacks as operations of their own: the request the API makes to the caller's URL."""
    callbacks = operation.get("callbacks")
    if not isinstance(callbacks, dict):
        return []
    found = []
    for name, callback in callbacks.items():
        callback = resolver.resolve(callback)
        if not isinstance(callback, dict):
            continue
        for tag, method, expression, inner in _operations(callback, resolver):
            described = f"callback {name}: {expression}"
            tag = str((operation.get("tags") or [tag])[0])
            found.append((tag, method, described, inner))
    return found


def _from_swagger(op: dict[str, Any], spec: dict[str, Any], resolver: _Resolver) -> dict[str, Any]:
    """A Swagger 2.0 operation in the OpenAPI 3 shape that _render_operation reads."""
    consumes = op.get("consumes") or spec.get("consumes") or ["application/json"]
    produces = op.get("produces") or spec.get("produces") or ["application/json"]
    parameters, form = [], []
    body: dict[str, Any] = {}
    for parameter in (resolver.resolve(p) for p in op.get("parameters") or []):
        if not isinstance(parameter, dict):
            continue
        where = parameter.get("in")
        if where == "body":
            body = {
                "required": parameter.get("required", False),
                "description": parameter.get("description", ""),
                "content": {consumes[0]: {"schema": parameter.get("schema") or {}}},
            }
        elif where == "formData":
            form.append(parameter)
        else:
            schema = {k: parameter[k] for k in ("type", "format", "enum", "items") if k in parameter}
            parameters.append({**parameter, "schema": parameter.get("schema") or schema})
    if form:
        form_type = next((m for m in consumes if "form" in m), "application/x-www-form-urlencoded")
        properties = {
            str(p.get("name")): {k: p[k] for k in ("type", "format", "enum", "description") if k in p} for p in form
        }
        required = [str(p.get("name")) for p in form if p.get("required")]
        body = {"content": {form_type: {"schema": {"type": "object", "properties": properties, "required": required}}}}
    responses = {}
    for status, response in (op.get("responses") or {}).items():
        response = resolver.resolve(response)
        if not isinstance(response, dict):
            continue
        content = {}
        if response.get("schema") is not None:
            described: dict[str, Any] = {"schema": response["schema"]}
            examples = response.get("examples") or {}
            if isinstance(examples, dict) and examples:
                described["example"] = next(iter(examples.values()))
            content[produces[0]] = described
        responses[status] = {
            "description": response.get("description", ""),
            "content": content,
            "headers": response.get("headers") or {},  # Swagger 2.0 gives a header's type beside its description
        }
    return {**op, "parameters": parameters, "requestBody": body, "responses": responses}


def _render_operation(method: str, path: str, op: dict[str, Any], resolver: _Resolver) -> str:
    lines = [f"{method.upper()} {path}" + (f" — {op['summary']}" if op.get("summary") else "")]
    expanded: set[str] = set()
    meta = []
    if op.get("operationId"):
        meta.append(f"operationId: {op['operationId']}")
    if op.get("deprecated"):
        meta.append("deprecated")
    if meta:
        lines.append(" · ".join(meta))
    if op.get("description"):
        lines += ["", str(op["description"]).strip()]
    parameters = [resolver.resolve(p) for p in op.get("parameters") or []]
    if parameters:
        lines += ["", "Parameters:"]
        for p in parameters:
            schema = resolver.resolve(p.get("schema") or {})
            flags = [f"in {p.get('in', '?')}", "required" if p.get("required") else "optional", _type_of(schema)]
            lines.append(
                f"- {p.get('name')} ({', '.join(f for f in flags if f)}): {p.get('description', '')}".rstrip(": ")
            )
            if "example" in p:
                lines.append(f"  example: {_example(p['example'])}")
    body = resolver.resolve(op.get("requestBody") or {})
    if body:
        for media, content in (body.get("content") or {}).items():
            required = ", required" if body.get("required") else ""
            lines += [
                "",
                f"Request body ({media}{required}):" + (f" {body['description']}" if body.get("description") else ""),
            ]
            schema = resolver.resolve(content.get("schema") or {})
            if schema.get("description"):
                lines.append(f"  {_type_of(schema) or 'object'}{_described(schema)}")
            lines += _schema_lines(schema, resolver, 1, set(), expanded)
            for example in _examples(content, resolver):
                lines.append(f"  example: {example}")
    responses = op.get("responses") or {}
    if responses:
        lines += ["", "Responses:"]
        for status, response in responses.items():
            response = resolver.resolve(response)
            lines.append(f"- {status}: {response.get('description', '')}".rstrip(": "))
            for name, header in (response.get("headers") or {}).items():  # a reader of the spec sees these too
                header = resolver.resolve(header) if isinstance(header, dict) else {}
                schema = resolver.resolve(header.get("schema") or header)
                described = f"  header {name} ({_type_of(schema)}): {header.get('description', '')}"
                lines.append(described.rstrip(": ").replace(" ()", ""))
            for media, content in (response.get("content") or {}).items():
                schema = resolver.resolve(content.get("schema") or {})
                if schema:
                    lines.append(f"  {media}: {_type_of(schema)}{_described(schema)}")
                    lines += _schema_lines(schema, resolver, 2, set(), expanded)
                for example in _examples(content, resolver):
                    lines.append(f"  example: {example}")
    return "\n".join(lines).strip()


def _described(schema: dict[str, Any]) -> str:
    """' — ' and a schema's own description (a reader of the spec sees it above its properties), or ''."""
    description = " ".join(str(schema.get("description") or "").split())
    return f" — {description}" if description else ""


def _lead(method: str, path: str, op: dict[str, Any]) -> str:
    """What every part of an operation too long for one chunk opens with: its method, path and operationId."""
    lead = f"{method.upper()} {path}"
    return f"{lead} · operationId: {op['operationId']}" if op.get("operationId") else lead


def _type_of(schema: dict[str, Any]) -> str:
    if schema.get("title"):
        return str(schema["title"])
    kind = schema.get("type", "object" if "properties" in schema else "")
    if isinstance(kind, list):
        kind = " | ".join(str(k) for k in kind)
    if kind == "array":
        items = schema.get("items") or {}
        if isinstance(items.get("$ref"), str):  # named by its reference ('#/definitions/Pet': Pet)
            return f"array of {items['$ref'].rsplit('/', 1)[-1]}"
        return f"array of {_type_of(items)}".strip()
    if schema.get("format"):
        kind = f"{kind} ({schema['format']})"
    if schema.get("enum"):
        kind = f"{kind}, one of {' | '.join(str(v) for v in schema['enum'])}"
    return str(kind)


def _schema_lines(
    schema: dict[str, Any], resolver: _Resolver, depth: int, seen: set[int], expanded: set[str] | None = None
) -> list[str]:
    """Property lines of a schema; a named schema is spelled out once per operation, then named only."""
    if depth > MAX_DEPTH or id(schema) in seen:
        return []
    expanded = expanded if expanded is not None else set()
    title = schema.get("title")
    if title:
        if title in expanded:
            return []
        expanded.add(title)
    seen = seen | {id(schema)}
    indent = "  " * depth
    for combinator in ("allOf", "oneOf", "anyOf"):
        if combinator in schema:
            parts = [resolver.resolve(s) for s in schema[combinator]]
            if combinator == "allOf":
                merged: dict[str, Any] = {"properties": {}, "required": []}
                for part in parts:
                    merged["properties"].update(part.get("properties") or {})
                    merged["required"] += part.get("required") or []
                return _schema_lines(merged, resolver, depth, seen, expanded)
            word = "one of" if combinator == "oneOf" else "any of"
            return [f"{indent}{word}: " + ", ".join(_type_of(p) or "object" for p in parts)]
    if schema.get("type") == "array":
        return _schema_lines(resolver.resolve(schema.get("items") or {}), resolver, depth, seen, expanded)
    lines = []
    required = set(schema.get("required") or [])
    for name, prop in (schema.get("properties") or {}).items():
        prop = resolver.resolve(prop)
        flags = [_type_of(prop), "required" if name in required else ""]
        text = f"{indent}- {name} ({', '.join(f for f in flags if f)})"
        if prop.get("description"):
            text += f": {' '.join(str(prop['description']).split())}"
        lines.append(text)
        if prop.get("type") == "object" or "properties" in prop or prop.get("type") == "array":
            lines += _schema_lines(prop, resolver, depth + 1, seen, expanded)
    return lines


def _examples(content: dict[str, Any], resolver: _Resolver) -> list[str]:
    found = []
    if "example" in content:
        found.append(_example(content["example"]))
    for example in (content.get("examples") or {}).values():
        example = resolver.resolve(example)
        if isinstance(example, dict) and "value" in example:
            found.append(_example(example["value"]))
    return found


def _example(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return text if len(text) <= MAX_EXAMPLE_CHARS else text[:MAX_EXAMPLE_CHARS] + " …"


class _Resolver:
    """Resolves local `$ref`s ('#/components/...'); refuses external ones by name."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def resolve(self, node: Any, depth: int = 0) -> Any:
        if not isinstance(node, dict) or "$ref" not in node:
            return node
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ParseError(f"unsupported $ref {ref!r}: only references inside the same file (#/...) are resolved")
        if depth > 32:
            raise ParseError(f"$ref {ref!r} refers to itself through a chain of references")
        target: Any = self.spec
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise ParseError(f"$ref {ref!r} points at nothing: {part!r} does not exist")
            target = target[part]
        resolved = self.resolve(target, depth + 1)
        if (
            isinstance(resolved, dict)
            and "title" not in resolved
            and re.match(r"^#/(components/schemas|definitions)/", ref)
        ):
            resolved = {**resolved, "title": ref.rsplit("/", 1)[1]}
        return resolved
