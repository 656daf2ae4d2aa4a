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

from typing import NamedTuple

import torch

from xiaoyarl.agents.multi.common import (
    JointLayout,
    agent_view,
    multi_agent_policy_meta,
    with_agent_ids,
)
from xiaoyarl.agents.ppo import AgentPPO
from xiaoyarl.config import Config
from xiaoyarl.core.nets import ActorDiscretePPO, CriticV, RunningNorm
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec, MultiAgentVecEnv, team_reward


def squared_or_huber(error: torch.Tensor, kind: str, huber_delta: float) -> torch.Tensor:
    """Per-sample loss of an error `(B,)`: its square ("mse"), or ("huber") its square within
    +-huber_delta and linear beyond. Twice the usual Huber loss: PPO's update halves it."""
    if kind == "mse":
        return error.square()
    size = error.abs()
    return torch.where(size <= huber_delta, error.square(), huber_delta * (2 * size - huber_delta))


class MultiRollout(NamedTuple):
    """A multi-agent rollout with every (sub-env, agent) pair flattened into PPO's env axis
    (N = E * A), plus the team's view the training loop reads."""

    states: torch.Tensor  # (T, N, O + A) each agent's observation with its id
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


class PPOView(NamedTuple):
    """`MultiRollout` as PPO's update reads it (N = E * A sub-envs)."""

    states: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    terminals: torch.Tensor
    truncates: torch.Tensor
    next_states: torch.Tensor  # unused: the critic reads next_critic_states
    critic_states: torch.Tensor
    next_critic_states: torch.Tensor
    avail: torch.Tensor


class AgentMAPPO(AgentPPO):
    """MAPPO with a Gaussian actor (continuous actions)."""

    if_multi_agent = True
    config_fields = AgentPPO.config_fields | {"value_clip", "value_loss", "huber_delta"}

    def __init__(
        self, spec: MultiAgentEnvSpec, config: Config, device: torch.device, learner: bool = True
    ) -> None:
        self.multi_spec = spec
        self.layout = JointLayout(spec)
        super().__init__(agent_view(spec), config, device, learner)
        # value normalisation: the running mean and variance of the returns
        self.value_norm = RunningNorm(1, enabled=True, clip=None).to(device)
        self.nets["value_norm"] = self.value_norm

    def make_critic(self) -> torch.nn.Module:
        # differs: V_i(s) on the global state with the agent's id, its own normaliser
        spec, cfg = self.multi_spec, self.config
        width = spec.state_dim + spec.num_agents
        self.critic_norm = RunningNorm(width, cfg.state_norm, cfg.state_norm_clip)
        return CriticV(width, cfg.net_dims, self.critic_norm.to(self.device))

    def observe(self, obs: torch.Tensor, info: dict) -> torch.Tensor:
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

    @torch.no_grad()
    def explore_env(self, env: MultiAgentVecEnv, horizon_len: int) -> MultiRollout:
        spec, layout, dev = self.multi_spec, self.layout, self.device
        e, a = spec.num_envs, spec.num_agents
        n = e * a
        obs_width, critic_width = spec.obs_dim + a, spec.state_dim + a
        states = torch.empty((horizon_len, n, obs_width), device=dev)
        critic_states = torch.empty((horizon_len, n, critic_width), device=dev)
        next_critic_states = torch.empty_like(critic_states)
        if self.if_discrete:
            actions = torch.empty((horizon_len, n), dtype=torch.int64, device=dev)
            avails = torch.ones((horizon_len, n, spec.action_dim), dtype=torch.bool, device=dev)
        else:
            actions = torch.empty((horizon_len, n, spec.action_dim), device=dev)
            avails = torch.ones((horizon_len, n, 0), dtype=torch.bool, device=dev)
        logprobs = torch.empty((horizon_len, n), device=dev)
        agent_rewards = torch.empty((horizon_len, n), device=dev)
        rewards = torch.empty((horizon_len, e), device=dev)
        terminals = torch.empty((horizon_len, e), dtype=torch.bool, device=dev)
        truncates = torch.empty_like(terminals)

        joint = layout.unpack(self.last_state)
        for t in range(horizon_len):
            action, logprob = self.policy(joint.obs, joint.avail, sample=True)
            obs, reward, terminal, truncate, info = env.step(
                self.actor.convert_action_for_env(action)
            )
            states[t] = with_agent_ids(joint.obs).flatten(0, 1)
            critic_states[t] = self.critic_view(joint.state)
            next_critic_states[t] = self.critic_view(info["final_state"])
            if joint.avail is not None:
                avails[t] = joint.avail.flatten(0, 1)
            actions[t] = action.flatten(0, 1)
            logprobs[t] = logprob
            agent_rewards[t] = reward.flatten()
            rewards[t] = team_reward(spec, reward)
            terminals[t], truncates[t] = terminal, truncate
            joint = layout.unpack(layout.pack(obs, info["state"], info.get("avail_actions")))
        self.last_state = layout.pack(joint.obs, joint.state, joint.avail)
        return MultiRollout(
            states, actions, logprobs, agent_rewards, terminals.repeat_interleave(a, dim=1),
            truncates.repeat_interleave(a, dim=1), critic_states, next_critic_states, avails,
            rewards, terminals, truncates,
        )  # fmt: skip

    # --- learning: PPO's update on the flattened rollout ---
    def update_net(self, rollout: MultiRollout) -> dict[str, torch.Tensor]:
        view = PPOView(
            rollout.states, rollout.actions, rollout.logprobs, rollout.agent_rewards,
            rollout.agent_terminals, rollout.agent_truncates, rollout.next_critic_states,
            rollout.critic_states, rollout.next_critic_states, rollout.avail,
        )  # fmt: skip
        return self.run_update(self.ppo_update, view)

    def critic_inputs(self, rollout: PPOView) -> tuple[torch.Tensor, torch.Tensor]:
        return rollout.critic_states, rollout.next_critic_states  # differs: centralized

    def values(self, outputs: torch.Tensor) -> torch.Tensor:
        # differs: the critic predicts standardised values
        std = (self.value_norm.var + 1e-8).sqrt()
        return outputs * std + self.value_norm.mean

    def observe_returns(self, returns: torch.Tensor) -> None:
        self.value_norm.update(returns.unsqueeze(1))  # differs: value normalisation

    def value_loss(
        self, critic_states: torch.Tensor, returns: torch.Tensor, old_outputs: torch.Tensor
    ) -> torch.Tensor:
        # differs: against the standardised returns; the paper's clipped Huber loss
        cfg = self.config
        target = (returns - self.value_norm.mean) / (self.value_norm.var + 1e-8).sqrt()
        value = self.critic(critic_states)  # standardised, as `old_outputs`
        loss = squared_or_huber(target - value, cfg.value_loss, cfg.huber_delta)
        if cfg.value_clip:
            step = (value - old_outputs).clamp(-cfg.ratio_clip, cfg.ratio_clip)
            clipped = squared_or_huber(target - (old_outputs + step), cfg.value_loss,
                                       cfg.huber_delta)  # fmt: skip
            loss = torch.max(loss, clipped)
        return loss

    def update_state_norms(self, rollout: PPOView, critic_states: torch.Tensor) -> None:
        self.state_norm.update(rollout.states.flatten(0, 1))  # differs: two normalisers
        self.critic_norm.update(critic_states)

    def policy_state(self) -> dict:
        return {**super().policy_state(), **multi_agent_policy_meta(self.multi_spec)}


class AgentDiscreteMAPPO(AgentMAPPO):
    """MAPPO with a categorical actor (discrete actions), honouring action masks."""

    if_discrete = True
    actor_class = ActorDiscretePPO

    def logprob_entropy(
        self, rollout: PPOView, states: torch.Tensor, actions: torch.Tensor, idx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # differs: the masks of the step the action was taken in
        avail = rollout.avail.flatten(0, 1)[idx]
        return self.actor.get_logprob_entropy(states[idx], actions[idx], avail)
