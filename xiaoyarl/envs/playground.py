"""`PlaygroundVecEnv`: MuJoCo Playground's MJX tasks (JAX) behind the `VecEnv` contract.

`backend="playground"` (optional: `pip install -e '.[playground]'`) runs a MuJoCo Playground task
(`CartpoleBalance`, `CheetahRun`, `Go1JoystickFlatTerrain`, ...; `mujoco_playground.registry`)
as one jitted JAX function that steps every sub-env at once, vmapped, on the device that
matches the torch device (a GPU for `cuda:N`, the CPU for `cpu`). Observations, rewards and
flags reach torch through DLPack, so they stay in the simulator's memory (no host copy); actions
go back the same way.

Playground envs neither end episodes at a time limit nor reset themselves. Here the step counts
steps per sub-env, truncates at the task's `episode_length`, and resets the finished sub-envs
inside the same jitted call with fresh random keys (skipped, by a `lax.cond`, when none ended),
so `info["final_state"]` holds each ended episode's last observation as in every `VecEnv`.

- Actions are in [-1, 1], as Playground's tasks take them (its trainers squash with tanh).
- Tasks whose observation is a dict (the locomotion tasks: `state` for the policy,
  `privileged_state` for an asymmetric critic) give the agent the `state` entry.
- `env_kwargs` override the task's config (`registry.get_default_config(env_id)`), e.g.
  `{impl: jax}` for MJX's JAX implementation instead of its Warp one, or `{episode_length: 500}`.
- The first step of a new shape compiles (tens of seconds on a CPU); compiled functions are
  shared by envs of the same task, config, size and device.
- On a GPU, JAX would take most of the GPU's memory up front; unless the environment says
  otherwise, this module turns that off (`XLA_PYTHON_CLIENT_PREALLOCATE=false`) before JAX loads.
- `state_dict` holds the whole batched simulator state, so a resumed run continues exactly.
"""

from __future__ import annotations

import functools
import json
import math
import os
from typing import Any

import numpy as np
import torch

from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.errors import EnvError

INSTALL = "pip install -e '.[playground]' (and pip install 'jax[cuda12]' for a GPU)"


def _import() -> tuple[Any, Any]:
    """(jax, mujoco_playground.registry), or a clear error."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
        from mujoco_playground import registry
    except ImportError as e:
        raise EnvError(
            f"backend 'playground' needs MuJoCo Playground and JAX ({e}): {INSTALL}."
        ) from None
    return jax, registry


def _jax_device(jax: Any, device: torch.device) -> Any:
    """The JAX device that holds the same memory as the torch `device`."""
    if device.type == "cpu":
        return jax.devices("cpu")[0]
    if device.type != "cuda":
        raise EnvError(f"backend 'playground' runs on 'cpu' or 'cuda', not on '{device}'.")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index >= len(gpus):
        raise EnvError(
            f"torch device {device} has no JAX GPU beside it (JAX sees {len(gpus)} GPU(s)); "
            f"install JAX with CUDA (pip install 'jax[cuda12]') or use device cpu."
        )
    return gpus[index]


def _obs_width(observation_size: Any, env_id: str) -> int:
    """The flat width of the observation the agent sees (a dict's `state` entry)."""
    if isinstance(observation_size, dict):
        if "state" not in observation_size:
            raise EnvError(
                f"{env_id}: its observation is a dict without a 'state' entry "
                f"({', '.join(observation_size)}); xiaoyarl learns from one flat vector."
            )
        observation_size = observation_size["state"]
    if isinstance(observation_size, int):
        return observation_size
    if len(observation_size) != 1:
        raise EnvError(
            f"{env_id}: observations of shape {tuple(observation_size)} are images or "
            f"matrices; xiaoyarl learns from one flat vector (set vision off in env_kwargs)."
        )
    return int(math.prod(observation_size))


@functools.lru_cache(maxsize=16)
def _compiled(env_id: str, overrides: str, num_envs: int, jax_device: Any) -> tuple:
    """(env, jitted reset, jitted step, reset's output shapes, episode length) for one task,
    config overrides (as JSON, so that nested values can be a cache key), size and device."""
    jax, registry = _import()
    import jax.numpy as jnp

    config = registry.get_default_config(env_id)
    config.update(json.loads(overrides))
    env = registry.load(env_id, config=config)
    limit = int(config.episode_length)
    vreset, vstep = jax.vmap(env.reset), jax.vmap(env.step)

    def observe(state: Any) -> Any:
        obs = state.obs["state"] if isinstance(state.obs, dict) else state.obs
        return obs.reshape(num_envs, -1).astype(jnp.float32)

    def reset(key: Any) -> tuple:
        key, sub = jax.random.split(key)
        state = vreset(jax.random.split(sub, num_envs))
        # a task's reset may build leaves from Python numbers (weakly typed) that its step
        # returns strongly typed; typed alike, the step compiles once instead of twice
        state = jax.tree.map(lambda x: x.astype(x.dtype), state)
        return key, state, jnp.zeros(num_envs, jnp.int32), observe(state)

    def step(key: Any, state: Any, elapsed: Any, action: Any) -> tuple:
        state = vstep(state, jnp.clip(action.astype(jnp.float32), -1.0, 1.0))
        elapsed = elapsed + 1
        final_obs = observe(state)
        terminated = state.done > 0
        truncated = (elapsed >= limit) & ~terminated
        ended = terminated | truncated
        key, sub = jax.random.split(key)

        def restart(state: Any) -> Any:  # fresh episodes where one ended, the rest unchanged
            fresh = vreset(jax.random.split(sub, num_envs))

            def pick(new: Any, old: Any) -> Any:
                if old.ndim == 0 or old.shape[0] != num_envs:  # not per sub-env (MJX-Warp)
                    return old
                return jnp.where(ended.reshape((num_envs,) + (1,) * (old.ndim - 1)), new, old)

            return jax.tree.map(pick, fresh, state)

        reward = state.reward.astype(jnp.float32)
        state = jax.lax.cond(ended.any(), restart, lambda s: s, state)
        elapsed = jnp.where(ended, 0, elapsed)
        return key, state, elapsed, observe(state), reward, terminated, truncated, final_obs

    donate = (1,) if jax_device.platform == "gpu" else ()  # the CPU cannot donate buffers
    shapes = jax.eval_shape(reset, jax.random.PRNGKey(0))  # traced, not compiled
    return env, jax.jit(reset), jax.jit(step, donate_argnums=donate), shapes, limit


def _signed(array: np.ndarray) -> np.ndarray:
    """Unsigned integers viewed as the signed type of their width (torch lacks most unsigned)."""
    if array.dtype.kind == "u":
        return array.view(np.dtype(f"int{array.dtype.itemsize * 8}"))
    return array


class PlaygroundVecEnv(VecEnv):
    """`num_envs` sub-envs of the MuJoCo Playground task `env_id` on `device` (see the module
    docstring); the tensors it returns share the simulator's memory."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        env_kwargs: dict | None = None,
    ) -> None:
        jax, registry = _import()
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise EnvError(f"num_envs must be a positive integer, got {num_envs!r}.")
        if env_id not in registry.ALL_ENVS:
            raise EnvError(
                f"MuJoCo Playground has no task '{env_id}'. Its tasks include: "
                f"{', '.join(sorted(registry.ALL_ENVS)[:40])}, ..."
            )
        config = registry.get_default_config(env_id)
        unknown = sorted(set(env_kwargs or {}) - set(config.keys()))
        if unknown:
            raise EnvError(
                f"{env_id}: env_kwargs {', '.join(unknown)} are not in the task's config; its "
                f"settings are {', '.join(sorted(config.keys()))}."
            )
        self._jax = jax
        self.env_id = env_id
        self.num_envs = num_envs
        self.device = torch.device(device)
        self._jax_device = _jax_device(jax, self.device)
        overrides = json.dumps(env_kwargs or {}, sort_keys=True)
        try:
            env, self._reset_fn, self._step_fn, self._shapes, limit = _compiled(
                env_id, overrides, num_envs, self._jax_device
            )
        except EnvError:
            raise
        except Exception as e:  # a missing asset download, a bad config value, ...
            raise EnvError(
                f"MuJoCo Playground could not load '{env_id}': {type(e).__name__}: {e}"
            ) from None
        state_dim = _obs_width(env.observation_size, env_id)
        self.spec = EnvSpec(
            name=env_id, num_envs=num_envs, state_dim=state_dim,
            action_dim=int(env.action_size), if_discrete=False, max_step=limit,
            target_return=None, action_low=(-1.0,) * int(env.action_size),
            action_high=(1.0,) * int(env.action_size),
        )  # fmt: skip
        self._seed = 0 if seed is None else seed
        self._key = self._state = self._elapsed = None
        self.last_obs_array = None  # the JAX array behind the last observation tensor (tests)

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self._seed = seed
        key = self._jax.device_put(self._jax.random.PRNGKey(self._seed), self._jax_device)
        self._key, self._state, self._elapsed, obs = self._reset_fn(key)
        self.last_obs_array = obs
        return self._torch(obs), {}

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        if self._state is None:
            raise EnvError(f"{self.env_id}: call reset() before the first step().")
        shape = (self.num_envs, self.spec.action_dim)
        if tuple(action.shape) != shape:
            raise EnvError(
                f"{self.env_id}: continuous actions must have shape {shape} with values in "
                f"[-1, 1], got {tuple(action.shape)}."
            )
        action = action.detach().to(self.device, torch.float32).contiguous()
        if action.data_ptr() % 16:  # XLA takes GPU buffers at 16-byte aligned addresses only
            action = action.clone()  # (a slice of a larger tensor may start in between)
        out = self._step_fn(self._key, self._state, self._elapsed, self._jax_array(action))
        self._key, self._state, self._elapsed, obs, reward, terminated, truncated, final = out
        self.last_obs_array = obs
        as_bool = lambda x: self._torch(x).to(torch.bool)  # noqa: E731
        return (
            self._torch(obs),
            self._torch(reward),
            as_bool(terminated),
            as_bool(truncated),
            {"final_state": self._torch(final)},
        )

    def state_dict(self) -> dict:
        """The random key, step counters and every leaf of the batched simulator state (as
        tensors; unsigned JAX arrays, such as random keys, are saved bit for bit as signed)."""
        if self._state is None:
            return {}
        arrays = [self._key, self._elapsed, *self._jax.tree.leaves(self._state)]
        return {"arrays": [torch.from_numpy(_signed(np.array(a))) for a in arrays]}

    def load_state_dict(self, state: dict) -> None:
        jax = self._jax
        key, state_shapes, elapsed = self._shapes[:3]
        expected = [key, elapsed, *jax.tree.leaves(state_shapes)]
        saved = state["arrays"]
        if len(saved) != len(expected) or any(
            tuple(t.shape) != e.shape for t, e in zip(saved, expected, strict=True)
        ):
            raise EnvError(
                f"{self.env_id}: the saved simulator state does not fit this task with "
                f"{self.num_envs} sub-envs; it was saved from another task, size or version."
            )
        arrays = [
            jax.device_put(t.numpy().view(e.dtype), self._jax_device)
            for t, e in zip(saved, expected, strict=True)
        ]
        self._key, self._elapsed = arrays[:2]
        self._state = jax.tree.unflatten(jax.tree.structure(state_shapes), arrays[2:])

    def _torch(self, array: Any) -> torch.Tensor:
        """A JAX array as a torch tensor on `self.device`, sharing its memory (DLPack)."""
        return torch.from_dlpack(array)

    def _jax_array(self, tensor: torch.Tensor) -> Any:
        return self._jax.dlpack.from_dlpack(tensor)
