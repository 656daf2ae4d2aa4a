"""Exploration noise, a component of the agents that explore with a deterministic actor (DDPG,
TD3 and their multi-agent versions), chosen once at construction from the config.

- `explore_noise: gaussian` (the default): independent N(0, std^2) at every step (TD3's);
- `explore_noise: ou`: each sub-env's Ornstein-Uhlenbeck process,
  x <- x - theta * x * dt + std * sqrt(dt) * N(0, 1), from 0 at its episode's start: a push
  that lasts, for tasks a random walk of actions does not solve (the DDPG paper's noise; theta
  0.15 and dt 0.01 as OpenAI Baselines and SB3);
- the std is `explore_noise_std`, or with `explore_noise_std_max` each sub-env's own, drawn
  uniformly between the two and drawn anew when its episode ends (FastTD3), so the sub-envs
  explore from nearly greedy to wide.
"""

from __future__ import annotations

import math

import torch

from xiaoyarl.config import Config
from xiaoyarl.core.nets import gaussian_logprob

# the Ornstein-Uhlenbeck noise's pull to 0 (the DDPG paper's) and time step (OpenAI Baselines',
# SB3's defaults)
OU_THETA, OU_DT = 0.15, 1e-2
# the settings of the exploration noise
NOISE_FIELDS = frozenset({"explore_noise_std", "explore_noise_std_max", "explore_noise"})


class ExplorationNoise:
    """Noise for batches of actions `(num_envs, action_dim)` (see the module docstring). Its
    state, each sub-env's std and OU value, is part of the agent's training state."""

    def __init__(self, config: Config, device: torch.device) -> None:
        self.std = config.explore_noise_std
        self.std_max = config.explore_noise_std_max
        self.ou = config.explore_noise == "ou"
        self.device = device
        self.stds: torch.Tensor | None = None  # (num_envs, 1) with explore_noise_std_max
        self.ou_noise: torch.Tensor | None = None  # (num_envs, action_dim) with ou

    def __call__(self, action: torch.Tensor) -> torch.Tensor:
        """The noise to add to `action`."""
        draw = torch.randn_like(action)  # drawn before any new noise stds (`sub_env_std`)
        std = self.sub_env_std(action.shape[0])
        if not self.ou:
            return draw * std
        if self.ou_noise is None or self.ou_noise.shape != action.shape:
            self.ou_noise = torch.zeros_like(action)
        pull = OU_THETA * OU_DT
        self.ou_noise = (1 - pull) * self.ou_noise + std * math.sqrt(OU_DT) * draw
        return self.ou_noise

    def sub_env_std(self, num_envs: int) -> torch.Tensor | float:
        """The noise's std: `explore_noise_std`, or each sub-env's own `(num_envs, 1)`."""
        if self.std_max is None:
            return self.std
        if self.stds is None or self.stds.shape[0] != num_envs:
            self.stds = self.draw_stds((num_envs,))
        return self.stds

    def draw_stds(self, sub_envs: tuple[int, ...]) -> torch.Tensor:
        """New stds for the sub-envs of shape `sub_envs` (`(num_envs,)`; a vmapped population's
        `(members, num_envs)`), uniform in [explore_noise_std, ..._max]: `(*sub_envs, 1)`."""
        assert self.std_max is not None, "drawn only with explore_noise_std_max"
        draw = torch.rand(*sub_envs, 1, device=self.device)
        return self.std + (self.std_max - self.std) * draw

    def episodes_ended(self, ended: torch.Tensor) -> None:
        """A sub-env whose episode ended `(num_envs,)` draws a new std and restarts its OU
        process from 0."""
        if self.stds is None and self.ou_noise is None:
            return
        ended = ended.unsqueeze(-1)
        if self.stds is not None:
            self.stds = torch.where(ended, self.draw_stds(ended.shape[:-1]), self.stds)
        if self.ou_noise is not None:
            self.ou_noise = torch.where(ended, 0.0, self.ou_noise)

    def logprob(self, noise: torch.Tensor) -> torch.Tensor:
        """The density of Gaussian noise `(B, A)` of std `explore_noise_std`, summed over the
        action's dimensions `(B,)` (the H-term's density of the exploring policy)."""
        log_std = torch.full_like(noise, math.log(self.std))
        return gaussian_logprob(noise * (-log_std).exp(), log_std).sum(-1)

    def state_dict(self) -> dict:
        return {"noise_stds": self.stds, "ou_noise": self.ou_noise}

    def load_state_dict(self, state: dict) -> None:
        # absent from the checkpoints of earlier versions
        stds, ou = state.get("noise_stds"), state.get("ou_noise")
        self.stds = None if stds is None else stds.to(self.device)
        self.ou_noise = None if ou is None else ou.to(self.device)
