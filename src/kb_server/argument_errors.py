"""Tool argument errors as one sentence that names the argument and says what it accepts.

The SDK reports arguments that fail the input schema with pydantic's own text (several lines, the rejected
value's type, a link to pydantic's documentation), which a calling model or person has to decode. Here
each one becomes, e.g., "top_k must be a whole number from 1 to 50 (got 99)", built from the tool's input
schema, so the sentence always matches what the schema advertises.
"""

from __future__ import annotations

import json
from difflib import get_close_matches
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from pydantic import ValidationError

_KINDS = {"integer": "a whole number", "number": "a number", "string": "text", "boolean": "true or false"}


def accepts(schema: dict[str, Any]) -> str:
    """What a JSON schema property accepts, in words."""
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    nullable = len(options) < len(schema.get("anyOf", [schema]))
    part = options[0] if options else schema
    kind = part.get("type")
    if kind == "array":
        items = accepts(part.get("items", {}))
        words = f"a list of {items}" + (f" (at most {part['maxItems']})" if "maxItems" in part else "")
    elif kind == "string" and part.get("format") == "date":
        words = "a date as YYYY-MM-DD"
    elif kind in ("integer", "number") and "minimum" in part and "maximum" in part:
        words = f"{_KINDS[kind]} from {part['minimum']} to {part['maximum']}"
    elif kind == "string" and "maxLength" in part:
        words = f"text of at most {part['maxLength']} characters"
    else:
        words = _KINDS.get(str(kind), "a value of its schema")
    return words + (", or nothing" if nullable and kind != "array" else "")


def describe(error: ValidationError, input_schema: dict[str, Any]) -> str:
    errors = error.errors()
    # A misnamed argument explains the others (`querry` given, so `query` is missing): it is named first.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(p) for p in first["loc"]]
    name = loc[0] if loc else "the arguments"
    properties = input_schema.get("properties", {})
    if name not in properties:
        close = get_close_matches(name, list(properties), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown argument {name!r}{hint}; this tool takes: {', '.join(properties)}"
    wanted = accepts(properties[name])
    if first["type"] == "missing":
        return f"{name} is required: {wanted}"
    given = first.get("input")
    # The caller wrote JSON: null and true read as it wrote them, not as Python's None and True.
    shown = json.dumps(given) if given is None or isinstance(given, bool) else repr(given)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    # One parenthesis, not "(item 0) (got 1)" after the "(at most 9)" of a list's wording.
    got = f"item {loc[1]} was {shown}" if len(loc) > 1 and loc[1].isdigit() else f"got {shown}"
    sentence = f"{name} must be {wanted} ({got})"
    reason = _reason(first["type"], first.get("input"), name)
    return f"{sentence}: {reason}" if reason else sentence


_JSON_KINDS = {
    dict: "an object",
    list: "a list",
    str: "text",
    bool: "true or false",
    int: "a number",
    float: "a number",
}


def _reason(error_type: str, value: Any, name: str) -> str:
    """Why the value was refused, where the value shown does not make it plain."""
    if error_type == "string_unicode":
        # A lone surrogate escaped in valid JSON (\ud800) looks like text but cannot be stored or searched.
        return "it holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not valid Unicode text"
    if error_type == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        # Found walking it: the MCP Inspector sends --tool-arg version=2.0 as the number 2, and the caller
        # read "(got 2)" as the server misreading them.
        return (
            'a number was given: send it as text, in quotes ("2.0"; a number loses its ".0"); with the MCP '
            f"Inspector, --tool-arg '{name}=\"2.0\"'"
        )
    if error_type.endswith("_type") and value is not None:
        return f"{_JSON_KINDS.get(type(value), type(value).__name__)} was given"
    return ""


def not_a_boolean(value: Any) -> Any:
    """Refuse JSON's true and false where a number is asked: pydantic's lax mode reads them as 1 and 0."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


class PlainArgumentErrors(MCPServer):
    """An MCPServer whose argument errors read as one sentence (the rest is the SDK's behaviour)."""

    def refuse_unknown_arguments(self) -> None:
        """Every registered tool refuses an argument it does not take, and its input schema says so.

        The SDK drops unknown arguments silently, so `search_knowledge_base(department="legal")` (the filter is
        `departments`) searched every department and looked filtered: a refusal naming the argument meant is
        what lets the caller notice. Call it once every tool is registered."""
        for tool in self._tool_manager.list_tools():
            arguments = tool.fn_metadata.arg_model
            arguments.model_config["extra"] = "forbid"
            arguments.model_rebuild(force=True)
            tool.parameters["additionalProperties"] = False

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError):
                raise  # a crash: the SDK's bare "Error executing tool <name>", nothing of the cause
            if isinstance(cause, ValidationError):
                tool = self._tool_manager.get_tool(name)
                schema = tool.parameters if tool is not None else {}
                raise ToolError(describe(cause, schema)) from cause
            if isinstance(cause, ToolError):
                # The tool's own sentence, as an argument error reads: the SDK prefixed these alone with
                # "Error executing tool <name>: ", so one call's errors came in two forms.
                raise ToolError(str(cause)) from cause
            if self._tool_manager.get_tool(name) is None:
                raise ToolError(self.unknown_tool(name)) from None
            raise

    def unknown_tool(self, name: str) -> str:
        tools = [tool.name for tool in self._tool_manager.list_tools()]
        close = get_close_matches(name, tools, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown tool {name[:60]!r}{hint}; the tools are: {', '.join(tools)}"

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            if not str(exc).startswith("Unknown resource:"):
                raise  # a resource's own sentence (unknown department, no such document, ...)
            # The SDK's bare "Unknown resource: <uri>" (no template matched) names no form to use instead.
            forms = sorted(template.uri_template for template in self._resource_manager.list_templates())
            raise ResourceNotFoundError(f"{exc}; the resources are {', '.join(forms)}") from None
