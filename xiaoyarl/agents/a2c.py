"""A2C: Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016, in its
synchronous form: PPO's agent (`agents/ppo.py`) with the plain policy gradient."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from xiaoyarl.agents.ppo import (
    AgentPPO,
    on_policy_common,
    on_policy_eval_every,
    on_policy_num_envs,
)
from xiaoyarl.core.nets import ActorDiscretePPO

if TYPE_CHECKING:
    from xiaoyarl.config import Config


class AgentA2C(AgentPPO):
    """A2C: the plain policy gradient `log pi(a|s) * A` instead of PPO's clipped ratio; by default
    one gradient step on each short rollout (see `Config` defaults for `a2c`)."""

    config_fields = AgentPPO.config_fields - {"ratio_clip"}  # differs: no clipped ratio
    tune_space: ClassVar[str | None] = "a2c.yaml"
    # differs: no clip range to vary per vmapped member
    member_fields = frozenset({"learning_rate", "lambda_entropy", "clip_grad_norm"})

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        # differs: one gradient step on each short rollout (8 steps), as in its paper, lr 7e-4
        num_envs = on_policy_num_envs(config, batched, device_type)
        horizon_len = config.horizon_len or 8
        return {
            **on_policy_common(num_envs),
            "eval_every": on_policy_eval_every(num_envs * horizon_len),
            "horizon_len": horizon_len,
            "batch_size": num_envs * horizon_len,
            "repeat_times": 1.0,
            "learning_rate": 7e-4,
        }

    def actor_objective(
        self,
        ratio: torch.Tensor,
        advantage: torch.Tensor,
        logprob: torch.Tensor,
        ratio_clip: float | torch.Tensor | None = None,
    ) -> torch.Tensor:
        return logprob * advantage  # differs from PPO: no ratio, no clipping


class AgentDiscreteA2C(AgentA2C):
    """A2C for discrete actions: only the actor differs (categorical instead of Gaussian)."""

    if_discrete = True
    actor_class = ActorDiscretePPO
