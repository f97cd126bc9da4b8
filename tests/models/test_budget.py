"""The one time budget of both models: the GNN's shares by weight left, LightGBM's claims with a floor."""

from __future__ import annotations

import pytest

from models.budget import TimeBudget


def test_time_budget_shares_carry_over():
    now = [0.0]
    budget = TimeBudget(100.0, clock=lambda: now[0])
    assert budget.share(4) == pytest.approx(25.0)
    now[0] = 10.0  # the first run used 10 s of its 25
    assert budget.share(3) == pytest.approx(30.0)
    now[0] = 200.0
    assert budget.remaining() == 0.0
    assert TimeBudget(0).share(3) == float("inf")


def test_budget_claims_follow_rows_with_a_floor():
    budget = TimeBudget(100.0, clock=lambda: 1000.0, weights={"a": 3.0, "b": 1.0})  # a clock that stands still
    assert budget.claim("a") == pytest.approx(62.5)  # 100 x (0.5/2 + 0.5 x 3/4)
    assert budget.claim("b") == pytest.approx(100.0)  # whatever is left
    assert TimeBudget(0.0, weights={"a": 1.0}).claim("a") == float("inf")


def test_a_claim_after_the_time_ran_out_is_zero():
    now = [0.0]
    budget = TimeBudget(10.0, clock=lambda: now[0], weights={"a": 1.0, "b": 1.0})
    now[0] = 20.0
    assert budget.claim("a") == 0.0 and budget.claim("b") == 0.0
