"""Epsilon-greedy exploration with a linearly decaying epsilon: the DQN family, PQN, VDN and
QMIX share it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from xiaoyarl.config import Config


class EpsilonGreedy:
    """Epsilon decays linearly from 1 to `explore_rate` over the first `explore_decay_steps` env
    steps the agent explored; each action is a random one with probability epsilon."""

    config: Config
    explored: int
    device: torch.device
    action_reason = "it acts by a max over one Q-value per action, so over finitely many actions"

    def epsilon(self) -> float:
        cfg = self.config
        assert cfg.explore_decay_steps is not None, "resolve_config sets explore_decay_steps"
        progress = min(1.0, self.explored / cfg.explore_decay_steps)
        return 1.0 + progress * (cfg.explore_rate - 1.0)

    def epsilon_greedy(self, greedy: torch.Tensor, random: torch.Tensor,
                       epsilon: float | torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Each of `random` (actions, the shape of `greedy`) with probability `epsilon` (None:
        this agent's, `epsilon()`), else the `greedy` action at its place."""
        epsilon = self.epsilon() if epsilon is None else epsilon
        explore = torch.rand(greedy.shape, device=self.device) < epsilon
        return torch.where(explore, random, greedy)
