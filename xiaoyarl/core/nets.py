"""Networks: MLP builder, running normalizers, the on-policy actors and critics (PPO, A2C,
MAPPO). The off-policy agents' networks are in `off_policy_nets.py`.

Every network takes raw observations and normalizes them itself through a shared
`RunningNorm`, so a saved actor is a complete policy: nothing else is needed to run it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

# --- sampling, written out: torch.distributions objects cost ~100 us each to build and query on
# a CPU, more than the small policy network itself (see BENCHMARKS.md) --------------------------
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def sample_categorical(logprobs: torch.Tensor) -> torch.Tensor:
    """One action `(batch,)` int64 per row of normalised log-probabilities `(batch, A)`, by
    inverting the cumulative distribution at a uniform draw u in [0, 1): the first action whose
    cumulative probability exceeds u. An action of probability 0 (a masked one) is never taken:
    where the rounded probabilities sum to less than u, the row's last action of positive
    probability is taken (not its last action, which may be masked)."""
    u, probs = torch.rand(logprobs.shape[:-1] + (1,), device=logprobs.device), logprobs.exp()
    last = probs.shape[-1] - 1 - (probs > 0).flip(-1).to(torch.uint8).argmax(-1)
    return torch.minimum((probs.cumsum(-1) <= u).sum(-1), last)


# The logit of an unavailable action (probability exp(-1e9) = 0): finite, unlike -inf, so
# that the gradients through a masked softmax stay finite.
MASKED_LOGIT = -1e9


def pick(values: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """`values[i, action[i]]`: `(batch, A), (batch,) -> (batch,)`."""
    return values.gather(-1, action.unsqueeze(-1)).squeeze(-1)


def gaussian_logprob(noise: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Elementwise log N(mean + std * noise; mean, std): -noise^2 / 2 - log std - log(2 pi) / 2."""
    return noise.square().mul(-0.5).sub(log_std).sub_(_HALF_LOG_2PI)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Elementwise entropy of N(mean, std): log std + 1/2 + log(2 pi) / 2."""
    return log_std + (0.5 + _HALF_LOG_2PI)


def build_mlp(dims: list[int], activation: type[nn.Module] = nn.Tanh, out_gain: float = 1.0,
              layer_norm: bool = False) -> nn.Sequential:  # fmt: skip
    """`dims = [in, hidden..., out]`: Linear layers with `activation` between them (not after the
    last), each hidden one followed by a LayerNorm first where `layer_norm`. Orthogonal init
    (gain sqrt(2) for hidden layers, `out_gain` for the last), zero bias."""
    layers: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        last = i == len(dims) - 2
        linear = nn.Linear(d_in, d_out)
        nn.init.orthogonal_(linear.weight, out_gain if last else math.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.extend([nn.LayerNorm(d_out), activation()] if layer_norm else [activation()])
    return nn.Sequential(*layers)


class RunningNorm(nn.Module):
    """Observation normalizer: running mean and variance over everything seen, merged batch by
    batch (Chan et al.'s parallel update), applied as `clamp((x - mean) / std, -clip, clip)`
    (`clip=None`: no clamp).
    When disabled it is the identity, but keeps the same buffers so checkpoints look alike.
    In data-parallel training `moments` is set to a function that returns the mean, variance
    and size of the batches of all ranks together, so every rank merges the same statistics."""

    # buffers (registered in __init__), declared so that they read as tensors, not modules
    mean: torch.Tensor  # (dim,)
    var: torch.Tensor  # (dim,)
    count: torch.Tensor  # () float64

    def __init__(self, dim: int, enabled: bool = True, clip: float | None = 10.0) -> None:
        super().__init__()
        self.enabled = enabled
        self.clip = clip
        self.out_dim = dim  # as an encoder (`core/encoders.py`): the width of what it returns
        self.moments: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, float]] | None
        self.moments = None
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge a batch `(batch, dim)` into the running statistics."""
        if not self.enabled:
            return
        if self.moments is None:
            batch_mean = x.mean(0)
            batch_var = x.var(0, unbiased=False)
            n = float(x.shape[0])  # a kernel argument, not a host-to-device copy (CUDA graphs)
        else:
            batch_mean, batch_var, n = self.moments(x)
        total = self.count + n
        delta = batch_mean - self.mean
        w = torch.div(n, total).to(x.dtype)
        self.mean += delta * w
        m2 = self.var * (1 - w) + batch_var * w + delta.square() * w * (1 - w)
        self.var.copy_(m2)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return x
        x = (x - self.mean) / (self.var + 1e-8).sqrt()
        return x if self.clip is None else x.clamp(-self.clip, self.clip)


class RewardScaler(nn.Module):
    """Divides rewards by the running std of the discounted return (as in PPO implementations that
    "normalize rewards"), which keeps value targets near unit scale whatever the reward units.
    Tracks one discounted return per sub-env; the statistics are part of the checkpoint."""

    returns: torch.Tensor  # (num_envs,) a buffer, registered in __init__

    def __init__(self, num_envs: int, gamma: float, enabled: bool = True) -> None:
        super().__init__()
        self.enabled = enabled
        self.gamma = gamma
        self.register_buffer("returns", torch.zeros(num_envs))
        self.stats = RunningNorm(1)

    @torch.no_grad()
    def forward(self, rewards: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
        """Scale rewards `(horizon_len, num_envs)`; `dones` (same shape) ends running returns."""
        if not self.enabled:
            return rewards
        returns = torch.empty_like(rewards)
        running = self.returns
        for t in range(rewards.shape[0]):
            running = running * self.gamma + rewards[t]
            returns[t] = running
            running = running * (~dones[t])
        self.returns.copy_(running)
        self.stats.update(returns.reshape(-1, 1))
        return rewards / (self.stats.var + 1e-8).sqrt()


class ActorPPO(nn.Module):
    """Gaussian policy for continuous actions: an MLP gives the mean, a learned state-independent
    log-std gives the spread. Samples are unbounded; the env receives them clipped to [-1, 1]."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.net = build_mlp([state_dim, *net_dims, action_dim], out_gain=0.01)
        self.action_std_log = nn.Parameter(torch.full((action_dim,), -0.5))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """Deterministic action `(batch, action_dim)` in [-1, 1] for evaluation."""
        return self.net(self.norm(state)).clamp(-1.0, 1.0)

    def get_action(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampled action `(batch, action_dim)` and its log-probability `(batch,)`."""
        mean = self.net(self.norm(state))
        noise = torch.randn_like(mean)
        action = torch.addcmul(mean, self.action_std_log.exp(), noise)
        return action, gaussian_logprob(noise, self.action_std_log).sum(-1)

    def get_logprob_entropy(self, state: torch.Tensor, action: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        mean = self.net(self.norm(state))
        log_std = self.action_std_log
        logprob = gaussian_logprob((action - mean) * (-log_std).exp(), log_std).sum(-1)
        entropy = gaussian_entropy(log_std).sum(-1).expand(mean.shape[:-1])
        return logprob, entropy

    @staticmethod
    def convert_action_for_env(action: torch.Tensor) -> torch.Tensor:
        return action.clamp(-1.0, 1.0)


class ActorDiscretePPO(nn.Module):
    """Categorical policy for discrete actions: an MLP gives the logits. `avail` `(batch, A)`
    bool, where given, masks out unavailable actions (probability 0)."""

    def __init__(self, state_dim: int, action_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.net = build_mlp([state_dim, *net_dims, action_dim], out_gain=0.01)

    def logprobs(self, state: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.net(self.norm(state))
        if avail is not None:  # a finite floor, not -inf: its gradients stay finite
            logits = logits.masked_fill(~avail, MASKED_LOGIT)
        return logits.log_softmax(-1)

    def forward(self, state: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        """Greedy action `(batch,)` int64 for evaluation."""
        return self.logprobs(state, avail).argmax(-1)

    def get_action(self, state: torch.Tensor, avail: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Sampled action `(batch,)` int64 and its log-probability `(batch,)`."""
        logprobs = self.logprobs(state, avail)
        action = sample_categorical(logprobs)
        return action, pick(logprobs, action)

    def get_logprob_entropy(
        self, state: torch.Tensor, action: torch.Tensor, avail: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logprobs = self.logprobs(state, avail)
        plogp = logprobs.exp() * logprobs  # an unavailable action's is exp(-1e9) * -1e9 = 0
        return pick(logprobs, action), -plogp.sum(-1)

    @staticmethod
    def convert_action_for_env(action: torch.Tensor) -> torch.Tensor:
        return action


class CriticV(nn.Module):
    """State-value function V(s): `(batch, state_dim) -> (batch,)`."""

    def __init__(self, state_dim: int, net_dims: list[int], norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.net = build_mlp([state_dim, *net_dims, 1], out_gain=1.0)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(state)).squeeze(-1)
