"""DDPG: Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016.

The root of the off-policy actor-critic line: TD3 (`td3.py`), SAC (`sac.py`) and REDQ
(`redq.py`) each override only the hooks their paper changes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, cast

import torch
from torch import nn

from xiaoyarl.agents.off_policy import OFF_POLICY_FIELDS, AgentOffPolicy
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.core.distributional import DistributionalCriticEnsemble, c51_target
from xiaoyarl.core.nets import gaussian_logprob
from xiaoyarl.core.off_policy_nets import Actor, CriticEnsemble
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit


# the Ornstein-Uhlenbeck noise's pull to 0 (the DDPG paper's) and time step (OpenAI Baselines',
# SB3's defaults)
OU_THETA, OU_DT = 0.15, 1e-2
# the settings of the exploration noise (SAC explores with its own policy's)
NOISE_FIELDS = frozenset({"explore_noise_std", "explore_noise_std_max", "explore_noise"})


class AgentDDPG(AgentOffPolicy):
    """Deterministic actor, Q critic, target networks for both, Gaussian exploration noise
    (independent at every step, or the paper's Ornstein-Uhlenbeck process)."""

    if_discrete = False
    config_fields = OFF_POLICY_FIELDS | NOISE_FIELDS | {"num_critics", "target_q_reduce",
                                                        "critic_atoms", "critic_v_min",
                                                        "critic_v_max", "crossq"}  # fmt: skip
    takes_h_term = True
    tune_space: ClassVar[str | None] = "td3.yaml"
    actor_class: type[nn.Module] = Actor
    uses_target_actor = True
    default_num_critics = 1  # critics unless `num_critics` says otherwise
    default_repeat_times = 1.0  # gradient steps per env step unless `repeat_times` says otherwise

    @classmethod
    def check(cls, config: Config) -> None:
        """gSDE is a squashed Gaussian policy's; the H-term's density here is the exploration
        noise's, N(actor(s), explore_noise_std^2), independent at each step and one std for
        every sub-env."""
        if config.explore_noise == "gsde":
            raise ConfigError(
                f"invalid config: explore_noise='gsde' does not apply to {config.algo}: gSDE "
                f"perturbs a squashed Gaussian policy (SAC's); choose gaussian or ou."
            )
        if not config.h_term:
            return
        if config.explore_noise_std <= 0:
            raise ConfigError(
                f"invalid config: explore_noise_std={config.explore_noise_std!r} with "
                f"h_term=True on {config.algo}: the H-term needs the exploration density "
                f"N(actor(s), explore_noise_std^2), which has no log-probability without noise; "
                f"set explore_noise_std > 0 or h_term off (the default noise is 0.1)."
            )
        if config.explore_noise_std_max:
            raise ConfigError(
                f"invalid config: explore_noise_std_max={config.explore_noise_std_max!r} with "
                f"h_term=True on {config.algo}: the H-term reads the exploration density of one "
                f"noise std for every sub-env; remove explore_noise_std_max or h_term."
            )
        if config.explore_noise == "ou":
            raise ConfigError(
                f"invalid config: explore_noise='ou' with h_term=True on {config.algo}: the "
                f"H-term reads the density of independent Gaussian noise at each step; set "
                f"explore_noise=gaussian or h_term off."
            )

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """A few sub-envs, one gradient step of 256 transitions per env step on [256, 256]
        networks, no normalisation, and evaluations every 2,000 env steps, since these
        algorithms learn within tens of thousands."""
        return {
            "num_envs": config.num_envs or (16 if batched else 1),
            "horizon_len": 1 if batched else 8,
            "batch_size": 256,
            "repeat_times": cls.default_repeat_times,
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
        encoder = self.make_encoder()  # image encoders: the actor's and the critic's own
        self.actor = self.actor_class(encoder.out_dim, spec.action_dim, config.net_dims, encoder)
        self.actor.to(device)
        self.critic = self.make_critic(self.make_encoder()).to(device)
        self.nets = {"actor": self.actor, "critic": self.critic}
        # CrossQ has no target networks: its targets come from the critics themselves
        self.critic_target = self.critic if config.crossq else self.make_target(self.critic)
        if not config.crossq:
            self.nets["critic_target"] = self.critic_target
        self.actor_target: nn.Module | None = None
        if self.uses_target_actor and not config.crossq:
            self.actor_target = self.make_target(self.actor)
            self.nets["actor_target"] = self.actor_target
        self.optimizers = {
            "actor": self.make_optimizer(self.actor),
            "critic": self.make_optimizer(self.critic),
        }
        self.noise_stds: torch.Tensor | None = None  # (num_envs, 1) with explore_noise_std_max
        self.ou_noise: torch.Tensor | None = None  # (num_envs, action_dim) with explore_noise ou

    def make_critic(self, encoder: nn.Module) -> nn.Module:
        """The critics: `num_critics` Q(s, a) networks, C51 distributions where `critic_atoms`."""
        spec, cfg = self.spec, self.config
        assert cfg.net_dims is not None and cfg.num_critics is not None, "set by resolve_config"
        if cfg.critic_atoms:
            assert cfg.critic_v_min is not None and cfg.critic_v_max is not None, "check_config"
            return DistributionalCriticEnsemble(
                self.feature_dim, spec.action_dim, cfg.net_dims, encoder, cfg.num_critics,
                cfg.layer_norm, cfg.critic_atoms, cfg.critic_v_min, cfg.critic_v_max)  # fmt: skip
        return CriticEnsemble(self.feature_dim, spec.action_dim, cfg.net_dims, encoder,
                              cfg.num_critics, cfg.layer_norm, cfg.crossq)  # fmt: skip

    # --- the hooks the successors override ---
    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        action = self.actor(state)
        return (action + self.explore_noise(action)).clamp(-1.0, 1.0)

    def explore_noise(self, action: torch.Tensor) -> torch.Tensor:
        """Noise for a batch of actions `(num_envs, action_dim)`: Gaussian with `explore_std`,
        drawn anew at every step; or (`explore_noise: ou`) each sub-env's Ornstein-Uhlenbeck
        process, x <- x - theta * x * dt + std * sqrt(dt) * N(0, 1), from 0 at its episode's
        start: a push that lasts, for tasks a random walk of actions does not solve (the
        DDPG paper's noise; theta 0.15, dt 0.01 as OpenAI Baselines and SB3)."""
        draw = torch.randn_like(action)  # drawn before any new noise stds (`explore_std`)
        std = self.explore_std(action.shape[0])
        if self.config.explore_noise != "ou":
            return draw * std
        if self.ou_noise is None or self.ou_noise.shape != action.shape:
            self.ou_noise = torch.zeros_like(action)
        pull = OU_THETA * OU_DT
        self.ou_noise = (1 - pull) * self.ou_noise + std * math.sqrt(OU_DT) * draw
        return self.ou_noise

    def explore_std(self, num_envs: int) -> torch.Tensor | float:
        """The exploration noise's std: `explore_noise_std`, or with `explore_noise_std_max`
        each sub-env's own `(num_envs, 1)`, drawn uniformly between the two and drawn anew when
        its episode ends (FastTD3), so the sub-envs explore from nearly greedy to wide."""
        if self.config.explore_noise_std_max is None:
            return self.config.explore_noise_std
        if self.noise_stds is None or self.noise_stds.shape[0] != num_envs:
            self.noise_stds = self.draw_noise_stds(num_envs)
        return self.noise_stds

    def draw_noise_stds(self, num_envs: int) -> torch.Tensor:
        low, high = self.config.explore_noise_std, self.config.explore_noise_std_max
        assert high is not None, "drawn only with explore_noise_std_max"
        return low + (high - low) * torch.rand(num_envs, 1, device=self.device)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        if self.noise_stds is not None or self.ou_noise is not None:
            ended = (terminal | truncate).unsqueeze(-1)
            if self.noise_stds is not None:  # a sub-env whose episode ended draws a new std
                fresh = self.draw_noise_stds(ended.shape[0])
                self.noise_stds = torch.where(ended, fresh, self.noise_stds)
            if self.ou_noise is not None:  # and its Ornstein-Uhlenbeck noise restarts from 0
                self.ou_noise = torch.where(ended, 0.0, self.ou_noise)
        return super().record(kept, reward, terminal, truncate, info)

    def sub_env_state(self) -> dict:
        # differs: each sub-env's noise std (explore_noise_std_max) and OU noise (ou)
        return {**super().sub_env_state(), **self._noise_state()}

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)
        self._load_noise_state(state)

    def state_dict(self) -> dict:
        return {**super().state_dict(), **self._noise_state()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self._load_noise_state(state)

    def _noise_state(self) -> dict:
        return {"noise_stds": self.noise_stds, "ou_noise": self.ou_noise}

    def _load_noise_state(self, state: dict) -> None:
        # absent from the checkpoints of earlier versions
        stds, ou = state.get("noise_stds"), state.get("ou_noise")
        self.noise_stds = None if stds is None else stds.to(self.device)
        self.ou_noise = None if ou is None else ou.to(self.device)

    def target_action(self, next_states: torch.Tensor) -> torch.Tensor:
        """The action the target policy takes in s' `(B, A)`."""
        return self.target_actor()(next_states)

    def target_actor(self) -> nn.Module:
        """The policy of the targets: the target actor, or the actor itself with `crossq`."""
        return self.actor if self.actor_target is None else self.actor_target

    def next_action(self, next_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The target's action a' in s' `(B, A)`, and what the target subtracts from Q'(s', a')
        `(B,)` (None: nothing; SAC: its entropy term)."""
        return self.target_action(next_states), None

    def reduce_target_q(self, q: torch.Tensor) -> torch.Tensor:
        """Combine the target critics' values `(num_critics, B)` into one `(B,)`: their
        minimum, or their mean with `target_q_reduce: mean` (an averaged ensemble)."""
        return q.mean(0) if self.config.target_q_reduce == "mean" else q.min(0).values

    def reduce_target_distribution(self, probs: torch.Tensor) -> torch.Tensor:
        """Combine the target critics' distributions `(num_critics, B, K)` into one `(B, K)`:
        the one with the least mean, or their mixture (with `target_q_reduce: mean`)."""
        if self.config.target_q_reduce == "mean":
            return probs.mean(0)
        return pick_least(probs, self.distributional_critic().mean(probs))

    def td_target(self, batch: Batch) -> torch.Tensor:
        """The critics' target `(B,)`: r + gamma * Q'(s', a') (gamma^m over an m-step transition:
        `Batch`), a' and any penalty from `next_action`, Q' the target critics combined by
        `reduce_target_q`; no bootstrap past a terminal."""
        action, penalty = self.next_action(batch.next_states)
        q = self.reduce_target_q(self.critic_target(batch.next_states, action))
        if penalty is not None:
            q = q - penalty
        not_terminal = (~batch.terminals).float()
        return batch.rewards + batch.discounts * not_terminal * q

    def td_target_distribution(self, batch: Batch) -> torch.Tensor:
        """C51's target `(B, K)`: the target critics' distribution of Z(s', a') (combined by
        `reduce_target_distribution`), each atom z moved to r + gamma * (z - penalty) and
        projected back onto the support; no bootstrap past a terminal."""
        action, penalty = self.next_action(batch.next_states)
        logits = cast(DistributionalCriticEnsemble, self.critic_target).logits(
            batch.next_states, action)  # fmt: skip
        probs = self.reduce_target_distribution(logits.softmax(-1))
        return c51_target(probs, batch, self.distributional_critic().support, penalty)

    def distributional_critic(self) -> DistributionalCriticEnsemble:
        """The critics, which `make_critic` built as C51 ones where `critic_atoms`."""
        return cast(DistributionalCriticEnsemble, self.critic)

    def critic_loss(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The critics' loss (summed over critics, each weighted by prioritized replay's
        weights), their Q(s, a) `(num_critics, B)` and their TD errors `(num_critics, B)`:
        squared TD errors, or with `critic_atoms` the cross-entropy of each critic's
        distribution against C51's target (TD errors between the distributions' means)."""
        if self.config.crossq:
            return self.crossq_critic_loss(batch)
        if not self.config.critic_atoms:
            with torch.no_grad():
                target = self.td_target(batch)
            q = self.critic_q(batch.states, batch.actions)  # (num_critics, B)
            td_errors = target - q
            return (batch.weights * td_errors.square()).mean(-1).sum(), q, td_errors
        with torch.no_grad():
            target_probs = self.td_target_distribution(batch)  # (B, K)
        critic = self.distributional_critic()
        log_probs = critic.logits(batch.states, batch.actions).log_softmax(-1)
        cross_entropy = -(target_probs * log_probs).sum(-1)  # (num_critics, B)
        q = critic.mean(log_probs.detach().exp())
        td_errors = critic.mean(target_probs) - q
        return (batch.weights * cross_entropy).mean(-1).sum(), q, td_errors

    def critic_q(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Every critic's Q(s, a) for the batch's actions `(num_critics, B)`."""
        return self.critic(states, actions)

    def crossq_critic_loss(self, batch: Batch
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """CrossQ (Bhatt et al., "CrossQ: Batch Normalization in Deep Reinforcement Learning for
        Greater Sample Efficiency and Simplicity", ICLR 2024): no target networks; (s, a) and
        (s', a') go through the critics in one batch, so their batch renormalisation sees both
        distributions; the target r + gamma * Q(s', a') (minus any penalty) from that same pass,
        without gradient. Returns what `critic_loss` does."""
        with torch.no_grad():
            action, penalty = self.next_action(batch.next_states)
        both = self.critic(torch.cat([batch.states, batch.next_states]),
                           torch.cat([batch.actions, action]))  # fmt: skip
        q, next_q = both.split(batch.rewards.shape[0], dim=-1)  # (num_critics, B) each
        with torch.no_grad():
            value = self.reduce_target_q(next_q)
            if penalty is not None:
                value = value - penalty
            target = batch.rewards + batch.discounts * (~batch.terminals).float() * value
        td_errors = target - q
        return (batch.weights * td_errors.square()).mean(-1).sum(), q, td_errors

    def critic_q_for_actor(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The critics' Q(s, a) `(num_critics, B)` with gradients to the actions only: the
        actor's loss never needs the critics' weight gradients, so they are not computed.
        The critics are in eval mode (CrossQ's batch renormalisation: running statistics)."""
        self.critic.requires_grad_(False)
        self.critic.eval()
        try:
            return self.critic(states, actions)
        finally:
            self.critic.requires_grad_(True)
            self.critic.train()

    def should_update_actor(self, critic_loss: torch.Tensor) -> bool:
        return True  # DDPG updates the actor after every critic step

    def critic_target_due(self, actor_updated: bool) -> bool:
        """Whether this gradient step soft-updates the target critics (besides the
        `target_update_every` schedule): every step in DDPG."""
        return True

    def reduce_actor_q(self, q: torch.Tensor) -> torch.Tensor:
        """Combine the critics `(num_critics, B)` for the actor's objective: the first critic's."""
        return q[0]

    def update_actor(self, states: torch.Tensor) -> dict[str, torch.Tensor]:
        """Ascend Q(s, actor(s)) of the critics combined by `reduce_actor_q` (plus the auxiliary
        loss, if any)."""
        aux_loss, aux_log = self.auxiliary_loss()
        q = self.reduce_actor_q(self.critic_q_for_actor(states, self.actor(states)))
        actor_loss = -q.mean()
        self.optimizer_step(self.optimizers["actor"], self.actor, actor_loss + aux_loss)
        return {"actor_loss": actor_loss.detach(), **aux_log}

    def explore_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The exploration distribution's density: N(actor(s), explore_noise_std^2)."""
        log_std = torch.full_like(actions, math.log(self.config.explore_noise_std))
        return gaussian_logprob((actions - self.actor(states)) * (-log_std).exp(), log_std).sum(-1)

    # --- one gradient step ---
    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        critic_loss, q, td_errors = self.critic_loss(batch)
        self.optimizer_step(self.optimizers["critic"], self.critic, critic_loss)
        logs = {"critic_loss": critic_loss.detach(), "q_value": q.detach().mean()}
        actor_updated = self.should_update_actor(critic_loss.detach())
        if actor_updated:
            logs.update(self.update_actor(batch.states))
            if self.actor_target is not None:
                self.update_targets((self.actor_target, self.actor))
        if self.critic_target_due(actor_updated) and not self.config.crossq:
            self.update_targets((self.critic_target, self.critic))
        return logs, td_errors.detach().abs().mean(0)  # critics of opposite error: no cancelling


def pick_least(probs: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Per sample, the distribution `(B, K)` among `probs` `(num, B, K)` whose mean `values`
    `(num, B)` is least: clipped double Q for distributional critics."""
    least = values.argmin(0)  # (B,)
    return probs.gather(0, least.view(1, -1, 1).expand(1, *probs.shape[1:])).squeeze(0)
