"""An agent's training state as plain data (`AgentBase.state_dict` and its inverse): what a
checkpoint holds of it, and the part that belongs to its own sub-envs. Loaded where a run keeps
its state, not by an agent that only trains (the hello world)."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from xiaoyarl.agents import protocols


class AgentState(Protocol):
    """What of an agent (`AgentBase`) its training state is made of."""

    nets: dict[str, nn.Module]
    optimizers: dict[str, protocols.Optimizer | None]
    last_state: torch.Tensor | None
    explored: int
    updates: int
    auxiliary: protocols.AuxiliaryLoss | None
    update_runner: protocols.UpdateRunner
    device: torch.device


# optimizer settings that belong to the process that steps, not to the saved run
PROCESS_SETTINGS = ("capturable",)


def training_state(agent: AgentState) -> dict:
    """`agent.state_dict()` of `AgentBase`: networks, optimizers, where exploring resumes, the
    counters and the auxiliary loss's state."""
    return {
        "nets": {name: net.state_dict() for name, net in agent.nets.items()},
        "optimizers": {name: _saved(opt) for name, opt in _optimizers(agent).items()},
        "last_state": agent.last_state,
        "counters": {"explored": agent.explored, "updates": agent.updates},
        **_auxiliary_state(agent),
    }


def load_training_state(agent: AgentState, state: dict) -> None:
    """Restore what `training_state` returned into `agent`."""
    for name, net in agent.nets.items():
        net.load_state_dict(state["nets"][name])
    for name, opt in _optimizers(agent).items():
        # how this process steps (e.g. capturable) is its own, not the saved run's
        settings = [{k: g[k] for k in PROCESS_SETTINGS if k in g} for g in opt.param_groups]
        rates = [g["lr"] for g in opt.param_groups]
        opt.load_state_dict(state["optimizers"][name])
        for group, own, rate in zip(opt.param_groups, settings, rates, strict=True):
            group.update(own)
            if isinstance(rate, torch.Tensor):  # a captured update reads this tensor
                group["lr"] = rate.fill_(float(group["lr"]))
    agent.update_runner.reset()  # new optimizer state tensors
    load_sub_env_state(agent, state)
    agent.explored = state["counters"]["explored"]
    agent.updates = state["counters"]["updates"]


def sub_env_state(agent: AgentState) -> dict:
    """`agent.sub_env_state()` of `AgentBase`: the last observation of each sub-env and the
    auxiliary loss's state."""
    return {"last_state": agent.last_state, **_auxiliary_state(agent)}


def load_sub_env_state(agent: AgentState, state: dict) -> None:
    """Restore what `sub_env_state` returned into `agent`."""
    last = state["last_state"]
    agent.last_state = None if last is None else last.to(agent.device)
    if agent.auxiliary is not None and state.get(agent.auxiliary.name) is not None:
        agent.auxiliary.load_state_dict(state[agent.auxiliary.name])


def _saved(optimizer: protocols.Optimizer) -> dict:
    """`optimizer.state_dict()`, its learning rates as numbers: a process that captures its
    updates holds them as tensors on its device (`core/graphs.py`), which are its own."""
    state = optimizer.state_dict()
    for group in state["param_groups"]:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"] = group["lr"].item()
    return state


def _optimizers(agent: AgentState) -> dict[str, protocols.Optimizer]:
    """`agent.optimizers`, of a learner: an acting-only copy has none, and no training state."""
    optimizers = {name: opt for name, opt in agent.optimizers.items() if opt is not None}
    assert len(optimizers) == len(agent.optimizers), "an acting-only copy has no optimizers"
    return optimizers


def _auxiliary_state(agent: AgentState) -> dict:
    if agent.auxiliary is None:
        return {}
    return {agent.auxiliary.name: agent.auxiliary.state_dict()}
