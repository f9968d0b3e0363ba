"""Property-based fuzzing of every tool's arguments through one real in-process MCP session, as the lowest
role: arbitrary (surrogate-free) unicode, control characters, huge integers, wrong types, lists and maps of
junk, missing and unknown arguments. Each call gets a normal answer or an error with a readable message
(never the SDK's bare 'Error executing tool <name>', which means the tool crashed), no answer carries a
document above the role's ceiling, and afterwards the database has every row it had before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kb_core.departments import DEPARTMENTS
from kb_core.roles import Role
from tests.security.conftest import (
    CLASSIFICATION,
    SQL_SHAPED,
    BlockingClient,
    audit_records,
    blocking_client,
    check_answer,
    table_counts,
)

ROLE = Role.DEMO_READONLY
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=80)
CONTROL = st.text(alphabet=st.characters(categories=("Cc", "Cf", "Zl", "Zp", "Zs")), min_size=1, max_size=20)
LONG_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=900, max_size=4100)
HUGE_INT = st.integers(min_value=-(2**80), max_value=2**80)
SCALAR = st.none() | st.booleans() | HUGE_INT | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JUNK = st.recursive(
    SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=12
)
CODES = sorted(CLASSIFICATION)
HOSTILE_TEXT = (
    TEXT | CONTROL | st.sampled_from(SQL_SHAPED) | st.builds(lambda a, b: a + b, st.sampled_from(SQL_SHAPED), TEXT)
)


def near(values: list[str]) -> st.SearchStrategy[str]:
    """Valid values, and the same bent: padded, re-cased, with control characters or junk appended."""
    valid = st.sampled_from(values)
    return (
        valid
        | st.builds(lambda v, pad: pad + v + pad, valid, CONTROL)
        | st.builds(lambda v: v.swapcase(), valid)
        | st.builds(lambda v, junk: v + junk, valid, TEXT)
    )


QUERY = HOSTILE_TEXT | LONG_TEXT | near(["wire transfer cut-off", "restricted SAR filing", "board bonus pool"])
DEPARTMENT = HOSTILE_TEXT | near(list(DEPARTMENTS))
DOC_CODE = HOSTILE_TEXT | near(CODES)
VERSION = HOSTILE_TEXT | near(["1.0", "2.0", "3.1", "0.0.0.1"]) | HUGE_INT.map(str)
STATUS = HOSTILE_TEXT | near(["effective", "superseded", "draft"])
TOP_K = HUGE_INT | st.integers(min_value=-2, max_value=60) | st.sampled_from(["5", "1e3", "0x10", " 7 "])
EXTRA = st.dictionaries(TEXT, JUNK, max_size=2)


def arguments(fields: dict[str, st.SearchStrategy], required: tuple[str, ...] = ()) -> st.SearchStrategy[dict]:
    """Each argument: absent, a value of its own kind, or junk of any type; plus unknown arguments."""
    given_fields = {name: strategy | JUNK for name, strategy in fields.items()}
    optional = {name: s for name, s in given_fields.items() if name not in required}
    mandatory = {name: s for name, s in given_fields.items() if name in required}
    shaped = st.fixed_dictionaries(mandatory, optional=optional)
    missing_required = st.fixed_dictionaries({}, optional=given_fields)
    return st.builds(lambda a, extra: {**extra, **a}, shaped | missing_required, EXTRA | st.just({}))


SEARCH = arguments(
    {"query": QUERY, "departments": st.lists(DEPARTMENT, max_size=12) | DEPARTMENT, "top_k": TOP_K},
    required=("query",),
)
GET = arguments({"doc_code": DOC_CODE, "version": VERSION}, required=("doc_code",))
LIST = arguments({"department": DEPARTMENT, "status": STATUS})
COMPARE = arguments(
    {"doc_code": DOC_CODE, "from_version": VERSION, "to_version": VERSION},
    required=("doc_code", "from_version", "to_version"),
)
CITATION = HOSTILE_TEXT | near(
    ["kb://finance/FIN-REF-002@5.0#1", "kb://finance/FIN-REF-002@4.0", "kb://compliance/CMP-SOP-004@3.1#4.2"]
)
VERIFY = arguments({"citation": CITATION, "quote": QUERY}, required=("citation", "quote"))


@pytest.fixture(scope="module")
def rows_before(corpus_database) -> dict[str, int]:
    return {**table_counts(corpus_database.targets.owner), "audit": audit_records(corpus_database.targets.owner)}


@pytest.fixture(scope="module")
def fuzz_client(corpus_database, local_embedder, rows_before) -> Iterator[BlockingClient]:
    with blocking_client(corpus_database, ROLE, local_embedder) as client:
        yield client


def outcome(result) -> None:  # type: ignore[no-untyped-def]
    event("error" if result.is_error else "answer")


@FUZZ
@given(args=SEARCH)
def test_fuzzed_search_arguments_get_an_answer_or_a_readable_error_and_nothing_above_the_ceiling(fuzz_client, args):
    result = fuzz_client.call_tool("search_knowledge_base", args)
    outcome(result)
    check_answer("search_knowledge_base", result, ROLE)


@FUZZ
@given(args=GET)
def test_fuzzed_get_document_arguments_get_a_document_or_a_readable_error_and_nothing_above_the_ceiling(
    fuzz_client, args
):
    result = fuzz_client.call_tool("get_document", args)
    outcome(result)
    check_answer("get_document", result, ROLE)


@FUZZ
@given(args=LIST)
def test_fuzzed_list_documents_arguments_get_a_list_or_a_readable_error_and_nothing_above_the_ceiling(
    fuzz_client, args
):
    result = fuzz_client.call_tool("list_documents", args)
    outcome(result)
    check_answer("list_documents", result, ROLE)


@FUZZ
@given(args=COMPARE)
def test_fuzzed_compare_versions_arguments_get_a_comparison_or_a_readable_error_and_nothing_above_the_ceiling(
    fuzz_client, args
):
    result = fuzz_client.call_tool("compare_versions", args)
    outcome(result)
    check_answer("compare_versions", result, ROLE)


@FUZZ
@given(args=VERIFY)
def test_fuzzed_verify_quote_arguments_get_a_verdict_or_a_readable_error_and_nothing_above_the_ceiling(
    fuzz_client, args
):
    result = fuzz_client.call_tool("verify_quote", args)
    outcome(result)
    check_answer("verify_quote", result, ROLE)


@FUZZ
@given(name=TEXT | st.sampled_from(["search_knowledge_base ", "GET_DOCUMENT", "list_documents\x00"]), args=JUNK)
def test_fuzzed_tool_names_and_argument_shapes_get_a_readable_error(fuzz_client, name, args):
    arguments_ = args if isinstance(args, dict) else {"value": args}
    result = fuzz_client.call_tool(name, arguments_)
    assert result.is_error
    check_answer(name, result, ROLE)


def test_after_the_fuzzing_the_session_still_serves_and_every_row_is_in_place(
    fuzz_client, corpus_database, rows_before
):
    """Runs after the fuzzers in this module (pytest keeps a module's order)."""
    listed = fuzz_client.call_tool("list_documents", {})
    searched = fuzz_client.call_tool("search_knowledge_base", {"query": "wire transfer cut-off time"})
    assert not listed.is_error and not searched.is_error and searched.structured_content["documents"]
    public = sum(1 for c in CLASSIFICATION.values() if ROLE.may_read(c))
    assert len({d["doc_code"] for d in listed.structured_content["documents"]}) == public
    content = {k: v for k, v in rows_before.items() if k != "audit"}
    assert table_counts(corpus_database.targets.owner) == content, "a fuzzed call changed the database"
    assert audit_records(corpus_database.targets.owner) > rows_before["audit"]  # the log only grew
