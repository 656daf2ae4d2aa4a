"""`make_multi_agent_env`: the multi-agent env of an id, a built-in torch-native one or a
PettingZoo parallel env (see the package's docstring)."""

from __future__ import annotations

import torch

from xiaoyarl.envs.multi.base import MultiAgentVecEnv, TorchMultiAgentVecEnv
from xiaoyarl.envs.multi.spread import SpreadContinuousEnv, SpreadDiscreteEnv
from xiaoyarl.envs.multi.two_step import TwoStepGameEnv
from xiaoyarl.errors import EnvError

# Torch-native multi-agent envs by id.
MULTI_AGENT_ENVS: dict[str, type[TorchMultiAgentVecEnv]] = {
    "SpreadDiscrete-v0": SpreadDiscreteEnv,
    "SpreadContinuous-v0": SpreadContinuousEnv,
    "TwoStepGame-v0": TwoStepGameEnv,
}


def is_pettingzoo_id(env_id: str) -> bool:
    """Whether `env_id` has the form of a PettingZoo id, `"module:env_fn"` (both dotted
    Python identifiers), as opposed to a gymnasium `"module:Env-v0"`."""
    if env_id.count(":") != 1:
        return False
    module, attr = env_id.split(":")
    return all(part.isidentifier() for part in (*module.split("."), *attr.split(".")))


def is_multi_agent(env_id: str) -> bool:
    """Whether `env_id` names a multi-agent env: a built-in id or a PettingZoo `module:env_fn`."""
    return env_id in MULTI_AGENT_ENVS or is_pettingzoo_id(env_id)


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
    multi_agent_envs = MULTI_AGENT_ENVS
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
