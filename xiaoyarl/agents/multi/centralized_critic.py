"""Centralized critics: MADDPG and MATD3.

MADDPG: Lowe et al., "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive Environments",
NeurIPS 2017. MATD3: Ackermann et al., "Reducing Overestimation Bias in Multi-Agent Domains
Using Double Centralized Critics", 2019.

Decentralized actors (one network shared by the agents, each observation with its agent id)
and a centralized critic Q_i(s, a_1..a_A) of agent i's return, on the global state and every
agent's action (one network with the agent id, too). Agent i's critic learns
r_i + gamma (1 - terminal) Q_i'(s', a'_1..a'_A) with every a'_j from the target actor; agent
i's actor ascends Q_i(s, a_1..mu(o_i)..a_A), the other agents' actions as stored. Everything
else is the single-agent algorithm's own: its gradient step (`update_step`, on the losses
written here for joint steps: `critic_loss`, `actor_losses`), `AgentMADDPG` takes DDPG's target
networks and exploration noise, `AgentMATD3` TD3's clipped double Q (two critics), target
policy smoothing and delayed actor and target updates, through the very hooks TD3 overrides in
DDPG.
Discrete actions go through the Gumbel-softmax (a straight-through one-hot sample) as in the
MADDPG paper, over the agent's available actions only (exploring, target and relaxed
actions alike); the critic sees one-hot actions.
Shapes: B = batch, A = agents, O = observation, S = global state, U = action size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, NamedTuple, cast

import torch
from torch import nn
from torch.nn import functional as F

from xiaoyarl.agents.critics import CriticLoss
from xiaoyarl.agents.ddpg import AgentDDPG
from xiaoyarl.agents.multi.common import Joint, MultiAgentOffPolicy, with_agent_ids
from xiaoyarl.agents.multi.value_decomposition import masked
from xiaoyarl.agents.td3 import AgentTD3
from xiaoyarl.core.buffer import Batch, Transitions
from xiaoyarl.core.nets import RunningNorm, sample_categorical
from xiaoyarl.core.off_policy_nets import ActorGumbel, CriticEnsemble


class JointStep(NamedTuple):
    """B joint transitions as the centralized critics and the actor read them."""

    joint: Joint  # what the agents observed (B, A, O), the global state (B, S), masks
    taken: torch.Tensor  # (B, A, U): the actions taken, as the critic sees them
    rewards: torch.Tensor  # (B, A): each agent's
    after: Joint  # where the step led
    terminals: torch.Tensor  # (B,) bool
    weights: torch.Tensor  # (B,): each transition's weight in the critics' loss
    counted: torch.Tensor | None  # (B,) float: the transitions the actor's loss averages over


class CentralizedCritic(MultiAgentOffPolicy, AgentDDPG):
    """Mix-in that turns DDPG (or TD3) into its multi-agent version (see the module). It comes
    first in the bases, before DDPG or TD3; it names DDPG among its own so that the hooks it
    calls are known (the agents' method resolution order is the same either way)."""

    tune_space: ClassVar[str | None] = "centralized_critic.yaml"  # differs: one-step targets

    def make_critic(self, norm: nn.Module) -> nn.Module:
        # differs: the critic sees the global state, the agent's id and every agent's action
        spec, cfg = self.multi_spec, self.config
        assert cfg.net_dims is not None and cfg.num_critics is not None, "set by resolve_config"
        state_in = spec.state_dim + spec.num_agents
        self.critic_norm = RunningNorm(state_in, bool(cfg.state_norm), cfg.state_norm_clip)
        self.critic_norm.to(self.device)
        return CriticEnsemble(state_in, spec.num_agents * spec.action_dim, cfg.net_dims,
                              self.critic_norm, cfg.num_critics, cfg.layer_norm)  # fmt: skip

    def update_normalizers(self, rollout: Transitions) -> None:
        super().update_normalizers(rollout)
        state = self.layout.unpack(rollout.states.flatten(0, 1)).state
        self.critic_norm.update(self.critic_states(state))

    def critic_states(self, state: torch.Tensor) -> torch.Tensor:
        """Each agent's critic input: the global state with its id, `(B, S) -> (B * A, S + A)`."""
        a = self.multi_spec.num_agents
        return with_agent_ids(state.unsqueeze(1).expand(-1, a, -1)).flatten(0, 1)

    def joint_features(self, actions: torch.Tensor) -> torch.Tensor:
        """Joint actions as the critic sees them `(B, A, U)`: continuous values, or one-hots."""
        if self.multi_spec.if_discrete:
            return F.one_hot(actions, self.multi_spec.action_dim).float()
        return actions

    def gumbel(self, actor: nn.Module | None) -> ActorGumbel:
        """The actor or the target actor of discrete actions, which `actor_class` built as an
        `ActorGumbel`."""
        assert actor is not None, "DDPG and TD3 keep a target actor (uses_target_actor)"
        return cast(ActorGumbel, actor)

    def for_every_agent(self, joint: torch.Tensor) -> torch.Tensor:
        """The joint action once per agent (each agent's critic sees all): `(B, A, U) ->
        (B * A, A * U)`."""
        a = self.multi_spec.num_agents
        return joint.flatten(1).repeat_interleave(a, dim=0)

    @staticmethod
    def per_agent(net: Callable[..., torch.Tensor], obs: torch.Tensor,
                  avail: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """`net` on every agent's observation with its id, `(B, A, O) -> (B, A, ...)`, its rows
        `(B * A, ...)` in one batch (a recurrent actor's memory reads them so); `avail` `(B, A,
        U)`, where given, goes with them."""
        rows = with_agent_ids(obs).flatten(0, 1)
        out = net(rows) if avail is None else net(rows, avail.flatten(0, 1))
        return out.view(*obs.shape[:2], *out.shape[1:])

    # --- acting ---
    def greedy_joint_action(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        if self.multi_spec.if_discrete:
            return masked(self.per_agent(self.gumbel(self.actor).logits, obs), avail).argmax(-1)
        return self.per_agent(self.actor, obs)

    def explore_joint_action(self, joint: Joint) -> torch.Tensor:
        if self.multi_spec.if_discrete:  # a sample of the policy's distribution
            logits = masked(self.per_agent(self.gumbel(self.actor).logits, joint.obs), joint.avail)
            return sample_categorical(logits.log_softmax(-1))
        return self.per_agent(self.explore_action, joint.obs)  # DDPG's (TD3's) own noise

    def target_joint(self, joint: Joint) -> torch.Tensor:
        """Every agent's target action a'_j `(B, A, U)` in the next states."""
        if self.multi_spec.if_discrete:
            logits = self.per_agent(self.gumbel(self.actor_target).logits, joint.obs)
            best = masked(logits, joint.avail).argmax(-1)
            return F.one_hot(best, self.multi_spec.action_dim).float()
        # DDPG's target action (TD3: with clipped smoothing noise)
        return self.per_agent(self.target_action, joint.obs)

    def policy_joint(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        """Every agent's action from the actor, differentiable `(B, A, U)`, for observations
        `(B, A, O)` and masks `(B, A, U)` or None: discrete, a Gumbel-softmax one-hot sample
        among the available actions."""
        if self.multi_spec.if_discrete:
            return self.per_agent(self.gumbel(self.actor).relaxed, obs, avail)
        return self.per_agent(self.actor, obs)

    # --- learning: DDPG's (TD3's) gradient step, its losses on joint transitions ---
    def joint_step(self, batch: Batch) -> JointStep:
        """The batch's transitions as joint steps, every transition counted in the actor's
        loss."""
        actions, rewards = self.layout.unpack_step(batch.actions)  # (B, A[, U]), (B, A)
        return JointStep(self.layout.unpack(batch.states), self.joint_features(actions), rewards,
                         self.layout.unpack(batch.next_states), batch.terminals, batch.weights,
                         None)  # fmt: skip

    def critic_loss(self, batch: Batch) -> CriticLoss:
        """Each agent's critic towards r_i + gamma (1 - terminal) Q_i'(s', a'_1..a'_A) (TD3: the
        smaller of two), each transition's squared error weighted by `weights` (prioritized
        replay's, or 1); the TD errors are each transition's mean absolute one over the agents
        (signs do not cancel) `(num_critics, B)`."""
        step = self.joint_step(batch)
        b, a = step.rewards.shape
        with torch.no_grad():
            after = step.after
            q_next = self.critic_target(
                self.critic_states(after.state), self.for_every_agent(self.target_joint(after))
            )
            v_next = self.reduce_target_q(q_next).view(b, a)  # TD3: the minimum of two
            not_terminal = (~step.terminals).float().unsqueeze(1)
            target = step.rewards + self.config.gamma * not_terminal * v_next  # (B, A)
        states = self.critic_states(step.joint.state)  # (B * A, S + A)
        q = self.critic_q(states, self.for_every_agent(step.taken)).view(-1, b, a)
        td_errors = target - q  # (critics, B, A)
        critic_loss = (step.weights.view(1, b, 1) * td_errors.square()).mean((-2, -1)).sum()
        return critic_loss, q, td_errors.abs().mean(-1)

    def actor_losses(self, batch: Batch,
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
        """Ascend each agent's Q_i(s, a_1..mu(o_i)..a_A) (`reduce_actor_q`: the first critic),
        the other agents' actions as stored; over the `counted` transitions only, where the
        joint step says."""
        step = self.joint_step(batch)
        a = self.multi_spec.num_agents
        own = torch.eye(a, device=self.device).view(1, a, a, 1)  # agent i's own slot
        mine = self.policy_joint(step.joint.obs, step.joint.avail).unsqueeze(1)  # (B, 1, A, U)
        mixed = step.taken.unsqueeze(1) * (1 - own) + mine * own  # (B, A agents, A slots, U)
        states = self.critic_states(step.joint.state)  # (B * A, S + A)
        q = self.reduce_actor_q(self.critic_q_for_actor(states, mixed.flatten(2).flatten(0, 1)))
        if step.counted is None:
            actor_loss = -q.mean()
        else:
            counted = step.counted.unsqueeze(1)
            actor_loss = -(q.view(-1, a) * counted).sum() / (counted.sum() * a)
        return {"actor": actor_loss}, {"actor_loss": actor_loss.detach()}


# the single-agent actor-critics' options a centralized critic does not take (refused: common.py)
SINGLE_AGENT_ONLY = {"explore_noise_std_max", "critic_atoms", "critic_v_min", "critic_v_max",
                     "crossq"}  # fmt: skip


class AgentMADDPG(CentralizedCritic, AgentDDPG):
    """MADDPG with continuous actions: DDPG with a centralized critic."""

    config_fields = AgentDDPG.config_fields - SINGLE_AGENT_ONLY


class AgentMADDPGDiscrete(AgentMADDPG):
    """MADDPG with discrete actions: a Gumbel-softmax actor."""

    if_discrete = True
    actor_class = ActorGumbel  # differs: logits, relaxed one-hot samples


class AgentMATD3(CentralizedCritic, AgentTD3):
    """MATD3 with continuous actions: TD3 (clipped double Q, target smoothing, delayed actor
    and target updates) with centralized critics."""

    config_fields = AgentTD3.config_fields - SINGLE_AGENT_ONLY


class AgentMATD3Discrete(AgentMATD3):
    """MATD3 with discrete actions: a Gumbel-softmax actor (target actions are one-hots of the
    target actor's best action: smoothing noise does not apply to one-hots)."""

    if_discrete = True
    actor_class = ActorGumbel  # differs: logits, relaxed one-hot samples
