"""Value decomposition: VDN and QMIX.

VDN: Sunehag et al., "Value-Decomposition Networks For Cooperative Multi-Agent Learning", 2017.
QMIX: Rashid et al., "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent
Reinforcement Learning", ICML 2018.

One Q-network shared by all agents (each observation with its agent id) gives every agent's
Q(o_i, .); a mixer turns the Q-values of the actions taken into the team's Q_tot, trained with
DQN's machinery (replay, epsilon-greedy, target networks, prioritized replay) on the team
reward: Q_tot(s, a) -> r + gamma (1 - terminal) Q_tot'(s', a*), with double Q (the online
network picks each agent's a* among its available actions, the target networks score it), and
the squared TD error as the loss, as in both papers. Their recurrent agents (`recurrent`) are
`recurrent_decomposition.py`'s.
Shapes: B = batch, A = agents, O = observation, S = global state, U = actions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

import torch
from torch import nn
from torch.nn import functional as F

from xiaoyarl.agents.dqn import AgentDQN
from xiaoyarl.agents.multi.common import (
    Joint,
    MultiAgentOffPolicy,
    with_agent_ids,
)
from xiaoyarl.core.buffer import Batch, Transitions
from xiaoyarl.core.nets import RunningNorm, build_mlp
from xiaoyarl.core.off_policy_nets import QNet
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Optimizer, OptimizerKit
    from xiaoyarl.config import Config


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


class AgentVDN(MultiAgentOffPolicy, AgentDQN):
    """VDN: DQN on the team reward with Q_tot the sum of the agents' Q-values. With `recurrent`
    the agent network is recurrent (`recurrent_decomposition.py`)."""

    mixer_class: type[nn.Module] = VDNMixer
    tune_space: ClassVar[str | None] = "value_decomposition.yaml"  # differs: its own
    config_fields = (AgentDQN.config_fields - {"critic_atoms", "critic_v_min", "critic_v_max"}) | {
        "reward_norm", "recurrent", "recurrent_dim", "td_lambda"}  # fmt: skip

    @classmethod
    def check(cls, config: Config) -> None:
        # differs: TD(lambda) runs over the whole episodes the recurrent agents replay
        if config.td_lambda and not config.recurrent:
            raise ConfigError(
                f"td_lambda={config.td_lambda} without recurrent: TD(lambda) targets run over "
                f"whole replayed episodes, which the recurrent agents replay; set recurrent=gru "
                f"(or lstm) for them, or td_lambda=0."
            )
        super().check(config)

    def __init__(self, spec, config, device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        super().__init__(spec, config, device, learner, kit)
        self.mixer = self.make_mixer().to(device)
        self.mixer_target = self.make_target(self.mixer)
        # team rewards standardised by their running mean and std (`reward_norm`, as EPyMARL)
        self.reward_stats = RunningNorm(1, bool(config.reward_norm), clip=None).to(device)
        self.nets.update(mixer=self.mixer, mixer_target=self.mixer_target,
                         reward_stats=self.reward_stats)  # fmt: skip
        if any(True for _ in self.mixer.parameters()):
            self.optimizers["mixer"] = self.make_optimizer(self.mixer)

    def make_mixer(self) -> nn.Module:
        return self.mixer_class()

    # --- acting ---
    def agent_q(self, net: QNet, obs: torch.Tensor) -> torch.Tensor:
        """Every agent's Q(o_i, .) `(B, A, U)` from observations `(B, A, O)`."""
        return net.q_values(with_agent_ids(obs))

    def greedy_joint_action(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        return masked(self.agent_q(self.qnet, obs), avail).argmax(-1)

    def explore_joint_action(self, joint: Joint) -> torch.Tensor:
        # differs from DQN: per agent, a random available action with probability epsilon
        greedy = masked(self.explore_q(joint), joint.avail).argmax(-1)
        return self.epsilon_greedy(greedy, self.random_joint_action(joint))

    def explore_q(self, joint: Joint) -> torch.Tensor:
        """Every agent's Q-values `(E, A, U)` that this exploring step acts on."""
        return self.agent_q(self.qnet, joint.obs)

    def update_normalizers(self, rollout: Transitions) -> None:
        super().update_normalizers(rollout)
        self.reward_stats.update(rollout.rewards.reshape(-1, 1))

    # --- learning ---
    def next_team_value(self, joint: Joint) -> torch.Tensor:
        """Q_tot'(s', a*) `(B,)`: double Q, each agent's a* the online network's best
        available action, scored by the target networks."""
        best = masked(self.agent_q(self.qnet, joint.obs), joint.avail).argmax(-1, keepdim=True)
        q = self.agent_q(self.qnet_target, joint.obs).gather(-1, best).squeeze(-1)  # (B, A)
        return self.mixer_target(q, joint.state)

    critic_nets: ClassVar[tuple[str, ...]] = ("qnet", "mixer")  # differs: one TD loss of both

    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        loss, q_tot, td_errors = self.critic_loss(batch)
        return self.step_networks(loss, q_tot), td_errors

    def critic_loss(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The team's TD loss, Q_tot of the joint actions taken, and the TD errors `(B,)`."""
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
        return loss, q_tot, (target - q_tot).detach()

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
