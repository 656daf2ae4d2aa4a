"""Multi-discrete actions (gymnasium's MultiDiscrete and MultiBinary) for the agents of discrete
actions.

- PPO and A2C: the feed-forward agents with the policy of `core/multi_discrete.py`, whose
  components are chosen independently given the state (the log-probability of an action is the
  sum of its components'). Everything else, GAE, the clipped surrogate, the critic, is the
  agents' own.
- The DQN family and PQN: action branching (Tavakoli et al. 2018; `QNet` with `nvec`): one
  Q-network with a branch of values per component, each component its branch's greedy choice,
  epsilon-greedy per component. The target is the reward plus the discounted mean over branches
  of their next values (DQN: the target network's max; Double DQN and D3QN: the target network's
  value of the online network's choice), and each branch's value of its own component is
  regressed on it. The replay buffer stores the K components of an action as a vector.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from xiaoyarl.agents.a2c import AgentDiscreteA2C
from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
from xiaoyarl.agents.ppo import AgentDiscretePPO
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.config import Config
from xiaoyarl.core.multi_discrete import ActorMultiDiscretePPO
from xiaoyarl.errors import ConfigError


class MultiDiscrete:
    """Mixed in before a discrete PPO-family agent: its actor is `ActorMultiDiscretePPO` over
    the env's `action_nvec`."""

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        assert spec.action_nvec is not None, "the registry picks this agent for such envs"
        self.actor_class: Any = functools.partial(ActorMultiDiscretePPO, nvec=spec.action_nvec)
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]


class Branching:
    """Mixed in before a DQN-family agent or PQN: its Q-network has a branch per component of
    the env's `action_nvec` (see the module)."""

    spec: Any
    device: torch.device
    qnet: Any
    qnet_class: Any

    @classmethod
    def check(cls, config: Config) -> None:
        super().check(config)  # type: ignore[misc]
        if config.critic_atoms:
            raise ConfigError(
                f"invalid config: critic_atoms={config.critic_atoms} (C51) with multi-discrete "
                f"actions: {config.algo} branches its Q-values per component, each an expected "
                f"value; remove critic_atoms."
            )

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        assert spec.action_nvec is not None, "the registry picks this agent for such envs"
        self.qnet_class = functools.partial(type(self).qnet_class, nvec=spec.action_nvec)
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]

    def buffer_sizes(self) -> tuple:
        capacity, n, s, _, _, max_step = super().buffer_sizes()  # type: ignore[misc]
        return capacity, n, s, len(self.spec.action_nvec), False, max_step  # K components

    def random_action(self, n: int) -> torch.Tensor:
        """Uniformly random actions `(n, K)`, each component among its own choices."""
        shape = (n, len(self.spec.action_nvec))
        return self.qnet.random_like(torch.zeros(shape, dtype=torch.long, device=self.device))


class AgentMultiDiscretePPO(MultiDiscrete, AgentDiscretePPO):
    """PPO for multi-discrete actions."""


class AgentMultiDiscreteA2C(MultiDiscrete, AgentDiscreteA2C):
    """A2C for multi-discrete actions."""


class AgentBranchingDQN(Branching, AgentDQN):
    """DQN for multi-discrete actions (action branching)."""


class AgentBranchingDoubleDQN(Branching, AgentDoubleDQN):
    """Double DQN for multi-discrete actions (action branching)."""


class AgentBranchingD3QN(Branching, AgentD3QN):
    """D3QN for multi-discrete actions (action branching, a dueling head per branch)."""


class AgentBranchingPQN(Branching, AgentPQN):
    """PQN for multi-discrete actions (action branching)."""


# the multi-discrete agent of each discrete one
MULTI_DISCRETE = {AgentDiscretePPO: AgentMultiDiscretePPO, AgentDiscreteA2C: AgentMultiDiscreteA2C,
                  AgentDQN: AgentBranchingDQN, AgentDoubleDQN: AgentBranchingDoubleDQN,
                  AgentD3QN: AgentBranchingD3QN, AgentPQN: AgentBranchingPQN}  # fmt: skip
