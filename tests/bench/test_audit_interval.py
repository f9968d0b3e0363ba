"""The audit bench reports the p95 difference with its bootstrap interval, not one noisy draw."""

from __future__ import annotations

import random

from bench.audit import p95_difference_interval


def test_the_interval_brackets_a_known_shift_of_every_call():
    rng = random.Random(1)
    without = [rng.lognormvariate(3.5, 0.3) for _ in range(400)]
    with_audit = [x + 1.5 for x in without]
    rng.shuffle(with_audit)
    low, high = p95_difference_interval(with_audit, without)
    assert low < 1.5 < high
    assert high - low < 20  # a spread, not an interval that says nothing


def test_the_interval_holds_zero_when_the_two_servers_are_alike():
    rng = random.Random(2)
    a = [rng.lognormvariate(3.5, 0.3) for _ in range(400)]
    b = [rng.lognormvariate(3.5, 0.3) for _ in range(400)]
    low, high = p95_difference_interval(a, b)
    assert low < 0 < high
