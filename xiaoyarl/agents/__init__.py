"""Agents by lower-case algorithm name: (continuous-action class, discrete-action class)."""

from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.ddpg import AgentDDPG
from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
from xiaoyarl.agents.multi import (  # noqa: E402 - after the single-agent agents they extend
    AgentDiscreteMAPPO,
    AgentMADDPG,
    AgentMADDPGDiscrete,
    AgentMAPPO,
    AgentMATD3,
    AgentMATD3Discrete,
    AgentQMIX,
    AgentVDN,
)
from xiaoyarl.agents.ppo import AgentA2C, AgentDiscreteA2C, AgentDiscretePPO, AgentPPO
from xiaoyarl.agents.redq import AgentREDQ
from xiaoyarl.agents.sac import AgentModSAC, AgentSAC, AgentSACDiscrete
from xiaoyarl.agents.td3 import AgentTD3
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec
from xiaoyarl.errors import ConfigError

# name -> (agent for continuous actions, agent for discrete actions); None where it has none.
ALGORITHMS: dict[str, tuple[type[AgentBase] | None, type[AgentBase] | None]] = {
    "ppo": (AgentPPO, AgentDiscretePPO),
    "a2c": (AgentA2C, AgentDiscreteA2C),
    "dqn": (None, AgentDQN),
    "double_dqn": (None, AgentDoubleDQN),
    "d3qn": (None, AgentD3QN),
    "ddpg": (AgentDDPG, None),
    "td3": (AgentTD3, None),
    "sac": (AgentSAC, None),
    "modsac": (AgentModSAC, None),
    "sac_discrete": (None, AgentSACDiscrete),
    "redq": (AgentREDQ, None),
    # multi-agent
    "vdn": (None, AgentVDN),
    "qmix": (None, AgentQMIX),
    "maddpg": (AgentMADDPG, AgentMADDPGDiscrete),
    "matd3": (AgentMATD3, AgentMATD3Discrete),
    "mappo": (AgentMAPPO, AgentDiscreteMAPPO),
}


def agent_class(algo: str, spec: EnvSpec | MultiAgentEnvSpec) -> type[AgentBase]:
    """The agent for `algo` that fits the env (single- or multi-agent, action space), or a
    ConfigError naming the algorithms that fit."""
    continuous, discrete = ALGORITHMS[algo]
    multi = isinstance(spec, MultiAgentEnvSpec)
    if (continuous or discrete).if_multi_agent != multi:
        fits = sorted(n for n, pair in ALGORITHMS.items()
                      if (pair[0] or pair[1]).if_multi_agent == multi)  # fmt: skip
        kind = "multi-agent" if multi else "single-agent"
        raise ConfigError(
            f"algorithm '{algo}' cannot train in {spec.name}, a {kind} env. Algorithms for "
            f"{kind} envs: {', '.join(fits)}."
        )
    chosen = discrete if spec.if_discrete else continuous
    if chosen is None:
        kind = "discrete" if spec.if_discrete else "continuous"
        fits = sorted(n for n, pair in ALGORITHMS.items() if pair[int(spec.if_discrete)])
        raise ConfigError(
            f"algorithm '{algo}' cannot act in {spec.name}, whose actions are {kind}. "
            f"Algorithms for {kind} actions: {', '.join(fits)}."
        )
    return chosen


__all__ = [
    "ALGORITHMS",
    "AgentDiscreteMAPPO",
    "AgentMADDPG",
    "AgentMADDPGDiscrete",
    "AgentMAPPO",
    "AgentMATD3",
    "AgentMATD3Discrete",
    "AgentQMIX",
    "AgentVDN",
    "AgentBase",
    "AgentA2C",
    "AgentD3QN",
    "AgentDDPG",
    "AgentDQN",
    "AgentDiscreteA2C",
    "AgentDiscretePPO",
    "AgentDoubleDQN",
    "AgentModSAC",
    "AgentPPO",
    "AgentREDQ",
    "AgentSAC",
    "AgentSACDiscrete",
    "AgentTD3",
    "agent_class",
]
