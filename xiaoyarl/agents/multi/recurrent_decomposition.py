"""VDN and QMIX with recurrent agent networks (`--set recurrent=gru`, or lstm), as the QMIX
paper's agents: the shared agent network is a `RecurrentQNet` (a DRQN: Hausknecht and Stone
2015) whose GRU or LSTM of `recurrent_dim` units, after the layers of `net_dims`, carries each
agent's episode so far (the paper's agents: `net_dims: [64]`, `recurrent_dim: 64`).

What changes against the feed-forward agents (`value_decomposition.py`):
- exploring carries each agent's hidden state from step to step (`HiddenStates`, the carrier
  every recurrent policy uses) and zeroes it where a sub-env's episode ends;
- every gradient step replays `batch_size // max_step` whole episodes from the buffer, unrolled
  from their first step (the papers' episode replay), instead of single transitions; with
  `td_lambda` the targets are TD(lambda) returns over each episode;
- evaluation and saved policies keep their own hidden states (`RecurrentGreedy`, `reset()`
  starts anew); the exploring hidden states are part of the checkpoint.
Shapes: B = batch, A = agents, O = observation, S = global state, U = actions, T = steps,
E = sub-envs, H = the width of a hidden state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch

from xiaoyarl.agents.multi.common import Joint, masked_random_actions, with_agent_ids
from xiaoyarl.agents.multi.episode_memory import EpisodeMemory
from xiaoyarl.agents.multi.value_decomposition import AgentQMIX, AgentVDN, masked
from xiaoyarl.core.buffer import Batch, Episodes
from xiaoyarl.core.off_policy_nets import QNet, RecurrentQNet
from xiaoyarl.core.recurrent import HiddenStates
from xiaoyarl.core.returns import lambda_returns

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit


class RecurrentGreedy:
    """The greedy joint policy of recurrent agent networks over one batch of episodes:
    `(obs (E, A, O), avail) -> actions (E, A)`, carrying a hidden state per sub-env and agent
    from call to call; `reset()` (the evaluator calls it when its env resets) starts new ones.
    With `explore_rate` > 0 each agent instead takes a random available action with that
    probability (epsilon-greedy, as it explores)."""

    def __init__(self, qnet: RecurrentQNet, explore_rate: float = 0.0) -> None:
        self.qnet = qnet
        self.explore_rate = explore_rate
        self.hiddens = HiddenStates(qnet.initial_hidden)  # (E * A, H)

    def reset(self) -> None:
        self.hiddens.reset()

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        x = with_agent_ids(obs).flatten(0, 1)
        q, hidden = self.qnet.step(x, self.hiddens.current(x.shape[0]))
        self.hiddens.keep(hidden)
        greedy = masked(q.view(*obs.shape[:2], -1), avail).argmax(-1)
        if not self.explore_rate:
            return greedy
        random = masked_random_actions(avail, greedy.shape, q.shape[-1], greedy.device)
        explore = torch.rand(greedy.shape, device=greedy.device) < self.explore_rate
        return torch.where(explore, random, greedy)


class RecurrentAgents(EpisodeMemory):
    """The recurrent version of a value-decomposition agent (mixed in before it: see the
    module; what the episode replay shares with MADDPG's and MATD3's: `EpisodeMemory`)."""

    # set by the value-decomposition agent this is mixed into
    qnet_class: type[QNet]
    config: Any
    device: torch.device
    qnet: QNet
    qnet_target: QNet
    multi_spec: Any
    layout: Any
    buffer: Any
    mixer: Any
    mixer_target: Any
    reward_stats: Any
    step_networks: Callable[..., dict[str, torch.Tensor]]

    def __init__(self, spec, config, device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        # differs: DRQN agents, with the memory the config asks for. A RecurrentQNet is no QNet
        # (it has no `q_values`), but what of DQN needs one is overridden here, and the methods
        # here get it from `drqn`
        drqn = functools.partial(RecurrentQNet, hidden_dim=config.recurrent_dim,
                                 kind=config.recurrent)  # fmt: skip
        self.qnet_class = cast("type[QNet]", drqn)
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]
        self.hiddens = HiddenStates(self.drqn(self.qnet).initial_hidden)  # (E * A, H) exploring
        self.step_q: torch.Tensor | None = None  # (E, A, U) of the current step

    @staticmethod
    def drqn(net: QNet) -> RecurrentQNet:
        """`qnet` or `qnet_target`, which `qnet_class` built as a `RecurrentQNet` (DQN's
        attributes type them as its QNet)."""
        return cast(RecurrentQNet, net)

    # --- acting ---
    def greedy_joint_action(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        raise ValueError(
            "a recurrent agent acts on whole episodes: use `evaluation_policy()` (a policy "
            "that keeps the hidden states, reset with the env), not `act`."
        )

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        explore_rate = 0.0 if self.config.eval_deterministic else self.config.explore_rate
        return RecurrentGreedy(self.drqn(self.qnet), explore_rate)

    def read_observation(self, joint: Joint) -> None:
        # the hidden state takes in every step
        x = with_agent_ids(joint.obs).flatten(0, 1)
        q, hidden = self.drqn(self.qnet).step(x, self.hiddens.current(x.shape[0]))
        self.hiddens.keep(hidden)
        self.step_q = q.view(*joint.obs.shape[:2], -1)

    def explore_q(self, joint: Joint) -> torch.Tensor:
        assert self.step_q is not None, "read_observation took this step's Q-values"
        return self.step_q  # the hidden states took in this step already

    # --- learning ---
    def update_step(self, batch: Batch | Episodes) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The TD update of the feed-forward agents on whole episodes `(T, B)`: each network is
        unrolled from the episode's first step; the next state's Q-values at step t come from
        one more step on it from the hidden state after step t (on the kept last state where
        the episode was truncated). With `td_lambda` the targets are TD(lambda) returns over
        each episode (PyMARL2's and JaxMARL's TD(lambda) loss: Hu et al. 2021, "Rethinking
        the Implementation Tricks and Monotonicity Constraint in Cooperative Multi-Agent
        Reinforcement Learning"), bootstrapping from the target Q_tot where an episode was
        truncated or its stored part ends. The loss averages over the episodes' real steps."""
        assert isinstance(batch, Episodes), "recurrent agents replay whole episodes"
        t_len, b = batch.mask.shape
        a = self.multi_spec.num_agents
        joint = self.layout.unpack(batch.states)  # obs (T, B, A, O), state (T, B, S)
        after = self.layout.unpack(batch.next_states)
        actions, _ = self.layout.unpack_step(batch.actions)  # (T, B, A)
        x, x_next = with_agent_ids(joint.obs).flatten(1, 2), with_agent_ids(after.obs).flatten(1, 2)

        def q_values(net: RecurrentQNet) -> tuple[torch.Tensor, torch.Tensor]:
            """Q at every step and at its next state, `(T, B, A, U)` each."""
            q, hidden = net.unroll(x)  # (T, B * A, U), (T, B * A, H)
            q_next, _ = net.step(x_next.flatten(0, 1), hidden.flatten(0, 1))
            return q.view(t_len, b, a, -1), q_next.view(t_len, b, a, -1)

        q, q_next = q_values(self.drqn(self.qnet))
        with torch.no_grad():
            _, q_next_target = q_values(self.drqn(self.qnet_target))
            best = masked(q_next.detach(), after.avail).argmax(-1, keepdim=True)  # double Q
            next_q = q_next_target.gather(-1, best).squeeze(-1)  # (T, B, A)
            next_value = self.mixer_target(next_q.flatten(0, 1), after.state.flatten(0, 1))
            rewards = self.reward_stats(batch.rewards.reshape(-1, 1)).squeeze(-1)
            if self.config.td_lambda:
                target = self.lambda_targets(batch, rewards.view(t_len, b),
                                             next_value.view(t_len, b)).flatten()  # fmt: skip
            else:
                not_terminal = (~batch.terminals).flatten().float()
                target = rewards + self.config.gamma * not_terminal * next_value  # (T * B,)
        chosen = q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)  # (T, B, A)
        q_tot = self.mixer(chosen.flatten(0, 1), joint.state.flatten(0, 1))
        mask = batch.mask.flatten().float()
        loss = (mask * (target - q_tot).square()).sum() / mask.sum()
        return self.step_networks(loss, q_tot, mask), ((target - q_tot) * mask).detach()

    def lambda_targets(self, episodes: Episodes, rewards: torch.Tensor,
                       next_value: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """TD(lambda) returns `(T, B)` of episodes from their rewards and the target Q_tot of
        the states their steps reached: each trace ends at the episode's last real step
        (terminal: no bootstrap; else from the target Q_tot there)."""
        mask = episodes.mask
        last = mask & ~torch.cat([mask[1:], torch.zeros_like(mask[:1])])
        truncated = last & ~episodes.terminals
        return lambda_returns(rewards, next_value, episodes.terminals, truncated,
                              self.config.gamma, self.config.td_lambda)  # fmt: skip


class AgentRecurrentVDN(RecurrentAgents, AgentVDN):
    """VDN with recurrent agent networks."""


class AgentRecurrentQMIX(RecurrentAgents, AgentQMIX):
    """QMIX with recurrent agent networks (the paper's agents)."""


# the recurrent agent of each feed-forward one (`recurrent`)
RECURRENT_AGENTS = {AgentVDN: AgentRecurrentVDN, AgentQMIX: AgentRecurrentQMIX}
