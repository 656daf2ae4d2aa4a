"""Agents by lower-case algorithm name: (continuous-action class, discrete-action class).

Names load on first use (PEP 562): `import xiaoyarl.agents.ppo` loads PPO and what it builds
on, not every agent; `ALGORITHMS` (and so `agent_class`) imports them all when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from xiaoyarl.errors import ConfigError
from xiaoyarl.lazy import lazy_attributes

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from xiaoyarl.agents.base import AgentBase
    from xiaoyarl.agents.ddpg import AgentDDPG
    from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
    from xiaoyarl.agents.multi import (
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
    from xiaoyarl.config import Config
    from xiaoyarl.envs.base import EnvSpec
    from xiaoyarl.envs.multi.base import MultiAgentEnvSpec

# name -> (agent for continuous actions, agent for discrete actions); None where it has none.
# Built by `_algorithms()` on first access.
ALGORITHMS: dict[str, tuple[type[AgentBase] | None, type[AgentBase] | None]]

# public name -> the module that defines it
_MODULES = {
    "AgentBase": "xiaoyarl.agents.base",
    "AgentDDPG": "xiaoyarl.agents.ddpg",
    "AgentD3QN": "xiaoyarl.agents.dqn",
    "AgentDoubleDQN": "xiaoyarl.agents.dqn",
    "AgentDQN": "xiaoyarl.agents.dqn",
    "AgentDiscreteMAPPO": "xiaoyarl.agents.multi.mappo",
    "AgentMADDPG": "xiaoyarl.agents.multi.centralized_critic",
    "AgentMADDPGDiscrete": "xiaoyarl.agents.multi.centralized_critic",
    "AgentMAPPO": "xiaoyarl.agents.multi.mappo",
    "AgentMATD3": "xiaoyarl.agents.multi.centralized_critic",
    "AgentMATD3Discrete": "xiaoyarl.agents.multi.centralized_critic",
    "AgentQMIX": "xiaoyarl.agents.multi.value_decomposition",
    "AgentVDN": "xiaoyarl.agents.multi.value_decomposition",
    "AgentA2C": "xiaoyarl.agents.ppo",
    "AgentDiscreteA2C": "xiaoyarl.agents.ppo",
    "AgentDiscretePPO": "xiaoyarl.agents.ppo",
    "AgentPPO": "xiaoyarl.agents.ppo",
    "AgentREDQ": "xiaoyarl.agents.redq",
    "AgentModSAC": "xiaoyarl.agents.sac",
    "AgentSAC": "xiaoyarl.agents.sac",
    "AgentSACDiscrete": "xiaoyarl.agents.sac",
    "AgentTD3": "xiaoyarl.agents.td3",
}


def _algorithms() -> dict[str, tuple[type[AgentBase] | None, type[AgentBase] | None]]:
    """ALGORITHMS, built on first use (it imports every agent) and kept as a module attribute."""
    if "ALGORITHMS" not in globals():
        from xiaoyarl.agents.ddpg import AgentDDPG
        from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
        from xiaoyarl.agents.multi.centralized_critic import (
            AgentMADDPG,
            AgentMADDPGDiscrete,
            AgentMATD3,
            AgentMATD3Discrete,
        )
        from xiaoyarl.agents.multi.mappo import AgentDiscreteMAPPO, AgentMAPPO
        from xiaoyarl.agents.multi.value_decomposition import AgentQMIX, AgentVDN
        from xiaoyarl.agents.ppo import AgentA2C, AgentDiscreteA2C, AgentDiscretePPO, AgentPPO
        from xiaoyarl.agents.redq import AgentREDQ
        from xiaoyarl.agents.sac import AgentModSAC, AgentSAC, AgentSACDiscrete
        from xiaoyarl.agents.td3 import AgentTD3

        globals()["ALGORITHMS"] = {
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
    return globals()["ALGORITHMS"]


def _either(pair: tuple[type[AgentBase] | None, type[AgentBase] | None]) -> type[AgentBase]:
    """An algorithm's continuous-action agent, or its discrete-action one where it has none."""
    agent = pair[0] or pair[1]
    assert agent is not None, "every algorithm has an agent for one kind of action at least"
    return agent


def agent_class(algo: str, spec: EnvSpec | MultiAgentEnvSpec) -> type[AgentBase]:
    """The agent for `algo` that fits the env (single- or multi-agent, action space), or a
    ConfigError naming the algorithms that fit."""
    from xiaoyarl.envs.multi.base import MultiAgentEnvSpec  # loaded with the registry's agents

    algorithms = _algorithms()
    continuous, discrete = algorithms[algo]
    multi = isinstance(spec, MultiAgentEnvSpec)
    if _either((continuous, discrete)).if_multi_agent != multi:
        fits = sorted(n for n, pair in algorithms.items()
                      if _either(pair).if_multi_agent == multi)  # fmt: skip
        kind = "multi-agent" if multi else "single-agent"
        raise ConfigError(
            f"algorithm '{algo}' cannot train in {spec.name}, a {kind} env. Algorithms for "
            f"{kind} envs: {', '.join(fits)}."
        )
    chosen = discrete if spec.if_discrete else continuous
    if chosen is None:
        kind = "discrete" if spec.if_discrete else "continuous"
        fits = sorted(n for n, pair in algorithms.items() if pair[int(spec.if_discrete)])
        raise ConfigError(
            f"algorithm '{algo}' cannot act in {spec.name}, whose actions are {kind}. "
            f"Algorithms for {kind} actions: {', '.join(fits)}."
        )
    return chosen


def make_agent(
    algo: str,
    spec: EnvSpec | MultiAgentEnvSpec,
    config: Config,
    device: torch.device,
    learner: bool = True,
) -> AgentBase:
    """The agent of `algo` for the env of `spec` (`agent_class`), with the auxiliary actor loss
    the config asks for plugged into a learner: the H-term (`h_term`, `agents/hterm.py`)."""
    # the class fits the spec (`agent_class`): a multi-agent agent takes a MultiAgentEnvSpec,
    # which type[AgentBase] (whose __init__ takes an EnvSpec) cannot say
    build = cast("Callable[..., AgentBase]", agent_class(algo, spec))
    agent = build(spec, config, device, learner)
    if config.h_term and learner:
        from xiaoyarl.agents.hterm import HTerm  # only runs with the H-term load it

        agent.auxiliary = HTerm(config, device)
    return agent


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
    "make_agent",
]


__getattr__, __dir__ = lazy_attributes(globals(), {**_MODULES, "ALGORITHMS": _algorithms})
