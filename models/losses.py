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
                      tie_eps: float = 1e-9) -> torch.Tensor:
    """RankNet: mean over ordered pairs (config i truly faster than j, beyond ``tie_eps`` of the
    group's largest runtime) of ``log(1 + exp(-(cost_j - cost_i)))``, averaged per group first."""
    cost, target, mask = _as_groups(cost, target, mask)
    diff_target = target[:, None, :] - target[:, :, None]  # [g, i, j] = t_j - t_i
    scale = target.abs().amax(dim=1, keepdim=True).clamp_min(1e-12)[:, :, None]
    valid = (diff_target > tie_eps * scale) & mask[:, :, None] & mask[:, None, :]
    per_pair = F.softplus(cost[:, :, None] - cost[:, None, :])  # softplus(-(c_j - c_i))
    counts = valid.sum(dim=(1, 2))
    has = counts > 0
    if not bool(has.any()):
        return per_pair.sum() * 0.0  # keeps the graph connected; no ordered pair to learn from
    return ((per_pair * valid).sum(dim=(1, 2))[has] / counts[has]).mean()
