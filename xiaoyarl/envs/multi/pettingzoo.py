"""`PettingZooVecEnv`: any PettingZoo *parallel* env behind the `MultiAgentVecEnv` contract.

The id `"module:env_fn"` names the env: `module` is imported and `env_fn` looked up in it
(dots go deeper; a missing attribute is tried as a submodule). If what is found has a
`parallel_env` attribute (a PettingZoo env module such as `mpe2.simple_spread_v3`) that is
called, else it must be callable itself: `"mpe2:simple_spread_v3"` builds
`mpe2.simple_spread_v3.parallel_env(**env_kwargs)`.

The `num_envs` sub-envs are separate instances stepped by a Python loop in this process (like
`GymVecEnv`'s sync mode), writing into preallocated numpy arrays that cross to torch once per
step. Agents are `possible_agents`, in their order (A of them):

- Observations: each agent's `Box` observation (or the `"observation"` entry of a dict that
  also holds an `"action_mask"`), flattened to float32 and padded with zeros to the widest
  agent's size `obs_dim`: `(num_envs, A, obs_dim)`.
- Global state: the env's `state()` flattened, when it implements one; else the agents'
  padded observations concatenated `(A * obs_dim,)`.
- Actions: all agents `Discrete` (`action_dim` = the largest `n`; an agent with fewer actions
  has the others masked out) or all `Box` with finite bounds (`action_dim` = the longest; an
  agent uses the first entries of its row, each rescaled linearly from `[-1, 1]` to its bounds).
- Action masks: from `"action_mask"` in a dict observation or in an agent's info, as
  `info["avail_actions"] (num_envs, A, action_dim)` bool; present (`spec.has_action_mask`)
  when the env has masks or agents' action counts differ.
- Episodes: agents that finish before the others get zero observations, zero rewards and
  all-available masks until the sub-env's episode ends, which is when every agent is done (the
  env's `agents` list is empty) or after `spec.max_step` steps. The sub-env is then
  `truncated` if the time limit (the env's own or the adapter's) cut it, else `terminated`,
  and it auto-resets. `spec.max_step` is `env_kwargs["max_episode_steps"]` if given (taken
  out of the env's kwargs), else the env's `max_cycles`/`max_steps`, else `DEFAULT_MAX_STEP`.
- Seeding: `reset(seed)` resets sub-env i with `seed + i`; the constructor's seed is used by
  the first `reset()` that is given none; auto-resets continue each sub-env's own generator.
- Pictures (`xiaoyarl record`): with `env_kwargs["render_mode"] == "rgb_array"` (passed on to
  the env, as gymnasium's `make` takes it) `render_frame(i)` is sub-env i's own `render()`;
  where its episode ended in the last step, the picture it rendered before the auto-reset.

PettingZoo and the simulators are optional: `pip install -e '.[multi]'` installs pettingzoo and
mpe2.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from xiaoyarl.envs.gym import is_image_space
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec, MultiAgentVecEnv
from xiaoyarl.errors import EnvError

DEFAULT_MAX_STEP = 1000  # time limit given to envs that declare none

INSTALL_ADVICE = "install the multi-agent extra with `pip install -e '.[multi]'` (pettingzoo, mpe2)"
_EXTRA_MODULES = ("pettingzoo", "mpe2")  # modules that the 'multi' extra installs
# the multi-agent agents read vectors (each agent's observation with its id); image encoders are
# the single-agent agents'
_IMAGE_ADVICE = (
    "the multi-agent algorithms read vector observations, not images; wrap the env so that each "
    "agent observes a feature vector (e.g. its state), in your own module, and pass "
    "'my_module:env_fn'"
)
_OBS_ADVICE = (
    "PettingZooVecEnv needs Box observations (or a dict with a Box 'observation' and an "
    "'action_mask'); wrap the env (e.g. with supersuit's flatten wrappers) in your own module "
    "and pass 'module:env_fn'"
)


def _require_pettingzoo() -> ModuleType:
    try:
        return importlib.import_module("pettingzoo")
    except ImportError as e:
        raise EnvError(f"PettingZoo envs need the pettingzoo package: {INSTALL_ADVICE}.") from e


def resolve_env_fn(env_id: str) -> Any:
    """The callable that builds the parallel env named by `"module:env_fn"`."""
    if env_id.count(":") != 1:
        raise EnvError(
            f"'{env_id}' is not a PettingZoo env id: use 'module:env_fn', e.g. "
            f"'mpe2:simple_spread_v3' or 'pettingzoo.butterfly:pistonball_v6'."
        )
    module_name, attr_path = env_id.split(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        missing = getattr(e, "name", None) or module_name
        if missing.split(".")[0] in _EXTRA_MODULES:
            fix = INSTALL_ADVICE
        else:
            fix = f"install the package that provides '{missing}' or put it on PYTHONPATH"
        raise EnvError(
            f"cannot use PettingZoo env '{env_id}': module '{missing}' is not installed "
            f"({type(e).__name__}: {e}); {fix}."
        ) from e
    for part in attr_path.split("."):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        if isinstance(obj, ModuleType):  # e.g. pettingzoo.butterfly does not import its envs
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
                continue
            except ModuleNotFoundError as e:
                if e.name != f"{obj.__name__}.{part}":
                    raise EnvError(
                        f"cannot use PettingZoo env '{env_id}': importing it needs module "
                        f"'{e.name}', which is not installed; install it and try again."
                    ) from e
        raise EnvError(
            f"cannot use PettingZoo env '{env_id}': '{getattr(obj, '__name__', obj)}' has no "
            f"attribute '{part}'. Check the spelling (e.g. 'mpe2:simple_spread_v3')."
        )
    if hasattr(obj, "parallel_env"):
        return obj.parallel_env
    if callable(obj):
        return obj
    raise EnvError(
        f"cannot use PettingZoo env '{env_id}': it names neither a PettingZoo env module (with a "
        f"`parallel_env` function) nor a callable that returns a parallel env."
    )


def _make_parallel(env_id: str, env_fn: Any, kwargs: dict) -> Any:
    """Call `env_fn(**kwargs)` and check that it returned a PettingZoo parallel env."""
    pettingzoo = _require_pettingzoo()
    try:
        env = env_fn(**kwargs)
    except TypeError as e:
        raise EnvError(
            f"cannot create PettingZoo env '{env_id}' with env_kwargs {kwargs}: {e}. Check the "
            f"keyword arguments against the env's constructor."
        ) from e
    if isinstance(env, pettingzoo.AECEnv):
        raise EnvError(
            f"'{env_id}' built an AEC (turn-based) env, {type(env).__name__}; PettingZooVecEnv "
            f"needs a parallel env. Name the env module (whose `parallel_env` is used) or a "
            f"function returning `parallel_env(...)`, or convert it with "
            f"pettingzoo.utils.conversions.aec_to_parallel in your own module."
        )
    required = ("reset", "step", "possible_agents", "observation_space", "action_space")
    if not isinstance(env, pettingzoo.ParallelEnv) and not all(hasattr(env, r) for r in required):
        raise EnvError(
            f"'{env_id}' returned {type(env).__name__}, which is not a PettingZoo parallel env "
            f"(pettingzoo.ParallelEnv with reset, step, possible_agents, observation_space and "
            f"action_space)."
        )
    return env


class PettingZooVecEnv(MultiAgentVecEnv):
    """`num_envs` copies of a PettingZoo parallel env speaking torch tensors on `device`.

    See the module docstring for ids, padding, masks, episode ends and seeding. `envs` is the
    list of the underlying PettingZoo envs (sub-env i is `envs[i]`).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        env_kwargs: dict | None = None,
    ) -> None:
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise EnvError(f"num_envs must be a positive integer, got {num_envs!r}.")
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self._seed = seed
        self._closed = False
        self._needs_reset = True
        self._num_steps = 0
        kwargs = dict(env_kwargs or {})
        max_step = kwargs.pop("max_episode_steps", None)
        self._render_mode = kwargs.get("render_mode")
        # sub-env i's last picture before its auto-reset, where its episode ended in the last step
        self._final_frames: list[np.ndarray | None] = [None] * self.num_envs

        env_fn = resolve_env_fn(env_id)
        self.envs: list[Any] = [_make_parallel(env_id, env_fn, kwargs)]
        try:
            self._read_spaces(self.envs[0])
            self.spec = self._probe(self.envs[0], max_step)
            for _ in range(self.num_envs - 1):
                self.envs.append(_make_parallel(env_id, env_fn, kwargs))
        except BaseException:
            self.close()
            raise

        n, a, d, s = self.num_envs, self._num_agents, self.spec.obs_dim, self.spec.state_dim
        self._obs = np.zeros((n, a, d), dtype=np.float32)
        self._final_obs = np.zeros((n, a, d), dtype=np.float32)
        self._state = np.zeros((n, s), dtype=np.float32)
        self._final_state = np.zeros((n, s), dtype=np.float32)
        self._reward = np.zeros((n, a), dtype=np.float32)
        self._terminated = np.zeros(n, dtype=bool)
        self._truncated = np.zeros(n, dtype=bool)
        self._avail = np.ones((n, a, self.spec.action_dim), dtype=bool)
        self._live = np.zeros((n, a), dtype=bool)  # agents still in their sub-env's episode
        self._elapsed = np.zeros(n, dtype=np.int64)

    # --- construction --------------------------------------------------------------------------
    def _read_spaces(self, env: Any) -> None:
        """Check every agent's spaces; set the per-agent sizes and the action conversions."""
        self._agents = list(env.possible_agents)
        self._index = {agent: j for j, agent in enumerate(self._agents)}
        self._num_agents = len(self._agents)
        if not self._agents:
            raise EnvError(f"{self.env_id}: the env has no possible_agents.")
        self._obs_sizes, self._dict_obs = [], False
        for agent in self._agents:
            space = env.observation_space(agent)
            if isinstance(space, spaces.Dict) and "observation" in space.spaces:
                self._dict_obs = True
                space = space.spaces["observation"]
            if not isinstance(space, spaces.Box) or is_image_space(space):
                why = _IMAGE_ADVICE if isinstance(space, spaces.Box) else _OBS_ADVICE
                raise EnvError(
                    f"{self.env_id}: agent '{agent}' has observation space {space}, which is "
                    f"not supported: {why}."
                )
            self._obs_sizes.append(int(np.prod(space.shape)))

        act_spaces = [env.action_space(agent) for agent in self._agents]
        if all(isinstance(s, spaces.Discrete) for s in act_spaces):
            self._if_discrete = True
            self._act_n = [int(s.n) for s in act_spaces]
            self._act_start = [int(s.start) for s in act_spaces]
            self._action_dim = max(self._act_n)
        elif all(isinstance(s, spaces.Box) for s in act_spaces):
            self._if_discrete = False
            for agent, s in zip(self._agents, act_spaces, strict=True):
                if not (np.isfinite(s.low).all() and np.isfinite(s.high).all()):
                    raise EnvError(
                        f"{self.env_id}: agent '{agent}' has action space {s} with infinite "
                        f"bounds, so actions in [-1, 1] cannot be rescaled to it; give the env "
                        f"finite action bounds."
                    )
            self._act_spaces = act_spaces
            self._act_low = [s.low.reshape(-1) for s in act_spaces]
            self._act_span = [(s.high - s.low).reshape(-1) for s in act_spaces]
            self._act_sizes = [int(np.prod(s.shape)) for s in act_spaces]
            self._action_dim = max(self._act_sizes)
        else:
            kinds = sorted({type(s).__name__ for s in act_spaces})
            raise EnvError(
                f"{self.env_id}: action spaces {kinds} are not supported; PettingZooVecEnv "
                f"needs every agent to have a Discrete action space, or every agent a Box one."
            )

    def _probe(self, env: Any, max_step: int | None) -> MultiAgentEnvSpec:
        """Reset the first env once to find the global state's size and whether masks come."""
        obs, infos = env.reset(seed=self._seed)
        try:
            state = env.state()
            self._has_state = True
            state_dim = int(np.asarray(state).size)
        except NotImplementedError:
            self._has_state = False
            state_dim = self._num_agents * max(self._obs_sizes)
        has_mask = self._if_discrete and (
            self._dict_obs
            or any(isinstance(i, dict) and "action_mask" in i for i in infos.values())
            or len(set(self._act_n)) > 1
        )
        if max_step is None:
            unwrapped = getattr(env, "unwrapped", env)
            max_step = getattr(unwrapped, "max_cycles", None) or getattr(
                unwrapped, "max_steps", None
            )
        if max_step is None:
            max_step = DEFAULT_MAX_STEP
        action_low = action_high = None
        if not self._if_discrete:
            lows = {tuple(s.low.reshape(-1).tolist()) for s in self._act_spaces}
            highs = {tuple(s.high.reshape(-1).tolist()) for s in self._act_spaces}
            if len(lows) == 1 and len(highs) == 1:  # one set of bounds for every agent
                action_low, action_high = lows.pop(), highs.pop()
        metadata = getattr(env, "metadata", None) or {}
        self.render_fps: int | None = metadata.get("render_fps")  # a video's frames a second
        return MultiAgentEnvSpec(
            name=str(metadata.get("name", self.env_id.split(":")[-1])),
            num_envs=self.num_envs,
            num_agents=self._num_agents,
            obs_dim=max(self._obs_sizes),
            state_dim=state_dim,
            action_dim=self._action_dim,
            if_discrete=self._if_discrete,
            max_step=int(max_step),
            target_return=None,
            shared_reward=False,
            action_low=action_low,
            action_high=action_high,
            agent_names=tuple(str(a) for a in self._agents),
            has_action_mask=has_mask,
        )

    # --- the contract --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        """Reset all sub-envs (sub-env i with `seed + i`); obs `(num_envs, A, obs_dim)`."""
        self._check_open()
        if seed is None:
            seed = self._seed  # the constructor's seed, used once
        self._seed = None
        self._final_frames = [None] * self.num_envs
        for i in range(self.num_envs):
            self._reset_one(i, None if seed is None else seed + i, "on reset()")
        self._needs_reset = False
        info = {"state": torch.tensor(self._state, device=self.device)}
        if self.spec.has_action_mask:
            info["avail_actions"] = torch.tensor(self._avail, device=self.device)
        return torch.tensor(self._obs, device=self.device), info

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """One step of every sub-env; see `envs/multi/base.py` for shapes and auto-reset."""
        self._check_open()
        if self._needs_reset:
            raise EnvError(f"{self.spec.name}: call reset() before the first step().")
        self._check_action_layout(actions)
        acts = actions.detach().cpu().numpy()
        if self._if_discrete:  # ranges and masks of the agents still playing
            live = torch.from_numpy(self._live)
            avail = torch.from_numpy(self._avail | ~self._live[:, :, None])
            self._check_action_values(torch.from_numpy(acts) * live, avail)
        else:
            acts = np.clip(acts, -1.0, 1.0)
        self._num_steps += 1
        for i in range(self.num_envs):
            self._step_one(i, acts[i])
        if not (np.isfinite(self._obs).all() and np.isfinite(self._final_obs).all()):
            bad = ~(np.isfinite(self._obs).all((1, 2)) & np.isfinite(self._final_obs).all((1, 2)))
            raise EnvError(
                f"{self.spec.name}: sub-env {int(np.flatnonzero(bad)[0])} returned a NaN or inf "
                f"observation at step {self._num_steps}; check the environment."
            )

        to = self.device
        info = {
            "state": torch.tensor(self._state, device=to),
            "final_obs": torch.tensor(self._final_obs, device=to),
            "final_state": torch.tensor(self._final_state, device=to),
        }
        if self.spec.has_action_mask:
            info["avail_actions"] = torch.tensor(self._avail, device=to)
        return (
            torch.tensor(self._obs, device=to),
            torch.tensor(self._reward, device=to),
            torch.tensor(self._terminated, device=to),
            torch.tensor(self._truncated, device=to),
            info,
        )

    def close(self) -> None:
        """Close every sub-env; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        envs, self.envs = self.envs, []
        for env in envs:
            env.close()

    def render_frame(self, index: int) -> np.ndarray:
        """Sub-env `index` drawn by its env's `render()` as the last reset or step left it: where
        its episode ended in that step, as it ended (before the auto-reset). Needs the env made
        with `env_kwargs["render_mode"] = "rgb_array"`."""
        self._check_open()
        if self._render_mode != "rgb_array":
            raise EnvError(
                f"{self.spec.name}: render_frame needs the env made with env_kwargs "
                f"render_mode='rgb_array' (it was made with render_mode={self._render_mode!r})."
            )
        final = self._final_frames[index]
        return self.envs[index].render() if final is None else final

    # --- one sub-env ---------------------------------------------------------------------------
    def _reset_one(self, i: int, seed: int | None, when: str) -> None:
        """Reset sub-env i and write its first observations, state and masks."""
        env = self.envs[i]
        obs, infos = env.reset(seed=seed)
        self._live[i] = False
        self._avail[i] = True
        self._write_obs(self._obs[i], obs, infos, self._avail[i], i, when)
        for agent in env.agents:
            self._live[i, self._index[agent]] = True
        self._state[i] = self._read_state(env, self._obs[i], i, when)
        self._elapsed[i] = 0

    def _step_one(self, i: int, acts: np.ndarray) -> None:
        env, live = self.envs[i], self._live[i]
        env_actions = {
            agent: self._env_action(self._index[agent], acts[self._index[agent]])
            for agent in env.agents
            if live[self._index[agent]]
        }
        obs, rewards, terminations, truncations, infos = env.step(env_actions)
        when = f"at step {self._num_steps}"
        avail = np.ones_like(self._avail[i])
        self._write_obs(self._final_obs[i], obs, infos, avail, i, when)
        self._reward[i] = 0.0
        for agent, r in rewards.items():
            if agent in self._index:
                self._reward[i, self._index[agent]] = r
        ended_by_time = False
        for agent in set(terminations) | set(truncations):
            term, trunc = bool(terminations.get(agent)), bool(truncations.get(agent))
            if (term or trunc) and agent in self._index:
                live[self._index[agent]] = False
                ended_by_time |= trunc and not term
        live[[self._index[a] for a in self._agents if a not in set(env.agents)]] = False
        self._final_state[i] = self._read_state(env, self._final_obs[i], i, when)
        self._elapsed[i] += 1

        done = not live.any()
        time_limit = self._elapsed[i] >= self.spec.max_step
        self._truncated[i] = (done and ended_by_time) or (time_limit and not done)
        self._terminated[i] = done and not ended_by_time
        ended = done or time_limit
        self._final_frames[i] = env.render() if ended and self._render_mode == "rgb_array" else None
        if ended:
            self._reset_one(i, None, f"on the auto-reset after step {self._num_steps}")
        else:
            self._obs[i] = self._final_obs[i]
            self._state[i] = self._final_state[i]
            self._avail[i] = avail

    def _env_action(self, j: int, action: np.ndarray) -> Any:
        """Agent j's action as its env takes it: an int, or floats rescaled to its Box."""
        if self._if_discrete:
            return int(action) + self._act_start[j]
        a = action[: self._act_sizes[j]]
        a = self._act_low[j] + (a + 1.0) * 0.5 * self._act_span[j]  # [-1, 1] -> [low, high]
        space = self._act_spaces[j]
        return a.astype(space.dtype, copy=False).reshape(space.shape)

    def _write_obs(
        self, out: np.ndarray, obs: dict, infos: dict, avail: np.ndarray, i: int, when: str
    ) -> None:
        """Write the agents' observations into `out (A, obs_dim)` (zeros for absent agents)
        and their action masks into `avail (A, action_dim)`."""
        out[:] = 0.0
        for agent, o in obs.items():
            j = self._index.get(agent)
            if j is None:
                raise EnvError(
                    f"{self.spec.name}: sub-env {i} returned an observation for '{agent}' {when}, "
                    f"which is not one of possible_agents {self._agents}."
                )
            mask = None
            if isinstance(o, dict):
                mask = o.get("action_mask")
                o = o["observation"]
            info = infos.get(agent) if isinstance(infos, dict) else None
            if mask is None and isinstance(info, dict):
                mask = info.get("action_mask")
            flat = np.asarray(o, dtype=np.float32).reshape(-1)
            if flat.size != self._obs_sizes[j]:
                raise EnvError(
                    f"{self.spec.name}: sub-env {i}, agent '{agent}' returned an observation of "
                    f"{flat.size} numbers {when}, but its observation space holds "
                    f"{self._obs_sizes[j]}; check the env's observation_space."
                )
            out[j, : flat.size] = flat
            if self._if_discrete:
                n = self._act_n[j]
                avail[j, n:] = False
                if mask is not None:
                    avail[j, :n] = np.asarray(mask, dtype=bool).reshape(-1)[:n]

    def _read_state(self, env: Any, obs: np.ndarray, i: int, when: str) -> np.ndarray:
        """The env's global state, flat float32, or the concatenated padded observations."""
        if not self._has_state:
            return obs.reshape(-1)
        state = np.asarray(env.state(), dtype=np.float32).reshape(-1)
        if state.size != self.spec.state_dim:
            raise EnvError(
                f"{self.spec.name}: sub-env {i} returned a state of {state.size} numbers {when}, "
                f"expected {self.spec.state_dim}."
            )
        return state

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError(f"{self.env_id}: this PettingZooVecEnv is closed; create a new one.")
