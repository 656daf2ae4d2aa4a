"""Registers the torch-native envs with gymnasium as `xiaoyarl/<EnvId>` (at `import xiaoyarl`):
`gymnasium.make_vec("xiaoyarl/CartPole-v1", num_envs=4096)` gives a `TorchGymVectorEnv`
(`envs/gym_vector.py`), `gymnasium.make` gymnasium's own env of the same task.

Registering loads no simulator, so that `import xiaoyarl` stays light: each env's time limit and
target return are listed here (a test checks them against the envs' classes), and the
simulator's module loads when gymnasium makes one.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import gymnasium

NAMESPACE = "xiaoyarl"

# env id -> (time limit `max_step`, `target_return`), as the torch-native env's class sets them
TORCH_ENV_LIMITS = {
    "CartPole-v1": (500, 475.0),
    "CartPoleNoVelocity-v1": (500, 475.0),
    "Pendulum-v1": (200, -200.0),
    "PendulumNoVelocity-v1": (200, -200.0),
    "Acrobot-v1": (500, -100.0),
    "MountainCarContinuous-v0": (999, 90.0),
    "Chase-v0": (1024, 6.3),
}


def make_vector_env(env_id: str, num_envs: int = 1, **kwargs: Any) -> Any:
    """What `gymnasium.make_vec("xiaoyarl/<env_id>", num_envs, **kwargs)` calls."""
    gym_vector = importlib.import_module("xiaoyarl.envs.gym_vector")
    return gym_vector.TorchGymVectorEnv(env_id, num_envs=num_envs, **kwargs)


def register_torch_envs() -> None:
    """Register every torch-native env as `xiaoyarl/<EnvId>` in gymnasium (idempotent)."""
    for env_id, (max_step, target_return) in TORCH_ENV_LIMITS.items():
        vec_id = f"{NAMESPACE}/{env_id}"
        if vec_id in gymnasium.registry:
            continue
        own = gymnasium.registry.get(env_id)  # gymnasium's single env of the same task
        gymnasium.register(
            vec_id,
            entry_point=None if own is None else own.entry_point,
            vector_entry_point=functools.partial(make_vector_env, env_id),
            max_episode_steps=max_step,
            reward_threshold=target_return,
        )
