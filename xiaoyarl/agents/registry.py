"""The registry of agents by lower-case algorithm name, and `make_agent`, which builds one.

Importing it imports every agent (the CLI, the trainer and the config checks use it); an agent
module alone (`import xiaoyarl.agents.ppo`) loads only what that agent builds on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import torch

from xiaoyarl.agents.a2c import AgentA2C, AgentDiscreteA2C
from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.ddpg import AgentDDPG
from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
from xiaoyarl.agents.fast_td3 import AgentFastSAC, AgentFastTD3
from xiaoyarl.agents.hterm import HTerm
from xiaoyarl.agents.masked import MASKED
from xiaoyarl.agents.multi.centralized_critic import (
    AgentMADDPG,
    AgentMADDPGDiscrete,
    AgentMATD3,
    AgentMATD3Discrete,
)
from xiaoyarl.agents.multi.mappo import AgentDiscreteMAPPO, AgentMAPPO
from xiaoyarl.agents.multi.pqn_vdn import AgentPQNVDN
from xiaoyarl.agents.multi.value_decomposition import AgentQMIX, AgentVDN
from xiaoyarl.agents.multi_discrete import MULTI_DISCRETE
from xiaoyarl.agents.ppo import AgentDiscretePPO, AgentPPO
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.agents.recurrent import RECURRENT
from xiaoyarl.agents.redq import AgentREDQ
from xiaoyarl.agents.sac import AgentModSAC, AgentSAC, AgentSACDiscrete
from xiaoyarl.agents.td3 import AgentTD3
from xiaoyarl.core.optim import LeanKit
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.config import Config
    from xiaoyarl.envs.base import EnvSpec

# name -> (agent for continuous actions, agent for discrete actions); None where it has none.
ALGORITHMS: dict[str, tuple[type[AgentBase] | None, type[AgentBase] | None]] = {
    "ppo": (AgentPPO, AgentDiscretePPO),
    "a2c": (AgentA2C, AgentDiscreteA2C),
    "dqn": (None, AgentDQN),
    "double_dqn": (None, AgentDoubleDQN),
    "d3qn": (None, AgentD3QN),
    "pqn": (None, AgentPQN),
    "ddpg": (AgentDDPG, None),
    "td3": (AgentTD3, None),
    "sac": (AgentSAC, None),
    "modsac": (AgentModSAC, None),
    "sac_discrete": (None, AgentSACDiscrete),
    "redq": (AgentREDQ, None),
    "fast_td3": (AgentFastTD3, None),
    "fast_sac": (AgentFastSAC, None),
    # multi-agent
    "vdn": (None, AgentVDN),
    "qmix": (None, AgentQMIX),
    "pqn_vdn": (None, AgentPQNVDN),
    "maddpg": (AgentMADDPG, AgentMADDPGDiscrete),
    "matd3": (AgentMATD3, AgentMATD3Discrete),
    "mappo": (AgentMAPPO, AgentDiscreteMAPPO),
}


def _either(pair: tuple[type[AgentBase] | None, type[AgentBase] | None]) -> type[AgentBase]:
    """An algorithm's continuous-action agent, or its discrete-action one where it has none."""
    agent = pair[0] or pair[1]
    assert agent is not None, "every algorithm has an agent for one kind of action at least"
    return agent


def agent_class(algo: str, spec: EnvSpec | MultiAgentEnvSpec) -> type[AgentBase]:
    """The agent for `algo` that fits the env (single- or multi-agent, action space), or a
    ConfigError naming the algorithms that fit."""
    algorithms = ALGORITHMS
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
    """The agent of `algo` for the env of `spec` (`agent_class`), stepping xiaoyarl's lean
    optimizers (`core.optim.LeanKit`), with the auxiliary actor loss the config asks for plugged
    into a learner: the H-term (`h_term`, `agents/hterm.py`)."""
    # the class fits the spec (`agent_class`): a multi-agent agent takes a MultiAgentEnvSpec,
    # which type[AgentBase] (whose __init__ takes an EnvSpec) cannot say
    chosen = agent_class(algo, spec)
    nvec = getattr(spec, "action_nvec", None)  # multi-discrete actions (single-agent envs)
    if nvec is not None:
        chosen = _variant(algo, config, chosen, MULTI_DISCRETE, f"act in {spec.name}, whose "
                          f"actions are multi-discrete {list(nvec)}", "ppo and a2c")  # fmt: skip
    if getattr(spec, "action_mask", False):  # the env says which actions are allowed
        chosen = _variant(algo, config, chosen, MASKED, f"honour the action masks of "
                          f"{spec.name}", "ppo, a2c, dqn, double_dqn and d3qn")  # fmt: skip
    if config.recurrent:  # the same agent with a recurrent policy (ppo, a2c)
        chosen = RECURRENT[chosen]  # type: ignore[index]
    build = cast("Callable[..., AgentBase]", chosen)
    agent = build(spec, config, device, learner, LeanKit())
    if config.h_term and learner:
        agent.auxiliary = HTerm(config, device)
    return agent


def _variant(algo: str, config: Config, chosen: type, table: dict, what: str, fits: str) -> type:
    """The agent `table` gives for `chosen` (its multi-discrete or masked variant), or a
    ConfigError saying that `algo` cannot `what` and which algorithms can."""
    if chosen not in table or config.recurrent:
        recurrent = " with recurrent" if config.recurrent else ""
        raise ConfigError(f"algorithm '{algo}'{recurrent} cannot {what}; {fits} can "
                          f"(feed-forward).")  # fmt: skip
    return table[chosen]
