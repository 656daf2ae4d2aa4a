"""The policy of multi-discrete actions (gymnasium's MultiDiscrete and MultiBinary): K
components, each a categorical choice among its own `nvec[k]` options, drawn independently given
the state. One MLP gives the logits of every component side by side, so

    log pi(a | s) = sum_k log pi_k(a_k | s),   H(pi(. | s)) = sum_k H(pi_k(. | s)),

as Stable-Baselines3's MultiCategorical distribution and CleanRL's MultiDiscrete PPO have it.
"""

from __future__ import annotations

import torch
from torch import nn

from xiaoyarl.core.nets import build_mlp, pick, sample_categorical


class ActorMultiDiscretePPO(nn.Module):
    """Categorical policies of K action components: `(batch, ...) -> actions (batch, K)` int64.
    `action_dim` is `sum(nvec)`, the width of the logits."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 nvec: tuple[int, ...]) -> None:  # fmt: skip
        super().__init__()
        assert sum(nvec) == action_dim, "the logits of every component, side by side"
        self.norm = norm
        self.nvec = tuple(nvec)
        self.net = build_mlp([state_dim, *net_dims, action_dim], out_gain=0.01)

    def logprobs(self, state: torch.Tensor) -> list[torch.Tensor]:
        """Each component's normalised log-probabilities, `[(batch, nvec[k])]`."""
        logits = self.net(self.norm(state))
        return [part.log_softmax(-1) for part in logits.split(self.nvec, dim=-1)]

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Greedy actions `(batch, K)` for evaluation."""
        return torch.stack([lp.argmax(-1) for lp in self.logprobs(state)], dim=-1)

    def get_action(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampled actions `(batch, K)` and their log-probability `(batch,)`."""
        parts = self.logprobs(state)
        actions = torch.stack([sample_categorical(lp) for lp in parts], dim=-1)
        return actions, self._logprob(parts, actions)

    def get_logprob_entropy(self, state: torch.Tensor, action: torch.Tensor,
                            ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        parts = self.logprobs(state)
        entropy = sum((-(lp.exp() * lp).sum(-1) for lp in parts), torch.zeros(()))
        return self._logprob(parts, action), entropy

    @staticmethod
    def _logprob(parts: list[torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        return torch.stack([pick(lp, actions[:, k]) for k, lp in enumerate(parts)]).sum(0)

    @staticmethod
    def convert_action_for_env(action: torch.Tensor) -> torch.Tensor:
        return action
