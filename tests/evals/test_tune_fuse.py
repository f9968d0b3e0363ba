"""evals.tune.fuse is the SQL's fusion in Python: the tuner and the dev-only simulations rank with it."""

from evals.tune import fuse

from kb_server.search import DEFAULT_FUSION


def test_a_key_both_legs_rank_high_comes_before_one_leg_alone() -> None:
    legs = {"vector": [("a", 0.9), ("b", 0.8), ("c", 0.1)], "text": [("b", 9.0), ("c", 1.0)]}
    assert fuse(legs, DEFAULT_FUSION, 3) == ["b", "a", "c"]


def test_the_identifier_bonus_puts_its_key_first_and_skips_keys_no_leg_found() -> None:
    legs = {"vector": [("a", 0.9), ("b", 0.8), ("c", 0.1)], "text": [("b", 9.0), ("c", 1.0)]}
    bonus = {"c": DEFAULT_FUSION.identifier_bonus, "absent": DEFAULT_FUSION.identifier_bonus}
    assert fuse(legs, DEFAULT_FUSION, 3, bonus) == ["c", "b", "a"]
