"""Return and objective functions of the on-policy agents, pure functions of tensors.

GAE: Schulman et al., "High-Dimensional Continuous Control Using Generalized Advantage
Estimation", 2016. The clipped surrogate: Schulman et al., "Proximal Policy Optimization
Algorithms", 2017.
"""

from __future__ import annotations

from typing import Any, cast

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminals: torch.Tensor,
    truncates: torch.Tensor,
    gamma: float,
    lambda_gae: float,
) -> torch.Tensor:
    """GAE advantages `(T, N)` from `(T, N)` inputs.

    `next_values[t]` is V of the state step t reached (the true last state when the episode ended
    there). A terminal step does not bootstrap; a truncated one does, from that last state. Either
    way the advantage does not run on into the next episode.
    """
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    keep_value = (~terminals).float()
    keep_trace = (~(terminals | truncates)).float()
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * keep_value[t] * next_values[t] - values[t]
        running = delta + gamma * lambda_gae * keep_trace[t] * running
        advantages[t] = running
    return advantages


def clipped_surrogate(
    ratio: torch.Tensor, advantage: torch.Tensor, ratio_clip: float | torch.Tensor
) -> torch.Tensor:
    """PPO's clipped surrogate objective per sample (to be maximized); `ratio_clip` is epsilon
    (a tensor of one value per member in a vmapped population)."""
    # torch.clamp takes number or tensor bounds; its stubs type the two as separate overloads
    low, high = cast(Any, 1 - ratio_clip), cast(Any, 1 + ratio_clip)
    clipped = torch.clamp(ratio, low, high)
    return torch.min(ratio * advantage, clipped * advantage)
