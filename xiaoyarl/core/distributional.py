"""Distributional critics: C51 (Bellemare, Dabney and Munos, "A Distributional Perspective on
Reinforcement Learning", ICML 2017), as FastTD3 (Seo et al. 2025) uses it for continuous control.

A critic predicts a categorical distribution over `num_atoms` fixed returns evenly spaced on
[v_min, v_max] (the support). Its target is the distribution of r + gamma * Z(s', a'): every atom
of the next state's distribution moved to r + gamma * z, then its probability split between the
two neighbouring atoms of the support in proportion to how near each is (the paper's Algorithm
1). The loss is the cross-entropy of the critic's distribution against that target; the actor
and the TD errors use the distribution's mean, Q(s, a).
"""

from __future__ import annotations

import torch
from torch import nn

from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.nets import build_mlp
from xiaoyarl.core.off_policy_nets import QNet, QNetDuel, build_ensemble_mlp


def categorical_projection(atoms: torch.Tensor, probs: torch.Tensor,
                           support: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Project a distribution onto `support` `(K,)` (evenly spaced): `probs` `(..., M)` placed
    at `atoms` `(..., M)` (any values; clipped to the support's range). Each atom's probability
    goes to the two support points around it, linearly by distance; returns `(..., K)`, rows
    summing to the rows of `probs` (one atom of probability 1: a two-hot vector)."""
    num_atoms = support.shape[0]
    v_min, v_max = support[0], support[-1]
    position = (atoms.clamp(v_min, v_max) - v_min) / (v_max - v_min) * (num_atoms - 1)
    lower = position.floor().clamp(max=num_atoms - 2)  # an atom at v_max: all to the upper one
    upper_share = position - lower
    projected = probs.new_zeros(*probs.shape[:-1], num_atoms)
    projected.scatter_add_(-1, lower.long(), probs * (1 - upper_share))
    projected.scatter_add_(-1, lower.long() + 1, probs * upper_share)
    return projected


def c51_target(probs: torch.Tensor, batch: Batch, support: torch.Tensor,
               penalty: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """C51's target `(B, K)`: the next state's distribution `probs` `(B, K)` on `support`, each
    atom z moved to r + gamma^m * (z - penalty) (gamma^m: the batch's `discounts`; r alone past
    a terminal; `penalty` `(B,)`, e.g. SAC's entropy term) and projected back onto `support`."""
    atoms = support.expand_as(probs)
    if penalty is not None:
        atoms = atoms - penalty.unsqueeze(-1)
    bootstrap = (batch.discounts * (~batch.terminals).float()).unsqueeze(-1)
    return categorical_projection(batch.rewards.unsqueeze(-1) + bootstrap * atoms, probs, support)


class DistributionalCriticEnsemble(nn.Module):
    """`num` C51 critics of Q(s, a) evaluated in one call: `logits(state, action)` gives
    `(num, batch, num_atoms)`, `forward` their means `(num, batch)`, so whatever reads a
    critic's value (an actor's objective, a TD error) reads it unchanged."""

    support: torch.Tensor  # (num_atoms,): the returns the atoms stand for

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 num: int, layer_norm: bool, num_atoms: int, v_min: float,
                 v_max: float) -> None:  # fmt: skip
        super().__init__()
        self.norm = norm
        self.num = num
        dims = [state_dim + action_dim, *net_dims, num_atoms]
        self.net = build_ensemble_mlp(num, dims, layer_norm)
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms))

    def logits(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([self.norm(state), action], -1))

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mean(self.logits(state, action).softmax(-1))

    def mean(self, probs: torch.Tensor) -> torch.Tensor:
        """The expected return of distributions `(..., num_atoms)`: `(...)`."""
        return (probs * self.support).sum(-1)


class DistributionalQNet(QNet):
    """C51's Q-network for discrete actions: `logits(state)` `(batch, action_dim, num_atoms)`,
    `q_values` their means `(batch, action_dim)`, and the greedy action when called (`QNet`)."""

    support: torch.Tensor  # (num_atoms,)

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 layer_norm: bool, num_atoms: int, v_min: float, v_max: float) -> None:  # fmt: skip
        super().__init__(state_dim, action_dim * num_atoms, net_dims, norm, layer_norm)
        self.action_dim, self.num_atoms = action_dim, num_atoms
        self.v_min, self.v_max = v_min, v_max
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms))

    def init_kwargs(self) -> dict:
        return {"layer_norm": self.layer_norm, "num_atoms": self.num_atoms, "v_min": self.v_min,
                "v_max": self.v_max}  # fmt: skip

    def logits(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(state)).unflatten(-1, (self.action_dim, self.num_atoms))

    def q_values(self, state: torch.Tensor) -> torch.Tensor:
        return (self.logits(state).softmax(-1) * self.support).sum(-1)


class DistributionalQNetDuel(DistributionalQNet):
    """C51 with dueling heads (as Rainbow: Hessel et al. 2018): per atom, the logits are
    V(s) + A(s, a) - mean_a A(s, a), on `QNetDuel`'s trunk."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 layer_norm: bool, num_atoms: int, v_min: float, v_max: float) -> None:  # fmt: skip
        super().__init__(state_dim, action_dim, net_dims, norm, layer_norm, num_atoms, v_min,
                         v_max)  # fmt: skip
        self.layer_norm = layer_norm
        trunk = QNetDuel(state_dim, action_dim, net_dims, norm, layer_norm)
        self.net = trunk.net
        self.value_head = build_mlp([net_dims[-1], num_atoms])
        self.advantage_head = build_mlp([net_dims[-1], action_dim * num_atoms])

    def logits(self, state: torch.Tensor) -> torch.Tensor:
        hidden = self.net(self.norm(state))
        advantage = self.advantage_head(hidden).unflatten(-1, (self.action_dim, self.num_atoms))
        value = self.value_head(hidden).unsqueeze(-2)
        return value + advantage - advantage.mean(-2, keepdim=True)


DISTRIBUTIONAL_Q: dict[type[QNet], type[DistributionalQNet]] = {
    QNet: DistributionalQNet,
    QNetDuel: DistributionalQNetDuel,
}
