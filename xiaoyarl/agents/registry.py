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
from xiaoyarl.agents.combined import RECURRENT_COMBINED
from xiaoyarl.agents.ddpg import AgentDDPG
from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
from xiaoyarl.agents.dreamerv3 import AgentDreamerV3, AgentDreamerV3Discrete
from xiaoyarl.agents.fast_td3 import AgentFastSAC, AgentFastTD3
from xiaoyarl.agents.hterm import HTerm
from xiaoyarl.agents.hybrid import HYBRID
from xiaoyarl.agents.masked import MASKED
from xiaoyarl.agents.multi.centralized_critic import (
    AgentMADDPG,
    AgentMADDPGDiscrete,
    AgentMATD3,
    AgentMATD3Discrete,
)
from xiaoyarl.agents.multi.mappo import AgentDiscreteMAPPO, AgentMAPPO
from xiaoyarl.agents.multi.pqn_vdn import AgentPQNVDN
from xiaoyarl.agents.multi.recurrent_critic import RECURRENT_CRITICS
from xiaoyarl.agents.multi.recurrent_decomposition import RECURRENT_AGENTS
from xiaoyarl.agents.multi.recurrent_on_policy import RECURRENT_ON_POLICY
from xiaoyarl.agents.multi.value_decomposition import AgentQMIX, AgentVDN
from xiaoyarl.agents.multi_discrete import MULTI_DISCRETE
from xiaoyarl.agents.ppo import AgentDiscretePPO, AgentPPO
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.agents.recurrent import RECURRENT
from xiaoyarl.agents.recurrent_replay import RECURRENT_REPLAY
from xiaoyarl.agents.redq import AgentREDQ
from xiaoyarl.agents.sac import AgentModSAC, AgentSAC, AgentSACDiscrete
from xiaoyarl.agents.td3 import AgentTD3
from xiaoyarl.agents.tdmpc2 import AgentTDMPC2
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
    "tdmpc2": (AgentTDMPC2, None),
    "dreamerv3": (AgentDreamerV3, AgentDreamerV3Discrete),
    # multi-agent
    "vdn": (None, AgentVDN),
    "qmix": (None, AgentQMIX),
    "pqn_vdn": (None, AgentPQNVDN),
    "maddpg": (AgentMADDPG, AgentMADDPGDiscrete),
    "matd3": (AgentMATD3, AgentMATD3Discrete),
    "mappo": (AgentMAPPO, AgentDiscreteMAPPO),
}


HYBRID_KIND = "hybrid (discrete and continuous parts)"  # how a refusal names hybrid actions

# the recurrent variant of each agent that has one (`recurrent`)
RECURRENT_VARIANTS: dict[type, type] = {
    base: variant
    for table in (
        RECURRENT,
        RECURRENT_REPLAY,
        RECURRENT_COMBINED,
        RECURRENT_AGENTS,
        RECURRENT_CRITICS,
        RECURRENT_ON_POLICY,
    )
    for base, variant in table.items()
}


def _either(pair: tuple[type[AgentBase] | None, type[AgentBase] | None]) -> type[AgentBase]:
    """An algorithm's continuous-action agent, or its discrete-action one where it has none."""
    agent = pair[0] or pair[1]
    assert agent is not None, "every algorithm has an agent for one kind of action at least"
    return agent


def agent_class(
    algo: str, spec: EnvSpec | MultiAgentEnvSpec, config: Config | None = None
) -> type[AgentBase]:
    """The agent class `make_agent` builds for `algo` in the env of `spec` (with `config`'s
    recurrent policy, where given), or a ConfigError saying why it cannot and naming the
    algorithms that can there (`algorithms_for`)."""
    try:
        return _resolve(algo, spec, config)
    except _Unfit as unfit:
        fits = algorithms_for(spec, config)
        can = f"Algorithms that can: {', '.join(fits)}." if fits else "No algorithm can."
        if not fits and config is not None and config.recurrent:
            fits = algorithms_for(spec)
            can = f"No algorithm can with a recurrent policy; feed-forward: {', '.join(fits)}."
        raise ConfigError(f"algorithm '{algo}' cannot {unfit}. {can}") from None


def algorithms_for(spec: EnvSpec | MultiAgentEnvSpec, config: Config | None = None) -> list[str]:
    """The algorithms whose agents take the env of `spec` (and `config`'s recurrent policy)."""
    fits = []
    for name in ALGORITHMS:
        try:
            _resolve(name, spec, config)
        except _Unfit:
            continue
        fits.append(name)
    return sorted(fits)


class _Unfit(Exception):
    """What an algorithm cannot do in an env (a phrase after "cannot")."""


def _resolve(
    algo: str, spec: EnvSpec | MultiAgentEnvSpec, config: Config | None
) -> type[AgentBase]:
    """The agent class for `algo` in the env of `spec`, or `_Unfit` saying why there is none."""
    continuous, discrete = ALGORITHMS[algo]
    multi = isinstance(spec, MultiAgentEnvSpec)
    if _either((continuous, discrete)).if_multi_agent != multi:
        raise _Unfit(f"train in {spec.name}, a {'multi' if multi else 'single'}-agent env")
    chosen = discrete if spec.if_discrete else continuous
    hybrid = bool(getattr(spec, "if_hybrid", False))  # discrete and continuous parts
    kind = "discrete" if spec.if_discrete else HYBRID_KIND if hybrid else "continuous"
    if chosen is None:
        why = _either((continuous, discrete)).action_reason
        raise _Unfit(f"act in {spec.name}, whose actions are {kind}{': ' + why if why else ''}")
    nvec = getattr(spec, "action_nvec", None)  # multi-discrete actions (single-agent envs)
    asked = "train"  # what the env asks of the agent beyond the plain one
    if hybrid:
        asked = f"act in {spec.name}, whose actions are {kind}"
        chosen = _variant(chosen, HYBRID, asked, chosen.hybrid_reason)
    elif nvec is not None:
        asked = f"act in {spec.name}, whose actions are multi-discrete {list(nvec)}"
        chosen = _variant(chosen, MULTI_DISCRETE, asked,
                          getattr(chosen, "multi_discrete_reason", ""))  # fmt: skip
    if getattr(spec, "action_mask", False):  # the env says which actions are allowed
        asked = f"honour the action masks of {spec.name}"
        chosen = _variant(chosen, MASKED, asked)
    if config is not None and config.recurrent:  # the same agent with a recurrent policy
        if chosen not in RECURRENT_VARIANTS:
            raise _Unfit(f"{asked} with a recurrent policy")
        chosen = RECURRENT_VARIANTS[chosen]
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
    chosen = agent_class(algo, spec, config)
    build = cast("Callable[..., AgentBase]", chosen)
    agent = build(spec, config, device, learner, LeanKit())
    if config.h_term and learner:
        agent.auxiliary = HTerm(config, device)
    return agent


def _variant(chosen: type, table: dict, what: str, why: str = "") -> type:
    """The agent `table` gives for `chosen` (its multi-discrete, hybrid or masked variant), or
    `_Unfit` saying what it cannot do and `why`, where the algorithm says."""
    if chosen not in table:
        raise _Unfit(f"{what}{': ' + why if why else ''}")
    return table[chosen]
