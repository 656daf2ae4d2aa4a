"""Value decomposition: VDN and QMIX.

VDN: Sunehag et al., "Value-Decomposition Networks For Cooperative Multi-Agent Learning", 2017.
QMIX: Rashid et al., "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent
Reinforcement Learning", ICML 2018.

One Q-network shared by all agents (each observation with its agent id) gives every agent's
Q(o_i, .); a mixer turns the Q-values of the actions taken into the team's Q_tot, trained with
DQN's machinery (replay, epsilon-greedy, target networks, prioritized replay) on the team
reward: Q_tot(s, a) -> r + gamma (1 - terminal) Q_tot'(s', a*), with double Q (the online
network picks each agent's a* among its available actions, the target networks score it), and
the squared TD error as the loss, as in both papers.
Shapes: B = batch, A = agents, O = observation, S = global state, U = actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import torch
from torch import nn
from torch.nn import functional as F

from xiaoyarl.agents.dqn import AgentDQN
from xiaoyarl.agents.multi.common import (
    Joint,
    MultiAgentOffPolicy,
    masked_random_actions,
    with_agent_ids,
)
from xiaoyarl.core.buffer import Batch, Episodes, Transitions
from xiaoyarl.core.nets import RunningNorm, build_mlp
from xiaoyarl.core.off_policy_nets import QNet, RecurrentQNet
from xiaoyarl.core.returns import lambda_returns

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Optimizer, OptimizerKit


class VDNMixer(nn.Module):
    """Q_tot = sum of the agents' Q-values: `(B, A), (B, S) -> (B,)`."""

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return q.sum(-1)


class QMixer(nn.Module):
    """QMIX's mixing network: Q_tot = elu(q W1 + b1) W2 + b2, whose weights and biases are
    produced from the global state by hypernetworks; W1 and W2 are taken in absolute value, so
    Q_tot is monotonic (non-decreasing) in every agent's Q. `(B, A), (B, S) -> (B,)`.
    The hypernetworks of W1 and W2 are two-layer ReLU networks (`hypernet_layers=2`, as PyMARL
    uses) or linear maps of the state (1, as in the paper); b1 is linear and b2 = V(s) a
    two-layer ReLU network, as in the paper. `init_gain`: the gain of every hypernetwork
    layer's orthogonal init (None: the library's usual one, `build_mlp`'s)."""

    def __init__(self, num_agents: int, state_dim: int, norm: RunningNorm, embed: int = 32,
                 hypernet_layers: int = 2, hyper: int = 64,
                 init_gain: float | None = None) -> None:  # fmt: skip
        super().__init__()
        self.norm = norm
        self.num_agents, self.embed = num_agents, embed
        hidden = [hyper] if hypernet_layers == 2 else []
        self.hyper_w1 = build_mlp([state_dim, *hidden, num_agents * embed], nn.ReLU)
        self.hyper_b1 = build_mlp([state_dim, embed])
        self.hyper_w2 = build_mlp([state_dim, *hidden, embed], nn.ReLU)
        self.hyper_b2 = build_mlp([state_dim, embed, 1], nn.ReLU)  # V(s)
        if init_gain is not None:
            for layer in self.modules():
                if isinstance(layer, nn.Linear):
                    nn.init.orthogonal_(layer.weight, init_gain)

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        s = self.norm(state)
        batch = q.shape[0]
        w1 = self.hyper_w1(s).abs().view(batch, self.num_agents, self.embed)
        hidden = F.elu(q.unsqueeze(1) @ w1 + self.hyper_b1(s).unsqueeze(1))  # (B, 1, embed)
        w2 = self.hyper_w2(s).abs().view(batch, self.embed, 1)
        return (hidden @ w2).view(batch) + self.hyper_b2(s).view(batch)


def masked(q: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
    """Q-values `(..., U)` with unavailable actions at -inf (never picked by an argmax)."""
    return q if avail is None else q.masked_fill(~avail, -torch.inf)


class RecurrentGreedy:
    """The greedy joint policy of recurrent agent networks over one batch of episodes:
    `(obs (E, A, O), avail) -> actions (E, A)`, carrying a hidden state per sub-env and agent
    from call to call; `reset()` (the evaluator calls it when its env resets) starts new ones.
    With `explore_rate` > 0 each agent instead takes a random available action with that
    probability (epsilon-greedy, as it explores)."""

    def __init__(self, qnet: RecurrentQNet, explore_rate: float = 0.0) -> None:
        self.qnet = qnet
        self.explore_rate = explore_rate
        self.hidden: torch.Tensor | None = None  # (E * A, H)

    def reset(self) -> None:
        self.hidden = None

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        x = with_agent_ids(obs).flatten(0, 1)
        if self.hidden is None or self.hidden.shape[0] != x.shape[0]:
            self.hidden = self.qnet.initial_hidden(x.shape[0])
        q, self.hidden = self.qnet.step(x, self.hidden)
        greedy = masked(q.view(*obs.shape[:2], -1), avail).argmax(-1)
        if not self.explore_rate:
            return greedy
        random = masked_random_actions(avail, greedy.shape, q.shape[-1], greedy.device)
        explore = torch.rand(greedy.shape, device=greedy.device) < self.explore_rate
        return torch.where(explore, random, greedy)


class AgentVDN(MultiAgentOffPolicy, AgentDQN):
    """VDN: DQN on the team reward with Q_tot the sum of the agents' Q-values.

    With `agent_rnn` the shared agent network is recurrent (`RecurrentQNet`, as the QMIX
    paper's agents): exploring carries each agent's hidden state through the episode, and
    every gradient step replays `batch_size // max_step` whole episodes from the buffer,
    unrolled from their first step (the papers' episode replay), instead of single
    transitions."""

    mixer_class: type[nn.Module] = VDNMixer
    config_fields = (AgentDQN.config_fields - {"critic_atoms", "critic_v_min", "critic_v_max"}) | {
        "reward_norm", "agent_rnn", "td_lambda"}  # fmt: skip

    def __init__(self, spec, config, device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        self.recurrent = bool(config.agent_rnn)
        if self.recurrent:
            # differs: DRQN agents. A RecurrentQNet is no QNet (it has no `q_values`), but what
            # of DQN needs one is overridden here, and the methods here that use the recurrent
            # network get it from `drqn`
            self.qnet_class = cast("type[QNet]", RecurrentQNet)
        super().__init__(spec, config, device, learner, kit)
        self.mixer = self.make_mixer().to(device)
        self.mixer_target = self.make_target(self.mixer)
        # team rewards standardised by their running mean and std (`reward_norm`, as EPyMARL)
        self.reward_stats = RunningNorm(1, bool(config.reward_norm), clip=None).to(device)
        self.nets.update(mixer=self.mixer, mixer_target=self.mixer_target,
                         reward_stats=self.reward_stats)  # fmt: skip
        if any(True for _ in self.mixer.parameters()):
            self.optimizers["mixer"] = self.make_optimizer(self.mixer)
        self.hidden: torch.Tensor | None = None  # recurrent: (E * A, H) while exploring
        self.step_q: torch.Tensor | None = None  # recurrent: (E, A, U) of the current step

    def make_mixer(self) -> nn.Module:
        return self.mixer_class()

    @staticmethod
    def drqn(net: QNet) -> RecurrentQNet:
        """`qnet` or `qnet_target` of recurrent agents, which `qnet_class` built as a
        `RecurrentQNet` (DQN's attributes type them as its QNet)."""
        return cast(RecurrentQNet, net)

    def update_cycle(self) -> int | None:
        # episode replay draws a data-dependent number of episode starts: choices vary
        return None if self.recurrent else super().update_cycle()

    # --- acting ---
    def agent_q(self, net: QNet, obs: torch.Tensor) -> torch.Tensor:
        """Every agent's Q(o_i, .) `(B, A, U)` from observations `(B, A, O)`."""
        return net.q_values(with_agent_ids(obs))

    def greedy_joint_action(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        if self.recurrent:
            raise ValueError(
                "a recurrent agent acts on whole episodes: use `evaluation_policy()` (a policy "
                "that keeps the hidden states, reset with the env), not `act`."
            )
        return masked(self.agent_q(self.qnet, obs), avail).argmax(-1)

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        # differs: recurrent agents evaluate with hidden states of their own
        if self.recurrent:
            explore_rate = 0.0 if self.config.eval_deterministic else self.config.explore_rate
            return RecurrentGreedy(self.drqn(self.qnet), explore_rate)
        return super().evaluation_policy()

    def observe(self, obs: torch.Tensor, info: dict) -> torch.Tensor:
        self.hidden = None  # the envs were reset: new episodes
        return super().observe(obs, info)

    def read_observation(self, joint: Joint) -> None:
        if self.recurrent:  # differs: the hidden state takes in every step
            x = with_agent_ids(joint.obs).flatten(0, 1)
            qnet = self.drqn(self.qnet)
            if self.hidden is None:
                self.hidden = qnet.initial_hidden(x.shape[0])
            q, self.hidden = qnet.step(x, self.hidden)
            self.step_q = q.view(*joint.obs.shape[:2], -1)

    def episodes_ended(self, done: torch.Tensor) -> None:
        if self.recurrent:  # a finished sub-env's agents start their next episode afresh
            assert self.hidden is not None, "read_observation started it before this step"
            keep = (~done).repeat_interleave(self.multi_spec.num_agents).unsqueeze(1)
            self.hidden = self.hidden * keep

    def explore_joint_action(self, joint: Joint) -> torch.Tensor:
        # differs from DQN: per agent, a random available action with probability epsilon
        if self.recurrent:
            q = self.step_q
            assert q is not None, "read_observation took this step's Q-values"
        else:
            q = self.agent_q(self.qnet, joint.obs)
        greedy = masked(q, joint.avail).argmax(-1)
        return self.epsilon_greedy(greedy, self.random_joint_action(joint))

    def update_normalizers(self, rollout: Transitions) -> None:
        super().update_normalizers(rollout)
        self.reward_stats.update(rollout.rewards.reshape(-1, 1))

    # --- learning ---
    def sample_batch(self) -> Batch | Episodes:
        if not self.recurrent:
            return super().sample_batch()
        assert self.buffer is not None, "an acting-only copy (learner=False) never updates"
        assert self.config.batch_size is not None, "resolve_config sets batch_size"
        episodes = max(1, self.config.batch_size // self.multi_spec.max_step)
        return self.buffer.sample_episodes(episodes, self.multi_spec.max_step)

    def next_team_value(self, joint: Joint) -> torch.Tensor:
        """Q_tot'(s', a*) `(B,)`: double Q, each agent's a* the online network's best
        available action, scored by the target networks."""
        best = masked(self.agent_q(self.qnet, joint.obs), joint.avail).argmax(-1, keepdim=True)
        q = self.agent_q(self.qnet_target, joint.obs).gather(-1, best).squeeze(-1)  # (B, A)
        return self.mixer_target(q, joint.state)

    def update_step(self, batch: Batch | Episodes) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        if self.recurrent:
            assert isinstance(batch, Episodes), "recurrent agents replay whole episodes"
            return self.episode_update(batch)
        assert isinstance(batch, Batch), "other agents replay transitions"
        joint = self.layout.unpack(batch.states)
        actions, _ = self.layout.unpack_step(batch.actions)  # (B, A)
        with torch.no_grad():
            not_terminal = (~batch.terminals).float()
            next_value = self.next_team_value(self.layout.unpack(batch.next_states))
            rewards = self.reward_stats(batch.rewards.unsqueeze(-1)).squeeze(-1)
            target = rewards + self.config.gamma * not_terminal * next_value
        q = self.agent_q(self.qnet, joint.obs).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        q_tot = self.mixer(q, joint.state)
        # differs from DQN: the papers' squared TD error, not the Huber loss
        loss = (batch.weights * (target - q_tot).square()).mean()
        return self.step_networks(loss, q_tot), (target - q_tot).detach()

    def episode_update(self, episodes: Episodes) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The same TD update on whole episodes `(T, B)` of recurrent agents: each network is
        unrolled from the episode's first step; the next state's Q-values at step t come from
        one more step on it from the hidden state after step t (on the kept last state where
        the episode was truncated). With `td_lambda` the targets are TD(lambda) returns over
        each episode (PyMARL2's and JaxMARL's TD(lambda) loss: Hu et al. 2021, "Rethinking
        the Implementation Tricks and Monotonicity Constraint in Cooperative Multi-Agent
        Reinforcement Learning"), bootstrapping from the target Q_tot where an episode was
        truncated or its stored part ends. The loss averages over the episodes' real steps."""
        t_len, b = episodes.mask.shape
        a = self.multi_spec.num_agents
        joint = self.layout.unpack(episodes.states)  # obs (T, B, A, O), state (T, B, S)
        after = self.layout.unpack(episodes.next_states)
        actions, _ = self.layout.unpack_step(episodes.actions)  # (T, B, A)
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
            rewards = self.reward_stats(episodes.rewards.reshape(-1, 1)).squeeze(-1)
            if self.config.td_lambda:
                target = self.lambda_targets(episodes, rewards.view(t_len, b),
                                             next_value.view(t_len, b)).flatten()  # fmt: skip
            else:
                not_terminal = (~episodes.terminals).flatten().float()
                target = rewards + self.config.gamma * not_terminal * next_value  # (T * B,)
        chosen = q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)  # (T, B, A)
        q_tot = self.mixer(chosen.flatten(0, 1), joint.state.flatten(0, 1))
        mask = episodes.mask.flatten().float()
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

    def step_networks(self, loss: torch.Tensor, q_tot: torch.Tensor,
                      mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:  # fmt: skip
        """One optimizer step of the agent network and the mixer, then the target update."""
        pairs: list[tuple[Optimizer | None, nn.Module]] = [(self.optimizers["qnet"], self.qnet)]
        if "mixer" in self.optimizers:
            pairs.append((self.optimizers["mixer"], self.mixer))
        self.optimizer_steps(loss, *pairs)
        self.update_targets((self.qnet_target, self.qnet), (self.mixer_target, self.mixer))
        q_tot = q_tot.detach()
        q_mean = q_tot.mean() if mask is None else (q_tot * mask).sum() / mask.sum()
        return {"critic_loss": loss.detach(), "q_value": q_mean}

    # --- the hidden state belongs to the training state ---
    def state_dict(self) -> dict:
        return {**super().state_dict(), "hidden": self.hidden}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        hidden = state.get("hidden")
        self.hidden = None if hidden is None else hidden.to(self.device)


class AgentQMIX(AgentVDN):
    """QMIX: VDN with the sum replaced by a monotonic mixing network of the global state."""

    mixer_class = QMixer
    config_fields = AgentVDN.config_fields | {
        "mixer_embed_dim", "hypernet_layers", "hypernet_dim", "hypernet_init_gain"
    }  # fmt: skip

    def make_mixer(self) -> nn.Module:
        # differs: hypernetworks of the global state (with their own normaliser)
        spec = self.multi_spec
        cfg = self.config
        norm = RunningNorm(spec.state_dim, bool(cfg.state_norm), cfg.state_norm_clip)
        return QMixer(spec.num_agents, spec.state_dim, norm.to(self.device), cfg.mixer_embed_dim,
                      cfg.hypernet_layers, cfg.hypernet_dim, cfg.hypernet_init_gain)  # fmt: skip

    def update_normalizers(self, rollout: Transitions) -> None:
        super().update_normalizers(rollout)
        mixer = cast(QMixer, self.mixer)  # what `make_mixer` built
        mixer.norm.update(self.layout.unpack(rollout.states.flatten(0, 1)).state)
