"""Counts read as a person writes them."""

from __future__ import annotations

import pytest

from kb_core.words import counted


@pytest.mark.parametrize(("n", "said"), [(0, "0 messages"), (1, "1 message"), (2, "2 messages")])
def test_a_count_of_one_is_singular_and_every_other_plural(n: int, said: str) -> None:
    assert counted(n, "message") == said
