"""The vectorized-environment contract (`VecEnv`, `EnvSpec`) and the base of torch-native envs.

Every environment the runner sees holds `num_envs` sub-environments and speaks torch tensors:

- `reset(seed) -> (state, info)`, `state: (num_envs, *spec.obs_shape)` of `spec.obs_dtype`: a
  float32 vector `(num_envs, state_dim)` for most envs; an image such as `(num_envs, C, H, W)`
  uint8 or bool stays in its own dtype (4x less memory than float32 in rollouts and replay) and
  is converted on the device inside the network (`core/encoders.py`).
- `step(action) -> (state, reward, terminated, truncated, info)`; `reward`, `terminated`,
  `truncated` have shape `(num_envs,)`. Discrete actions are int64 `(num_envs,)`; continuous
  actions are `(num_envs, action_dim)` in `[-1, 1]` and the env rescales them to its bounds.
- `terminated`: the episode ended for good (no value after it). `truncated`: the step reached
  the time limit `spec.max_step`, whether or not the episode also terminated there, so a
  terminal step at the time limit has both flags set (gymnasium's convention, and what its
  `TimeLimit` wrapper returns). Termination takes precedence wherever both are read: agents
  bootstrap only where `truncated & ~terminated`, and the episode ends where either is set.
  Adapters pass their env's flags on; some never set both (playground, PettingZoo), which
  the rule allows.
- Sub-environments reset themselves when `terminated | truncated`. `info["final_state"]`
  `(num_envs, state_dim)` holds the observation each sub-environment reached in this step
  *before* any auto-reset: it equals `state` where the episode goes on, and is the last
  observation of the episode where it ended, so agents can bootstrap through truncation.
- Optional, for videos (`xiaoyarl record`): a torch-native env that can picture itself draws one
  sub-env's state as reset and step return it (`state[i]`, or `info["final_state"][i]` where an
  episode ended) with `render_state(state) -> (height, width, 3)` uint8, at `render_fps` frames
  a second; an adapter whose simulator draws itself renders sub-env `i` as the last reset or
  step left it (before any auto-reset) with `render_frame(i)` (`envs/multi/pettingzoo.py`).

`TorchVecEnv` is the base of torch-native simulators: the time limit (with the rule above),
auto-reset, seeding, `set_sim_state` and `state_dict` live there once, and the multi-agent
`TorchMultiAgentVecEnv` (`envs/multi/base.py`) extends it.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

import torch

from xiaoyarl.errors import EnvError


@dataclass(frozen=True)
class EnvSpec:
    """What an agent needs to know about a vectorized env.

    `action_dim` is the number of discrete actions when `if_discrete`, else the length of the
    continuous action vector. Multi-discrete actions (`action_nvec`: the number of choices of
    each of K components; MultiBinary is K twos) are int64 `(num_envs, K)`, and `action_dim` is
    `sum(action_nvec)`. Dict observations arrive packed in one float32 vector, the keys side by
    side; `obs_keys` says how to unpack them: `(key, shape, kind)` per key, kind "uint8" (an
    image or other uint8 Box, values 0-255), "float" (another Box) or "onehot" (a Discrete).
    With `action_mask`, `info["action_mask"]` holds the actions allowed in the returned state
    and `info["final_action_mask"]` those of `final_state` (discrete actions).
    `action_low/high` are the env's own bounds (continuous only); agents always act in
    `[-1, 1]`. `target_return` is None when nothing defines "solved".
    A Dict or Tuple action space (`action_parts`, `envs/actions.py`) is read as one of those
    kinds by what its parts are: multi-discrete, continuous, or *hybrid* (`if_hybrid`: discrete
    and continuous parts; float32 `(num_envs, K + C)`, the K discrete choices of `action_nvec`
    then the C = `action_dim` continuous values in `[-1, 1]`).
    """

    name: str
    num_envs: int
    state_dim: int
    action_dim: int
    if_discrete: bool
    max_step: int
    target_return: float | None
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    obs_shape: tuple[int, ...] = ()
    obs_dtype: torch.dtype = torch.float32
    action_nvec: tuple[int, ...] | None = None
    obs_keys: tuple[tuple[str, tuple[int, ...], str], ...] | None = None  # Dict: see below
    action_mask: bool = False  # info["action_mask"] (num_envs, action_dim) bool: allowed actions
    frame_stack: int = 1  # > 1: obs_shape[0] holds the last frame_stack frames, oldest first
    channels_last: bool | None = None  # 3-D images: (H, W, C) or (C, H, W); None: by the shape
    action_parts: tuple | None = None  # a Dict or Tuple action space's parts (envs/actions.py)

    def __post_init__(self) -> None:  # () is a vector of state_dim (frozen: set it this way)
        object.__setattr__(self, "obs_shape", tuple(self.obs_shape) or (self.state_dim,))

    @property
    def if_hybrid(self) -> bool:
        """Whether actions have discrete and continuous parts (see the class)."""
        return not self.if_discrete and self.action_nvec is not None


class VecEnv:
    """Base class of every vectorized env: see the module docstring for the contract."""

    spec: EnvSpec
    device: torch.device

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        """Start new episodes in every sub-env: `(obs (num_envs, *obs_shape), info)`; `seed`
        reseeds the env."""
        raise NotImplementedError

    def step(self, action: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:  # fmt: skip
        """One step of every sub-env: `(obs, reward, terminated, truncated, info)`, each
        `(num_envs, ...)`; finished sub-envs reset themselves, `info["final_state"]` keeps the
        state they ended in."""
        raise NotImplementedError

    def close(self) -> None:
        """Release processes or handles the env holds (a no-op for torch-native envs)."""

    def state_dict(self) -> dict:
        """Simulator state needed to continue bit-exactly after a resume ({} if not restorable)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned; adapters that cannot restore ignore it."""

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TorchVecEnv(VecEnv):
    """A batched simulator written in torch, stepping all sub-envs with tensor ops on one device.

    Subclasses set `name`, `state_dim`, `sim_dim`, `action_dim`, `if_discrete`, `max_step`,
    `target_return` (and `action_low/high` when continuous) as class attributes and implement
    `_sample_initial`, `_dynamics` and `_observe`. This class does the rest: the time limit
    (`truncated = elapsed >= max_step`, see the module docstring), auto-reset (on a CPU fresh
    states are drawn for the finished sub-envs only; on an accelerator for every sub-env and
    selected with `torch.where`, so a step never syncs with the host), `final_state`, seeding,
    `set_sim_state` and `state_dict`.

    `TorchMultiAgentVecEnv` extends it: it overrides `_make_spec`, `_check_action`,
    `_final_outputs` and `_next_outputs` (its spec, action checks and what a step returns).
    """

    name: str
    state_dim: int
    sim_dim: int
    action_dim: int
    if_discrete: bool
    max_step: int
    target_return: float | None
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    sim_dtype: torch.dtype = torch.float32  # of `sim_state` (a simulator of integers may differ)
    # set in __init__; declared here so that subclasses and methods see their types
    num_envs: int
    generator: torch.Generator
    sim_state: torch.Tensor  # (num_envs, sim_dim)
    elapsed: torch.Tensor  # (num_envs,) int64 steps since the last reset

    def __init__(self, num_envs: int, device: str | torch.device = "cpu",
                 seed: int | None = None) -> None:  # fmt: skip
        if not isinstance(num_envs, numbers.Integral) or num_envs < 1:
            raise EnvError(f"num_envs must be a positive integer, got {num_envs!r}.")
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.spec = self._make_spec()
        self.generator = torch.Generator(device=self.device).manual_seed(seed or 0)
        self.sim_state = self._sample_initial(self.num_envs)  # (num_envs, sim_dim)
        self.elapsed = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)

    # --- what a simulator implements ---
    def _sample_initial(self, n: int) -> torch.Tensor:
        """Draw `n` initial simulator states `(n, sim_dim)` from `self.generator`."""
        raise NotImplementedError

    def _dynamics(self, sim_state: torch.Tensor, action: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """One transition for all sub-envs: `(next_sim_state, reward, terminated)`.
        `self.elapsed` still counts the steps before this one."""
        raise NotImplementedError

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        """Observation `(n, *obs_shape)` of `obs_dtype` (float32 `(n, state_dim)` by default)
        of simulator states `(n, sim_dim)`: a new
        tensor, never a view of `sim_state` (on a CPU, `step` resets finished sub-envs in place
        after taking `final_state`)."""
        raise NotImplementedError

    # --- what the multi-agent base changes ---
    def _make_spec(self) -> EnvSpec:
        """The env's spec: each field is the attribute of the same name (class attributes and
        `self.num_envs`)."""
        fields = dataclasses.fields(EnvSpec)  # obs_shape, obs_dtype where set (a vector if not)
        return EnvSpec(**{f.name: getattr(self, f.name) for f in fields if hasattr(self, f.name)})

    def _check_action(self, action: torch.Tensor) -> None:
        """Raise `EnvError` unless `action` has the contract's shape."""
        expected = (self.num_envs,) if self.if_discrete else (self.num_envs, self.action_dim)
        if action.shape != expected:
            kind = "int64 indices" if self.if_discrete else "floats in [-1, 1]"
            raise EnvError(f"{self.name}: step() expects actions of shape {expected} ({kind}), "
                           f"got {tuple(action.shape)}.")  # fmt: skip

    def _final_outputs(self, sim_state: torch.Tensor) -> dict[str, torch.Tensor]:
        """What each sub-env reached in this step, before any auto-reset: `{"final_state"}`."""
        return {"final_state": self._observe(sim_state)}

    def _next_outputs(self, final: dict[str, torch.Tensor],
                      reset_any: bool) -> tuple[torch.Tensor, dict]:  # fmt: skip
        """The returned state and info (holding `final`) of `self.sim_state` after the
        auto-reset; where no sub-env reset, the state is a copy of `final["final_state"]`."""
        state = self._observe(self.sim_state) if reset_any else final["final_state"].clone()
        return state, final

    # --- the contract ---
    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        """Draw fresh initial states for every sub-env (from `seed` when given)."""
        if seed is not None:
            self.generator.manual_seed(seed)
        self.sim_state = self._sample_initial(self.num_envs)
        self.elapsed.zero_()
        return self._observe(self.sim_state), {}

    def step(self, action: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:  # fmt: skip
        """Step every sub-env with `_dynamics`, apply the time limit, reset finished ones."""
        self._check_action(action)
        sim_state, reward, terminated = self._dynamics(self.sim_state, action)
        self.elapsed += 1
        truncated = self.elapsed >= self.max_step  # terminal or not: see the module docstring
        final = self._final_outputs(sim_state)  # before the auto-reset overwrites sim_state
        reset_any = self._auto_reset(sim_state, terminated | truncated)
        state, info = self._next_outputs(final, reset_any)
        return state, reward, terminated, truncated, info

    def _auto_reset(self, sim_state: torch.Tensor, done: torch.Tensor) -> bool:
        """Make `sim_state` `(num_envs, sim_dim)` the current state, with fresh initial states
        and zeroed step counters where `done` `(num_envs,)`. False when no sub-env reset (known
        on a CPU only; on an accelerator it is always True, as knowing would sync)."""
        if self.device.type != "cpu":  # on an accelerator a data-dependent size would sync
            fresh = self._sample_initial(self.num_envs)
            self.sim_state = torch.where(done.unsqueeze(1), fresh, sim_state)
            self.elapsed.masked_fill_(done, 0)
            return True
        # only the finished sub-envs draw fresh states: on a CPU, drawing them for all
        # num_envs every step costs about as much as the dynamics themselves
        index = done.nonzero().squeeze(1)
        self.sim_state = sim_state
        if not index.numel():  # most steps of a few sub-envs end no episode
            return False
        sim_state.index_copy_(0, index, self._sample_initial(index.numel()))
        self.elapsed.index_fill_(0, index, 0)
        return True

    def uniform_rows(self, n: int, low: float, high: float, dim: int) -> torch.Tensor:
        """`(dim, n)` samples uniform in `[low, high)` from the env's own generator (a
        simulator's initial states, stored variable-major: `.T` gives `(n, dim)`)."""
        u = torch.rand((dim, n), generator=self.generator, device=self.device)
        return u.mul_(high - low).add_(low)

    def set_sim_state(self, sim_state: torch.Tensor, elapsed: torch.Tensor | None = None) -> None:
        """Put every sub-env into a given simulator state (tests, demonstrations, curricula)."""
        if tuple(sim_state.shape) != (self.num_envs, self.sim_dim):
            raise EnvError(f"{self.name}: sim_state must have shape ({self.num_envs}, "
                           f"{self.sim_dim}), got {tuple(sim_state.shape)}.")  # fmt: skip
        self.sim_state = sim_state.to(self.device, self.sim_dtype).clone()
        if elapsed is not None:
            self.elapsed = elapsed.to(self.device, torch.int64).clone()

    def state_dict(self) -> dict:
        """The simulator states, step counters and generator: a resume continues bit-exactly."""
        return {"sim_state": self.sim_state.clone(), "elapsed": self.elapsed.clone(),
                "generator": self.generator.get_state()}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned, on this env's device."""
        self.sim_state = state["sim_state"].to(self.device, self.sim_dtype).clone()
        self.elapsed = state["elapsed"].to(self.device).clone()
        self.generator.set_state(state["generator"])
