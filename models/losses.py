"""The ranking loss over the configs of one graph (docs/competition.md §7): RankNet's pairwise
logistic loss (hinge and ListMLE lost to it under cross-validation, benchmarks/gnn_cv.json, and
were removed).

Convention everywhere: the model predicts a **cost** (lower = predicted faster) and the target
is the true runtime (lower = faster). Inputs are ``(B,)`` or ``(G, B)`` tensors — ``G`` groups
(graphs) of ``B`` configs — with an optional boolean ``mask`` of the same shape marking real
entries (padding is ignored). The loss is averaged over groups.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _as_groups(cost: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if cost.shape != target.shape:
        raise ValueError(f"cost shape {tuple(cost.shape)} != target shape {tuple(target.shape)}")
    if cost.ndim == 1:
        cost, target = cost[None], target[None]
        mask = mask[None] if mask is not None else None
    if cost.ndim != 2:
        raise ValueError(f"expected (B,) or (G, B) tensors, got shape {tuple(cost.shape)}")
    if mask is None:
        mask = torch.ones_like(cost, dtype=torch.bool)
    return cost.float(), target.to(cost.device).float(), mask.to(cost.device).bool()


def pairwise_logistic(cost: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None,
                      tie_eps: float = 1e-9, soft: float = 0.0) -> torch.Tensor:
    """RankNet: mean over ordered pairs (config i truly faster than j, beyond ``tie_eps`` of the
    group's largest runtime) of ``log(1 + exp(-(cost_j - cost_i)))``, averaged per group first.
    ``soft`` > 0: soft labels, P(i faster) = sigmoid(soft * (log t_j - log t_i) / sd of the group's
    log runtimes), so the loss is least where cost gaps are proportional to log runtime gaps."""
    cost, target, mask = _as_groups(cost, target, mask)
    diff_target = target[:, None, :] - target[:, :, None]  # [g, i, j] = t_j - t_i
    scale = target.abs().amax(dim=1, keepdim=True).clamp_min(1e-12)[:, :, None]
    valid = (diff_target > tie_eps * scale) & mask[:, :, None] & mask[:, None, :]
    per_pair = F.softplus(cost[:, :, None] - cost[:, None, :])  # softplus(-(c_j - c_i))
    if soft > 0:
        weight = mask.float()
        logs = target.clamp_min(1e-30).log() * weight
        count = weight.sum(dim=1, keepdim=True).clamp_min(1)
        centred = (logs - logs.sum(dim=1, keepdim=True) / count) * weight
        sd = ((centred ** 2).sum(dim=1, keepdim=True) / count).sqrt().clamp_min(1e-12)
        p = torch.sigmoid(soft * (logs[:, None, :] - logs[:, :, None]) / sd[:, :, None])
        per_pair = p * per_pair + (1 - p) * F.softplus(cost[:, None, :] - cost[:, :, None])
    counts = valid.sum(dim=(1, 2))
    has = counts > 0
    if not bool(has.any()):
        return per_pair.sum() * 0.0  # keeps the graph connected; no ordered pair to learn from
    return ((per_pair * valid).sum(dim=(1, 2))[has] / counts[has]).mean()
