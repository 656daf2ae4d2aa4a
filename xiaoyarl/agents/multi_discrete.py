"""PPO and A2C for multi-discrete actions (gymnasium's MultiDiscrete and MultiBinary): the
feed-forward agents with the policy of `core/multi_discrete.py`, whose components are chosen
independently given the state (the log-probability of an action is the sum of its
components'). Everything else, GAE, the clipped surrogate, the critic, is the agents' own."""

from __future__ import annotations

import functools
from typing import Any

from xiaoyarl.agents.a2c import AgentDiscreteA2C
from xiaoyarl.agents.ppo import AgentDiscretePPO
from xiaoyarl.core.multi_discrete import ActorMultiDiscretePPO


class MultiDiscrete:
    """Mixed in before a discrete PPO-family agent: its actor is `ActorMultiDiscretePPO` over
    the env's `action_nvec`."""

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        assert spec.action_nvec is not None, "the registry picks this agent for such envs"
        self.actor_class: Any = functools.partial(ActorMultiDiscretePPO, nvec=spec.action_nvec)
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]


class AgentMultiDiscretePPO(MultiDiscrete, AgentDiscretePPO):
    """PPO for multi-discrete actions."""


class AgentMultiDiscreteA2C(MultiDiscrete, AgentDiscreteA2C):
    """A2C for multi-discrete actions."""


# the multi-discrete agent of each discrete one
MULTI_DISCRETE = {AgentDiscretePPO: AgentMultiDiscretePPO, AgentDiscreteA2C: AgentMultiDiscreteA2C}
