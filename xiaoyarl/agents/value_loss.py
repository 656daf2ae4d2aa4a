"""The critic's loss beyond the plain squared error, a component an on-policy agent takes at
construction where the config asks for it (`value_norm`, `value_clip`, `value_loss: huber`;
MAPPO's defaults): PPO's plain case never loads this module.

Value normalisation: Andrychowicz et al., "What Matters In On-Policy Reinforcement Learning?",
2020, and MAPPO (Yu et al., "The Surprising Effectiveness of PPO in Cooperative Multi-Agent
Games", 2022), which also clips the value and uses the Huber loss.
"""

from __future__ import annotations

import torch

from xiaoyarl.config import Config
from xiaoyarl.core.nets import RunningNorm


def squared_or_huber(error: torch.Tensor, kind: str | None, huber_delta: float) -> torch.Tensor:
    """Per-sample loss of an error `(B,)`: its square ("mse"), or ("huber") its square within
    +-huber_delta and linear beyond. Twice the usual Huber loss: PPO's update halves it."""
    if kind == "mse":
        return error.square()
    if kind != "huber":
        raise ValueError(f"value_loss={kind!r}: expected 'mse' or 'huber'")
    size = error.abs()
    return torch.where(size <= huber_delta, error.square(), huber_delta * (2 * size - huber_delta))


class ValueLoss:
    """The critic learns returns standardised by their running mean and variance (`norm`,
    with `value_norm`; None without), with the squared or Huber error (`value_loss`), clipped
    around its outputs before the update (`value_clip`)."""

    def __init__(self, config: Config, device: torch.device) -> None:
        self.config = config
        self.norm = (
            RunningNorm(1, enabled=True, clip=None).to(device) if config.value_norm else None
        )

    def value(self, outputs: torch.Tensor) -> torch.Tensor:
        """V in return units from the critic's outputs: scaled back by the returns' running
        mean and standard deviation under value normalisation."""
        if self.norm is None:
            return outputs
        return outputs * (self.norm.var + 1e-8).sqrt() + self.norm.mean

    def observe(self, returns: torch.Tensor) -> None:
        """Merge a batch's returns `(B,)` into the running statistics (value normalisation)."""
        if self.norm is not None:
            self.norm.update(returns.unsqueeze(1))

    def __call__(self, outputs: torch.Tensor, returns: torch.Tensor, old_outputs: torch.Tensor,
                 ratio_clip: float | torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """The loss per sample `(B,)` of the critic's `outputs` against `returns`; with
        `value_clip`, the larger of that and the loss of the outputs clipped to +-ratio_clip
        (None: the config's) around `old_outputs`, the outputs before this update."""
        cfg, norm = self.config, self.norm
        eps = cfg.ratio_clip if ratio_clip is None else ratio_clip
        target = returns if norm is None else (returns - norm.mean) / (norm.var + 1e-8).sqrt()
        loss = squared_or_huber(target - outputs, cfg.value_loss, cfg.huber_delta)
        if cfg.value_clip:
            step = (outputs - old_outputs).clamp(-eps, eps)  # type: ignore[arg-type]  # a float or a tensor
            clipped = squared_or_huber(target - (old_outputs + step), cfg.value_loss,
                                       cfg.huber_delta)  # fmt: skip
            loss = torch.max(loss, clipped)
        return loss
