"""MAPPO: Yu et al., "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games",
NeurIPS 2022 Datasets and Benchmarks.

PPO (`agents/ppo.py`: GAE, the clipped objective, reward scaling, mini-batch epochs) with
parameter sharing and a centralized value function: one actor for all agents on its own
observation and agent id, one critic V_i(s) on the global state and the agent id. Each
(sub-env, agent) pair is one of PPO's "sub-envs": its rewards, advantages and returns are the
agent's own (in shared-reward envs they are all the team's). Value normalisation as in the
paper: the critic learns returns standardised with their running mean and variance. The value
loss as in the paper's code (`use_clipped_value_loss`, `use_huber_loss`, `huber_delta` 10): the
larger of the Huber losses of the standardised prediction and of the prediction clipped to
+-ratio_clip around the critic's output before the update (`value_clip`, `value_loss`,
`huber_delta`; off and "mse": PPO's plain squared error). The Huber loss here is the symmetric
one; the paper's code gives errors below -huber_delta no loss at all (its `huber_loss` tests
`e > d`, not `|e| > d`), which we take for a slip rather than the method.
Shapes: T = horizon, E = sub-envs, A = agents, O = observation, S = global state, U = actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.multi.common import (
    JointLayout,
    agent_view,
    joint_evaluation_policy,
    with_agent_ids,
)
from xiaoyarl.agents.ppo import AgentPPO, Rollout
from xiaoyarl.config import Config
from xiaoyarl.core.nets import ActorDiscretePPO, CriticV, RunningNorm
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec, team_reward

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit, Steps


class MultiRollout(NamedTuple):
    """A multi-agent rollout with every (sub-env, agent) pair flattened into PPO's env axis
    (N = E * A), plus the team's view the training loop reads."""

    states: torch.Tensor  # (T, N, O + A) each agent's observation with its id
    next_states: torch.Tensor  # (T, N, O + A) ... of the step each step reached
    actions: torch.Tensor  # (T, N, U) float, or (T, N) int64
    logprobs: torch.Tensor  # (T, N)
    agent_rewards: torch.Tensor  # (T, N) each agent's reward
    agent_terminals: torch.Tensor  # (T, N) bool: its sub-env's episode ended for good
    agent_truncates: torch.Tensor  # (T, N) bool: ... was cut by the time limit
    critic_states: torch.Tensor  # (T, N, S + A) the global state with the agent's id
    next_critic_states: torch.Tensor  # (T, N, S + A) ... of the state each step reached
    avail: torch.Tensor  # (T, N, U) bool (all True without masks); (T, N, 0) continuous
    rewards: torch.Tensor  # (T, E) the team's reward
    terminals: torch.Tensor  # (T, E) bool
    truncates: torch.Tensor  # (T, E) bool


class AgentMAPPO(AgentPPO):
    """MAPPO with a Gaussian actor (continuous actions)."""

    if_multi_agent = True
    # differs: PPO's H-term is single-agent (its search space applies)
    takes_h_term = False

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        # differs: value normalisation and the paper's clipped Huber value loss
        return {**super().defaults(config, batched, device_type), "value_norm": True,
                "value_clip": True, "value_loss": "huber"}  # fmt: skip

    def __init__(self, spec: MultiAgentEnvSpec, config: Config, device: torch.device,
                 learner: bool = True, kit: OptimizerKit | None = None) -> None:  # fmt: skip
        self.multi_spec = spec
        self.layout = JointLayout(spec)
        super().__init__(agent_view(spec), config, device, learner, kit)

    def make_critic(self) -> CriticV:
        # differs: V_i(s) on the global state with the agent's id, its own normaliser
        spec, cfg = self.multi_spec, self.config
        assert cfg.net_dims is not None, "resolve_config sets net_dims"
        width = spec.state_dim + spec.num_agents
        self.critic_norm = RunningNorm(width, bool(cfg.state_norm), cfg.state_norm_clip)
        return CriticV(width, cfg.net_dims, self.critic_norm.to(self.device))

    def next_observation(self, obs: torch.Tensor, info: dict) -> torch.Tensor:
        return self.layout.pack(obs, info["state"], info.get("avail_actions"))

    def critic_view(self, state: torch.Tensor) -> torch.Tensor:
        """Each agent's critic input, `(E, S) -> (E * A, S + A)`."""
        a = self.multi_spec.num_agents
        return with_agent_ids(state.unsqueeze(1).expand(-1, a, -1)).flatten(0, 1)

    # --- acting ---
    def policy(
        self, obs: torch.Tensor, avail: torch.Tensor | None, sample: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Joint actions `(E, A[, U])` (and log-probabilities `(E * A,)` when sampling) for
        observations `(E, A, O)` and masks `(E, A, U)` or None."""
        inputs = with_agent_ids(obs).flatten(0, 1)
        extra = () if avail is None else (avail.flatten(0, 1),)
        if sample:
            action, logprob = self.actor.get_action(inputs, *extra)
        else:
            action, logprob = self.actor(inputs, *extra), None
        return action.view(*obs.shape[:2], *action.shape[1:]), logprob

    @torch.no_grad()
    def act(self, obs: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        """Deterministic joint action for observations `(E, A, O)` (and masks)."""
        return self.policy(obs, avail, sample=False)[0]

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        return joint_evaluation_policy(self)

    # --- exploring ---
    # each agent explores into its own rollout class and learns from it (`update_net`)
    rollout_class: ClassVar[Callable[..., Steps]] = MultiRollout

    def explore_step(self, packed: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        # differs: joint steps; the actor acts for every agent, its log-probability per agent
        joint = self.layout.unpack(packed)
        action, logprob = self.policy(joint.obs, joint.avail, sample=True)
        return self.actor.convert_action_for_env(action), (packed, action, logprob)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        packed, action, logprob = kept
        joint = self.layout.unpack(packed)
        spec = self.multi_spec
        a = spec.num_agents
        if joint.avail is not None:
            avail = joint.avail.flatten(0, 1)
        else:  # every action allowed (continuous actions: none to mask)
            width = spec.action_dim if self.if_discrete else 0
            avail = torch.ones((spec.num_envs * a, width), dtype=torch.bool, device=self.device)
        return (
            with_agent_ids(joint.obs).flatten(0, 1),
            with_agent_ids(info["final_obs"]).flatten(0, 1),
            action.flatten(0, 1), logprob, reward.flatten(),
            terminal.repeat_interleave(a), truncate.repeat_interleave(a),
            self.critic_view(joint.state), self.critic_view(info["final_state"]), avail,
            team_reward(spec, reward), terminal, truncate,
        )  # fmt: skip

    # --- learning: PPO's update on the flattened rollout ---
    def update_net(self, rollout: MultiRollout) -> dict[str, torch.Tensor]:  # type: ignore[override]
        return self.run_update(self.ppo_update, self.ppo_rollout(rollout))

    def ppo_rollout(self, rollout: MultiRollout) -> Rollout:
        # differs: each (sub-env, agent) pair is one of PPO's sub-envs, the critic centralized
        masks = rollout.avail if self.if_discrete else None
        return Rollout(
            rollout.states, rollout.actions, rollout.logprobs, rollout.agent_rewards,
            rollout.agent_terminals, rollout.agent_truncates, rollout.next_states,
            rollout.critic_states, rollout.next_critic_states, masks,
        )  # fmt: skip


class AgentDiscreteMAPPO(AgentMAPPO):
    """MAPPO with a categorical actor (discrete actions), honouring action masks."""

    if_discrete = True
    actor_class = ActorDiscretePPO
