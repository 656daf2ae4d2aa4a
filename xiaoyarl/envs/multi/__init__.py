"""Multi-agent environments: `make_multi_agent_env` builds a `MultiAgentVecEnv`.

Ids are either a built-in torch-native env (`MULTI_AGENT_ENVS`: cooperative navigation as in
mpe2's `simple_spread_v3`, QMIX's two-step game) or a PettingZoo parallel env named
`"module:env_fn"` (e.g. `"mpe2:simple_spread_v3"`), adapted by `PettingZooVecEnv`. A
PettingZoo id names a Python attribute (`env_fn` is a dotted identifier), which tells it apart
from a single-agent gymnasium id `"module:Env-v0"` (whose name has a `-vN` version).

The contract (shapes, auto-reset, masks, team return) is in `envs/multi/base.py` and
`docs/multi_agent.md`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xiaoyarl.errors import EnvError
from xiaoyarl.lazy import lazy_attributes

if TYPE_CHECKING:
    import torch

    from xiaoyarl.envs.multi.base import (
        MultiAgentEnvSpec,
        MultiAgentVecEnv,
        TorchMultiAgentVecEnv,
        team_reward,
    )
    from xiaoyarl.envs.multi.spread import SpreadContinuousEnv, SpreadDiscreteEnv, SpreadEnv
    from xiaoyarl.envs.multi.two_step import TwoStepGameEnv

# Torch-native multi-agent envs by id. Built by `_multi_agent_envs()` on first access.
MULTI_AGENT_ENVS: dict[str, type[TorchMultiAgentVecEnv]]

# public name -> the module that defines it
_MODULES = {
    "MultiAgentEnvSpec": "xiaoyarl.envs.multi.base",
    "MultiAgentVecEnv": "xiaoyarl.envs.multi.base",
    "TorchMultiAgentVecEnv": "xiaoyarl.envs.multi.base",
    "team_reward": "xiaoyarl.envs.multi.base",
    "SpreadContinuousEnv": "xiaoyarl.envs.multi.spread",
    "SpreadDiscreteEnv": "xiaoyarl.envs.multi.spread",
    "SpreadEnv": "xiaoyarl.envs.multi.spread",
    "TwoStepGameEnv": "xiaoyarl.envs.multi.two_step",
}


def _multi_agent_envs() -> dict[str, type[TorchMultiAgentVecEnv]]:
    """MULTI_AGENT_ENVS, built on first use (it imports every torch-native multi-agent env)."""
    if "MULTI_AGENT_ENVS" not in globals():
        from xiaoyarl.envs.multi.spread import SpreadContinuousEnv, SpreadDiscreteEnv
        from xiaoyarl.envs.multi.two_step import TwoStepGameEnv

        globals()["MULTI_AGENT_ENVS"] = {
            "SpreadDiscrete-v0": SpreadDiscreteEnv,
            "SpreadContinuous-v0": SpreadContinuousEnv,
            "TwoStepGame-v0": TwoStepGameEnv,
        }
    return globals()["MULTI_AGENT_ENVS"]


def is_pettingzoo_id(env_id: str) -> bool:
    """Whether `env_id` has the form of a PettingZoo id, `"module:env_fn"` (both dotted
    Python identifiers), as opposed to a gymnasium `"module:Env-v0"`."""
    if env_id.count(":") != 1:
        return False
    module, attr = env_id.split(":")
    return all(part.isidentifier() for part in (*module.split("."), *attr.split(".")))


def is_multi_agent(env_id: str) -> bool:
    """Whether `env_id` names a multi-agent env: a built-in id or a PettingZoo `module:env_fn`."""
    return env_id in _multi_agent_envs() or is_pettingzoo_id(env_id)


def make_multi_agent_env(
    env_id: str,
    num_envs: int = 1,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    env_kwargs: dict | None = None,
) -> MultiAgentVecEnv:
    """A multi-agent vectorized env of `num_envs` sub-envs on `device`.

    env_kwargs: keyword arguments of the torch-native env's constructor (e.g.
    `{"num_agents": 4, "local_ratio": 0.0}` for the spread envs), or of the PettingZoo
    `parallel_env` function (plus `max_episode_steps`, a time limit the adapter enforces).
    """
    kwargs = dict(env_kwargs or {})
    multi_agent_envs = _multi_agent_envs()
    if env_id in multi_agent_envs:
        cls = multi_agent_envs[env_id]
        try:
            return cls(num_envs, device=device, seed=seed, **kwargs)
        except TypeError as e:
            raise EnvError(
                f"cannot create '{env_id}' with env_kwargs {kwargs}: {e}. See the docstring of "
                f"{cls.__module__}.{cls.__name__} for its keyword arguments."
            ) from e
    if is_pettingzoo_id(env_id):
        from xiaoyarl.envs.multi.pettingzoo import PettingZooVecEnv

        return PettingZooVecEnv(env_id, num_envs, device=device, seed=seed, env_kwargs=kwargs)
    hint = ""
    if ":" in env_id or "-v" in env_id:
        hint = (
            " If it is a single-agent gymnasium env, use xiaoyarl.envs.make_env instead; a "
            "PettingZoo env is named 'module:env_fn' without a '-vN' version."
        )
    raise EnvError(
        f"unknown multi-agent environment '{env_id}'. Built-in multi-agent envs: "
        f"{', '.join(multi_agent_envs)}; any PettingZoo parallel env is named 'module:env_fn', "
        f"e.g. 'mpe2:simple_spread_v3'.{hint}"
    )


__all__ = [
    "MULTI_AGENT_ENVS",
    "MultiAgentEnvSpec",
    "MultiAgentVecEnv",
    "SpreadContinuousEnv",
    "SpreadDiscreteEnv",
    "SpreadEnv",
    "TorchMultiAgentVecEnv",
    "TwoStepGameEnv",
    "is_multi_agent",
    "is_pettingzoo_id",
    "make_multi_agent_env",
    "team_reward",
]


__getattr__, __dir__ = lazy_attributes(
    globals(), {**_MODULES, "MULTI_AGENT_ENVS": _multi_agent_envs}
)
