"""The multi-agent vectorized-environment contract (`MultiAgentVecEnv`, `MultiAgentEnvSpec`).

It mirrors the single-agent `VecEnv` (`envs/base.py`) with an agent axis after the env axis.
An env holds `num_envs` sub-environments of `num_agents` agents each and speaks torch tensors
on its device (A = num_agents, D = obs_dim):

- `reset(seed) -> (obs, info)`: `obs (num_envs, A, D)` float32; `info["state"]
  (num_envs, state_dim)` float32 is the global state a centralized critic or mixer sees;
  `info["avail_actions"] (num_envs, A, n_actions)` bool is present when
  `spec.has_action_mask` (discrete envs whose actions are sometimes unavailable).
- `step(actions) -> (obs, rewards, terminated, truncated, info)`: discrete actions are int64
  `(num_envs, A)`; continuous actions are float `(num_envs, A, action_dim)` in `[-1, 1]`, clipped
  to it and rescaled linearly by the env to its own bounds. `rewards (num_envs, A)` float32;
  `terminated`, `truncated` `(num_envs,)` bool, one episode per sub-env shared by its agents.
- The flags follow the single-agent rule: `terminated` means the episode ended for good;
  `truncated` means the step reached the time limit `spec.max_step`, whether or not the episode
  also terminated there, so a terminal step at the time limit has both set (gymnasium's
  convention). Termination takes precedence wherever both are read: agents bootstrap only
  where `truncated & ~terminated`. Adapters may leave `truncated` False on such a step (the
  PettingZoo one does), which the rule allows.
- Sub-environments reset themselves when `terminated | truncated`. `info["final_obs"]
  (num_envs, A, D)` and `info["final_state"] (num_envs, state_dim)` hold what each sub-env
  reached in this step *before* any auto-reset (equal to `obs` / `info["state"]` where the
  episode goes on); `info["state"]` and `info["avail_actions"]` describe the returned
  (post-reset) observations, i.e. the next decision.
- Invalid actions (wrong shape or dtype, an index out of range, an unavailable action chosen)
  raise `EnvError`.
- Pictures, optional as in the single-agent contract: `render_state(state)` draws a global state
  (`info["state"][i]`, or `info["final_state"][i]` where an episode ended); `render_frame(i)`
  renders sub-env `i` as the last reset or step left it.

Team return: the return of an episode for the team is the sum over agents of their rewards,
except in shared-reward envs (`spec.shared_reward`), where every agent gets the same reward and
the team return is that one reward; `team_reward` applies the convention per step.

`TorchMultiAgentVecEnv` is the base of torch-native simulators. It extends the single-agent
`TorchVecEnv`, whose time limit, auto-reset, step counter, seeding, `set_sim_state` and
`state_dict` it uses as they are; it adds the agent axis, the global state, action masks and
`final_obs`, for subclasses that implement `_sample_initial`, `_dynamics`, `_observe` and
`_global_state`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from xiaoyarl.envs.base import TorchVecEnv, VecEnv
from xiaoyarl.errors import EnvError


@dataclass(frozen=True)
class MultiAgentEnvSpec:
    """What multi-agent algorithms need to know about a vectorized multi-agent env.

    `obs_dim` is the width of every agent's observation (adapters pad narrower ones with zeros);
    `state_dim` the width of the global state. `action_dim` is the number of discrete actions
    when `if_discrete`, else the length of each agent's continuous action vector;
    `action_low/high` are the env's own bounds (continuous only; agents act in `[-1, 1]`).
    `target_return` is the team return that counts as solved, or None. `shared_reward`: every
    agent gets the same reward each step. `has_action_mask`: `info["avail_actions"]` is given.
    """

    name: str
    num_envs: int
    num_agents: int
    obs_dim: int
    state_dim: int
    action_dim: int
    if_discrete: bool
    max_step: int
    target_return: float | None
    shared_reward: bool
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    agent_names: tuple[str, ...] = ()
    has_action_mask: bool = False


def team_reward(spec: MultiAgentEnvSpec, rewards: torch.Tensor) -> torch.Tensor:
    """The team's reward `(num_envs,)` of per-agent rewards `(num_envs, num_agents)`: their
    sum, or the common reward (agent 0's) in a shared-reward env. Summed over an episode it
    gives the team return that `spec.target_return` is measured in."""
    return rewards[:, 0] if spec.shared_reward else rewards.sum(dim=1)


class MultiAgentVecEnv(VecEnv):
    """Base class of every multi-agent vectorized env: see the module docstring. `close`,
    `state_dict`, `load_state_dict` and the context manager are the single-agent `VecEnv`'s."""

    spec: MultiAgentEnvSpec  # type: ignore[assignment]

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        raise NotImplementedError

    # --- shared checks -------------------------------------------------------------------------
    def _check_action_layout(self, actions: torch.Tensor) -> None:
        """Raise `EnvError` unless `actions` has the contract's shape and dtype (no host sync)."""
        spec = self.spec
        if not isinstance(actions, torch.Tensor):
            raise EnvError(
                f"{spec.name}: step() expects a torch.Tensor of actions, got "
                f"{type(actions).__name__}."
            )
        expected: tuple[int, ...]
        if spec.if_discrete:
            expected, kind = (spec.num_envs, spec.num_agents), "int64 action indices"
            dtype_ok = actions.dtype == torch.int64
        else:
            expected = (spec.num_envs, spec.num_agents, spec.action_dim)
            kind = "floats in [-1, 1]"
            dtype_ok = actions.is_floating_point()
        if tuple(actions.shape) != expected:
            raise EnvError(
                f"{spec.name}: step() expects actions of shape {expected} ((num_envs, "
                f"num_agents{'' if spec.if_discrete else ', action_dim'}) {kind}), got "
                f"{tuple(actions.shape)}."
            )
        if not dtype_ok:
            raise EnvError(
                f"{spec.name}: step() expects {kind}, got dtype {actions.dtype}"
                + (" (convert with .long())." if spec.if_discrete else ".")
            )

    def _check_action_values(
        self, actions: torch.Tensor, avail_actions: torch.Tensor | None
    ) -> None:
        """Raise `EnvError` on a discrete index out of range or an unavailable action chosen.

        Reads the actions on the host (a sync on an accelerator)."""
        spec = self.spec
        if not spec.if_discrete:
            return
        bad = (actions < 0) | (actions >= spec.action_dim)  # (num_envs, A)
        if bad.any():
            i, j = (int(x) for x in bad.nonzero()[0])
            raise EnvError(
                f"{spec.name}: sub-env {i}, agent {j} ({self._agent_name(j)}) chose action "
                f"{int(actions[i, j])}, outside 0..{spec.action_dim - 1}."
            )
        if avail_actions is None:
            return
        chosen = avail_actions.gather(2, actions.unsqueeze(2)).squeeze(2)  # (num_envs, A)
        if not chosen.all():
            i, j = (int(x) for x in (~chosen).nonzero()[0])
            allowed = avail_actions[i, j].nonzero().squeeze(1).tolist()
            raise EnvError(
                f"{spec.name}: sub-env {i}, agent {j} ({self._agent_name(j)}) chose action "
                f"{int(actions[i, j])}, which is unavailable (masked out); available actions: "
                f"{allowed}. Sample from info['avail_actions'] of the previous reset()/step()."
            )

    def _agent_name(self, j: int) -> str:
        names = self.spec.agent_names
        return names[j] if j < len(names) else f"agent_{j}"


class TorchMultiAgentVecEnv(TorchVecEnv, MultiAgentVecEnv):
    """A batched multi-agent simulator in torch: all sub-envs step with tensor ops on one device.

    A subclass sets, before calling `super().__init__`, the attributes `name`, `num_agents`,
    `obs_dim`, `state_dim`, `sim_dim`, `action_dim`, `if_discrete`, `max_step`,
    `target_return`, `shared_reward`, `agent_names` (and `action_low/high` when continuous),
    and implements `_sample_initial`, `_dynamics`, `_observe` and `_global_state` (and
    `_avail_actions` when some actions are sometimes unavailable). `TorchVecEnv` does the time
    limit, auto-reset, seeding, `set_sim_state` and `state_dict`; this class adds the
    multi-agent action checks, observations with an agent axis, the global state and masks,
    and `final_obs`.

    `check_actions`: also check action values (index range, masks). That reads the actions on
    the host, a sync per step on an accelerator; turn it off there once a policy is trusted.
    """

    name: str
    num_agents: int
    obs_dim: int
    state_dim: int
    sim_dim: int
    action_dim: int
    if_discrete: bool
    max_step: int
    target_return: float | None
    shared_reward: bool
    agent_names: tuple[str, ...]
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    has_action_mask: bool = False

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        check_actions: bool = True,
    ) -> None:
        self.check_actions = check_actions
        super().__init__(num_envs, device, seed)
        self._avail: torch.Tensor | None = None  # masks of the last returned observations

    # --- what a simulator implements -----------------------------------------------------------
    def _dynamics(
        self, sim_state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One transition of all sub-envs: `(next_sim_state (n, sim_dim), rewards (n, A),
        terminated (n,))`. `self.elapsed` still counts the steps before this one."""
        raise NotImplementedError

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        """Observations `(n, A, obs_dim)` float32: a new tensor, never a view of `sim_state`."""
        raise NotImplementedError

    def _global_state(self, sim_state: torch.Tensor) -> torch.Tensor:
        """Global state `(n, state_dim)` float32: a new tensor, never a view of `sim_state`."""
        raise NotImplementedError

    def _avail_actions(self, sim_state: torch.Tensor) -> torch.Tensor | None:
        """Available actions `(n, A, action_dim)` bool, or None when all always are."""
        return None

    # --- what differs from the single-agent simulator ------------------------------------------
    def _make_spec(self) -> MultiAgentEnvSpec:  # type: ignore[override]
        # differs: the multi-agent spec
        return MultiAgentEnvSpec(
            name=self.name,
            num_envs=self.num_envs,
            num_agents=self.num_agents,
            obs_dim=self.obs_dim,
            state_dim=self.state_dim,
            action_dim=self.action_dim,
            if_discrete=self.if_discrete,
            max_step=self.max_step,
            target_return=self.target_return,
            shared_reward=self.shared_reward,
            action_low=self.action_low,
            action_high=self.action_high,
            agent_names=tuple(self.agent_names),
            has_action_mask=self.has_action_mask,
        )

    def _check_action(self, actions: torch.Tensor) -> None:
        # differs: joint actions' layout and dtype, and (with check_actions) values and masks
        self._check_action_layout(actions)
        if self.check_actions:
            self._check_action_values(actions, self._avail)

    def _final_outputs(self, sim_state: torch.Tensor) -> dict[str, torch.Tensor]:
        # differs: the agents' observations and the global state
        return {"final_obs": self._observe(sim_state), "final_state": self._global_state(sim_state)}

    def _next_outputs(
        self, final: dict[str, torch.Tensor], reset_any: bool
    ) -> tuple[torch.Tensor, dict]:
        # differs: observations (n, A, obs_dim) and an info with the state and masks
        if reset_any:
            obs, info = self._observe(self.sim_state), self._info(self.sim_state)
        else:  # the returned obs are final_obs (as copies)
            obs = final["final_obs"].clone()
            info = self._info(self.sim_state, state=final["final_state"].clone())
        return obs, {**info, **final}

    def _info(self, sim_state: torch.Tensor, state: torch.Tensor | None = None) -> dict:
        """`{"state"}` (given, or computed) and `"avail_actions"` when the env has masks."""
        info = {"state": self._global_state(sim_state) if state is None else state}
        self._avail = self._avail_actions(sim_state)
        if self._avail is not None:
            info["avail_actions"] = self._avail
        return info

    # --- the contract --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[torch.Tensor, dict]:
        obs, _ = super().reset(seed)
        return obs, self._info(self.sim_state)  # differs: the global state and masks

    def set_sim_state(self, sim_state: torch.Tensor, elapsed: torch.Tensor | None = None) -> None:
        super().set_sim_state(sim_state, elapsed)
        self._avail = self._avail_actions(self.sim_state)  # differs: the new state's masks

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self._avail = self._avail_actions(self.sim_state)  # differs: the restored state's masks
