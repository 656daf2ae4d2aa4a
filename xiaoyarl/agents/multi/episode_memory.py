"""`EpisodeMemory`: what the multi-agent replay agents with recurrent agent networks share (VDN
and QMIX, `recurrent_decomposition.py`; MADDPG and MATD3, `recurrent_critic.py`), as the
PyMARL family trains them: exploring carries a hidden state per (sub-env, agent), zeroed where
its sub-env's episode ends; a gradient step replays `batch_size // max_step` whole episodes from
the replay buffer, uniformly, each network unrolled from the episode's first step; the
exploring hidden states belong to the checkpoint. (Prioritized replay, of transitions, is
refused for them: `MultiAgentOffPolicy.check`.)
Shapes: E = sub-envs, A = agents, H = the width of a hidden state.
"""

from __future__ import annotations

from typing import Any

import torch

from xiaoyarl.core.buffer import Episodes
from xiaoyarl.core.recurrent import HiddenStates


class EpisodeMemory:
    """Mixed in before the agent (see the module); the agent's constructor sets `hiddens`."""

    # set by the agent this is mixed into
    config: Any
    device: torch.device
    multi_spec: Any
    buffer: Any
    hiddens: HiddenStates  # (E * A, H): where exploring goes on

    @property
    def hidden(self) -> torch.Tensor | None:
        """The exploring agents' hidden states `(E * A, H)` (None before the first step)."""
        return self.hiddens.value

    def update_cycle(self) -> int | None:
        return None  # episode replay draws a data-dependent number of episode starts

    def observe(self, obs: torch.Tensor, info: dict) -> torch.Tensor:
        self.hiddens.reset()  # the envs were reset: new episodes
        return super().observe(obs, info)  # type: ignore[misc]

    def episodes_ended(self, done: torch.Tensor) -> None:
        # a finished sub-env's agents start their next episode afresh
        self.hiddens.restart(done.repeat_interleave(self.multi_spec.num_agents))

    def sample_batch(self) -> Episodes:
        assert self.buffer is not None, "an acting-only copy (learner=False) never updates"
        assert self.config.batch_size is not None, "resolve_config sets batch_size"
        episodes = max(1, self.config.batch_size // self.multi_spec.max_step)
        return self.buffer.sample_episodes(episodes, self.multi_spec.max_step)

    # --- the hidden state belongs to the training state ---
    def state_dict(self) -> dict:
        return {**super().state_dict(), "hidden": self.hiddens.value}  # type: ignore[misc]

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)  # type: ignore[misc]
        hidden = state.get("hidden")
        self.hiddens.keep(None if hidden is None else hidden.to(self.device))
