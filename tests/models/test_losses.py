"""Ranking losses: correct direction, masking, ties, and learnability on a toy."""

from __future__ import annotations

import pytest
import torch

from models.losses import LOSSES, get_loss, listmle, pairwise_hinge

TARGET = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_correct_order_beats_reversed(name):
    loss = get_loss(name)
    good = loss(TARGET * 2.0, TARGET)
    bad = loss(-TARGET * 2.0, TARGET)
    assert float(good) < float(bad)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradient_pushes_faster_config_down(name):
    cost = torch.zeros(5, requires_grad=True)
    get_loss(name)(cost, TARGET).backward()
    # the fastest config's cost should decrease, the slowest's increase (gradient descent)
    assert cost.grad[0] > 0 > cost.grad[4] or (cost.grad[0] > 0 and cost.grad[4] < 0)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_mask_ignores_padding(name):
    loss = get_loss(name)
    cost = torch.tensor([[1.0, 2.0, 3.0, 0.0]])
    target = torch.tensor([[1.0, 2.0, 3.0, 99.0]])
    mask = torch.tensor([[True, True, True, False]])
    padded = loss(cost, target, mask)
    plain = loss(cost[:, :3], target[:, :3])
    assert torch.allclose(padded, plain, atol=1e-6)


def test_hinge_is_zero_beyond_margin_and_ignores_ties():
    assert float(pairwise_hinge(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0]), margin=0.5)) == 0
    tied = pairwise_hinge(torch.tensor([1.0, 0.0]), torch.tensor([3.0, 3.0]))
    assert float(tied) == 0.0


def test_listmle_tiebreak_generator_is_reproducible():
    cost = torch.randn(6, generator=torch.Generator().manual_seed(1))
    target = torch.tensor([1.0, 1.0, 2.0, 2.0, 3.0, 3.0])
    a = listmle(cost, target, generator=torch.Generator().manual_seed(5))
    b = listmle(cost, target, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


def test_shape_mismatch_rejected():
    with pytest.raises(ValueError, match="shape"):
        pairwise_hinge(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="unknown loss"):
        get_loss("mse")


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_decreases_on_learnable_toy(name):
    """A linear scorer learns to rank configs whose runtime is a linear function of features."""
    torch.manual_seed(0)  # the scorer's initial weights: the test must not depend on the run order
    gen = torch.Generator().manual_seed(0)
    true_w = torch.tensor([1.5, -2.0, 0.5, 0.0])
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    loss_fn = get_loss(name)
    losses = []
    for _ in range(150):
        x = torch.randn(4, 32, 4, generator=gen)  # 4 graphs x 32 configs
        runtime = x @ true_w
        loss = loss_fn(model(x).squeeze(-1), runtime)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10
    cos = torch.nn.functional.cosine_similarity(model.weight[0].detach(), true_w, dim=0)
    assert float(cos) > 0.9
