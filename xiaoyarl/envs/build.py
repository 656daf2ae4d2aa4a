"""A run's env, built from its config whatever its kind (`build_env`: single- or multi-agent),
and the check of the observations it returns (`check_state`)."""

from __future__ import annotations

import torch

from xiaoyarl.config import Config
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec, MultiAgentVecEnv
from xiaoyarl.envs.multi.registry import is_multi_agent, make_multi_agent_env
from xiaoyarl.envs.registry import make_env
from xiaoyarl.errors import EnvError


def build_env(config: Config, num_envs: int, device: torch.device, backend: str, seed: int,
              evaluation: bool = False) -> VecEnv | MultiAgentVecEnv:  # fmt: skip
    """The run's env (or, `evaluation`, an env to evaluate on) of `num_envs` sub-envs: single- or
    multi-agent."""
    if is_multi_agent(config.env_id):
        return make_multi_agent_env(config.env_id, num_envs, device, seed, config.env_kwargs)
    return make_env(config.env_id, num_envs, device, backend, seed, config.vector_mode,
                    config.env_kwargs, evaluation)  # fmt: skip


def check_state(state: torch.Tensor, spec: EnvSpec | MultiAgentEnvSpec, where: str) -> None:
    """Reject an observation batch with the wrong shape or non-finite values, naming the env."""
    expected: tuple[int, ...] = (spec.num_envs, spec.state_dim)
    if isinstance(spec, EnvSpec):
        expected = (spec.num_envs, *spec.obs_shape)
    if isinstance(spec, MultiAgentEnvSpec):
        expected = (spec.num_envs, spec.num_agents, spec.obs_dim)
    if tuple(state.shape) != expected:
        raise EnvError(
            f"env {spec.name} returned observations of shape {tuple(state.shape)} on {where}, "
            f"expected {expected}; check the env's observation_space against what it returns."
        )
    if state.is_floating_point() and not torch.isfinite(state).all():
        raise EnvError(
            f"env {spec.name} returned NaN or infinite observations on {where}; fix the env "
            f"or wrap it so it returns finite values."
        )
