"""The replay agents with memory (`--set recurrent=lstm|gru` for the DQN family, discrete SAC,
DDPG, TD3, SAC, ModSAC, REDQ, FastTD3 and FastSAC): R2D2's recurrent experience replay
(Kapturowski et al., "Recurrent Experience Replay in Distributed Reinforcement Learning", ICLR
2019) around each agent's own losses.

Each network reads observations through its own `RecurrentEncoder` (`core/recurrent.py`): the
actor and the critics have separate memories, which recurrent actor-critics learn best with
(Ni et al., "Recurrent Model-Free RL Can Be a Strong Baseline for Many POMDPs", ICML 2022); a
target network's memory is a copy that lags with its weights.

What changes against the feed-forward agent:
- exploring carries every memory's hidden state from step to step (zeroed where an episode
  starts), and the replay buffer keeps them beside each step (`core/sequence_replay.py`);
- a gradient step replays `batch_size // sequence_len` windows of consecutive steps: each
  network runs along a window from its stored hidden state (a target network from its online
  network's), `burn_in` steps without gradients, then the `sequence_len` steps the agent's own
  loss is taken over, unchanged (`ReplayWindow`); the bootstrap reads each reached state from
  the hidden state after the step that reached it;
- evaluation and saved policies keep their own hidden states; the hidden states are part of
  the checkpoint.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from xiaoyarl.agents.ddpg import AgentDDPG
from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
from xiaoyarl.agents.fast_td3 import AgentFastSAC, AgentFastTD3
from xiaoyarl.agents.memory import Memory
from xiaoyarl.agents.off_policy import BufferSizes, Net
from xiaoyarl.agents.redq import AgentREDQ
from xiaoyarl.agents.sac import AgentModSAC, AgentSAC, AgentSACDiscrete
from xiaoyarl.agents.td3 import AgentTD3
from xiaoyarl.core.recurrent import RecurrentEncoder, ReplayWindow
from xiaoyarl.core.sequence_replay import MemoryTransitions, SequenceReplayBuffer, Sequences
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from xiaoyarl.agents.protocols import Steps
    from xiaoyarl.core.buffer import ReplayBuffer
    from xiaoyarl.core.encoders import Encoder
    from xiaoyarl.core.nets import RunningNorm


def memories_of(net: nn.Module) -> list[RecurrentEncoder]:
    """The recurrent encoders inside `net`, in module order."""
    return [module for module in net.modules() if isinstance(module, RecurrentEncoder)]


def share_normalisers(net: Net, target: Net) -> Net:
    """`target`, a copy of `net` whose memories lag with its weights, made to read observations
    through `net`'s own observation normaliser (a memory's inner module without weights)."""
    for online, copy in zip(memories_of(net), memories_of(target), strict=True):
        if next(online.inner.parameters(), None) is None:
            copy.inner = online.inner
    return target


class RecurrentReplay(Memory):
    """The recurrent version of a replay agent, mixed in before it (see the module)."""

    rollout_class: ClassVar[Callable[..., Steps]] = MemoryTransitions
    # set by the agent this is mixed into
    spec: Any
    nets: dict[str, nn.Module]
    buffer: ReplayBuffer | None
    feature_dim: int

    def __init__(self, spec, config, device, learner=True, kit=None) -> None:  # noqa: ANN001
        if config.per:
            raise ConfigError(
                f"invalid config: per=True with recurrent={config.recurrent!r}: replayed "
                f"sequences are drawn uniformly (prioritized replay draws single transitions); "
                f"remove per=true."
            )
        if config.crossq:
            raise ConfigError(
                f"invalid config: crossq=True with recurrent={config.recurrent!r}: CrossQ's "
                f"critic normalises states and next states in one batch, where a recurrent "
                f"critic reads each from its own hidden state; remove crossq=true."
            )
        self.memories: list[RecurrentEncoder] = []  # every online network's, as they are built
        super().__init__(spec, config, device, learner, kit)  # type: ignore[call-arg]
        # the buffer keeps every memory's hidden state: made now that their widths are known
        self.buffer = self.make_buffer() if learner else None
        self.hidden = torch.zeros(spec.num_envs, self.hidden_width(), device=device)  # (N, Hs)
        self.starts = torch.ones(spec.num_envs, dtype=torch.bool, device=device)  # (N,)

    def hidden_width(self) -> int:
        """The width of every memory's hidden state side by side (what each step stores)."""
        return sum(memory.state_dim for memory in self.memories)

    def make_encoder(self, layer_norm: bool = False) -> Encoder | RunningNorm:
        inner = super().make_encoder(layer_norm)  # type: ignore[misc]
        encoder = RecurrentEncoder(inner, self.config.recurrent_dim, self.config.recurrent)
        encoder.slot = len(self.memories)
        self.memories.append(encoder)
        self.feature_dim = encoder.out_dim
        return encoder.to(self.device)  # type: ignore[return-value]

    def make_target(self, net: Net) -> Net:
        return share_normalisers(net, super().make_target(net))  # type: ignore[misc]

    # --- the replay buffer ---
    def make_buffer(self) -> ReplayBuffer | None:
        if not self.memories:  # the feed-forward agent's constructor, before any network
            return None
        return super().make_buffer()  # type: ignore[misc]

    def buffer_bytes(self, sizes: BufferSizes, obs_bytes: int, stack: int) -> int:
        hiddens = SequenceReplayBuffer.hidden_bytes(sizes[0], sizes[1], self.hidden_width())
        return SequenceReplayBuffer.bytes_needed(*sizes, obs_bytes, stack) + hiddens

    def build_buffer(self, sizes: BufferSizes, obs_shape: tuple[int, ...] | None,
                     obs_dtype: torch.dtype, stack: int) -> ReplayBuffer:  # fmt: skip
        cfg = self.config
        return SequenceReplayBuffer(*sizes, self.device, obs_shape, obs_dtype, stack, cfg.n_step,
                                    cfg.gamma, hidden_dim=self.hidden_width(),
                                    sequence_len=cfg.sequence_len, burn_in=cfg.burn_in)  # fmt: skip

    # --- exploring ---
    def acting_nets(self) -> dict[str, nn.Module]:
        # differs: exploring steps every online network's memory, whose hidden states it stores
        return {name: net for name, net in self.nets.items()
                if any(memory in self.memories for memory in memories_of(net))}  # fmt: skip

    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """The agent's step, every memory continuing each sub-env's hidden state (those the
        action did not read step on the state too); keeps the hidden states it continued."""
        hidden = self.hidden * (~self.starts).unsqueeze(1)  # zero where an episode begins
        one_step = torch.zeros(1, hidden.shape[0], dtype=torch.bool, device=self.device)
        states = hidden.split([memory.state_dim for memory in self.memories], dim=1)
        with contextlib.ExitStack() as stack:
            for memory, h in zip(self.memories, states, strict=True):
                memory.hiddens = None
                stack.enter_context(memory.context(h, one_step))
            action, kept = super().explore_step(state)  # type: ignore[misc]
            for memory in self.memories:
                if memory.hiddens is None:  # not read by this step's action
                    memory(state)
        after = [memory.hiddens[0] for memory in self.memories]  # type: ignore[index]
        self.hidden = torch.cat(after, dim=1)
        return action, (*kept, hidden)

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        *own, hidden = kept
        self.starts = terminal | truncate  # the next step of these sub-envs begins an episode
        steps = super().record(tuple(own), reward, terminal, truncate, info)  # type: ignore[misc]
        return (*steps, hidden)

    # --- the update ---
    def update_step(self, batch: Any) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The agent's own step on the windows' trained transitions, every network's memory
        replaying the windows (`ReplayWindow`); `batch` is the `Sequences` its buffer samples."""
        assert isinstance(batch, Sequences), "a recurrent replay agent replays windows"
        widths = [memory.state_dim for memory in self.memories]
        window = ReplayWindow(batch.states, batch.starts, list(batch.hiddens.split(widths, 1)),
                              batch.burn_in, batch.last, batch.batch.states,
                              batch.batch.next_states)  # fmt: skip
        with contextlib.ExitStack() as stack:
            for net in self.nets.values():
                for memory in memories_of(net):
                    stack.enter_context(memory.replaying(window))
            return super().update_step(batch.batch)  # type: ignore[misc]

    def update_cycle(self) -> int | None:
        return None  # a window's episode starts are read back to run its memories


class AgentRecurrentDQN(RecurrentReplay, AgentDQN):
    """DQN with a recurrent Q-network (R2D2's replay)."""


class AgentRecurrentDoubleDQN(RecurrentReplay, AgentDoubleDQN):
    """Double DQN with a recurrent Q-network."""


class AgentRecurrentD3QN(RecurrentReplay, AgentD3QN):
    """D3QN with a recurrent dueling Q-network (R2D2's network)."""


class AgentRecurrentSACDiscrete(RecurrentReplay, AgentSACDiscrete):
    """Discrete SAC with a recurrent actor and critics."""


class AgentRecurrentDDPG(RecurrentReplay, AgentDDPG):
    """DDPG with a recurrent actor and critics."""


class AgentRecurrentTD3(RecurrentReplay, AgentTD3):
    """TD3 with a recurrent actor and critics."""


class AgentRecurrentSAC(RecurrentReplay, AgentSAC):
    """SAC with a recurrent actor and critics."""


class AgentRecurrentModSAC(RecurrentReplay, AgentModSAC):
    """ModSAC with a recurrent actor and critics."""


class AgentRecurrentREDQ(RecurrentReplay, AgentREDQ):
    """REDQ with a recurrent actor and critic ensemble."""


class AgentRecurrentFastTD3(RecurrentReplay, AgentFastTD3):
    """FastTD3 with a recurrent actor and critics."""


class AgentRecurrentFastSAC(RecurrentReplay, AgentFastSAC):
    """FastSAC with a recurrent actor and critics."""


# the recurrent agent of each feed-forward replay agent
RECURRENT_REPLAY: dict[type, type] = {
    AgentDQN: AgentRecurrentDQN, AgentDoubleDQN: AgentRecurrentDoubleDQN,
    AgentD3QN: AgentRecurrentD3QN, AgentSACDiscrete: AgentRecurrentSACDiscrete,
    AgentDDPG: AgentRecurrentDDPG, AgentTD3: AgentRecurrentTD3, AgentSAC: AgentRecurrentSAC,
    AgentModSAC: AgentRecurrentModSAC, AgentREDQ: AgentRecurrentREDQ,
    AgentFastTD3: AgentRecurrentFastTD3, AgentFastSAC: AgentRecurrentFastSAC,
}  # fmt: skip
