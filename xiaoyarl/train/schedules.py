"""Schedules: the learning rate, PPO's clip range and the entropy coefficient decayed over training.

A scheduled field starts at its configured value and decays to `schedule_end` times that value
over `schedule_steps` env steps (None: the run's `max_steps`), then stays there:

    constant  v                                         (no schedule, the default)
    linear    v * (1 - p * (1 - end))                   (RL Zoo's `lin_...` settings)
    cosine    v * (end + (1 - end) * (1 + cos(pi p)) / 2)

with p = min(env steps / schedule_steps, 1). The loop sets the values before each update from
the env steps taken so far, rollout included, so a resumed run (its step count is in the
checkpoint) continues exactly where it stopped.

The learning rate is written into every optimizer of the agent (its parameter groups' `lr`; in
place where it is a tensor, as in an update captured as a CUDA graph, whose replays read it;
times the agent's `learning_rate_scales` of that optimizer, where it has one);
`ratio_clip` and `lambda_entropy` into the agent's own copy of its config, which is what PPO's
losses read, so an update with those scheduled is not captured (a graph replays the values of
its capture). The run's config (config.yaml, the checkpoint) keeps the start values.
"""

from __future__ import annotations

import copy
import math

import torch

from xiaoyarl.agents import AgentBase
from xiaoyarl.config import SCHEDULES, Config

# scheduled field -> the Config field that names its schedule
SCHEDULED = {name: f"{name}_schedule" for name in ("learning_rate", "ratio_clip", "lambda_entropy")}
assert set(SCHEDULES) == {"constant", "linear", "cosine"}, "schedule_fraction knows these"


def schedule_fraction(kind: str, progress: float, end: float) -> float:
    """The fraction of its start value a field of schedule `kind` holds at `progress` (0 to 1)
    of its schedule, ending at `end`."""
    p = min(max(progress, 0.0), 1.0)
    if kind == "linear":
        return 1.0 - p * (1.0 - end)
    if kind == "cosine":
        return end + (1.0 - end) * 0.5 * (1.0 + math.cos(math.pi * p))
    return 1.0


def scheduled(config: Config) -> list[str]:
    """The fields of `config` that follow a schedule (not "constant")."""
    return [name for name, kind in SCHEDULED.items() if getattr(config, kind) != "constant"]


def scheduled_values(config: Config, env_steps: int) -> dict[str, float]:
    """Each scheduled field's value after `env_steps` env steps of the run."""
    steps = config.schedule_steps or config.max_steps
    progress = env_steps / max(steps, 1)
    values = {}
    for name in scheduled(config):
        start = getattr(config, name)
        assert start is not None, "resolve_config sets learning_rate"
        kind = getattr(config, SCHEDULED[name])
        values[name] = start * schedule_fraction(kind, progress, config.schedule_end)
    return values


class Schedules:
    """Sets the scheduled values of `agent` before each of its updates (see the module's
    docstring); does nothing for a config without schedules."""

    def __init__(self, config: Config, agent: AgentBase) -> None:
        self.config = config
        self.agent = agent
        self.active = bool(scheduled(config))

    def apply(self, env_steps: int) -> dict[str, float]:
        """Set the values for an update after `env_steps` env steps; return them."""
        if not self.active:
            return {}
        values = scheduled_values(self.config, env_steps)
        if "learning_rate" in values:
            # an optimizer an agent runs at a multiple of the learning rate (TD-MPC2's encoder's)
            scales = getattr(self.agent, "learning_rate_scales", {})
            for name, optimizer in self.agent.optimizers.items():
                for group in optimizer.param_groups if optimizer is not None else ():
                    set_learning_rate(group, values["learning_rate"] * scales.get(name, 1.0))
        others = {k: v for k, v in values.items() if k != "learning_rate"}
        if others:
            config = copy.copy(self.agent.config)
            for name, value in others.items():
                setattr(config, name, value)
            self.agent.config = config
        return values


def set_learning_rate(group: dict, value: float) -> None:
    """Set an optimizer parameter group's learning rate: in place where it is a tensor (a
    captured update reads that tensor)."""
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(value)
    else:
        group["lr"] = value
