"""xiaoyarl's torch-native envs as `gymnasium.vector.VectorEnv`s, for code outside xiaoyarl.

`TorchGymVectorEnv` lets anything that speaks gymnasium's vector API (a CleanRL-style loop,
another library's collector) step the batched torch simulators of `envs/classic.py` with numpy
arrays. `import xiaoyarl` registers each of them as `xiaoyarl/<EnvId>` (`envs/gym_registration.py`):

    envs = gymnasium.make_vec("xiaoyarl/CartPole-v1", num_envs=8)

gives a `TorchGymVectorEnv` (its `vector_entry_point`); `gymnasium.make("xiaoyarl/CartPole-v1")`
gives gymnasium's own single env of the same task (the dynamics are identical).

Auto-reset is gymnasium's `SAME_STEP` mode: after a step that ends an episode, the returned
observation is the first one of the next episode, and `info["final_obs"]` (an object array,
None where nothing ended) with the mask `info["_final_obs"]` holds the last one.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, cast

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from xiaoyarl.envs.base import TorchVecEnv
from xiaoyarl.envs.chase import ChaseEnv
from xiaoyarl.envs.classic import TORCH_ENVS as CLASSIC_ENVS
from xiaoyarl.errors import EnvError

# the torch-native envs that need no arguments (StockTrading-v0 is made from market data)
TORCH_ENVS: dict[str, type[TorchVecEnv]] = {**CLASSIC_ENVS, "Chase-v0": ChaseEnv}


class TorchGymVectorEnv(gymnasium.vector.VectorEnv):
    """`num_envs` sub-envs of the torch-native env `env_id`, behind gymnasium's vector API.

    Observations: float32 `(num_envs, state_dim)` inside `observation_space`, whose bounds are
    those of gymnasium's own env of the same id. Actions: int `(num_envs,)` for a `Discrete`
    space, or float `(num_envs, action_dim)` inside the env's true bounds (e.g. a torque in
    [-2, 2] for Pendulum), rescaled here to xiaoyarl's [-1, 1] convention and not clipped (as
    gymnasium's envs, which clip inside the dynamics). Rewards are float64 and the two flags
    bool `(num_envs,)`, as gymnasium's vector envs return them.

    `reset(seed=s)` seeds the one torch generator all sub-envs share (gymnasium's vector envs
    seed sub-env i with s + i instead); `seed` here is used until the first seeded reset.
    `max_episode_steps` overrides the env's time limit. `self.env` is the wrapped
    `TorchVecEnv`, whose data stays on `device`; one host copy is made per step.
    """

    def __init__(
        self,
        env_id: str = "CartPole-v1",
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
    ) -> None:
        if env_id not in TORCH_ENVS:
            raise EnvError(
                f"there is no torch-native env named '{env_id}'; choose one of "
                f"{', '.join(TORCH_ENVS)}. For other ids use gymnasium.make_vec directly."
            )
        self.env: TorchVecEnv = TORCH_ENVS[env_id](num_envs, device=device, seed=seed)
        if max_episode_steps is not None and max_episode_steps != self.env.max_step:
            if max_episode_steps < 1:
                raise EnvError(f"max_episode_steps must be positive, got {max_episode_steps}.")
            self.env.max_step = int(max_episode_steps)  # read by TorchVecEnv.step
            self.env.spec = dataclasses.replace(self.env.spec, max_step=self.env.max_step)
        spec = self.env.spec
        self.env_id = env_id
        self.num_envs = num_envs
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

        low, high = _observation_bounds(env_id, spec.state_dim)
        self.single_observation_space = spaces.Box(low, high, (spec.state_dim,), np.float32)
        if spec.if_discrete:
            self.single_action_space = spaces.Discrete(spec.action_dim)
        else:
            act_low = np.asarray(spec.action_low, dtype=np.float32)
            act_high = np.asarray(spec.action_high, dtype=np.float32)
            self.single_action_space = spaces.Box(act_low, act_high, (spec.action_dim,))
            self._act_low = act_low.astype(np.float64)  # (action_dim,)
            self._act_span = act_high.astype(np.float64) - self._act_low
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-env; observations float32 `(num_envs, state_dim)`.

        `options` are accepted for API compatibility; a partial reset (`reset_mask`) is not
        supported, as this env always auto-resets in the same step.
        """
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise EnvError(
                f"{self.env_id}: reset(seed=...) takes one int that seeds all sub-envs (they "
                f"share one torch generator), got {seed!r}."
            )
        if options and "reset_mask" in options:
            raise EnvError(
                f"{self.env_id}: options['reset_mask'] (a partial reset) is not supported; this "
                f"env resets finished sub-envs itself in the same step (SAME_STEP auto-reset)."
            )
        super().reset(seed=None if seed is None else int(seed))  # seeds self.np_random
        state, _ = self.env.reset(None if seed is None else int(seed))
        return np.ascontiguousarray(state.cpu().numpy()), {}

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every sub-env: `(obs, rewards, terminations, truncations, infos)`.

        Shapes `(num_envs, state_dim)`, `(num_envs,)` x 3; see the class docstring for the
        actions and the module docstring for `final_obs`.
        """
        state, reward, terminated, truncated, info = self.env.step(self._to_torch(actions))
        n, s = self.num_envs, self.env.spec.state_dim
        # one host copy of everything: state, final_state, reward, terminated, truncated
        flags = torch.stack((reward, terminated.to(reward.dtype), truncated.to(reward.dtype)), 1)
        host = torch.cat((state, info["final_state"], flags), 1).cpu().numpy()  # (n, 2s + 3)
        obs = np.ascontiguousarray(host[:, :s])
        rewards = host[:, 2 * s].astype(np.float64)
        terminations = host[:, 2 * s + 1] != 0
        truncations = host[:, 2 * s + 2] != 0
        done = terminations | truncations

        infos: dict[str, Any] = {}
        if done.any():  # as gymnasium's SAME_STEP vector envs: only when an episode ended
            final_obs = np.full(n, None, dtype=object)
            for i in np.flatnonzero(done):
                final_obs[i] = host[i, s : 2 * s].copy()
            infos = {
                "final_obs": final_obs,
                "_final_obs": done.copy(),
                "final_info": {},
                "_final_info": done.copy(),
            }
        return obs, rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()

    def _to_torch(self, actions: Any) -> torch.Tensor:
        """Gymnasium actions -> xiaoyarl's: int64 `(n,)` or float32 `(n, action_dim)` in [-1, 1]."""
        a = np.asarray(actions)
        spec, n = self.env.spec, self.num_envs
        if spec.if_discrete:
            if a.shape != (n,) or not np.issubdtype(a.dtype, np.integer):
                raise EnvError(
                    f"{self.env_id}: actions must be {n} integers, shape ({n},), got "
                    f"{a.dtype} of shape {a.shape}."
                )
            if ((a < 0) | (a >= spec.action_dim)).any():
                raise EnvError(
                    f"{self.env_id}: actions must lie in [0, {spec.action_dim - 1}], got {a}."
                )
            return torch.as_tensor(a.astype(np.int64), device=self.env.device)
        if a.shape != (n, spec.action_dim):
            box = cast(spaces.Box, self.single_action_space)  # continuous actions
            raise EnvError(
                f"{self.env_id}: actions must have shape ({n}, {spec.action_dim}) with values in "
                f"{box.low.tolist()}..{box.high.tolist()}, got shape {a.shape}."
            )
        # [low, high] -> [-1, 1]; in float64 so that the env's rescaling gives back `a` exactly
        unit = 2.0 * (a.astype(np.float64) - self._act_low) / self._act_span - 1.0
        return torch.as_tensor(unit, dtype=torch.float32, device=self.env.device)


@functools.cache
def _observation_bounds(env_id: str, state_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Observation bounds float32 `(state_dim,)` of gymnasium's own env `env_id` (else +-inf)."""
    try:
        env = gymnasium.make(env_id, disable_env_checker=True)
    except gymnasium.error.Error:  # not registered in this gymnasium: no bounds known
        inf = np.full(state_dim, np.inf, dtype=np.float32)
        return -inf, inf
    box = env.observation_space
    env.close()
    if not isinstance(box, spaces.Box) or box.shape != (state_dim,):
        raise EnvError(
            f"gymnasium's '{env_id}' has observation space {box}, which does not match the "
            f"torch-native env's {state_dim} observation values; the two have diverged."
        )
    return box.low.astype(np.float32), box.high.astype(np.float32)
