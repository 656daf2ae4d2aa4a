"""`EnvPoolVecEnv`: EnvPool's C++ thread-pool simulators behind the `VecEnv` contract.

`backend="envpool"` (optional: `pip install -e '.[envpool]'`) steps EnvPool's own
implementations of classic-control, Box2D and MuJoCo tasks in C++ threads, a fast CPU vector
env for tasks that have no torch-native version. EnvPool resets a finished sub-env on the step
*after* it ends (that step ignores its action and returns the first observation); here the
reset happens at once, in a second call for just those sub-envs, so as in every `VecEnv` the
returned state starts the next episode and `info["final_state"]` holds the last one's end, and
no transition mixes two episodes.

Atari ids (`ALE/<Game>-v5`, `<Game>NoFrameskip-v4`, or EnvPool's own `<Game>-v5`) run EnvPool's
Atari with its own preprocessing, the standard one (`envs/atari.py` says which): 30 no-op
starts, 4-frame skip with max-pooling, 84x84 grayscale, 4 stacked frames as uint8, FIRE at
reset; for training, episodic lives and clipped rewards, for evaluation whole games and game
scores. `ALE/*-v5` keeps v5's sticky actions (0.25), as gymnasium's; the other ids have none.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import cast

import gymnasium
import numpy as np
import torch

from xiaoyarl.envs.gym import GymVecEnv, atari_game
from xiaoyarl.errors import EnvError


class EnvPoolVecEnv(GymVecEnv):
    """`num_envs` sub-envs of the EnvPool task `env_id`; actions in [-1, 1] are rescaled (and
    checked) as in `GymVecEnv`, whose spec reading and checks this class reuses."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        evaluation: bool = False,
    ) -> None:
        try:
            import envpool
        except ImportError:
            raise EnvError(
                "backend 'envpool' needs the envpool package: pip install -e '.[envpool]' "
                "(Linux, x86-64). Or use --backend gymnasium."
            ) from None
        if num_envs < 1:
            raise EnvError(f"num_envs must be a positive integer, got {num_envs}.")
        name, self._options = env_id, {}
        game = atari_game(env_id)
        if game and f"{game}-v5" in envpool.list_all_envs():  # EnvPool's Atari
            name = f"{game}-v5"
            sticky = 0.25 if env_id.startswith("ALE/") else 0.0
            self._options = {"episodic_life": not evaluation, "reward_clip": not evaluation,
                             "repeat_action_probability": sticky}  # fmt: skip
        if name not in envpool.list_all_envs():
            raise EnvError(
                f"EnvPool has no task '{env_id}'. Its tasks include: "
                f"{', '.join(sorted(envpool.list_all_envs())[:40])}, ..."
            )
        self.env_id = env_id
        self._name = name  # EnvPool's
        self.num_envs = num_envs
        self.device = torch.device(device)
        self._envpool = envpool
        self._seed_used = 0 if seed is None else seed
        self._pool = self._make(self._seed_used)
        # duck-typed: the spaces and spec that _read_spec reads of a gymnasium.Env
        self._atari, self._obs_keys, self._masked = None, None, False
        spec = self._read_spec(cast(gymnasium.Env, self._describe(env_id)), env_id)
        stack = int(self._pool.spec.config.stack_num) if game and len(spec.obs_shape) == 3 else 1
        self.spec = dataclasses.replace(spec, frame_stack=stack)  # Atari: 4 frames, oldest first
        self._closed = False
        self._needs_reset = True

    def _make(self, seed: int):  # noqa: ANN202 - an EnvPool env
        return self._envpool.make(self._name, env_type="gymnasium", num_envs=self.num_envs,
                                  seed=seed, **self._options)  # fmt: skip

    def _describe(self, env_id: str) -> SimpleNamespace:
        """What `GymVecEnv._read_spec` reads, from the pool and gymnasium's registration."""
        registered = gymnasium.registry.get(env_id)
        spec = SimpleNamespace(
            id=env_id,
            max_episode_steps=self._pool.spec.config.max_episode_steps,
            reward_threshold=registered.reward_threshold if registered else None,
        )
        return SimpleNamespace(observation_space=self._pool.observation_space,
                               action_space=self._pool.action_space, spec=spec)  # fmt: skip

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        """Reset every sub-env; EnvPool seeds at construction, so a new seed rebuilds the pool."""
        self._check_open()
        if seed is not None and seed != self._seed_used:
            self._pool.close()
            self._seed_used = seed
            self._pool = self._make(seed)
        obs, _ = self._pool.reset()
        state = self._flat(obs, "on reset()")
        self._needs_reset = False
        return self._tensor(state), {}

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        self._check_open()
        if self._needs_reset:
            raise EnvError(f"{self.spec.name}: call reset() before the first step().")
        actions = self._to_env_actions(action)
        obs, reward, terminated, truncated, _ = self._pool.step(actions)
        final = self._flat(obs, "on step()")
        state = final.copy()
        done = np.flatnonzero(terminated | truncated)
        if done.size:  # reset those sub-envs now: their step ignores the action
            ids = done.astype(np.int32)
            first, *_ = self._pool.step(actions[done], env_id=ids)
            state[done] = self._flat(first, "on auto-reset", len(done))
        as_tensor = lambda x, dtype: torch.as_tensor(x, dtype=dtype, device=self.device)  # noqa: E731
        return (
            self._tensor(state),
            as_tensor(reward, torch.float32),
            as_tensor(terminated, torch.bool),
            as_tensor(truncated, torch.bool),
            {"final_state": self._tensor(final)},
        )

    def _tensor(self, batch: np.ndarray) -> torch.Tensor:
        """Observations `(N, S)` as the spec says: `(N, *obs_shape)` of `obs_dtype`."""
        state = torch.as_tensor(batch, device=self.device).view(-1, *self.spec.obs_shape)
        return state.to(self.spec.obs_dtype)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    def _flat(self, obs: np.ndarray, when: str, rows: int | None = None) -> np.ndarray:
        dtype = np.float32 if self._obs_float else np.uint8  # images stay uint8
        batch = np.asarray(obs, dtype=dtype).reshape(rows or self.num_envs, -1)
        self._check_finite(batch, when)
        return batch
