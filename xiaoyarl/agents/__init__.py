"""Agents by lower-case algorithm name: (continuous-action class, discrete-action class)."""

from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.ppo import AgentA2C, AgentDiscreteA2C, AgentDiscretePPO, AgentPPO

# name -> (agent for continuous actions, agent for discrete actions); None where it has none.
ALGORITHMS: dict[str, tuple[type[AgentBase] | None, type[AgentBase] | None]] = {
    "ppo": (AgentPPO, AgentDiscretePPO),
    "a2c": (AgentA2C, AgentDiscreteA2C),
}

__all__ = [
    "ALGORITHMS",
    "AgentBase",
    "AgentPPO",
    "AgentDiscretePPO",
    "AgentA2C",
    "AgentDiscreteA2C",
]
