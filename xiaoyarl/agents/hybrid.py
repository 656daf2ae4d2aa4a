"""Hybrid actions (a Dict or Tuple of discrete and continuous parts, `envs/actions.py`) for the
policy-gradient family: PPO and A2C with the policy of `core/hybrid.py`, whose discrete
components and continuous values are drawn independently given the state (H-PPO, Fan et al.
2019). Everything else, GAE, the clipped surrogate or the plain policy gradient, the critic, the
rollout (an action is one float vector of the choices and the values), is the agents' own.
"""

from __future__ import annotations

import functools
from typing import Any

from xiaoyarl.agents.a2c import AgentA2C
from xiaoyarl.agents.ppo import AgentPPO
from xiaoyarl.core.hybrid import ActorHybridPPO


class Hybrid:
    """Mixed in before a continuous-action PPO-family agent: its actor is `ActorHybridPPO` over
    the env's discrete components (`action_nvec`) and continuous values (`action_dim`)."""

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        assert spec.if_hybrid, "the registry picks this agent for such envs"
        self.actor_class: Any = functools.partial(ActorHybridPPO, nvec=spec.action_nvec)
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]


class AgentHybridPPO(Hybrid, AgentPPO):
    """PPO for hybrid actions."""


class AgentHybridA2C(Hybrid, AgentA2C):
    """A2C for hybrid actions."""


# the hybrid-action agent of each continuous-action one
HYBRID = {AgentPPO: AgentHybridPPO, AgentA2C: AgentHybridA2C}
