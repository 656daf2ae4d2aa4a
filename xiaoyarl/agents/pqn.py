"""PQN: Gallici et al., "Simplifying Deep Temporal Difference Learning", ICLR 2025 (Algorithm 1).

Q-learning built for many vectorized envs: a Q-network with LayerNorm, epsilon-greedy rollouts
of every sub-env, Peng's Q(lambda) returns over each rollout computed once with the network of
that moment, then several epochs of mini-batch regression onto them. No replay buffer and no
target network: the sub-envs decorrelate the data and LayerNorm keeps the bootstrapped targets
from running away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import torch

from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.epsilon_greedy import EpsilonGreedy
from xiaoyarl.agents.ppo import on_policy_eval_every, on_policy_num_envs
from xiaoyarl.core.off_policy_nets import QNetLayerNorm
from xiaoyarl.core.reduce import MiniBatches
from xiaoyarl.core.returns import lambda_returns

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit, Steps
    from xiaoyarl.config import Config
    from xiaoyarl.envs.base import EnvSpec


class Rollout(NamedTuple):
    """Time-major data of one rollout; T = horizon_len, N = num_envs, S = state_dim."""

    states: torch.Tensor  # (T, N, S)
    actions: torch.Tensor  # (T, N) int64
    rewards: torch.Tensor  # (T, N)
    terminals: torch.Tensor  # (T, N) bool: the episode ended for good (no bootstrap)
    truncates: torch.Tensor  # (T, N) bool: the episode was cut by a time limit (bootstrap)
    next_states: torch.Tensor  # (T, N, S): the state each step reached, before any auto-reset


class AgentPQN(EpsilonGreedy, AgentBase):
    """Parallelised Q-learning: epsilon decays linearly from 1 to `explore_rate` over
    `explore_decay_steps` env steps; each rollout's Q(`q_lambda`) returns are regressed onto
    for `repeat_times` epochs of `batch_size` mini-batches (squared error)."""

    if_off_policy = False
    if_discrete = True
    config_fields = frozenset({"repeat_times", "explore_rate", "explore_decay_steps", "q_lambda",
                               "recurrent", "recurrent_dim"})  # fmt: skip
    member_fields = frozenset({"learning_rate", "clip_grad_norm"})
    tune_space: ClassVar[str | None] = "pqn.yaml"
    rollout_class: ClassVar[Callable[..., Steps]] = Rollout
    qnet_class: Callable[..., QNetLayerNorm] = QNetLayerNorm

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """The sub-envs of the on-policy agents (1,024 batched on a GPU, 16 on a CPU, 8
        gymnasium envs) with rollouts of at least 1,024 transitions, cut into 8 mini-batches
        for 4 epochs: one gradient step per 32 transitions, the ratio of the paper's
        classic-control settings (32 envs x 64 steps, 16 mini-batches, 4 epochs), at its
        MinAtar and Atari learning rate, 5e-4; a [128, 128] LayerNorm network on raw
        observations (LayerNorm normalises inside); epsilon decays over the first tenth of the
        budget (the paper's code: a tenth of its MinAtar and Atari budgets, a fifth of its
        CartPole one), whatever the budget, not over a fixed number of env steps."""
        num_envs = on_policy_num_envs(config, batched, device_type)
        horizon_len = config.horizon_len or max(16, 1024 // num_envs)
        return {
            "num_envs": num_envs,
            "horizon_len": horizon_len,
            "batch_size": max(1, num_envs * horizon_len // 8),
            "repeat_times": 4.0,
            "learning_rate": 5e-4,
            "net_dims": [128, 128],
            "state_norm": False,
            "reward_norm": False,
            "eval_every": on_policy_eval_every(num_envs * horizon_len),
            "explore_decay_steps": max(1, config.max_steps // 10),
        }

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        assert config.net_dims is not None, "resolve_config sets net_dims"
        encoder = self.make_encoder(layer_norm=True)  # LayerNorm in its CNNs too, as the paper's
        self.qnet = self.qnet_class(encoder.out_dim, spec.action_dim, config.net_dims, encoder)
        self.qnet.to(device)
        self.actor = self.qnet  # the greedy policy
        self.nets = {"qnet": self.qnet}
        self.optimizers = {"qnet": self.make_optimizer(self.qnet)}

    def explore_step(
        self, state: torch.Tensor, epsilon: float | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, tuple]:
        """Epsilon-greedy actions (`epsilon`: None, this agent's schedule's)."""
        greedy = self.qnet(state)
        action = self.epsilon_greedy(greedy, self.qnet.random_like(greedy), epsilon)
        return action, (state, action)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        state, action = kept
        return state, action, reward, terminal, truncate, info["final_state"]

    def update_net(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """`pqn_update` on `rollout` (through `run_update`)."""
        return self.run_update(self.pqn_update, rollout)

    def q_lambda_targets(self, rollout: Rollout) -> torch.Tensor:
        """Q(lambda) returns `(T, N)` of the rollout, bootstrapped from max_a Q(s', a) of the
        network as it is now."""
        horizon_len, num_envs = rollout.rewards.shape
        with torch.no_grad():
            next_q = self.next_values(rollout)
            return lambda_returns(rollout.rewards, next_q.view(horizon_len, num_envs),
                                  rollout.terminals, rollout.truncates, self.config.gamma,
                                  self.config.q_lambda)  # fmt: skip

    def next_values(self, rollout: Rollout) -> torch.Tensor:
        """max_a Q(s', a) `(T * N,)` of the states the rollout's steps reached."""
        return self.greedy_values(rollout.next_states.flatten(0, 1))

    def greedy_values(self, states: torch.Tensor) -> torch.Tensor:
        """max_a Q(s, a) `(B,)` of states `(B, ...)`, what the returns bootstrap from (with
        branches, the mean over them of each one's max)."""
        return self.qnet.greedy_values(self.qnet.q_values(states))

    def chosen_values(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q(s, a) `(B,)` of the actions taken, what is regressed onto the returns (with
        branches `(B, K)`, each branch's value of its component)."""
        return self.qnet.action_values(self.qnet.q_values(states), actions)

    def update_state_norm(self, states: torch.Tensor) -> None:
        """Take in a rollout's states `(T * N, ...)` into the observation normaliser."""
        self.state_norm.update(states)

    def pqn_update(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """The rollout's Q(lambda) returns, then `repeat_times` epochs of mini-batch steps on
        the squared error of Q(s, a) against them; returns the mean loss and Q-value. The
        mini-batches are the whole batch's (`reducer`)."""
        horizon_len, num_envs = rollout.rewards.shape
        returns = self.q_lambda_targets(rollout).flatten()
        states, actions = rollout.states.flatten(0, 1), rollout.actions.flatten(0, 1)
        batches = self.minibatches(horizon_len, num_envs)
        logs = torch.zeros(2, device=self.device)
        for idx in batches.indices:
            loss, step_logs = self.minibatch_loss((states, actions, returns), idx, batches.mean)
            self.optimizer_step(self.optimizers["qnet"], self.qnet, loss)
            logs += step_logs
        self.update_state_norm(states)  # after the update, as the on-policy agents
        logs /= len(batches.indices)
        return {"critic_loss": logs[0], "q_value": logs[1]}

    def minibatches(self, horizon_len: int, num_envs: int) -> MiniBatches:
        """`repeat_times` epochs of `batch_size` transitions drawn from the whole batch
        (`reducer`)."""
        assert self.config.batch_size and self.config.repeat_times, "resolve_config sets them"
        return self.reducer.minibatches(horizon_len * num_envs, num_envs, self.config.batch_size,
                                        self.config.repeat_times, self.device)  # fmt: skip

    def minibatch_loss(self, data: tuple[torch.Tensor, ...], idx: torch.Tensor,
                       mean: Callable[[torch.Tensor], torch.Tensor],
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """`pqn_loss` of the transitions `idx` `(B,)` of the flat batch's (states, actions,
        returns)."""
        states, actions, returns = data
        return self.pqn_loss(states[idx], actions[idx], returns[idx], mean)

    def pqn_loss(
        self,
        states: torch.Tensor,
        actions: torch.Tensor,
        returns: torch.Tensor,
        mean: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Half the squared error of Q(s, a) against the Q(lambda) returns of a mini-batch, its
        mean taken by `mean` (the mini-batches'); and `(loss, mean Q)` detached, to log."""
        q = self.chosen_values(states, actions)
        returns = returns.view(-1, *([1] * (q.dim() - 1)))  # one per branch where q has them
        loss = 0.5 * mean((q - returns).square())
        return loss, torch.stack([loss.detach(), mean(q.detach())])
