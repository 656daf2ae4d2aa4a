"""Return and objective functions of the agents that learn from whole rollouts, pure functions
of tensors.

GAE: Schulman et al., "High-Dimensional Continuous Control Using Generalized Advantage
Estimation", 2016. The clipped surrogate: Schulman et al., "Proximal Policy Optimization
Algorithms", 2017. Lambda-returns: Sutton & Barto, "Reinforcement Learning: An Introduction",
2018, ch. 12; over greedy values, Peng's Q(lambda) as PQN uses it (Gallici et al.,
"Simplifying Deep Temporal Difference Learning", 2025).
"""

from __future__ import annotations

from typing import Any, cast

import torch


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
                terminals: torch.Tensor, truncates: torch.Tensor, gamma: float,
                lambda_gae: float) -> torch.Tensor:  # fmt: skip
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


def lambda_returns(rewards: torch.Tensor, next_values: torch.Tensor, terminals: torch.Tensor,
                   truncates: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:  # fmt: skip
    """Lambda-returns `(T, N)` from `(T, N)` inputs: `G_t = r_t + gamma * ((1 - lam) *
    next_values[t] + lam * G_{t+1})` while the episode goes on.

    `next_values[t]` is the value of the state step t reached (the true last state when the
    episode ended there; for Q(lambda), max_a Q). A terminal step does not bootstrap; a truncated
    one, and the rollout's last step, bootstrap from `next_values[t]` alone: the return does not
    run on into the next episode. Computed as GAE advantages plus the values they are taken
    against, the values of the states the steps start from: those are the values their previous
    steps reached (step 0's cancels out).
    """
    values = torch.cat([next_values[:1], next_values[:-1]])
    return compute_gae(rewards, values, next_values, terminals, truncates, gamma, lam) + values


def clipped_surrogate(ratio: torch.Tensor, advantage: torch.Tensor,
                      ratio_clip: float | torch.Tensor) -> torch.Tensor:  # fmt: skip
    """PPO's clipped surrogate objective per sample (to be maximized); `ratio_clip` is epsilon
    (a tensor of one value per member in a vmapped population)."""
    # torch.clamp takes number or tensor bounds; its stubs type the two as separate overloads
    low, high = cast(Any, 1 - ratio_clip), cast(Any, 1 + ratio_clip)
    clipped = torch.clamp(ratio, low, high)
    return torch.min(ratio * advantage, clipped * advantage)
