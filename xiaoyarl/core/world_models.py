"""What the model-based agents share: the symlog transform and discrete regression of scalars
(two-hot targets over a fixed support), simplicial normalisation of latent states, their
networks' layers, and the running scale of values by percentiles.

- symlog(x) = sign(x) log(1 + |x|), symexp its inverse (Hafner et al., "Mastering Diverse
  Domains through World Models", 2023): targets of any magnitude squashed to a range a network
  can regress.
- Discrete regression: a scalar is predicted as a categorical distribution over `num_bins`
  points evenly spaced on [low, high] of the symlog scale; its target is the two-hot vector that
  splits probability 1 between the two points around symlog(x), in proportion to how near each
  is (so its mean is symlog(x) exactly, inside the support). The loss is the cross-entropy; the
  prediction is symexp of the distribution's mean (TD-MPC2: Hansen, Su and Wang, ICLR 2024;
  DreamerV3).
- SimNorm (Lavoie et al., "Simplicial Embeddings in Self-Supervised Learning", 2022; TD-MPC2's
  latent states): a vector split into groups of `group` entries, each a softmax.
- `RunningScale`: the range between the 5th and 95th percentile of a batch of values, at least
  1, followed with an exponential moving average (TD-MPC2's policy loss; DreamerV3's returns).
- Categorical latent states (DreamerV3's): `stoch` variables of `classes` classes each, their
  probabilities mixed with 1% of the uniform distribution ("unimix") so that no class is
  impossible, sampled as one-hot vectors with straight-through gradients; `categorical_kl`.
- `NormGRUCell`: DreamerV3's GRU, its gates from one LayerNorm'd linear layer, the update gate
  biased towards keeping the state; `dreamer_mlp`: its layers (linear, LayerNorm, SiLU).
- `settings_of`: a model-based agent's settings that `Config` has no field for, read from
  `config.world_model` over the defaults of a dataclass, unknown names refused;
  `refuse_transition_settings`: the replay settings neither model-based agent reads.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from xiaoyarl.core.distributional import categorical_projection
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.config import Config

Settings = TypeVar("Settings")


def settings_of(cls: type[Settings], config: Config) -> Settings:
    """The settings (a frozen dataclass `cls`) that `config.world_model` asks for over `cls`'s
    defaults; a name `cls` has no field for is refused, naming the settings there are."""
    given: dict[str, Any] = dict(config.world_model or {})
    names = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigError(
            f"invalid config: world_model has no setting {', '.join(unknown)} for "
            f"{config.algo}; its settings are {', '.join(names)}."
        )
    return cls(**given)


def refuse_transition_settings(config: Config, why: str) -> None:
    """Refuse `n_step` and `per` (n-step returns, prioritized replay), which a model-based
    agent does not read: it replays windows of steps uniformly; `why`: what it does instead."""
    for name, value, plain in (("n_step", config.n_step, 1), ("per", config.per, False)):
        if value != plain:
            raise ConfigError(
                f"invalid config: {name}={value!r}: {config.algo} replays windows of steps "
                f"uniformly and {why} (remove the setting)."
            )


def symlog(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * log(1 + |x|), elementwise."""
    return torch.sign(x) * torch.log1p(x.abs())


def symexp(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * (exp(|x|) - 1), the inverse of `symlog`."""
    return torch.sign(x) * torch.expm1(x.abs())


class TwoHot(nn.Module):
    """Discrete regression on `num_bins` points evenly spaced on [low, high] of the symlog
    scale (see the module docstring): `loss(logits, x)` and `value(logits)`."""

    support: torch.Tensor  # (num_bins,) the points, on the symlog scale

    def __init__(self, num_bins: int, low: float, high: float) -> None:
        super().__init__()
        if num_bins < 2 or not low < high:
            raise ValueError(f"TwoHot: need num_bins >= 2 and low < high, got {num_bins}, "
                             f"[{low}, {high}].")  # fmt: skip
        self.num_bins, self.low, self.high = num_bins, low, high
        self.register_buffer("support", torch.linspace(low, high, num_bins), persistent=False)

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """Two-hot vectors `(*x.shape, num_bins)` of scalars `x` (clipped to the support): the
        projection of one atom at symlog(x) onto the points."""
        atom = symlog(x).unsqueeze(-1)
        return categorical_projection(atom, torch.ones_like(atom), self.support)

    def loss(self, logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Cross-entropy `x.shape` of the predicted distributions `(*x.shape, num_bins)` (logits)
        against the two-hot targets of `x`."""
        return -(self.target(x) * F.log_softmax(logits, -1)).sum(-1)

    def value(self, logits: torch.Tensor) -> torch.Tensor:
        """The scalars `logits.shape[:-1]` the distributions predict: symexp of their mean."""
        return symexp((F.softmax(logits, -1) * self.support).sum(-1))


class SimNorm(nn.Module):
    """Simplicial normalisation: the last dimension in groups of `group`, each a softmax."""

    def __init__(self, group: int = 8) -> None:
        super().__init__()
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        return F.softmax(x.view(*shape[:-1], -1, self.group), -1).view(shape)


class NormedLinear(nn.Sequential):
    """Linear, (dropout,) LayerNorm, then `activation` (Mish by default): TD-MPC2's layer."""

    def __init__(self, d_in: int, d_out: int, activation: nn.Module | None = None,
                 dropout: float = 0.0) -> None:  # fmt: skip
        layers = [nn.Linear(d_in, d_out)] + ([nn.Dropout(dropout)] if dropout else [])
        super().__init__(*layers, nn.LayerNorm(d_out), activation or nn.Mish())


def normed_mlp(dims: list[int], last: nn.Module | None = None,
               dropout: float = 0.0) -> nn.Sequential:  # fmt: skip
    """`dims = [in, hidden..., out]`: `NormedLinear` hidden layers (dropout after the first
    one's linear layer), then a plain linear output, or a `NormedLinear` ending in `last` (e.g.
    `SimNorm`) where given. Weights from a truncated normal of std 0.02, biases 0."""
    layers: list[nn.Module] = [
        NormedLinear(d_in, d_out, dropout=dropout if i == 0 else 0.0)
        for i, (d_in, d_out) in enumerate(zip(dims[:-2], dims[1:-1], strict=True))
    ]
    layers.append(NormedLinear(dims[-2], dims[-1], last) if last else nn.Linear(dims[-2], dims[-1]))
    net = nn.Sequential(*layers)
    for module in net.modules():
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)
    return net


class RunningScale(nn.Module):
    """The spread of values: the range between their 5th and 95th percentiles, at least 1,
    averaged over batches with weight `tau` for the newest (`update`); `forward(x)` divides by
    it. Starts at 1."""

    value: torch.Tensor  # () the scale

    def __init__(self, tau: float = 0.01) -> None:
        super().__init__()
        self.tau = tau
        self.register_buffer("value", torch.ones(()))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Move the scale towards the spread of the batch `x` (all its entries): percentiles by
        linear interpolation between the sorted values (`torch.quantile`'s), with the positions
        taken from the shape alone, so that a captured update never waits on the device."""
        values = x.detach().flatten().float().sort().values
        low, high = (self._percentile(values, p) for p in (0.05, 0.95))
        self.value.lerp_((high - low).clamp(min=1.0), self.tau)

    @staticmethod
    def _percentile(values: torch.Tensor, p: float) -> torch.Tensor:
        position = p * (values.shape[0] - 1)
        below = math.floor(position)
        above = min(below + 1, values.shape[0] - 1)
        return torch.lerp(values[below], values[above], position - below)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / self.value


def dreamer_mlp(dims: list[int], out: int | None = None, zero_out: bool = False) -> nn.Sequential:
    """`dims = [in, hidden...]`: each hidden layer linear (no bias), LayerNorm, SiLU; then a
    linear output layer of `out` units where given (its weights zero where `zero_out`: a
    prediction that starts at 0, DreamerV3's reward and value heads)."""
    layers: list[nn.Module] = []
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
        layers += [nn.Linear(d_in, d_out, bias=False), nn.LayerNorm(d_out), nn.SiLU()]
    if out is not None:
        head = nn.Linear(dims[-1], out)
        if zero_out:
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        layers.append(head)
    return nn.Sequential(*layers)


class NormGRUCell(nn.Module):
    """DreamerV3's GRU cell: reset, candidate and update gates from one linear layer of
    `[input, state]` and a LayerNorm; the update gate's input lowered by 1 (a new state starts
    mostly as the old one)."""

    def __init__(self, input_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(input_dim + hidden_dim, 3 * hidden_dim, bias=False)
        self.norm = nn.LayerNorm(3 * hidden_dim)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        reset, candidate, update = self.norm(self.linear(torch.cat([x, h], -1))).chunk(3, -1)
        reset = torch.sigmoid(reset)
        candidate = torch.tanh(reset * candidate)
        update = torch.sigmoid(update - 1)
        return update * candidate + (1 - update) * h


def latent_probs(logits: torch.Tensor, classes: int, unimix: float) -> torch.Tensor:
    """The probabilities `(..., stoch, classes)` of flat logits `(..., stoch * classes)`, each
    variable's softmax mixed with `unimix` of the uniform distribution."""
    probs = F.softmax(logits.unflatten(-1, (-1, classes)), -1)
    return (1 - unimix) * probs + unimix / classes


def sample_index(probs: torch.Tensor) -> torch.Tensor:
    """A class `probs.shape[:-1]` drawn from each distribution `(..., classes)`: the largest
    probs / E, E exponential (what `torch.multinomial` computes for one sample, the same draws
    from the generator), written out so that a captured update draws it on the device."""
    return (probs / torch.empty_like(probs).exponential_()).argmax(-1)


def one_hot_latent(probs: torch.Tensor, sample: bool = True) -> torch.Tensor:
    """A latent state `(..., stoch * classes)`: each variable a one-hot vector, drawn from
    `probs` `(..., stoch, classes)` (`sample`) or its most likely class, with straight-through
    gradients (the one-hot vector's gradient is that of the probabilities)."""
    if sample:
        index = sample_index(probs)
    else:
        index = probs.argmax(-1)
    hard = F.one_hot(index, probs.shape[-1]).to(probs.dtype)
    return (hard + probs - probs.detach()).flatten(-2)


def categorical_kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) of latent distributions `(..., stoch, classes)`, summed over the variables."""
    return (p * (p.log() - q.log())).sum((-2, -1))
