"""`AgentActorCritic`: what the off-policy actor-critics share (DDPG and TD3, SAC and REDQ,
their fast and multi-agent versions): an actor, critics of a kind chosen from the config
(`agents/critics.py`: plain, C51 or CrossQ), their target networks and optimizers. Each
algorithm writes its own exploration and `update_step` (`ddpg.py`, `sac.py`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn
from torch.func import functional_call

from xiaoyarl.agents.critics import CriticLoss, TargetReduce, critic_kind
from xiaoyarl.agents.off_policy import OFF_POLICY_FIELDS, AgentOffPolicy
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.off_policy_nets import Actor
from xiaoyarl.envs.base import EnvSpec

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit
    from xiaoyarl.core.encoders import Encoder
    from xiaoyarl.core.nets import RunningNorm

# the settings of the critics (their number, kind and target) every actor-critic reads
CRITIC_FIELDS = frozenset({"num_critics", "target_q_reduce", "critic_atoms", "critic_v_min",
                           "critic_v_max", "crossq"})  # fmt: skip


class AgentActorCritic(AgentOffPolicy):
    """An actor `actor_class`, the critics (`critic_kind`: `critic`, and `critic_target`
    unless the kind has no targets), a target actor where `uses_target_actor`, and an
    optimizer each for actor and critics. An algorithm gives `next_action` (the action and
    penalty its target takes in s'), `explore_action` and `update_step`."""

    if_discrete = False
    action_reason = ("its actor learns through the gradient of the critic's Q-value with "
                     "respect to a continuous action")  # fmt: skip
    hybrid_reason = ("its actor learns through the gradient of the critic's Q-value with respect "
                     "to the action, which has none with respect to a discrete part")  # fmt: skip
    config_fields = OFF_POLICY_FIELDS | CRITIC_FIELDS
    actor_class: type[nn.Module] = Actor
    uses_target_actor = False
    # the values of `explore_noise` it takes (gaussian: its own exploring, whatever that is)
    explore_noises: ClassVar[tuple[str, ...]] = ("gaussian",)
    default_num_critics = 1  # critics unless `num_critics` says otherwise
    default_replay_ratio = 1.0  # gradient steps per env step unless `replay_ratio` says otherwise

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """A few sub-envs, one gradient step of 256 transitions per env step on [256, 256]
        networks, no normalisation, and evaluations every 2,000 env steps, since these
        algorithms learn within tens of thousands."""
        return {
            "num_envs": config.num_envs or (16 if batched else 1),
            "horizon_len": 1 if batched else 8,
            "batch_size": 256,
            "replay_ratio": cls.default_replay_ratio,
            "learning_rate": 3e-4,
            "net_dims": [256, 256],
            "state_norm": False,
            "reward_norm": False,
            "num_critics": cls.default_num_critics,
            "eval_every": 2_000,
        }

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        assert config.net_dims is not None, "resolve_config sets net_dims"
        self.critic_kind = critic_kind(config)
        self.target_reduce = self.make_target_reduce()
        encoder = self.make_encoder()  # image encoders: the actor's and the critic's own
        self.actor = self.make_actor(encoder)
        self.actor.to(device)
        self.critic = self.make_critic(self.make_encoder()).to(device)
        self.nets = {"actor": self.actor, "critic": self.critic}
        # a kind without target networks (CrossQ) takes its targets from the critics themselves
        self.critic_target = self.critic
        if self.critic_kind.has_target:
            self.critic_target = self.make_target(self.critic)
            self.nets["critic_target"] = self.critic_target
        self.actor_target: nn.Module | None = None
        if self.uses_target_actor and self.critic_kind.has_target:
            self.actor_target = self.make_target(self.actor)
            self.nets["actor_target"] = self.actor_target
        self.optimizers = {
            "actor": self.make_optimizer(self.actor),
            "critic": self.make_optimizer(self.critic),
        }

    def make_actor(self, encoder: Encoder | RunningNorm) -> nn.Module:
        """The policy network: `actor_class` on the encoder's features."""
        assert self.config.net_dims is not None, "resolve_config sets net_dims"
        return self.actor_class(encoder.out_dim, self.spec.action_dim, self.config.net_dims,
                                encoder)  # fmt: skip

    def make_critic(self, encoder: nn.Module) -> nn.Module:
        """The critics' network, of the config's kind (`critic_kind`)."""
        return self.critic_kind.build(self, encoder)

    def make_target_reduce(self) -> TargetReduce:
        """How the target combines the target critics (`target_q_reduce`)."""
        return TargetReduce(self.config)

    # --- what an algorithm gives ---
    def next_action(self, next_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The target's action a' in s' `(B, A)`, and what the target subtracts from Q'(s', a')
        `(B,)` (None: nothing; SAC: its entropy term)."""
        raise NotImplementedError

    # --- the critics ---
    def reduce_target_q(self, q: torch.Tensor) -> torch.Tensor:
        """Combine the target critics' values `(num_critics, B)` into one `(B,)`."""
        return self.target_reduce.values(q)

    def td_target(self, batch: Batch) -> torch.Tensor:
        """The critics' target `(B,)`: r + gamma * Q'(s', a') (gamma^m over an m-step transition:
        `Batch`), a' and any penalty from `next_action`, Q' the target critics combined by
        `target_reduce`; no bootstrap past a terminal."""
        action, penalty = self.next_action(batch.next_states)
        q = self.reduce_target_q(self.critic_target(batch.next_states, action))
        if penalty is not None:
            q = q - penalty
        not_terminal = (~batch.terminals).float()
        return batch.rewards + batch.discounts * not_terminal * q

    def critic_loss(self, batch: Batch) -> CriticLoss:
        """The critics' loss (summed over critics, each weighted by prioritized replay's
        weights), their Q(s, a) `(num_critics, B)` and their TD errors `(num_critics, B)`, as
        their kind computes it (`agents/critics.py`)."""
        return self.critic_kind.loss(self, batch)

    def critic_q(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Every critic's Q(s, a) for the batch's actions `(num_critics, B)`."""
        return self.critic(states, actions)

    def critic_q_for_actor(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The critics' Q(s, a) `(num_critics, B)` with gradients to the actions only: the
        actor's loss never needs the critics' weight gradients, so they are not computed
        (the critics run on their weights detached: unlike switching `requires_grad` off, this
        holds inside a vmapped population's transforms too). The critics are in eval mode
        (CrossQ's batch renormalisation: running statistics)."""
        frozen = {name: weight.detach() for name, weight in self.critic.named_parameters()}
        self.critic.eval()
        try:
            return functional_call(self.critic, frozen, (states, actions))
        finally:
            self.critic.train()

    def actor_losses(self, batch: Batch,
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
        """The losses of what steps with the actor on the batch (its states; a multi-agent
        critic's, the other agents' actions too), by their optimizer's name (the actor's; SAC's
        temperature's too, where it is tuned), and what to log of them."""
        raise NotImplementedError

    def update_actor(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step of the actor (and what steps with it) on `actor_losses`: they
        share no parameters, so one backward pass through their sum gives each its own."""
        losses, logs = self.actor_losses(batch)
        self.optimizer_steps(
            sum(losses.values()),  # type: ignore[arg-type]
            *((self.optimizers[name], self.nets[name]) for name in losses),
        )
        return logs

    def update_critic_targets(self) -> None:
        """Soft-update the target critics (on the `target_update_every` schedule); nothing for
        a kind without targets."""
        if self.critic_kind.has_target:
            self.update_targets((self.critic_target, self.critic))


class DelayedActor(AgentActorCritic):
    """The actor, and what steps with it, steps on one critic step of every `policy_delay` (TD3's
    delayed policy update; FastSAC's actor and temperature). It comes first in an agent's bases."""

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        """Whether this gradient step also steps the actor: one of every `policy_delay`."""
        return self.updates % self.config.policy_delay == 0

    def update_cycle(self) -> int | None:
        # the actor's steps repeat every policy_delay critic steps
        cycle = super().update_cycle()
        return None if cycle is None else math.lcm(cycle, self.config.policy_delay)
