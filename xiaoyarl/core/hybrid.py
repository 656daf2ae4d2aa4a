"""The policy of hybrid actions (a Dict or Tuple of discrete and continuous parts, as the
parameterised actions of Platform or goal-kicking tasks; `envs/actions.py`): K categorical
components, each among its own `nvec[k]` choices, and C Gaussian values, drawn independently
given the state, as H-PPO (Fan et al., "Hybrid Actor-Critic Reinforcement Learning in
Parameterized Action Space", 2019) has them:

    log pi(a | s) = sum_k log pi_k(a_k | s) + sum_c log N(a_c; mu_c(s), sigma_c),
    H(pi(. | s)) = sum_k H(pi_k(. | s)) + sum_c H(N(mu_c, sigma_c)).

One MLP gives the logits of every component and the means of the continuous values side by side;
the log-standard deviations are learned and state-independent, as PPO's Gaussian policy's. An
action is one float vector `(batch, K + C)`: the K choices as whole numbers, then the C values
(the env receives them clipped to [-1, 1]). Every continuous value takes part in the
log-probability, the parameters of the choices not taken too (H-PPO's; their advantage is noise
that averages out).
"""

from __future__ import annotations

import torch
from torch import nn

from xiaoyarl.core.nets import (
    build_mlp,
    gaussian_entropy,
    gaussian_logprob,
    pick,
    sample_categorical,
)


class ActorHybridPPO(nn.Module):
    """Categorical and Gaussian policies side by side: `(batch, ...) -> actions (batch, K + C)`.
    `action_dim` is C, the continuous values; `nvec` the choices of each discrete component."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 nvec: tuple[int, ...]) -> None:  # fmt: skip
        super().__init__()
        self.norm = norm
        self.nvec = tuple(nvec)
        self.net = build_mlp([state_dim, *net_dims, sum(nvec) + action_dim], out_gain=0.01)
        self.action_std_log = nn.Parameter(torch.full((action_dim,), -0.5))

    def heads(self, state: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Each component's normalised log-probabilities `[(batch, nvec[k])]` and the means of
        the continuous values `(batch, C)`."""
        out = self.net(self.norm(state))
        *logits, mean = out.split([*self.nvec, self.action_std_log.shape[0]], dim=-1)
        return [part.log_softmax(-1) for part in logits], mean

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Greedy choices and the means in [-1, 1], `(batch, K + C)`, for evaluation."""
        parts, mean = self.heads(state)
        choices = torch.stack([lp.argmax(-1) for lp in parts], dim=-1).to(mean.dtype)
        return torch.cat([choices, mean.clamp(-1.0, 1.0)], dim=-1)

    def get_action(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampled actions `(batch, K + C)` and their log-probability `(batch,)`."""
        parts, mean = self.heads(state)
        choices = torch.stack([sample_categorical(lp) for lp in parts], dim=-1)
        noise = torch.randn_like(mean)
        values = torch.addcmul(mean, self.action_std_log.exp(), noise)
        logprob = self._choices_logprob(parts, choices)
        logprob = logprob + gaussian_logprob(noise, self.action_std_log).sum(-1)
        return torch.cat([choices.to(mean.dtype), values], dim=-1), logprob

    def get_logprob_entropy(self, state: torch.Tensor, action: torch.Tensor,
                            ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        parts, mean = self.heads(state)
        k = len(self.nvec)
        choices, values = action[:, :k].long(), action[:, k:]
        log_std = self.action_std_log
        gaussian = gaussian_logprob((values - mean) * (-log_std).exp(), log_std).sum(-1)
        entropy = sum((-(lp.exp() * lp).sum(-1) for lp in parts), torch.zeros(()))
        entropy = entropy + gaussian_entropy(log_std).sum(-1)
        return self._choices_logprob(parts, choices) + gaussian, entropy

    @staticmethod
    def _choices_logprob(parts: list[torch.Tensor], choices: torch.Tensor) -> torch.Tensor:
        return torch.stack([pick(lp, choices[:, k]) for k, lp in enumerate(parts)]).sum(0)

    def convert_action_for_env(self, action: torch.Tensor) -> torch.Tensor:
        """The choices as they are, the values clipped to [-1, 1]."""
        k = len(self.nvec)
        return torch.cat([action[:, :k], action[:, k:].clamp(-1.0, 1.0)], dim=-1)
