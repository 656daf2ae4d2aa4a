"""PPO and A2C with generalized advantage estimation.

PPO: Schulman et al., "Proximal Policy Optimization Algorithms", 2017 (clipped surrogate).
GAE: Schulman et al., "High-Dimensional Continuous Control Using Generalized Advantage
Estimation", 2016. A2C: Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning",
2016, in its synchronous form.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from xiaoyarl.agents.base import H_TERM_FIELDS, AgentBase
from xiaoyarl.config import Config
from xiaoyarl.core.nets import ActorDiscretePPO, ActorPPO, CriticV, RewardScaler
from xiaoyarl.core.returns import clipped_surrogate, compute_gae
from xiaoyarl.envs.base import EnvSpec, VecEnv


class Rollout(NamedTuple):
    """Time-major on-policy data; T = horizon_len, N = num_envs, S = state_dim, A = action_dim."""

    states: torch.Tensor  # (T, N, S)
    actions: torch.Tensor  # (T, N, A) float, or (T, N) int64 for discrete actions
    logprobs: torch.Tensor  # (T, N) log-probability of the action when it was taken
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool: the episode ended for good (no bootstrap)
    truncates: torch.Tensor  # (T, N) bool: the episode was cut by a time limit (bootstrap)
    next_states: torch.Tensor  # (T, N, S): the state each step reached, before any auto-reset


def on_policy_num_envs(config: Config, batched: bool, device_type: str) -> int:
    """Sub-envs of an on-policy run: 1,024 batched on a GPU, 16 batched on a CPU, 8 gymnasium."""
    return config.num_envs or ((1024 if device_type == "cuda" else 16) if batched else 8)


def on_policy_common(num_envs: int) -> dict:
    return {"num_envs": num_envs, "net_dims": [64, 64], "state_norm": True, "reward_norm": True}


def on_policy_eval_every(rollout: int) -> int:
    """Every 20k env steps, or every 8 rollouts where rollouts are larger (1,024 sub-envs on a
    GPU), so that evaluating (sequential episodes) does not take longer than training."""
    return max(20_000, 8 * rollout)


class AgentPPO(AgentBase):
    """PPO with a Gaussian actor, a state-value critic, GAE and the clipped surrogate objective."""

    if_off_policy = False
    if_discrete = False
    config_fields = H_TERM_FIELDS | {"ratio_clip", "lambda_gae_adv", "lambda_entropy",
                                     "reward_norm"}  # fmt: skip
    actor_class: type[torch.nn.Module] = ActorPPO

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

    def __init__(
        self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True
    ) -> None:
        super().__init__(spec, config, device, learner)
        self.actor = self.actor_class(
            spec.state_dim, spec.action_dim, config.net_dims, self.state_norm
        ).to(device)
        self.critic = self.make_critic().to(device)
        self.reward_scaler = RewardScaler(spec.num_envs, config.gamma, config.reward_norm)
        self.reward_scaler.to(device)
        self.nets = {"actor": self.actor, "critic": self.critic, "reward": self.reward_scaler}
        self.optimizers = {
            "actor": self.make_optimizer(self.actor),
            "critic": self.make_optimizer(self.critic),
        }

    @torch.no_grad()
    def explore_env(self, env: VecEnv, horizon_len: int) -> Rollout:
        n, s = env.spec.num_envs, env.spec.state_dim
        dev = self.device
        states = torch.empty((horizon_len, n, s), device=dev)
        next_states = torch.empty((horizon_len, n, s), device=dev)
        action_shape = (
            (horizon_len, n) if self.if_discrete else (horizon_len, n, env.spec.action_dim)
        )
        actions = torch.empty(
            action_shape, device=dev, dtype=torch.int64 if self.if_discrete else None
        )
        logprobs = torch.empty((horizon_len, n), device=dev)
        rewards = torch.empty((horizon_len, n), device=dev)
        terminals = torch.empty((horizon_len, n), dtype=torch.bool, device=dev)
        truncates = torch.empty((horizon_len, n), dtype=torch.bool, device=dev)

        state = self.last_state
        for t in range(horizon_len):
            action, logprob = self.actor.get_action(state)
            next_state, reward, terminal, truncate, info = env.step(
                self.actor.convert_action_for_env(action)
            )
            states[t] = state
            actions[t] = action
            logprobs[t] = logprob
            rewards[t] = reward
            terminals[t] = terminal
            truncates[t] = truncate
            next_states[t] = info["final_state"]
            state = next_state
        self.last_state = state
        return Rollout(states, actions, logprobs, rewards, terminals, truncates, next_states)

    def make_critic(self) -> torch.nn.Module:
        """V(s) on the actor's (normalised) states."""
        return CriticV(self.spec.state_dim, self.config.net_dims, self.state_norm)

    # --- what a multi-agent PPO (MAPPO) changes in the update ---
    def critic_inputs(self, rollout: Rollout) -> tuple[torch.Tensor, torch.Tensor]:
        """What the critic sees at each step and at the state each step reached `(T, N, S)`:
        the actor's states."""
        return rollout.states, rollout.next_states

    def values(self, outputs: torch.Tensor) -> torch.Tensor:
        """V in return units `(B,)` from the critic's outputs `(B,)`: PPO's critic outputs V."""
        return outputs

    def value_loss(
        self, critic_states: torch.Tensor, returns: torch.Tensor, old_outputs: torch.Tensor
    ) -> torch.Tensor:
        """Squared error of V against the returns, per sample `(B,)`. `old_outputs` `(B,)`, the
        critic's outputs before this update, are for MAPPO's clipped value loss."""
        return (self.critic(critic_states) - returns).square()

    def logprob_entropy(
        self, rollout: Rollout, states: torch.Tensor, actions: torch.Tensor, idx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability and entropy `(B,)` of the actions of the mini-batch `idx`."""
        return self.actor.get_logprob_entropy(states[idx], actions[idx])

    def observe_returns(self, returns: torch.Tensor) -> None:
        """Before the mini-batches: the returns `(T * N,)` the critic is about to fit."""

    def update_state_norms(self, rollout: Rollout, critic_states: torch.Tensor) -> None:
        """After the update: merge the rollout's states into the (shared) normaliser."""
        self.state_norm.update(rollout.states.flatten(0, 1))

    def sub_env_state(self) -> dict:
        # differs: each sub-env's running discounted return (reward scaling) is its own
        return {**super().sub_env_state(), "returns": self.reward_scaler.returns.clone()}

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)
        self.reward_scaler.returns.copy_(state["returns"])

    def actor_objective(
        self, ratio: torch.Tensor, advantage: torch.Tensor, logprob: torch.Tensor
    ) -> torch.Tensor:
        """PPO's clipped surrogate, per sample (to be maximized)."""
        return clipped_surrogate(ratio, advantage, self.config.ratio_clip)

    def graph_period(self) -> int | None:
        return 1  # every update on a rollout makes the same choices

    def update_net(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """`ppo_update` on `rollout`, replayed as one CUDA graph where enabled."""
        self.h_term_observe(rollout)
        return self.run_update(self.ppo_update, rollout)

    def h_term_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.actor.get_logprob_entropy(states, actions)[0]

    def ppo_update(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """GAE on the rollout, then `repeat_times` epochs of mini-batch steps on the clipped
        objective and the value loss; returns the mean of each loss over the steps.

        In data-parallel training (K ranks, `scale/distributed.py`) this computes the update
        of one process on the union of the ranks' rollouts (env axis: rank 0's sub-envs, then
        rank 1's, ...), with `batch_size` transitions per rank per mini-batch: the advantage
        statistics are those of the union, each mini-batch is drawn from the union with one
        permutation shared by the ranks, and each rank's loss is its part of the mini-batch
        mean, so that the averaged gradient is the union's."""
        cfg = self.config
        horizon_len, num_envs = rollout.rewards.shape
        dp = self.data_parallel
        world = 1 if dp is None else dp.world_size
        with torch.no_grad():
            dones = rollout.terminals | rollout.truncates
            rewards = self.reward_scaler(rollout.rewards, dones)
            critic_now, critic_next = self.critic_inputs(rollout)
            old_outputs = self.critic(critic_now.flatten(0, 1))  # (T * N,) before the update
            values = self.values(old_outputs).view(horizon_len, num_envs)
            next_outputs = self.critic(critic_next.flatten(0, 1))
            next_values = self.values(next_outputs).view(horizon_len, num_envs)
            advantages = compute_gae(
                rewards,
                values,
                next_values,
                rollout.terminals,
                rollout.truncates,
                cfg.gamma,
                cfg.lambda_gae_adv,
            )
            returns = (advantages + values).flatten()
            advantages = advantages.flatten()
            mean, std = (
                (advantages.mean(), advantages.std()) if dp is None else dp.mean_std(advantages)
            )
            advantages = (advantages - mean) / (std + 1e-8)
        states = rollout.states.flatten(0, 1)
        critic_states = critic_now.flatten(0, 1)
        actions = rollout.actions.flatten(0, 1)
        old_logprobs = rollout.logprobs.flatten()
        self.observe_returns(returns)

        size = horizon_len * num_envs * world  # transitions in the (union of the) rollouts
        batch_size = min(cfg.batch_size, size // world)  # per rank
        num_updates = max(1, int(cfg.repeat_times * size / (batch_size * world)))
        num_perms = -(-num_updates * batch_size * world // size)
        order = torch.cat([torch.randperm(size, device=self.device) for _ in range(num_perms)])

        def batch_mean(x: torch.Tensor) -> torch.Tensor:
            return x.mean() if dp is None else x.sum() / batch_size  # this rank's share

        logs = torch.zeros(5, device=self.device)
        for i in range(num_updates):
            idx = order[i * batch_size * world : (i + 1) * batch_size * world]
            if dp is not None:  # this rank's transitions of the mini-batch, as local indices
                idx = dp.local_part(idx, num_envs)
            logprob, entropy = self.logprob_entropy(rollout, states, actions, idx)
            log_ratio = logprob - old_logprobs[idx]
            ratio = log_ratio.exp()
            objective = batch_mean(self.actor_objective(ratio, advantages[idx], logprob))
            actor_loss = -(objective + cfg.lambda_entropy * batch_mean(entropy))
            actor_loss = actor_loss + self.h_term_loss()[0]
            value_loss = self.value_loss(critic_states[idx], returns[idx], old_outputs[idx])
            critic_loss = 0.5 * batch_mean(value_loss)
            self.optimizer_steps(
                actor_loss + critic_loss,
                (self.optimizers["actor"], self.actor),
                (self.optimizers["critic"], self.critic),
            )
            with torch.no_grad():
                approx_kl = ((ratio - 1) - log_ratio).mean()  # Schulman's k3 estimator
                clipped = ((ratio - 1).abs() > cfg.ratio_clip).float().mean()
                logs += torch.stack(
                    [
                        actor_loss.detach(),
                        critic_loss.detach(),
                        batch_mean(entropy).detach(),
                        approx_kl,
                        clipped,
                    ]
                )
        self.update_state_norms(rollout, critic_states)  # after: old and new log-probs agree
        logs /= num_updates
        names = ("actor_loss", "critic_loss", "entropy", "approx_kl", "clip_fraction")
        return dict(zip(names, logs.unbind(), strict=True))


class AgentDiscretePPO(AgentPPO):
    """PPO for discrete actions: only the actor differs (categorical instead of Gaussian)."""

    if_discrete = True
    actor_class = ActorDiscretePPO


class AgentA2C(AgentPPO):
    """A2C: the plain policy gradient `log pi(a|s) * A` instead of PPO's clipped ratio; by default
    one gradient step on each short rollout (see `Config` defaults for `a2c`)."""

    config_fields = AgentPPO.config_fields - {"ratio_clip"}  # differs: no clipped ratio

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        # differs: one gradient step on each short rollout (8 steps), as in its paper, lr 7e-4
        num_envs = on_policy_num_envs(config, batched, device_type)
        horizon_len = config.horizon_len or 8
        return {
            **on_policy_common(num_envs),
            "eval_every": on_policy_eval_every(num_envs * horizon_len),
            "horizon_len": horizon_len,
            "batch_size": num_envs * horizon_len,
            "repeat_times": 1.0,
            "learning_rate": 7e-4,
        }

    def actor_objective(
        self, ratio: torch.Tensor, advantage: torch.Tensor, logprob: torch.Tensor
    ) -> torch.Tensor:
        return logprob * advantage  # differs from PPO: no ratio, no clipping


class AgentDiscreteA2C(AgentA2C):
    """A2C for discrete actions: only the actor differs (categorical instead of Gaussian)."""

    if_discrete = True
    actor_class = ActorDiscretePPO
