"""The golden questions' development / held-out split is fixed: the held-out ids hash to the recorded digest."""

from __future__ import annotations

from evals.golden import ANSWERABLE, load_golden
from evals.split import (
    HELD_OUT_DIGEST,
    HELD_OUT_DIGEST_BEFORE_POINT_IN_TIME,
    golden_part,
    held_out_digest,
    npl_part,
)


def test_the_held_out_golden_questions_are_the_recorded_ones():
    held_out = golden_part(load_golden(), "held_out")
    assert held_out_digest(q.id for q in held_out) == HELD_OUT_DIGEST


def test_adding_the_point_in_time_questions_moved_no_earlier_question_between_parts():
    held_out = golden_part(load_golden(), "held_out")
    earlier = [q for q in held_out if q.category != "point_in_time"]
    assert held_out_digest(q.id for q in earlier) == HELD_OUT_DIGEST_BEFORE_POINT_IN_TIME


def test_dev_and_held_out_are_disjoint_and_cover_every_answerable_category():
    questions = load_golden()
    dev, held_out = golden_part(questions, "dev"), golden_part(questions, "held_out")
    assert {q.id for q in dev}.isdisjoint({q.id for q in held_out})
    assert len(dev) + len(held_out) == len(questions)
    for category in ANSWERABLE:
        assert any(q.category == category for q in held_out), category
        assert any(q.category == category for q in dev), category


def test_the_npl_queries_split_the_same_way_every_time():
    ids = [str(n) for n in range(1, 94)]
    assert npl_part(ids, "dev") == npl_part(list(reversed(ids)), "dev")[::-1]
    assert set(npl_part(ids, "dev")).isdisjoint(npl_part(ids, "held_out"))
