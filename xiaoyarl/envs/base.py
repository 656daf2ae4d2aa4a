"""The vectorized-environment contract (`VecEnv`, `EnvSpec`) and the base of torch-native envs.

Every environment the runner sees holds `num_envs` sub-environments and speaks torch tensors:

- `reset(seed) -> (state, info)`, `state: (num_envs, state_dim)` float32.
- `step(action) -> (state, reward, terminated, truncated, info)`; `reward`, `terminated`,
  `truncated` have shape `(num_envs,)`. Discrete actions are int64 `(num_envs,)`; continuous
  actions are `(num_envs, action_dim)` in `[-1, 1]` and the env rescales them to its bounds.
- Sub-environments reset themselves when `terminated | truncated`. `info["final_state"]`
  `(num_envs, state_dim)` holds the observation each sub-environment reached in this step
  *before* any auto-reset: it equals `state` where the episode goes on, and is the last
  observation of the episode where it ended, so agents can bootstrap through truncation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from xiaoyarl.errors import EnvError

# Target returns for envs whose gymnasium registration has no reward threshold.
# Pendulum-v1: -200 is the customary "solved" level (an upright, still pendulum scores ~-150).
DEFAULT_TARGET_RETURNS: dict[str, float] = {
    "Pendulum-v1": -200.0,
    "Hopper-v5": 3000.0,
    "HalfCheetah-v5": 4800.0,
    "Walker2d-v5": 3000.0,
    "Ant-v5": 4000.0,
    "Humanoid-v5": 5000.0,
}


@dataclass(frozen=True)
class EnvSpec:
    """What an agent needs to know about a vectorized env.

    `action_dim` is the number of discrete actions when `if_discrete`, else the length of the
    continuous action vector. `action_low/high` are the env's own bounds (continuous only);
    agents always act in `[-1, 1]`. `target_return` is None when nothing defines "solved".
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


class VecEnv:
    """Base class of every vectorized env: see the module docstring for the contract."""

    spec: EnvSpec
    device: torch.device

    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
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
    `_sample_initial`, `_dynamics` and `_observe`. This class does the rest: the time limit,
    auto-reset (on a CPU fresh states are drawn for the finished sub-envs only; on an
    accelerator for every sub-env and selected with `torch.where`, so a step never syncs with
    the host), `final_state`, seeding and `state_dict`.
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

    def __init__(
        self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None
    ) -> None:
        if num_envs < 1:
            raise EnvError(f"num_envs must be a positive integer, got {num_envs}.")
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.spec = EnvSpec(
            name=self.name,
            num_envs=num_envs,
            state_dim=self.state_dim,
            action_dim=self.action_dim,
            if_discrete=self.if_discrete,
            max_step=self.max_step,
            target_return=self.target_return,
            action_low=self.action_low,
            action_high=self.action_high,
        )
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else seed)
        self.sim_state = self._sample_initial(num_envs)  # (num_envs, sim_dim)
        self.elapsed = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    # --- what a simulator implements ---
    def _sample_initial(self, n: int) -> torch.Tensor:
        """Draw `n` initial simulator states `(n, sim_dim)` from `self.generator`."""
        raise NotImplementedError

    def _dynamics(
        self, sim_state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One transition for all sub-envs: `(next_sim_state, reward, terminated)`."""
        raise NotImplementedError

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        """Observation `(n, state_dim)` float32 of simulator states `(n, sim_dim)`: a new
        tensor, never a view of `sim_state` (on a CPU, `step` resets finished sub-envs in place
        after taking `final_state`)."""
        raise NotImplementedError

    # --- the contract ---
    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self.sim_state = self._sample_initial(self.num_envs)
        self.elapsed.zero_()
        return self._observe(self.sim_state), {}

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        expected = (self.num_envs,) if self.if_discrete else (self.num_envs, self.action_dim)
        if action.shape != expected:
            kind = "int64 indices" if self.if_discrete else "floats in [-1, 1]"
            raise EnvError(
                f"{self.name}: step() expects actions of shape {expected} ({kind}), "
                f"got {tuple(action.shape)}."
            )
        sim_state, reward, terminated = self._dynamics(self.sim_state, action)
        self.elapsed += 1
        truncated = self.elapsed >= self.max_step
        final_state = self._observe(sim_state)

        done = terminated | truncated
        if self.device.type == "cpu":
            # only the finished sub-envs draw fresh states: on a CPU, drawing them for all
            # num_envs every step costs about as much as the dynamics themselves
            index = done.nonzero().squeeze(1)
            if index.numel():  # most steps of a few sub-envs end no episode
                sim_state.index_copy_(0, index, self._sample_initial(index.numel()))
                self.elapsed.index_fill_(0, index, 0)
            self.sim_state = sim_state
        else:  # on an accelerator a data-dependent size would sync with the host
            fresh = self._sample_initial(self.num_envs)
            self.sim_state = torch.where(done.unsqueeze(1), fresh, sim_state)
            self.elapsed.masked_fill_(done, 0)
        state = self._observe(self.sim_state)
        return state, reward, terminated, truncated, {"final_state": final_state}

    def set_sim_state(self, sim_state: torch.Tensor, elapsed: torch.Tensor | None = None) -> None:
        """Put every sub-env into a given simulator state (tests, demonstrations, curricula)."""
        if sim_state.shape != (self.num_envs, self.sim_dim):
            raise EnvError(
                f"{self.name}: sim_state must have shape ({self.num_envs}, {self.sim_dim}), "
                f"got {tuple(sim_state.shape)}."
            )
        self.sim_state = sim_state.to(self.device, torch.float32).clone()
        if elapsed is not None:
            self.elapsed = elapsed.to(self.device, torch.int64).clone()

    def state_dict(self) -> dict:
        return {
            "sim_state": self.sim_state.clone(),
            "elapsed": self.elapsed.clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.sim_state = state["sim_state"].to(self.device).clone()
        self.elapsed = state["elapsed"].to(self.device).clone()
        self.generator.set_state(state["generator"])
