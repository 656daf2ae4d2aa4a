"""The networks of the value-based and off-policy agents: Q-networks (DQN family, PQN, VDN and
QMIX, DRQN), batched
critic ensembles (DDPG, TD3, SAC, REDQ, MADDPG), and deterministic, squashed-Gaussian,
categorical and Gumbel-softmax actors. Built from the blocks in `nets.py`, which every agent
uses; an on-policy agent does not load this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F

from xiaoyarl.core.nets import (
    MASKED_LOGIT,
    build_mlp,
    gaussian_logprob,
    sample_categorical,
)
from xiaoyarl.core.recurrent import rnn_sequence, rnn_step, state_width

# This process's (rank, number of ranks) in data-parallel training (`scale/distributed.py`).
DATA_SHARD = [0, 1]


def batch_randn_like(x: torch.Tensor) -> torch.Tensor:
    """`torch.randn_like(x)` for a batch `x` `(batch, ...)`. In data-parallel training the noise
    is drawn for all ranks' batches together (ranks share the update's random state) and each
    rank keeps its own rows, so K ranks draw exactly the noise one process would draw for the
    union of their batches."""
    rank, world = DATA_SHARD
    if world == 1:
        return torch.randn_like(x)
    rows = x.shape[0]
    noise = torch.randn((world * rows, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return noise[rank * rows : (rank + 1) * rows]


class QNet(nn.Module):
    """Q-values for discrete actions: `q_values(state) -> (batch, action_dim)`; calling the
    module gives the greedy action `(batch,)` int64, so it doubles as the policy.

    Multi-discrete actions (`nvec`: the choices of each of K components, `action_dim` their
    sum) are action branching (Tavakoli, Pardo and Kormushev, "Action Branching Architectures
    for Deep Reinforcement Learning", AAAI 2018): the outputs are K branches side by side, one
    Q-value per choice of each component; the greedy action `(batch, K)` is each branch's
    argmax, and the value of a state is the mean over branches of their greedy values (the
    paper's mean operator)."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 layer_norm: bool = False, nvec: Sequence[int] | None = None) -> None:  # fmt: skip
        super().__init__()
        assert nvec is None or sum(nvec) == action_dim, "every branch's values side by side"
        self.norm = norm
        self.layer_norm = layer_norm
        self.action_dim = action_dim
        self.nvec = None if nvec is None else tuple(int(n) for n in nvec)
        self.net = build_mlp([state_dim, *net_dims, action_dim], nn.ReLU, layer_norm=layer_norm)

    def init_kwargs(self) -> dict:
        """The constructor's arguments beyond the sizes and the encoder, as plain data: what a
        saved policy (`actor.pt`) rebuilds the network with."""
        return {"layer_norm": self.layer_norm, **self.branching()}

    def branching(self) -> dict:
        """`nvec` as a constructor argument, where the actions are multi-discrete."""
        return {} if self.nvec is None else {"nvec": list(self.nvec)}

    def q_values(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(state))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.greedy(self.q_values(state))

    # --- actions of Q-values `(batch, action_dim)`: one index, or one per branch ---
    def greedy(self, q: torch.Tensor) -> torch.Tensor:
        """The greedy action: `(batch,)`, or `(batch, K)` each branch's argmax."""
        if self.nvec is None:
            return q.argmax(-1)
        return torch.stack([part.argmax(-1) for part in q.split(self.nvec, -1)], -1)

    def random_like(self, actions: torch.Tensor) -> torch.Tensor:
        """Uniformly random actions of the shape of `actions` (each component among its own
        choices)."""
        if self.nvec is None:
            return torch.randint_like(actions, self.action_dim)
        return torch.stack([torch.randint_like(actions[:, k], n) for k, n in
                            enumerate(self.nvec)], -1)  # fmt: skip

    def action_values(self, q: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q(s, a) of `actions`: `(batch,)`, or `(batch, K)` each branch's value of its own
        component (integer-valued float actions are read as indices)."""
        actions = actions.long()
        if self.nvec is None:
            return q.gather(1, actions.unsqueeze(1)).squeeze(1)
        offsets = torch.tensor((0, *self.nvec[:-1]), device=q.device).cumsum(0)
        return q.gather(1, actions + offsets)

    def greedy_values(self, q: torch.Tensor) -> torch.Tensor:
        """The value `(batch,)` of the greedy action: max_a Q(s, a), or the mean over branches
        of each branch's max."""
        if self.nvec is None:
            return q.max(-1).values
        return torch.stack([part.max(-1).values for part in q.split(self.nvec, -1)], -1).mean(-1)

    def state_values(self, q: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The value `(batch,)` of taking `actions`: Q(s, a), or the mean over branches."""
        values = self.action_values(q, actions)
        return values if self.nvec is None else values.mean(-1)


class QNetLayerNorm(QNet):
    """A Q-network with LayerNorm after every hidden layer, which keeps TD learning stable
    without a target network (PQN: Gallici et al., "Simplifying Deep Temporal Difference
    Learning", 2025)."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 nvec: Sequence[int] | None = None) -> None:  # fmt: skip
        super().__init__(state_dim, action_dim, net_dims, norm, layer_norm=True, nvec=nvec)

    def init_kwargs(self) -> dict:
        return self.branching()  # its LayerNorm is its class's


class QNetDuel(QNet):
    """Dueling Q-network (Wang et al. 2016): `Q = V(s) + A(s, a) - mean_a A(s, a)`; with
    branches, each branch's advantages less their own mean (the paper of action branching)."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 layer_norm: bool = False, nvec: Sequence[int] | None = None) -> None:  # fmt: skip
        super().__init__(state_dim, action_dim, net_dims, norm, nvec=nvec)
        self.layer_norm = layer_norm
        self.net = build_mlp([state_dim, *net_dims[:-1], net_dims[-1]], nn.ReLU,
                             layer_norm=layer_norm)  # fmt: skip
        if layer_norm:
            self.net.append(nn.LayerNorm(net_dims[-1]))
        self.net.append(nn.ReLU())
        self.value_head = build_mlp([net_dims[-1], 1])
        self.advantage_head = build_mlp([net_dims[-1], action_dim])

    def q_values(self, state: torch.Tensor) -> torch.Tensor:
        hidden = self.net(self.norm(state))
        advantage = self.advantage_head(hidden)
        if self.nvec is None:
            return self.value_head(hidden) + advantage - advantage.mean(-1, keepdim=True)
        centred = [part - part.mean(-1, keepdim=True) for part in advantage.split(self.nvec, -1)]
        return self.value_head(hidden) + torch.cat(centred, -1)


class RecurrentQNet(nn.Module):
    """A DRQN agent network (Hausknecht & Stone 2015; the agents of the QMIX paper): the
    observation through ReLU layers (`net_dims`), then a GRU or an LSTM (`kind`) of
    `hidden_dim` units whose hidden state carries the episode so far, then a linear layer to
    the Q-values (PyTorch's default initialisation throughout, as PyMARL's agents).
    `step(state (B, S), hidden (B, H)) -> (q (B, U), hidden' (B, H))` is one time step;
    `unroll(states (T, B, S)) -> (q (T, B, U), hidden (T, B, H))` runs a whole episode from a
    zero hidden state (`hidden[t]` is the state after step t). H is `state_width`: the GRU's
    width, or the LSTM's h and c side by side. A zero hidden state starts every episode
    (`initial_hidden`). `layer_norm`: a LayerNorm before each ReLU of the body."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 layer_norm: bool = False, hidden_dim: int = 64, kind: str = "gru",
                 ) -> None:  # fmt: skip
        super().__init__()
        self.norm = norm
        self.hidden_dim, self.kind, self.layer_norm = hidden_dim, kind, layer_norm
        self.encoder = (build_mlp([state_dim, *net_dims], nn.ReLU, layer_norm=layer_norm)
                        if net_dims else nn.Identity())  # fmt: skip
        self.relu: nn.Module = nn.ReLU() if net_dims else nn.Identity()
        if net_dims and layer_norm:
            self.relu = nn.Sequential(nn.LayerNorm(net_dims[-1]), nn.ReLU())
        # one layer (nn.GRU runs a whole sequence in one call; a step is a sequence of 1)
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(net_dims[-1] if net_dims
                                                            else state_dim, hidden_dim)  # fmt: skip
        self.state_width = state_width(self.rnn)
        self.head = build_mlp([hidden_dim, action_dim])
        # networks saved when the layer was a GRU named `gru`
        self._register_load_state_dict_pre_hook(_renamed_gru)

    def init_kwargs(self) -> dict:
        """Its constructor's arguments besides the sizes (a saved policy rebuilds it so)."""
        return {"layer_norm": self.layer_norm, "hidden_dim": self.hidden_dim, "kind": self.kind}

    def initial_hidden(self, batch: int) -> torch.Tensor:
        first = cast(nn.Linear, self.head[0])  # build_mlp's first layer is a Linear
        return torch.zeros(batch, self.state_width, device=first.weight.device)

    def features(self, state: torch.Tensor) -> torch.Tensor:
        return self.relu(self.encoder(self.norm(state)))

    def step(self, state: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, hidden = rnn_step(self.rnn, self.features(state), hidden)  # core/recurrent.py's
        return self.head(out), hidden

    def unroll(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(states)  # (T, B, F)
        zero = self.initial_hidden(features.shape[1])
        out, hidden = rnn_sequence(self.rnn, features, zero, None)  # (T, B, H), one episode
        return self.head(out), hidden


def _renamed_gru(state_dict: dict, prefix: str, *args: object) -> None:
    """A `RecurrentQNet`'s weights saved before its recurrent layer was named `rnn`."""
    for key in [k for k in state_dict if k.startswith(f"{prefix}gru.")]:
        state_dict[f"{prefix}rnn.{key.removeprefix(f'{prefix}gru.')}"] = state_dict.pop(key)


class EnsembleLinear(nn.Module):
    """`num` independent Linear layers evaluated in one batched matmul: `(num, batch, in_dim)`
    (or `(batch, in_dim)`, shared by all members) -> `(num, batch, out_dim)`."""

    def __init__(self, num: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        bound = 1 / math.sqrt(in_dim)  # nn.Linear's default initialisation, per member
        self.weight = nn.Parameter(torch.empty(num, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(num, 1, out_dim).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.expand(self.weight.shape[0], *x.shape)
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the last axis of `(num, batch, dim)`, each member with its own gain and
    bias (one `nn.LayerNorm` would share them across the ensemble)."""

    def __init__(self, num: int, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num, 1, dim))
        self.bias = nn.Parameter(torch.zeros(num, 1, dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = F.layer_norm(x, x.shape[-1:], eps=self.eps)
        return torch.addcmul(self.bias, normed, self.weight)


class EnsembleBatchRenorm(nn.Module):
    """Batch renormalisation (Ioffe 2017) of `(num, batch, dim)` (or `(batch, dim)`, shared by
    the members) over the batch, each member with its own statistics, gain and bias, as
    CrossQ's critics (Bhatt et al. 2024; momentum 0.01, eps 0.001, r_max 3, d_max 5).

    In training mode it normalises by the batch's mean and std, corrected towards the running
    ones by r = std_batch / std_running (clipped to [1/r_max, r_max]) and d = (mean_batch -
    mean_running) / std_running (clipped to +-d_max), both without gradient, and updates the
    running statistics; for its first `warmup_steps` batches r = 1 and d = 0 (batch
    normalisation). In eval mode it normalises by the running statistics."""

    running_mean: torch.Tensor  # (num, 1, dim)
    running_var: torch.Tensor  # (num, 1, dim)
    steps: torch.Tensor  # () int64: batches seen in training mode

    def __init__(self, num: int, dim: int, momentum: float = 0.01, eps: float = 1e-3,
                 r_max: float = 3.0, d_max: float = 5.0,
                 warmup_steps: int = 100_000) -> None:  # fmt: skip
        super().__init__()
        self.num, self.momentum, self.eps = num, momentum, eps
        self.r_max, self.d_max, self.warmup_steps = r_max, d_max, warmup_steps
        self.weight = nn.Parameter(torch.ones(num, 1, dim))
        self.bias = nn.Parameter(torch.zeros(num, 1, dim))
        self.register_buffer("running_mean", torch.zeros(num, 1, dim))
        self.register_buffer("running_var", torch.ones(num, 1, dim))
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.expand(self.num, *x.shape)
        running_std = (self.running_var + self.eps).sqrt()
        if not self.training:
            return torch.addcmul(self.bias, (x - self.running_mean) / running_std, self.weight)
        mean = x.mean(1, keepdim=True)
        var = x.var(1, unbiased=False, keepdim=True)
        std = (var + self.eps).sqrt()
        with torch.no_grad():
            renorm = self.steps >= self.warmup_steps  # a tensor: no host sync, graph-safe
            r = torch.where(renorm, (std / running_std).clamp(1 / self.r_max, self.r_max), 1.0)
            d = torch.where(renorm, ((mean - self.running_mean) / running_std).clamp(
                -self.d_max, self.d_max), 0.0)  # fmt: skip
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var, self.momentum)
            self.steps += 1
        return torch.addcmul(self.bias, (x - mean) / std * r + d, self.weight)


def build_ensemble_mlp(num: int, dims: list[int], layer_norm: bool = False,
                       batch_renorm: bool = False) -> nn.Sequential:  # fmt: skip
    """`num` MLPs `dims = [in, hidden..., out]` in one call; ReLU after each hidden layer,
    preceded by a LayerNorm (each member's own) where `layer_norm`; with `batch_renorm` a batch
    renormalisation before every linear layer, the input's included (CrossQ's critics)."""
    layers: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        if batch_renorm:
            layers.append(EnsembleBatchRenorm(num, d_in))
        layers.append(EnsembleLinear(num, d_in, d_out))
        if i < len(dims) - 2:
            layers.extend([EnsembleLayerNorm(num, d_out), nn.ReLU()] if layer_norm
                          else [nn.ReLU()])  # fmt: skip
    return nn.Sequential(*layers)


class CriticEnsemble(nn.Module):
    """`num_critics` Q(s, a) networks evaluated in one call.

    `(batch, S), (batch, A) -> (num_critics, batch)`. DDPG uses one, TD3 and SAC two
    (clipped double Q), REDQ ten.
    """

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 num: int, layer_norm: bool = False,
                 batch_renorm: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.norm = norm
        self.num = num
        dims = [state_dim + action_dim, *net_dims, 1]
        self.net = build_ensemble_mlp(num, dims, layer_norm, batch_renorm)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([self.norm(state), action], -1)).squeeze(-1)


class QEnsemble(nn.Module):
    """`num` Q(s, .) networks for discrete actions: `(batch, S) -> (num, batch, action_dim)`."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 num: int, layer_norm: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.norm = norm
        self.num = num
        self.net = build_ensemble_mlp(num, [state_dim, *net_dims, action_dim], layer_norm)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(state))


class Actor(nn.Module):
    """Deterministic policy `(batch, S) -> (batch, A)` in [-1, 1] (tanh), as in DDPG and TD3."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.net = build_mlp([state_dim, *net_dims, action_dim], nn.ReLU)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(state)).tanh()


class ActorSAC(nn.Module):
    """Squashed Gaussian policy (Haarnoja et al. 2018): `a = tanh(u)`, `u ~ N(mu(s), sigma(s))`;
    the log-probability includes the tanh change of variables. `forward` is `tanh(mu)`."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.net = build_mlp([state_dim, *net_dims, 2 * action_dim], nn.ReLU)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(state)).chunk(2, -1)[0].tanh()

    def get_action_logprob(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised sample `(batch, A)` and its log-probability `(batch,)`."""
        mean, log_std = self.net(self.norm(state)).chunk(2, -1)
        log_std = log_std.clamp(-20, 2)
        noise = batch_randn_like(mean)
        u = torch.addcmul(mean, log_std.exp(), noise)
        action = u.tanh()
        # log N(u) - sum log(1 - tanh(u)^2), the latter written stably as
        # 2(log2 - u - softplus(-2u))
        squash = 2 * (math.log(2) - u - F.softplus(-2 * u))
        logprob = gaussian_logprob(noise, log_std) - squash
        return action, logprob.sum(-1)

    def logprob(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Log-probability `(batch,)` of given actions in [-1, 1] (clamped just inside, where
        tanh's inverse is finite)."""
        mean, log_std = self.net(self.norm(state)).chunk(2, -1)
        log_std = log_std.clamp(-20, 2)
        u = action.clamp(-1 + 1e-6, 1 - 1e-6).atanh()
        squash = 2 * (math.log(2) - u - F.softplus(-2 * u))
        return (gaussian_logprob((u - mean) * (-log_std).exp(), log_std) - squash).sum(-1)


class ActorGSDE(nn.Module):
    """SAC's squashed Gaussian policy with generalized state-dependent exploration (gSDE:
    Raffin et al., "Smooth Exploration for Robotic Reinforcement Learning", CoRL 2022).

    The pre-squash action is `u = mu(s) + z(s) E`: `z(s)` the last hidden layer's features
    (detached: the noise does not train them), `E` a `(features, A)` matrix of N(0, sigma^2)
    entries, `sigma = exp(log_std)` a learned matrix. So `u ~ N(mu(s), sigma(s)^2)` with
    `sigma(s)_k^2 = sum_j z_j(s)^2 sigma_jk^2`. Exploring keeps one `E` per sub-env for a whole
    rollout (`explore`), so the noise is a smooth function of the state, not a new draw per
    step; a gradient step draws one `E` for its batch, reparameterised (`get_action_logprob`).
    As the paper's SAC: the mean clipped to +-2 before tanh, log_std starting at -3."""

    log_std_init = -3.0
    mean_clip = 2.0

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.body = nn.Sequential(build_mlp([state_dim, *net_dims], nn.ReLU), nn.ReLU())
        self.mean = build_mlp([net_dims[-1], action_dim])
        self.log_std = nn.Parameter(torch.full((net_dims[-1], action_dim), self.log_std_init))

    def features_mean(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The detached features `z(s)` `(B, F)` and the clipped mean `mu(s)` `(B, A)`."""
        hidden = self.body(self.norm(state))
        mean = self.mean(hidden).clamp(-self.mean_clip, self.mean_clip)
        return hidden.detach(), mean

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.features_mean(state)[1].tanh()

    def draw_exploration(self, num: int) -> torch.Tensor:
        """`num` exploration matrices `(num, F, A)`, one per sub-env."""
        return self.log_std.exp() * torch.randn((num, *self.log_std.shape),
                                                device=self.log_std.device)  # fmt: skip

    def explore(self, state: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
        """Each sub-env's exploring action `(E, A)` with its own matrix `(E, F, A)`."""
        features, mean = self.features_mean(state)
        return (mean + (features.unsqueeze(1) @ matrices).squeeze(1)).tanh()

    def log_prob_u(self, features: torch.Tensor, mean: torch.Tensor,
                   u: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """log pi of squashed actions `tanh(u)` `(B,)`: N(mu, sigma(s)^2) of `u`, then the tanh
        change of variables (as `ActorSAC`)."""
        variance = features.square() @ self.log_std.exp().square()
        log_std = 0.5 * (variance + 1e-6).log()  # gSDE's epsilon keeps sigma(s) above 0
        squash = 2 * (math.log(2) - u - F.softplus(-2 * u))
        return (gaussian_logprob((u - mean) * (-log_std).exp(), log_std) - squash).sum(-1)

    def get_action_logprob(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised sample `(B, A)` with one matrix for the batch, and its log pi `(B,)`."""
        features, mean = self.features_mean(state)
        matrix = self.log_std.exp() * torch.randn_like(self.log_std)
        u = mean + features @ matrix
        return u.tanh(), self.log_prob_u(features, mean, u)

    def logprob(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """log pi `(batch,)` of given actions in [-1, 1] (clamped just inside, as `ActorSAC`)."""
        features, mean = self.features_mean(state)
        return self.log_prob_u(features, mean, action.clamp(-1 + 1e-6, 1 - 1e-6).atanh())


class ActorDiscreteSAC(nn.Module):
    """Categorical policy for discrete SAC: `probs_logprobs(state) -> (batch, A), (batch, A)`;
    `forward` gives the most probable action. Each takes the allowed actions `avail` `(batch,
    A)` bool where the env masks some: a masked action's probability is then 0 (its logit a
    finite floor, so that probabilities times log-probabilities stay finite)."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.net = build_mlp([state_dim, *net_dims, action_dim], nn.ReLU, out_gain=0.01)

    def logits(self, state: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.net(self.norm(state))
        return logits if avail is None else logits.masked_fill(~avail, MASKED_LOGIT)

    def forward(self, state: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        return self.logits(state, avail).argmax(-1)

    def probs_logprobs(self, state: torch.Tensor, avail: torch.Tensor | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        logprobs = self.logits(state, avail).log_softmax(-1)
        return logprobs.exp(), logprobs

    def sample(self, state: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        return sample_categorical(self.logits(state, avail).log_softmax(-1))


class ActorGumbel(nn.Module):
    """Policy for discrete actions: logits `(batch, O) -> (batch, U)`; `forward` gives the most
    probable action (int64), `relaxed` a Gumbel-softmax one-hot sample whose gradient is the
    softmax's (straight-through)."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.net = build_mlp([state_dim, *net_dims, action_dim], nn.ReLU, out_gain=0.01)

    def logits(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(state))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.logits(state).argmax(-1)

    def relaxed(self, state: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        """A Gumbel-softmax one-hot sample among the available actions (`avail`, bool, or all)."""
        logits = self.logits(state)
        if avail is not None:  # a finite floor, not -inf: its gradients stay finite
            logits = logits.masked_fill(~avail, MASKED_LOGIT)
        return F.gumbel_softmax(logits, hard=True)
