"""MADDPG and MATD3 with recurrent actors (`--set recurrent=gru`, or lstm): the shared actor
reads each agent's observation through a `RecurrentEncoder` (`core/recurrent.py`), a GRU or LSTM
of `recurrent_dim` units after the observation normaliser, so each agent acts on its episode so
far; the centralized critics stay feed-forward on the global state and the joint action (the
state is what the env is, the memory is what an agent's own observations lack). This is how
EPyMARL trains its MADDPG with recurrent agents: episode replay (`EpisodeMemory`, shared with
VDN's and QMIX's recurrent agents).

What changes against the feed-forward agents (`centralized_critic.py`):
- exploring carries each agent's hidden state from step to step (zeroed where its sub-env's
  episode ends; the random warm-up steps go through the memory too);
- a gradient step replays `batch_size // max_step` whole episodes: the actor runs along each
  from its first step; the target actor's action in the state step t reached continues its own
  memory, unrolled along the episode, by one step (on the kept last state where an episode was
  truncated); the critics' and the actor's losses average over the episodes' real steps;
- evaluation and saved policies keep their own hidden states (`reset()` starts anew).
Shapes: T = steps, B = episodes, A = agents, O = observation, H = the width of a hidden state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch

from xiaoyarl.agents.multi.centralized_critic import (
    AgentMADDPG,
    AgentMADDPGDiscrete,
    AgentMATD3,
    AgentMATD3Discrete,
    CentralizedCritic,
    JointStep,
)
from xiaoyarl.agents.multi.common import Joint, joint_evaluation_policy, with_agent_ids
from xiaoyarl.agents.multi.episode_memory import EpisodeMemory
from xiaoyarl.agents.off_policy import Net
from xiaoyarl.agents.recurrent_replay import share_normalisers
from xiaoyarl.core.buffer import Batch, Episodes
from xiaoyarl.core.recurrent import HiddenStates, RecurrentActing, RecurrentEncoder

if TYPE_CHECKING:
    from xiaoyarl.core.encoders import Encoder
    from xiaoyarl.core.nets import RunningNorm


class RecurrentActors(EpisodeMemory):
    """The recurrent version of a centralized-critic agent (mixed in before it: see the
    module)."""

    # set by the centralized-critic agent this is mixed into
    actor: Any
    actor_target: Any
    layout: Any
    explored: int
    feature_dim: int
    joint_features: Callable[[torch.Tensor], torch.Tensor]

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]
        self.memory: RecurrentEncoder = self.actor.norm
        self.hiddens = HiddenStates(self.memory.initial)  # (E * A, H) exploring
        self.step_hidden: torch.Tensor | None = None  # (E * A, H) before this exploring step

    def make_encoder(self, layer_norm: bool = False) -> Encoder | RunningNorm:
        # differs: the actor's memory (the critics, feed-forward, build their own inputs)
        inner = super().make_encoder(layer_norm)  # type: ignore[misc]
        encoder = RecurrentEncoder(inner, self.config.recurrent_dim, self.config.recurrent)
        self.feature_dim = encoder.out_dim
        return encoder.to(self.device)  # type: ignore[return-value]

    def make_target(self, net: Net) -> Net:
        # the target actor's memory lags with its weights; the observation normaliser is shared
        return share_normalisers(net, super().make_target(net))  # type: ignore[misc]

    # --- acting ---
    def read_observation(self, joint: Joint) -> None:
        # the memory takes in every step (the random warm-up's too)
        rows = with_agent_ids(joint.obs).flatten(0, 1)
        self.step_hidden = self.hiddens.current(rows.shape[0])
        with self.hiddens.continued(self.memory, rows.shape[0]):
            self.memory(rows)

    def explore_joint_action(self, joint: Joint) -> torch.Tensor:
        assert self.step_hidden is not None, "read_observation kept this step's hidden states"
        starts = torch.zeros(1, self.step_hidden.shape[0], dtype=torch.bool, device=self.device)
        with self.memory.context(self.step_hidden, starts):
            return super().explore_joint_action(joint)  # type: ignore[misc]

    def greedy_joint_action(self, obs: torch.Tensor, avail: torch.Tensor | None) -> torch.Tensor:
        raise ValueError(
            "a recurrent agent acts on whole episodes: use `evaluation_policy()` (a policy "
            "that keeps the hidden states, reset with the env), not `act`."
        )

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        own = cast(CentralizedCritic, super())

        def greedy(obs: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
            return own.greedy_joint_action(obs, avail)

        sample = not self.config.eval_deterministic
        act = joint_evaluation_policy(cast(CentralizedCritic, self)) if sample else greedy
        return RecurrentActing(act, self.memory, self.multi_spec.num_agents)

    # --- learning ---
    def update_step(self, batch: Batch | Episodes) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The feed-forward agents' step on whole episodes `(T, B)` flattened to T * B joint
        transitions (`joint_step`), the actor's memory along each episode from its first step,
        the target actor's continuing from its hidden state after each step."""
        assert isinstance(batch, Episodes), "recurrent agents replay whole episodes"
        t_len, b = batch.mask.shape
        along = torch.zeros(t_len, b * self.multi_spec.num_agents, dtype=torch.bool,
                            device=self.device)  # fmt: skip
        online, target = self.memory, cast(RecurrentEncoder, self.actor_target.norm)
        obs = self.layout.unpack(batch.states.flatten(0, 1)).obs  # (T * B, A, O)
        reached = self.hidden_after(target, obs, along)  # (T * B * A, H)
        with online.context(online.initial(along.shape[1]), along), \
                target.context(reached, along.view(1, -1)):  # fmt: skip
            return super().update_step(batch)  # type: ignore[misc]

    def joint_step(self, batch: Batch | Episodes) -> JointStep:
        """The episodes' T * B steps; every step's weight, and whether the actor's loss counts
        it, is whether it is one of its episode's (`mask`)."""
        assert isinstance(batch, Episodes), "recurrent agents replay whole episodes"
        actions, rewards = self.layout.unpack_step(batch.actions.flatten(0, 1))
        counted = batch.mask.flatten().float()  # (T * B,)
        return JointStep(self.layout.unpack(batch.states.flatten(0, 1)),
                         self.joint_features(actions), rewards,
                         self.layout.unpack(batch.next_states.flatten(0, 1)),
                         batch.terminals.flatten(), counted / counted.mean(),
                         counted)  # fmt: skip

    @staticmethod
    @torch.no_grad()
    def hidden_after(memory: RecurrentEncoder, obs: torch.Tensor,
                     along: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """`memory`'s hidden state after each step of the episodes `(T * B, A, O)`, run from
        their first step: `(T * B * A, H)`."""
        with memory.context(memory.initial(along.shape[1]), along):
            memory(with_agent_ids(obs).flatten(0, 1))
        assert memory.hiddens is not None, "set by the call"
        return memory.hiddens.flatten(0, 1)


class AgentRecurrentMADDPG(RecurrentActors, AgentMADDPG):
    """MADDPG with a recurrent actor, continuous actions."""


class AgentRecurrentMADDPGDiscrete(RecurrentActors, AgentMADDPGDiscrete):
    """MADDPG with a recurrent actor, discrete actions."""


class AgentRecurrentMATD3(RecurrentActors, AgentMATD3):
    """MATD3 with a recurrent actor, continuous actions."""


class AgentRecurrentMATD3Discrete(RecurrentActors, AgentMATD3Discrete):
    """MATD3 with a recurrent actor, discrete actions."""


# the recurrent agent of each feed-forward one (`recurrent`)
RECURRENT_CRITICS = {AgentMADDPG: AgentRecurrentMADDPG,
                     AgentMADDPGDiscrete: AgentRecurrentMADDPGDiscrete,
                     AgentMATD3: AgentRecurrentMATD3,
                     AgentMATD3Discrete: AgentRecurrentMATD3Discrete}  # fmt: skip
