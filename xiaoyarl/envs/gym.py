"""`GymVecEnv`: any gymnasium environment behind the `VecEnv` contract.

Two ways to run the `num_envs` sub-environments:

- `vector_mode="sync"`: a plain loop over `gymnasium.make` instances in this process, writing
  into preallocated numpy arrays and crossing to torch once per step. Best for cheap envs
  (classic control), where process hops would cost more than the simulation.
- `vector_mode="async"`: `gymnasium.vector.AsyncVectorEnv`, one worker process per sub-env, in
  `SAME_STEP` auto-reset mode. Best for expensive simulators (MuJoCo, Box2D).

Both auto-reset the same way (see `envs/base.py`): when a sub-env ends, the returned state is
the first observation of its next episode and `info["final_state"]` holds the last observation
of the one that ended. No transition ever mixes the two episodes (gymnasium's default
`NEXT_STEP` mode would add one such transition per episode; it is not used).

Every observation is checked at the boundary, on reset and on every step: a wrong shape or a
NaN/inf raises `EnvError` naming the env, the sub-env and the step.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import os
import re
import sys
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from xiaoyarl.envs.actions import (
    STRUCTURED,
    Part,
    bounds,
    continuous_dim,
    counts,
    index,
    leaves,
    nest,
    read_parts,
    split,
)
from xiaoyarl.envs.atari import (
    MAX_FRAMES,
    atari_settings,
    atari_state,
    gym_kwargs,
    load_atari_state,
    wrap_atari,
)
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.envs.targets import DEFAULT_TARGET_RETURNS
from xiaoyarl.errors import EnvError

# Time limit given to envs registered without one, so that every episode ends and
# `spec.max_step` is true. Pass `env_kwargs={"max_episode_steps": n}` to choose another.
DEFAULT_MAX_STEP = 1000

VECTOR_MODES = ("sync", "async")

# Pip extras of this package that install the optional simulators, keyed by a word that
# appears in the entry point of the envs that need them.
_EXTRAS = {"box2d": "box2d", "mujoco": "mujoco"}
# packages that register their envs with gymnasium, by the ids' prefix: the package, and the
# function that registers them ("module:function"; None: importing the package does)
_REGISTERED_ON_IMPORT = {"MiniGrid-": ("minigrid", None), "BabyAI-": ("minigrid", None),
                         "MinAtar/": ("minatar", "minatar.gym:register_envs")}  # fmt: skip

WRAP_ADVICE = (
    "wrap the env (e.g. with gymnasium.wrappers.FlattenObservation / TransformObservation) "
    "in your own module, register the wrapped env there, and pass 'my_module:MyEnv-v0'"
)

# Games of the Arcade Learning Environment (the Atari-57 benchmark), to recognise Atari ids
# such as 'ALE/Pong-v5', 'PongNoFrameskip-v4' or 'Breakout-ram-v4' when ale-py is missing.
_ATARI_GAMES = frozenset(
    """Alien Amidar Assault Asterix Asteroids Atlantis BankHeist BattleZone BeamRider Berzerk
    Bowling Boxing Breakout Centipede ChopperCommand CrazyClimber Defender DemonAttack
    DoubleDunk Enduro FishingDerby Freeway Frostbite Gopher Gravitar Hero IceHockey Jamesbond
    Kangaroo Krull KungFuMaster MontezumaRevenge MsPacman NameThisGame Phoenix Pitfall Pong
    PrivateEye Qbert Riverraid RoadRunner Robotank Seaquest Skiing Solaris SpaceInvaders
    StarGunner Surround Tennis TimePilot Tutankham UpNDown Venture VideoPinball WizardOfWor
    YarsRevenge Zaxxon""".split()
)
_ATARI_ID = re.compile(
    r"(?P<ale>ALE/)?(?P<game>[A-Za-z]+?)(?P<ram>-ram)?(?P<mode>NoFrameskip|Deterministic)?"
    r"-v(?P<version>\d+)"
)


def is_image_space(space: spaces.Space) -> bool:
    """Whether `space` holds images: a Box with 3 dimensions, or uint8 with 2 or more."""
    if not isinstance(space, spaces.Box):
        return False
    ndim = len(space.shape)
    return ndim == 3 or (space.dtype == np.uint8 and ndim >= 2)


def atari_env_kwargs(env_id: str, env_kwargs: dict | None) -> dict | None:
    """`env_kwargs` of an Atari id (`module:` prefix allowed) with its preprocessing settings
    written out (`env_kwargs["atari"]`, `envs/atari.py`), as a run's config.yaml records them;
    other ids' as they are."""
    if not is_atari_screen(env_id.rpartition(":")[2], env_kwargs or {}):
        return env_kwargs
    settings = atari_settings((env_kwargs or {}).get("atari"))
    return {**(env_kwargs or {}), "atari": False if settings is None else settings}


def is_atari_screen(registered_id: str, kwargs: dict) -> bool:
    """Whether an id and its kwargs give an Atari game's screen (the preprocessing's input), not
    its 128-byte RAM (a vector, used as it is)."""
    ram = "-ram" in registered_id or kwargs.get("obs_type") == "ram"
    return is_atari_id(registered_id) and not ram


# env steps between an Atari game's evaluations where `eval_every` is automatic (RL Zoo's): an
# evaluation plays whole games, thousands of steps each
ATARI_EVAL_EVERY = 25_000


def least_settings(env_id: str, env_kwargs: dict | None) -> dict:
    """The least values this env needs of the settings a run leaves automatic: an Atari game's
    evaluation cadence."""
    if is_atari_screen(env_id.rpartition(":")[2], env_kwargs or {}):
        return {"eval_every": ATARI_EVAL_EVERY}
    return {}


def atari_game(env_id: str) -> str | None:
    """The game an Atari-style id names ("Pong" of "ALE/Pong-v5", "PongNoFrameskip-v4" or
    EnvPool's "Pong-v5"), or None."""
    match = _ATARI_ID.fullmatch(env_id)
    return match["game"] if match else None


def is_atari_id(env_id: str) -> bool:
    """Whether `env_id` names an Atari game (`ALE/...`, or a known game with a -v0/-v4 id)."""
    if env_id.startswith("ALE/"):
        return True
    match = _ATARI_ID.fullmatch(env_id)
    return match is not None and match["game"] in _ATARI_GAMES


class GymVecEnv(VecEnv):
    """`num_envs` copies of a gymnasium env speaking torch tensors on `device`.

    `env_id` is a registered id (`"CartPole-v1"`) or `"my_module:MyEnv-v0"`, which imports
    `my_module` first so that it can register `MyEnv-v0` (found on `sys.path`, else in the
    current directory, as `python -m` would). `env_kwargs` go to `gymnasium.make`.
    Observations must be a `Box` of numbers: images (3-D, or 2-D uint8) keep their shape, and
    uint8 stays uint8 (`spec.obs_shape`, `spec.obs_dtype`); other Boxes are flattened to float32
    `(num_envs, state_dim)`. Actions a `Discrete` (int64 `(num_envs,)`), a finite `Box`
    (float `(num_envs, action_dim)` in `[-1, 1]`, clipped to it and rescaled linearly to the
    env's bounds), a `MultiDiscrete` or `MultiBinary` (int64 `(num_envs, K)`), or a Dict or Tuple
    of those (`envs/actions.py`: multi-discrete, continuous or hybrid by its parts).

    `spec.max_step` is the registration's `max_episode_steps` (or the one in `env_kwargs`);
    envs registered without a time limit get `DEFAULT_MAX_STEP`. `spec.target_return` is the
    registration's `reward_threshold`, else `DEFAULT_TARGET_RETURNS`, else None.

    Sub-env `i` is seeded with `seed + i` by `reset(seed)`; the constructor's `seed` is used
    by the first `reset()` that is given none.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        vector_mode: str = "sync",
        env_kwargs: dict | None = None,
        evaluation: bool = False,
    ) -> None:
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise EnvError(f"num_envs must be a positive integer, got {num_envs!r}.")
        if vector_mode not in VECTOR_MODES:
            raise EnvError(
                f"vector_mode must be one of {VECTOR_MODES}, got {vector_mode!r}: 'sync' loops "
                "over the sub-envs in this process, 'async' runs one worker process per sub-env."
            )
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.vector_mode = vector_mode
        self._seed = seed
        self._envs: list[gymnasium.Env] = []
        self._venv: gymnasium.vector.AsyncVectorEnv | None = None
        self._closed = False
        self._needs_reset = True
        self._num_steps = 0  # step() calls since construction, for error messages

        registered_id, kwargs = resolve_gym_id(env_id, env_kwargs)
        # Atari games get the standard preprocessing (`envs/atari.py`), evaluation its own part
        self._atari: dict | None = None
        if is_atari_screen(registered_id, kwargs):
            kwargs = dict(kwargs)
            self._atari = atari_settings(kwargs.pop("atari", None))
            kwargs = gym_kwargs(registered_id, kwargs) if self._atari else kwargs
        keep = kwargs.pop("obs_keys", None)  # Dict observations: the keys to read
        make = (registered_id, kwargs, self._atari, evaluation, keep)
        first = make_sub_env(env_id, *make)
        self._masked = False  # action masks: see below
        packed = isinstance(first, gymnasium.wrappers.FlattenObservation)
        inner = first.env.observation_space if packed else None  # type: ignore[attr-defined]
        self._obs_keys = dict_layout(inner, env_id) if isinstance(inner, spaces.Dict) else None
        try:
            self.spec = self._read_spec(first, registered_id)
            # action masks (MaskablePPO's convention: each reset's and step's
            # info["action_mask"]), seen on a first reset of the first sub-env
            self._masked = "action_mask" in first.reset(seed=seed)[1]
            self.spec = dataclasses.replace(self.spec, action_mask=self._masked)
        except EnvError:
            first.close()
            raise

        if vector_mode == "sync":
            self._envs = [first]
            try:
                for _ in range(num_envs - 1):
                    self._envs.append(make_sub_env(env_id, *make))
            except EnvError:
                self.close()
                raise
        else:
            first.close()
            # Workers make the env from the id as given, so a spawned worker imports the module.
            self._venv = gymnasium.vector.AsyncVectorEnv(
                [
                    _CheckedEnvFn(env_id, kwargs, self.spec.name, i, self._atari, evaluation, keep)
                    for i in range(num_envs)
                ],  # fmt: skip
                autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP,
            )

        # One flat host buffer crosses to torch per step; the arrays below are views into it:
        # state (N, S), final_state (N, S), reward (N,), terminated (N,), truncated (N,).
        # Images keep their own dtype (uint8) in a second buffer of state and final_state.
        n, s = num_envs, self.spec.state_dim
        obs_size = 2 * n * s if self._obs_float else 0
        self._buf = np.zeros(obs_size + 3 * n, dtype=np.float32)
        obs = self._buf if self._obs_float else np.zeros(2 * n * s, dtype=self._obs_np_dtype)
        self._obs_buf = obs[: 2 * n * s]
        self._state = obs[: n * s].reshape(n, s)
        self._final = obs[n * s : 2 * n * s].reshape(n, s)
        self._reward = self._buf[obs_size : obs_size + n]
        self._terminated = self._buf[obs_size + n : obs_size + 2 * n]
        self._truncated = self._buf[obs_size + 2 * n :]
        if self._masked:  # the allowed actions of state and of final_state
            if (
                vector_mode != "sync"
                or not self.spec.if_discrete
                or self._act_nvec is not None
                or self._act_parts is not None
            ):
                self.close()
                raise EnvError(f"{self.spec.name}: action masks (info['action_mask']) are read "
                               f"for Discrete actions with vector_mode sync.")  # fmt: skip
            self._mask = np.ones((n, self.spec.action_dim), dtype=bool)
            self._final_mask = self._mask.copy()

    # --- construction helpers ------------------------------------------------------------------
    def _read_spec(self, env: gymnasium.Env, registered_id: str) -> EnvSpec:
        """Check the spaces of `env` and describe it; also sets the action-conversion constants."""
        obs_space, act_space = env.observation_space, env.action_space
        name = env.spec.id if env.spec is not None else registered_id
        if not isinstance(obs_space, spaces.Box):
            raise EnvError(
                f"{name}: observation space {obs_space} is not supported; GymVecEnv needs a Box "
                f"observation space, or a Dict or Tuple of Box and Discrete ones (packed into one "
                f"float32 vector). To use this env, {WRAP_ADVICE}."
            )
        self._obs_shape = tuple(obs_space.shape)
        state_dim = int(np.prod(self._obs_shape))
        # images keep their shape (and uint8 stays uint8: the network scales it); other Boxes
        # are flattened to float32 vectors
        image = is_image_space(obs_space)
        self._obs_float = not (image and obs_space.dtype == np.uint8)
        self._obs_np_dtype = np.dtype(np.float32 if self._obs_float else np.uint8)
        obs_shape = self._obs_shape if image else (state_dim,)
        obs_dtype = torch.float32 if self._obs_float else torch.uint8

        action_low = action_high = None
        self._act_nvec = None  # multi-discrete: the choices of each component
        self._act_parts: tuple[Part, ...] | None = None  # a Dict or Tuple space: its parts
        if isinstance(act_space, spaces.Discrete):
            if_discrete, action_dim = True, int(act_space.n)
            self._act_start = int(act_space.start)
        elif isinstance(act_space, spaces.MultiDiscrete | spaces.MultiBinary):
            binary = isinstance(act_space, spaces.MultiBinary)
            nvec = np.full(act_space.shape, 2) if binary else act_space.nvec  # type: ignore[union-attr]
            if nvec.ndim != 1:
                raise EnvError(f"{name}: action space {act_space} has {nvec.ndim} axes; multi-"
                               f"discrete actions are one vector: {WRAP_ADVICE}.")  # fmt: skip
            self._act_nvec = tuple(int(k) for k in nvec)
            if_discrete, action_dim = True, int(sum(self._act_nvec))
            start = 0 if binary else act_space.start  # type: ignore[union-attr]
            self._act_offsets = np.asarray(start, dtype=np.int64)
            self._act_dtype = act_space.dtype
        elif isinstance(act_space, spaces.Box):
            if_discrete, action_dim = False, int(np.prod(act_space.shape))
            low = act_space.low.reshape(-1).astype(np.float64)
            high = act_space.high.reshape(-1).astype(np.float64)
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise EnvError(
                    f"{name}: action space {act_space} has infinite bounds, so actions in "
                    f"[-1, 1] cannot be rescaled to it. Give the env finite action bounds, or "
                    f"wrap it (e.g. with gymnasium.wrappers.RescaleAction) in your own module "
                    f"and pass 'my_module:MyEnv-v0'."
                )
            self._act_low = act_space.low.reshape(-1)
            self._act_span = act_space.high.reshape(-1) - act_space.low.reshape(-1)
            self._act_shape = tuple(act_space.shape)
            self._act_dtype = act_space.dtype
            action_low, action_high = tuple(low.tolist()), tuple(high.tolist())
        elif isinstance(act_space, STRUCTURED):  # its parts (`envs/actions.py`)
            self._act_parts = read_parts(act_space, name)
            nvec, action_dim = counts(self._act_parts), continuous_dim(self._act_parts)
            self._act_dtypes = [leaf.dtype for leaf in leaves(act_space)]
            if action_dim:
                low, high = bounds(act_space)
                self._act_low, self._act_span = low, high - low
                action_low, action_high = tuple(low.tolist()), tuple(high.tolist())
            if_discrete = not action_dim
            self._act_nvec = nvec or None
            action_dim = action_dim or sum(nvec)
        else:
            raise EnvError(
                f"{name}: action space {act_space} is not supported; GymVecEnv supports Discrete, "
                f"MultiDiscrete, MultiBinary and Box action spaces, and Dicts and Tuples of them. "
                f"For another, {WRAP_ADVICE}."
            )

        max_step = env.spec.max_episode_steps if env.spec is not None else None
        if is_atari_id(registered_id) and max_step is None:  # ALE's frame limit, in agent steps
            skip = self._atari["frame_skip"] if self._atari else env.unwrapped._frameskip  # type: ignore[attr-defined]
            frames = env.spec.kwargs.get("max_num_frames_per_episode") if env.spec else None
            max_step = (frames or MAX_FRAMES) // (skip if isinstance(skip, int) else 1)
        if max_step is None:
            max_step = time_limit_of(env) or DEFAULT_MAX_STEP
        reward_threshold = env.spec.reward_threshold if env.spec is not None else None
        if reward_threshold is None:
            reward_threshold = DEFAULT_TARGET_RETURNS.get(name)
        return EnvSpec(
            name=name,
            num_envs=self.num_envs,
            state_dim=state_dim,
            action_dim=action_dim,
            if_discrete=if_discrete,
            max_step=int(max_step),
            target_return=None if reward_threshold is None else float(reward_threshold),
            action_low=action_low,
            action_high=action_high,
            obs_shape=obs_shape,
            obs_dtype=obs_dtype,
            action_nvec=self._act_nvec,
            action_parts=self._act_parts,
            obs_keys=self._obs_keys,
            action_mask=self._masked,
            frame_stack=self._atari["frame_stack"] if self._atari and image else 1,
            # gymnasium's images are (H, W, C), unless the channels are the smaller end (frames
            # stacked first): (10, 10, 10) is MinAtar's Seaquest, not 10 channels of 10 x 10
            channels_last=obs_shape[-1] <= obs_shape[0] if len(obs_shape) == 3 else None,
        )

    # --- the contract --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        """Reset all sub-envs (sub-env `i` gets seed `seed + i`); state `(num_envs, state_dim)`."""
        self._check_open()
        if seed is None and self._seed is not None:
            seed = self._seed  # the constructor's seed, used once
        self._seed = None
        seeds: list[int | None] = (
            [None] * self.num_envs if seed is None else [seed + i for i in range(self.num_envs)]
        )

        if self._venv is not None:
            obs, _ = self._venv.reset(seed=seeds)  # checked in the workers
            self._state[:] = obs.reshape(self.num_envs, -1)
        else:
            for i, env in enumerate(self._envs):
                obs, info = env.reset(seed=seeds[i])
                self._write_obs(self._state, i, obs, "on reset()")
                if self._masked:
                    self._read_mask(self._mask, i, info, "on reset()")
            self._check_finite(self._state, "on reset()")
        self._needs_reset = False
        state = torch.tensor(self._state, device=self.device).view(-1, *self.spec.obs_shape)
        return state, self._mask_info()

    def _read_mask(self, out: np.ndarray, i: int, info: dict, when: str) -> None:
        """Sub-env `i`'s `info["action_mask"]` into row `i` of `out`, checked."""
        given = info.get("action_mask")
        mask = np.asarray(() if given is None else given, dtype=bool).reshape(-1)
        if mask.shape != (self.spec.action_dim,) or not mask.any():
            raise EnvError(
                f"{self.spec.name}: sub-env {i} gave info['action_mask'] {given!r} "
                f"{when}; it must be {self.spec.action_dim} booleans with at least one true, "
                f"in every reset's and step's info."
            )
        out[i] = mask

    def _mask_info(self) -> dict:
        """The step's (or reset's) action masks as torch bool tensors, where the env gives them."""
        if not self._masked:
            return {}
        device = self.device
        return {"action_mask": torch.tensor(self._mask, device=device),
                "final_action_mask": torch.tensor(self._final_mask, device=device)}  # fmt: skip

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """One step of every sub-env; see `envs/base.py` for shapes and auto-reset."""
        self._check_open()
        if self._needs_reset:
            raise EnvError(f"{self.spec.name}: call reset() before the first step().")
        actions = self._to_env_actions(action)
        self._num_steps += 1
        if self._venv is not None:
            self._step_async(actions)
        else:
            self._step_sync(actions)

        # One host -> device copy (two for images), then contiguous views of it.
        n, s, shape = self.num_envs, self.spec.state_dim, self.spec.obs_shape
        t = torch.tensor(self._buf, device=self.device)
        obs = t if self._obs_float else torch.tensor(self._obs_buf, device=self.device)
        state = obs[: n * s].view(n, *shape)
        final_state = obs[n * s : 2 * n * s].view(n, *shape)
        flags = t[t.shape[0] - 3 * n :]  # reward, terminated, truncated
        reward, terminated, truncated = flags[:n], flags[n : 2 * n].bool(), flags[2 * n :].bool()
        info = {"final_state": final_state, **self._mask_info()}
        return state, reward, terminated, truncated, info

    def state_dict(self) -> dict:
        """Atari games stepped in this process (`vector_mode` sync): each game's whole state
        (`atari_state`), so that a resumed run plays on bit for bit; {} for other envs, whose
        simulators gymnasium cannot save (a resumed run starts new episodes)."""
        if self._atari is None or self._venv is not None or self._needs_reset:
            return {}
        return {"atari": [atari_state(env) for env in self._envs]}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned (nothing where it returned {})."""
        if "atari" not in state:
            return
        if self._atari is None or self._venv is not None or len(state["atari"]) != self.num_envs:
            raise EnvError(
                f"{self.spec.name}: the checkpoint holds {len(state['atari'])} Atari games "
                f"stepped in this process; this env has {self.num_envs} sub-envs in "
                f"vector_mode {self.vector_mode}. Resume with the run's own num_envs and "
                "vector_mode."
            )
        for env, saved in zip(self._envs, state["atari"], strict=True):
            load_atari_state(env, saved)
        self._needs_reset = False

    def close(self) -> None:
        """Close every sub-env and stop the async workers; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        envs, self._envs = self._envs, []
        for env in envs:
            env.close()
        venv, self._venv = self._venv, None
        if venv is not None:
            venv.close()

    # --- stepping ------------------------------------------------------------------------------
    def _to_env_actions(self, action: torch.Tensor) -> Any:
        """Agent actions -> what the sub-envs take: a list of ints, or `(N, *shape)` floats."""
        n = self.num_envs
        if self._act_parts is not None:
            return self._structured_actions(action)
        if self._act_nvec is not None:
            k = len(self._act_nvec)
            if tuple(action.shape) != (n, k):
                raise EnvError(
                    f"{self.spec.name}: multi-discrete actions must have shape ({n}, {k}) (one "
                    f"int per component and sub-env), got {tuple(action.shape)}."
                )
            a = action.detach().cpu().numpy().astype(np.int64) + self._act_offsets
            return a.astype(self._act_dtype, copy=False)
        if self.spec.if_discrete:
            if tuple(action.shape) != (n,):
                raise EnvError(
                    f"{self.spec.name}: discrete actions must have shape ({n},) (one int per "
                    f"sub-env), got {tuple(action.shape)}."
                )
            a = action.detach().cpu().numpy().astype(np.int64)
            return a + self._act_start if self._act_start else a
        if tuple(action.shape) != (n, self.spec.action_dim):
            raise EnvError(
                f"{self.spec.name}: continuous actions must have shape ({n}, "
                f"{self.spec.action_dim}) with values in [-1, 1], got {tuple(action.shape)}."
            )
        a = np.clip(action.detach().cpu().numpy(), -1.0, 1.0)
        a = self._act_low + (a + 1.0) * 0.5 * self._act_span  # [-1, 1] -> [low, high]
        return a.astype(self._act_dtype, copy=False).reshape(n, *self._act_shape)

    def _structured_actions(self, action: torch.Tensor) -> Any:
        """Agent actions -> a Dict or Tuple action space's: the sub-envs' actions (sync), or
        the space's batched structure (async), from the flat vector of `envs/actions.py`."""
        assert self._act_parts is not None
        n, spec = self.num_envs, self.spec
        k = len(spec.action_nvec or ())
        c = 0 if spec.if_discrete else spec.action_dim
        if tuple(action.shape) != (n, k + c):
            what = (
                "the discrete choices then the continuous values in [-1, 1]"
                if k and c
                else "one int per discrete component"
                if k
                else "values in [-1, 1]"
            )
            raise EnvError(f"{spec.name}: actions must have shape ({n}, {k + c}) ({what}), got "
                           f"{tuple(action.shape)}.")  # fmt: skip
        a = action.detach().cpu().numpy()
        discrete = np.rint(a[:, :k]).astype(np.int64)
        continuous = None
        if c:  # [-1, 1] -> [low, high]
            continuous = self._act_low + (np.clip(a[:, k:], -1.0, 1.0) + 1.0) * 0.5 * self._act_span
        values = [
            v.astype(dtype, copy=False)
            for v, dtype in zip(
                split(self._act_parts, discrete, continuous), self._act_dtypes, strict=True
            )
        ]
        batched = nest(self._act_parts, values)
        if self._venv is not None:
            return batched
        return [index(batched, i) for i in range(n)]

    def _step_sync(self, actions: Any) -> None:
        if self.spec.if_discrete and self._act_nvec is None and self._act_parts is None:
            actions = actions.tolist()  # plain ints, as hand-written envs expect
        final, state, shape = self._final, self._state, self._obs_shape
        masked = self._masked
        for i, env in enumerate(self._envs):
            obs, reward, terminated, truncated, info = env.step(actions[i])
            if masked:
                self._read_mask(self._final_mask, i, info, f"at step {self._num_steps}")
            if type(obs) is np.ndarray and obs.shape == shape:  # what `_write_obs` checks
                final[i] = obs.reshape(-1)
            else:  # converts, or raises with the sub-env's index
                self._write_obs(final, i, obs, f"at step {self._num_steps}")
            self._reward[i] = reward
            self._terminated[i] = terminated
            self._truncated[i] = truncated
            if terminated or truncated:
                obs, info = env.reset()
                self._write_obs(state, i, obs, f"on the auto-reset after step {self._num_steps}")
                if masked:
                    self._read_mask(self._mask, i, info, "on an auto-reset")
            else:
                state[i] = final[i]
                if masked:
                    self._mask[i] = self._final_mask[i]
        if self._obs_float and not np.isfinite(self._obs_buf).all():  # state and final_state
            self._check_finite(final, f"at step {self._num_steps}")
            self._check_finite(state, f"on the auto-reset after step {self._num_steps}")

    def _step_async(self, actions: np.ndarray) -> None:
        assert self._venv is not None  # step() comes here only with the async workers
        obs, reward, terminated, truncated, info = self._venv.step(actions)  # checked in workers
        self._state[:] = obs.reshape(self.num_envs, -1)
        self._final[:] = self._state
        if "_final_obs" in info:  # SAME_STEP: last observations of the episodes that ended
            for i in np.flatnonzero(info["_final_obs"]):
                self._final[i] = np.ravel(info["final_obs"][i])
        self._reward[:] = reward
        self._terminated[:] = terminated
        self._truncated[:] = truncated

    # --- checks --------------------------------------------------------------------------------
    def _write_obs(self, out: np.ndarray, i: int, obs: Any, when: str) -> None:
        """Check the shape of sub-env `i`'s observation; write it, flat, into row `i` of `out`."""
        if type(obs) is not np.ndarray:
            obs = np.asarray(obs)
        if obs.shape != self._obs_shape:
            raise _obs_error(self.spec.name, i, when, obs, self._obs_shape)
        out[i] = obs.reshape(-1)

    def _check_finite(self, batch: np.ndarray, when: str) -> None:
        """Raise on the first sub-env whose observation row in `batch` has a NaN or inf."""
        finite = np.isfinite(batch).all(axis=1)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise _obs_error(self.spec.name, i, when, batch[i].reshape(self._obs_shape), None)

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError(f"{self.env_id}: this GymVecEnv is closed; create a new one.")


class _CheckedObs(gymnasium.Wrapper):
    """Checks every observation of one sub-env inside its async worker (shape, finiteness)."""

    def __init__(self, env: gymnasium.Env, name: str, index: int) -> None:
        super().__init__(env)
        self._name, self._index = name, index
        shape = env.observation_space.shape
        assert shape is not None  # a Box: GymVecEnv checked the spaces before starting workers
        self._shape = tuple(shape)
        self._steps = 0  # counts like GymVecEnv._num_steps: one per vector step
        self._ended = False

    def _check(self, obs: Any, when: str) -> None:
        if np.shape(obs) != self._shape:
            raise _obs_error(self._name, self._index, when, obs, self._shape)
        if not np.isfinite(obs).all():
            raise _obs_error(self._name, self._index, when, obs, None)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        auto = self._ended and not kwargs
        self._check(obs, f"on the auto-reset after step {self._steps}" if auto else "on reset()")
        self._ended = False
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        self._check(obs, f"at step {self._steps}")
        self._ended = bool(terminated or truncated)
        return obs, reward, terminated, truncated, info


class _CheckedEnvFn:
    """Picklable factory of one checked sub-env for an async worker."""

    def __init__(self, env_id: str, kwargs: dict, name: str, index: int, atari: dict | None,
                 evaluation: bool, keep: list[str] | None) -> None:  # fmt: skip
        self.env_id, self.kwargs, self.name, self.index = env_id, kwargs, name, index
        self.atari, self.evaluation, self.keep = atari, evaluation, keep

    def __call__(self) -> gymnasium.Env:
        env = gymnasium.make(self.env_id, **self.kwargs)
        if self.atari is not None:
            env = wrap_atari(env, self.atari, self.evaluation)
        return _CheckedObs(pack_dict(env, self.keep, self.name), self.name, self.index)


def _obs_error(
    name: str, index: int, when: str, obs: Any, expected_shape: tuple[int, ...] | None
) -> EnvError:
    """The error for a bad observation: a wrong shape (`expected_shape` given) or NaN/inf."""
    seen = np.array2string(np.asarray(obs), threshold=12, edgeitems=3, precision=4)
    if expected_shape is not None:
        problem = (
            f"its shape is {np.shape(obs)} but the observation space has shape {expected_shape}"
        )
    else:
        problem = "it contains NaN or inf"
    return EnvError(
        f"{name}: sub-env {index} returned an invalid observation {when}: {problem} "
        f"(got {seen}). Observations must be finite and match the env's observation_space; "
        f"check the environment's dynamics and observation_space, or {WRAP_ADVICE}."
    )


def resolve_gym_id(env_id: str, env_kwargs: dict | None) -> tuple[str, dict]:
    """Import the module of a `module:Env-v0` id, find the registration, complete the kwargs.

    Returns the registered id (without the module part) and the kwargs for `gymnasium.make`.
    """
    registered_id = env_id
    if ":" in env_id:
        module, registered_id = env_id.split(":", 1)
        try:
            _import_env_module(module)
        except Exception as e:
            if isinstance(e, ModuleNotFoundError) and e.name == "ale_py":
                raise _atari_error(env_id, registered_id) from e
            raise EnvError(
                f"cannot use environment '{env_id}': importing module '{module}' failed "
                f"({type(e).__name__}: {e}). Make sure '{module}' is importable from here "
                f"(installed, its folder on PYTHONPATH, or '{module}.py' in the current "
                f"directory) and imports without error."
            ) from e
    if is_atari_id(registered_id) and registered_id not in gymnasium.registry:
        _register_atari()  # ale-py registers its games only once imported
    _import_registering_package(registered_id)
    try:
        registration = gymnasium.spec(registered_id)
    except gymnasium.error.Error as e:
        if is_atari_id(registered_id):
            raise _atari_error(env_id, registered_id) from e
        raise _unknown_env_error(env_id, registered_id) from e

    kwargs = dict(env_kwargs or {})
    ends_itself = is_atari_id(registered_id)  # ALE cuts a game at its own frame limit
    if (kwargs.get("max_episode_steps") is None and registration.max_episode_steps is None
            and not ends_itself):  # fmt: skip
        kwargs["max_episode_steps"] = DEFAULT_MAX_STEP  # every episode ends; spec.max_step holds
    return registered_id, kwargs


def _import_env_module(module: str) -> None:
    """Import `module`; if it is not found, look in the current directory too, as `python -m`.

    The directory goes to the end of `sys.path`, so it never shadows an installed package, and
    stays there only if the import succeeds. A module that is found but fails inside raises its
    own exception unchanged.
    """
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        cwd = os.getcwd()
        is_this_module = module == missing or module.startswith(missing + ".")
        on_path = any(isinstance(p, str) and os.path.abspath(p or ".") == cwd for p in sys.path)
        if not is_this_module or on_path:
            raise
        sys.path.append(cwd)
        importlib.invalidate_caches()
        try:
            importlib.import_module(module)
        except BaseException:
            sys.path.remove(cwd)
            raise


def _missing_module(e: BaseException) -> str | None:
    """Name of the module whose import failed, from `e` or the exceptions that caused it."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ImportError) and seen.name:
            return seen.name
        seen = seen.__cause__ or seen.__context__
    return None


def make_sub_env(env_id: str, registered_id: str, kwargs: dict, atari: dict | None,
                 evaluation: bool, keep: list[str] | None = None) -> gymnasium.Env:  # fmt: skip
    """One sub-env: `make_gym_env`, with the Atari preprocessing where `atari` gives it, and
    Dict or Tuple observations packed into one vector (`pack_dict`, of the `keep` keys only)."""
    env = make_gym_env(env_id, registered_id, kwargs)
    env = env if atari is None else wrap_atari(env, atari, evaluation)
    return pack_dict(env, keep, env_id)


def dict_layout(space: spaces.Dict, name: str) -> tuple[tuple[str, tuple[int, ...], str], ...]:
    """`(key, shape, kind)` of each key of a Dict observation space, in its order: kind "uint8"
    or "float" for a Box, "onehot" for a Discrete (`EnvSpec.obs_keys`); an `EnvError` naming a
    key of another kind (text, nested dicts, ...) and how to leave it out."""
    layout = []
    for key, sub in space.spaces.items():
        if isinstance(sub, spaces.Box):
            kind = "uint8" if sub.dtype == np.uint8 else "float"
            layout.append((key, tuple(int(d) for d in sub.shape), kind))
        elif isinstance(sub, spaces.Discrete):
            layout.append((key, (int(sub.n),), "onehot"))
        else:
            readable = (spaces.Box, spaces.Discrete)
            keep = [k for k, s in space.spaces.items() if isinstance(s, readable)]
            raise EnvError(
                f"{name}: observation key '{key}' is a {type(sub).__name__} space, which "
                f"xiaoyarl cannot encode (it reads Box and Discrete keys). Leave it out with "
                f"the env_kwargs {{obs_keys: [{', '.join(keep)}]}} (the keys to keep): `train "
                f"... --set 'env_kwargs={{obs_keys: [{', '.join(keep)}]}}'`, `check-env ... "
                f"--env-kwargs '{{obs_keys: [{', '.join(keep)}]}}'`."
            )
    return tuple(layout)


def keyed_by_position(space: spaces.Tuple) -> spaces.Dict:
    """A Tuple space as the Dict space xiaoyarl reads it as: its parts keyed "0", "1", ..."""
    return spaces.Dict({str(i): sub for i, sub in enumerate(space.spaces)})


def tuple_as_dict(env: gymnasium.Env) -> gymnasium.Env:
    """An env with Tuple observations as one with Dict observations keyed by position
    (`keyed_by_position`), so they are read, filtered and packed as Dict observations; others
    as they are."""
    space = env.observation_space
    if not isinstance(space, spaces.Tuple):
        return env
    return gymnasium.wrappers.TransformObservation(
        env, lambda obs: {str(i): value for i, value in enumerate(obs)}, keyed_by_position(space)
    )


def pack_dict(env: gymnasium.Env, keep: list[str] | None, name: str) -> gymnasium.Env:
    """An env with Dict (or Tuple: `tuple_as_dict`) observations as one flat vector: the `keep`
    keys (all where None), each flattened (a Discrete one-hot) and side by side, in the space's
    order; others as they are."""
    env = tuple_as_dict(env)
    if not isinstance(env.observation_space, spaces.Dict):
        if keep is not None:
            raise EnvError(f"{name}: env_kwargs obs_keys is for Dict (and Tuple) observation "
                           f"spaces; this env's is {env.observation_space}.")  # fmt: skip
        return env
    if keep is not None:
        missing = sorted(set(keep) - set(env.observation_space.spaces))
        if missing:
            keys = ", ".join(env.observation_space.spaces)
            raise EnvError(f"{name}: env_kwargs obs_keys names {', '.join(missing)}, not keys "
                           f"of its observations ({keys}).")  # fmt: skip
        env = gymnasium.wrappers.FilterObservation(env, keep)
    assert isinstance(env.observation_space, spaces.Dict)
    dict_layout(env.observation_space, name)  # refuses what cannot be packed, naming the key
    return gymnasium.wrappers.FlattenObservation(env)


def make_gym_env(env_id: str, registered_id: str, kwargs: dict) -> gymnasium.Env:
    """`gymnasium.make` whose failures (missing simulator, bad kwargs) become `EnvError`."""
    try:
        return gymnasium.make(registered_id, **kwargs)
    except (gymnasium.error.DependencyNotInstalled, ImportError) as e:
        entry_point = str(gymnasium.spec(registered_id).entry_point).lower()
        extra = next((x for key, x in _EXTRAS.items() if key in entry_point), None)
        module = _missing_module(e)
        # gymnasium's own text often advises a different `pip install`: keep only one fix
        what = f"module '{module}'" if module else "a simulator it needs"
        detail = "" if "pip install" in str(e) else f" ({type(e).__name__}: {e})"
        fix = (
            f"Install it with `pip install -e '.[{extra}]'` (this project's '{extra}' extra)"
            if extra is not None
            else "Install the package that provides it"
        )
        raise EnvError(
            f"cannot create environment '{env_id}': {what} is not installed{detail}. "
            f"{fix}, then try again."
        ) from e
    except TypeError as e:
        raise EnvError(
            f"cannot create environment '{env_id}' with env_kwargs {kwargs}: {e}. Check the "
            f"keyword arguments against the env's constructor."
        ) from e


def _unknown_env_error(env_id: str, registered_id: str) -> EnvError:
    """`EnvError` for an id that gymnasium does not know, with close matches from its registry
    (the same id spelled in other letter cases first)."""
    known = [k for k in gymnasium.registry if k != registered_id]
    same = [k for k in known if k.lower() == registered_id.lower()]
    matches = same[:1] or difflib.get_close_matches(registered_id, known, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
    package = next((p for prefix, (p, _) in _REGISTERED_ON_IMPORT.items()
                    if registered_id.startswith(prefix)), None)  # fmt: skip
    if package is not None and importlib.util.find_spec(package) is None:
        return EnvError(f"'{env_id}' is an env of the {package} package, which is not installed: "
                        f"`pip install {package}`.")  # fmt: skip
    if registered_id != env_id:
        where = f"module '{env_id.split(':', 1)[0]}' was imported but did not register it"
    else:
        where = "not a built-in torch env and not registered in gymnasium"
    return EnvError(
        f"unknown environment '{registered_id}': {where}.{hint} Check the spelling, or use "
        f"'my_module:MyEnv-v0' so the module that registers it is imported first."
    )


def _import_registering_package(registered_id: str) -> None:
    """Import the package whose import registers `registered_id` (`_REGISTERED_ON_IMPORT`), if
    the id is not registered yet and the package is installed: its ids then need no
    `package:` prefix, as Atari's need none."""
    if registered_id in gymnasium.registry:
        return
    for prefix, (package, register) in _REGISTERED_ON_IMPORT.items():
        if registered_id.startswith(prefix) and importlib.util.find_spec(package) is not None:
            importlib.import_module(package)
            if register is not None:
                module, function = register.split(":")
                getattr(importlib.import_module(module), function)()


def _register_atari() -> bool:
    """Register the Atari games of ale-py with gymnasium; False if ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    gymnasium.register_envs(ale_py)
    return True


def _atari_error(env_id: str, registered_id: str) -> EnvError:
    """`EnvError` for an Atari id that is not registered: ale-py is missing, or has no such id."""
    if not _register_atari():
        return EnvError(
            f"'{env_id}' is an Atari game, and Atari envs need the ale-py package "
            f"(`pip install -e '.[atari]'`, or `pip install ale-py`; it ships the game ROMs)."
        )
    games = sorted(i for i in gymnasium.registry if i.startswith("ALE/"))
    close = difflib.get_close_matches(registered_id, games, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return EnvError(
        f"'{env_id}' looks like an Atari id, but ale-py (installed) registers no such game.{hint} "
        f"ale-py's ids are 'ALE/<Game>-v5' (and '<Game>NoFrameskip-v4'); RAM observations are "
        f"an option of those ids (--set env_kwargs={{obs_type: ram}}), not ids of their own."
    )


def time_limit_of(env: gymnasium.Env) -> int | None:
    """`max_episode_steps` of a TimeLimit wrapper around `env`, if there is one."""
    while isinstance(env, gymnasium.Wrapper):
        if isinstance(env, gymnasium.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        env = env.env
    return None
