"""The ranking loss: correct direction, masking, ties, and learnability on a toy."""

from __future__ import annotations

import pytest
import torch

from models.losses import pairwise_logistic

TARGET = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])


def test_correct_order_beats_reversed():
    assert float(pairwise_logistic(TARGET * 2.0, TARGET)) < float(pairwise_logistic(-TARGET * 2.0, TARGET))


def test_gradient_pushes_faster_config_down():
    cost = torch.zeros(5, requires_grad=True)
    pairwise_logistic(cost, TARGET).backward()
    # the fastest config's cost should decrease, the slowest's increase (gradient descent)
    assert cost.grad[0] > 0 > cost.grad[4]


def test_mask_ignores_padding():
    cost = torch.tensor([[1.0, 2.0, 3.0, 0.0]])
    target = torch.tensor([[1.0, 2.0, 3.0, 99.0]])
    mask = torch.tensor([[True, True, True, False]])
    padded = pairwise_logistic(cost, target, mask)
    plain = pairwise_logistic(cost[:, :3], target[:, :3])
    assert torch.allclose(padded, plain, atol=1e-6)


def test_ties_give_no_pair_but_keep_the_graph_connected():
    cost = torch.tensor([1.0, 0.0], requires_grad=True)
    tied = pairwise_logistic(cost, torch.tensor([3.0, 3.0]))
    assert float(tied) == 0.0
    tied.backward()
    assert torch.equal(cost.grad, torch.zeros(2))


def test_shape_mismatch_rejected():
    with pytest.raises(ValueError, match="shape"):
        pairwise_logistic(torch.zeros(3), torch.zeros(4))


def test_loss_decreases_on_learnable_toy():
    """A linear scorer learns to rank configs whose runtime is a linear function of features."""
    torch.manual_seed(0)  # the scorer's initial weights: the test must not depend on the run order
    gen = torch.Generator().manual_seed(0)
    true_w = torch.tensor([1.5, -2.0, 0.5, 0.0])
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(150):
        x = torch.randn(4, 32, 4, generator=gen)  # 4 graphs x 32 configs
        loss = pairwise_logistic(model(x).squeeze(-1), x @ true_w)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10
    cos = torch.nn.functional.cosine_similarity(model.weight[0].detach(), true_w, dim=0)
    assert float(cos) > 0.9
