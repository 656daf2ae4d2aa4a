"""PPO with generalized advantage estimation (A2C, `agents/a2c.py`, and MAPPO extend it).

PPO: Schulman et al., "Proximal Policy Optimization Algorithms", 2017 (clipped surrogate).
GAE: Schulman et al., "High-Dimensional Continuous Control Using Generalized Advantage
Estimation", 2016.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.base import AgentBase
from xiaoyarl.config import Config
from xiaoyarl.core.nets import ActorDiscretePPO, ActorPPO, CriticV, RewardScaler, RunningNorm
from xiaoyarl.core.reduce import MiniBatches
from xiaoyarl.core.returns import clipped_surrogate, compute_gae
from xiaoyarl.envs.base import EnvSpec

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit, Steps
    from xiaoyarl.agents.value_loss import ValueLoss


class Rollout(NamedTuple):
    """Time-major on-policy data; T = horizon_len, N = num_envs, S = state_dim, A = action_dim."""

    states: torch.Tensor  # (T, N, S)
    actions: torch.Tensor  # (T, N, A) float, or (T, N) int64 for discrete actions
    logprobs: torch.Tensor  # (T, N) log-probability of the action when it was taken
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool: the episode ended for good (no bootstrap)
    truncates: torch.Tensor  # (T, N) bool: the episode was cut by a time limit (bootstrap)
    next_states: torch.Tensor  # (T, N, S): the state each step reached, before any auto-reset
    # an asymmetric critic's own inputs (e.g. a global or privileged state) `(T, N, C)`, at each
    # step and at the state it reached; None: the critic sees the actor's states
    critic_states: torch.Tensor | None = None
    next_critic_states: torch.Tensor | None = None
    action_masks: torch.Tensor | None = None  # (T, N, A) bool: the actions allowed at each step


class PPOBatch(NamedTuple):
    """What an update reads, flat over (step, sub-env): B transitions (a mini-batch, or the
    whole rollout, B = T * N)."""

    states: torch.Tensor  # (B, S)
    critic_states: torch.Tensor  # (B, C): the critic's inputs (the states, unless asymmetric)
    actions: torch.Tensor  # (B, A) or (B,)
    masks: torch.Tensor | None  # (B, A) bool, or None
    old_logprobs: torch.Tensor  # (B,) when the actions were taken
    advantages: torch.Tensor  # (B,) standardised
    returns: torch.Tensor  # (B,) the critic's targets
    old_outputs: torch.Tensor  # (B,) the critic's outputs before the update


# the losses `ppo_loss` logs and `ppo_update` returns, in the order of its log
LOSS_NAMES = ("actor_loss", "critic_loss", "entropy", "approx_kl", "clip_fraction")


def on_policy_num_envs(config: Config, batched: bool, device_type: str) -> int:
    """Sub-envs of an on-policy run: 1,024 batched on a GPU, 16 batched on a CPU, 8 gymnasium."""
    return config.num_envs or ((1024 if device_type == "cuda" else 16) if batched else 8)


def on_policy_common(num_envs: int) -> dict:
    """Normalised observations and rewards; the critic's plain squared error on raw returns."""
    return {"num_envs": num_envs, "net_dims": [64, 64], "state_norm": True, "reward_norm": True,
            "value_norm": False, "value_clip": False, "value_loss": "mse"}  # fmt: skip


def on_policy_eval_every(rollout: int) -> int:
    """Every 20k env steps, or every 8 rollouts where rollouts are larger (1,024 sub-envs on a
    GPU), so that evaluating (sequential episodes) does not take longer than training."""
    return max(20_000, 8 * rollout)


class AgentPPO(AgentBase):
    """PPO with a Gaussian actor, a state-value critic, GAE and the clipped surrogate objective."""

    if_off_policy = False
    if_discrete = False
    config_fields = frozenset({"repeat_times", "ratio_clip", "lambda_gae_adv", "lambda_entropy",
                               "reward_norm", "value_norm", "value_clip", "value_loss",
                               "huber_delta", "share_encoder", "recurrent",
                               "recurrent_dim"})  # fmt: skip
    takes_h_term = True
    tune_space: ClassVar[str | None] = "ppo.yaml"
    member_fields = frozenset({"learning_rate", "ratio_clip", "lambda_entropy", "clip_grad_norm"})
    actor_class: type[ActorPPO | ActorDiscretePPO] = ActorPPO
    actor: ActorPPO | ActorDiscretePPO

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """A rollout of at least 1,024 transitions (e.g. 8 sub-envs x 128 steps), cut into 4
        mini-batches for 4 epochs. On a GPU batched envs (torch-native, Playground's JAX tasks)
        get 1,024 sub-envs (16 steps each), since more sub-envs cost next to nothing there; on a
        CPU the network update dominates, so they get 16 sub-envs and gymnasium envs 8, with
        longer horizons: fewer env steps per update learn more per second of CPU. Observations
        and rewards are normalised with running statistics."""
        num_envs = on_policy_num_envs(config, batched, device_type)
        horizon_len = config.horizon_len or max(16, 1024 // num_envs)
        return {
            **on_policy_common(num_envs),
            "eval_every": on_policy_eval_every(num_envs * horizon_len),
            "horizon_len": horizon_len,
            "batch_size": max(1, num_envs * horizon_len // 4),
            "repeat_times": 4.0,
            "learning_rate": 3e-4,
        }

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        assert config.net_dims is not None, "resolve_config sets net_dims"
        encoder = self.make_encoder()
        self.actor = self.actor_class(encoder.out_dim, spec.action_dim, config.net_dims, encoder)
        self.actor.to(device)
        self.critic = self.make_critic().to(device)
        self.reward_scaler = RewardScaler(spec.num_envs, config.gamma, bool(config.reward_norm))
        self.reward_scaler.to(device)
        self.nets = {"actor": self.actor, "critic": self.critic, "reward": self.reward_scaler}
        # the critic's loss beyond the squared error on raw returns (a component, chosen here)
        self.value_head: ValueLoss | None = None
        self.value_norm: RunningNorm | None = None
        if config.value_norm or config.value_clip or config.value_loss != "mse":
            from xiaoyarl.agents.value_loss import ValueLoss  # loaded only where asked for

            self.value_head = ValueLoss(config, device)
            self.value_norm = self.value_head.norm
            if self.value_norm is not None:
                self.nets["value_norm"] = self.value_norm
        # a shared encoder is stepped once, by the actor's optimizer, with both losses' gradient
        critic = self.critic.net if self.critic.norm is self.actor.norm else self.critic
        self.optimizers = {"actor": self.make_optimizer(self.actor),
                           "critic": self.make_optimizer(critic)}  # fmt: skip

    rollout_class: ClassVar[Callable[..., Steps]] = Rollout

    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        action, logprob = self.actor.get_action(state)
        return self.actor.convert_action_for_env(action), (state, action, logprob)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        state, action, logprob = kept
        return state, action, logprob, reward, terminal, truncate, info["final_state"]

    def make_critic(self) -> CriticV:
        """V(s) on the actor's states, through the actor's encoder (`share_encoder`, and always
        the shared normaliser of vectors) or its own."""
        assert self.config.net_dims is not None, "resolve_config sets net_dims"
        encoder = self.actor.norm if self.config.share_encoder else self.make_encoder()
        return CriticV(self.feature_dim, self.config.net_dims, encoder)

    def sub_env_state(self) -> dict:
        # differs: each sub-env's running discounted return (reward scaling) is its own
        return {**super().sub_env_state(), "returns": self.reward_scaler.returns.clone()}

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)
        self.reward_scaler.returns.copy_(state["returns"])

    def actor_objective(self, ratio: torch.Tensor, advantage: torch.Tensor,
                        logprob: torch.Tensor, ratio_clip: float | torch.Tensor | None = None,
                        ) -> torch.Tensor:  # fmt: skip
        """PPO's clipped surrogate, per sample (to be maximized); `ratio_clip` None: the
        config's."""
        eps = self.config.ratio_clip if ratio_clip is None else ratio_clip
        return clipped_surrogate(ratio, advantage, eps)

    def explore_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.actor.get_logprob_entropy(states, actions)[0]

    def value(self, outputs: torch.Tensor) -> torch.Tensor:
        """V in return units from the critic's outputs: as they are, or (value normalisation)
        scaled back by the returns' running mean and standard deviation."""
        return outputs if self.value_head is None else self.value_head.value(outputs)

    def value_loss(self, critic_states: torch.Tensor, returns: torch.Tensor,
                   old_outputs: torch.Tensor,
                   ratio_clip: float | torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """The critic's loss per sample `(B,)`: the squared error of its output against the
        returns, or the `value_head`'s (`agents/value_loss.py`: standardised returns, Huber,
        clipped to +-ratio_clip, None: the config's, around `old_outputs` `(B,)`)."""
        outputs = self.critic(critic_states)
        if self.value_head is None:
            return (returns - outputs).square()
        return self.value_head(outputs, returns, old_outputs, ratio_clip)

    def ppo_loss(self, batch: PPOBatch, mean: Callable[[torch.Tensor], torch.Tensor],
                 ratio_clip: float | torch.Tensor | None = None,
                 lambda_entropy: float | torch.Tensor | None = None,
                 ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """The loss of one mini-batch step, actor's and critic's summed (they share no
        parameters), and its log: `LOSS_NAMES` `(5,)`. `mean`: the mini-batch mean of a
        per-sample loss. `ratio_clip`, `lambda_entropy`: None, the config's."""
        cfg = self.config
        eps = cfg.ratio_clip if ratio_clip is None else ratio_clip
        entropy_weight = cfg.lambda_entropy if lambda_entropy is None else lambda_entropy
        extra = () if batch.masks is None else (batch.masks,)
        logprob, entropy = self.actor.get_logprob_entropy(batch.states, batch.actions, *extra)
        log_ratio = logprob - batch.old_logprobs
        ratio = log_ratio.exp()
        objective = mean(self.actor_objective(ratio, batch.advantages, logprob, eps))
        actor_loss = -(objective + entropy_weight * mean(entropy)) + self.auxiliary_loss()[0]
        value_loss = self.value_loss(batch.critic_states, batch.returns, batch.old_outputs, eps)
        critic_loss = 0.5 * mean(value_loss)
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()  # Schulman's k3 estimator
            clipped = ((ratio - 1).abs() > eps).float().mean()
            logs = torch.stack([actor_loss.detach(), critic_loss.detach(), mean(entropy).detach(),
                                approx_kl, clipped])  # fmt: skip
        return actor_loss + critic_loss, logs

    def update_net(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """`ppo_update` on `rollout` (through `run_update`)."""
        self.observe_auxiliary(rollout)
        return self.run_update(self.ppo_update, rollout)

    def ppo_rollout(self, rollout: Any) -> Rollout:
        """The agent's rollout as PPO's `Rollout` (a multi-agent agent's: its agents' rows)."""
        return rollout

    def ppo_batch(self, rollout: Rollout) -> PPOBatch:
        """The rollout `(T, N, ...)` as one batch of B = T * N transitions, with GAE advantages
        (standardised by the whole batch's statistics, `reducer`) and returns on the rewards
        `reward_scaler` scales, and the critic's outputs before the update. Advances the reward
        scaler's and the value normaliser's running statistics."""
        cfg = self.config
        horizon_len, num_envs = rollout.rewards.shape
        critic_now, critic_next = rollout.critic_states, rollout.next_critic_states
        if critic_now is None or critic_next is None:  # the critic sees the actor's states
            critic_now, critic_next = rollout.states, rollout.next_states
        with torch.no_grad():
            dones = rollout.terminals | rollout.truncates
            rewards = self.reward_scaler(rollout.rewards, dones)
            old_outputs, next_outputs = self.critic_outputs(critic_now, critic_next)
            values = self.value(old_outputs).view(horizon_len, num_envs)
            next_values = self.value(next_outputs)
            advantages = compute_gae(rewards, values, next_values.view(horizon_len, num_envs),
                                     rollout.terminals, rollout.truncates, cfg.gamma,
                                     cfg.lambda_gae_adv)  # fmt: skip
            returns = (advantages + values).flatten()
            advantages = advantages.flatten()
            mean, std = self.reducer.mean_std(advantages)
            advantages = (advantages - mean) / (std + 1e-8)
        if self.value_head is not None:
            self.value_head.observe(returns)
        masks = None if rollout.action_masks is None else rollout.action_masks.flatten(0, 1)
        flat = rollout.states.flatten(0, 1)  # one tensor where the critic sees the same states
        return PPOBatch(flat, flat if critic_now is rollout.states else critic_now.flatten(0, 1),
                        rollout.actions.flatten(0, 1), masks, rollout.logprobs.flatten(),
                        advantages, returns, old_outputs)  # fmt: skip

    def critic_outputs(self, states: torch.Tensor, next_states: torch.Tensor,
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """The critic's outputs `(T * N,)` before the update on the rollout's states `(T, N,
        ...)` and on the states its steps reached."""
        return self.critic(states.flatten(0, 1)), self.critic(next_states.flatten(0, 1))

    def minibatches(self, horizon_len: int, num_envs: int) -> MiniBatches:
        """`repeat_times` epochs of `batch_size` transitions drawn from the whole batch
        (`reducer`)."""
        assert self.config.batch_size and self.config.repeat_times, "resolve_config sets them"
        return self.reducer.minibatches(horizon_len * num_envs, num_envs, self.config.batch_size,
                                        self.config.repeat_times, self.device)  # fmt: skip

    def minibatch_loss(self, data: PPOBatch, idx: torch.Tensor,
                       mean: Callable[[torch.Tensor], torch.Tensor],
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """`ppo_loss` of the transitions `idx` `(B,)` of the batch (a tensor two fields share is
        indexed once: a shared image encoder then computes its features once, `Encoder`)."""
        picked: dict[int, torch.Tensor] = {}
        return self.ppo_loss(type(data)._make(None if x is None else picked.setdefault(
            id(x), x[idx]) for x in data), mean)  # fmt: skip

    def update_state_norms(self, data: PPOBatch) -> None:
        """Merge the batch's states into the running normalisers: after the update, so that
        old and new log-probabilities agree."""
        self.state_norm.update(data.states)
        if self.critic.norm is not self.state_norm:  # the critic's own inputs (a CNN: no-op)
            self.critic.norm.update(data.critic_states)  # type: ignore[operator]

    def ppo_update(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """GAE on the rollout (`ppo_batch`), then `repeat_times` epochs of mini-batch steps on
        the clipped objective and the value loss; returns the mean of each loss over the steps.
        The mini-batches are the whole batch's (`reducer`)."""
        horizon_len, num_envs = rollout.rewards.shape
        data = self.ppo_batch(rollout)
        batches = self.minibatches(horizon_len, num_envs)
        logs = torch.zeros(len(LOSS_NAMES), device=self.device)
        for idx in batches.indices:
            loss, step_logs = self.minibatch_loss(data, idx, batches.mean)
            self.optimizer_steps(loss, (self.optimizers["actor"], self.actor),
                                 (self.optimizers["critic"], self.critic))  # fmt: skip
            logs += step_logs
        self.update_state_norms(data)
        logs /= len(batches.indices)
        return dict(zip(LOSS_NAMES, logs.unbind(), strict=True))


class AgentDiscretePPO(AgentPPO):
    """PPO for discrete actions: only the actor differs (categorical instead of Gaussian)."""

    if_discrete = True
    actor_class = ActorDiscretePPO
