"""`Memory`: what every single-agent agent with a recurrent policy shares, on-policy
(`agents/recurrent.py`) or replaying (`agents/recurrent_replay.py`)."""

from __future__ import annotations

from typing import Any

import torch

from xiaoyarl.core.recurrent import RecurrentActing


class Memory:
    """Mixed in before the agent: where exploring goes on, each sub-env's hidden state
    `hidden` `(N, Hs)` and whether its next step begins an episode `starts` `(N,)`, both part of
    the training state (a resume continues bit-exactly); the evaluation policy, which keeps its
    own hidden states; no `act` and no H-term (a recurrent policy acts on the episode so far)."""

    # set by the agent this is mixed into
    config: Any
    device: torch.device
    actor: Any
    hidden: torch.Tensor
    starts: torch.Tensor

    @property
    def per_state(self) -> int:
        """Memory rows per observation the env gives (a multi-agent env's: one per agent)."""
        return 1

    def observe(self, state: torch.Tensor, info: dict) -> torch.Tensor:
        self.starts.fill_(True)  # the env was reset: every sub-env begins an episode
        return super().observe(state, info)  # type: ignore[misc]

    @torch.no_grad()
    def act(self, state: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Not for a recurrent policy: it acts on the episode so far (`evaluation_policy`)."""
        raise RuntimeError("a recurrent agent acts through evaluation_policy(), which keeps "
                           "its hidden states")  # fmt: skip

    def evaluation_policy(self) -> RecurrentActing:
        """The agent's own evaluation policy (its greedy action: the next class's `act`, which
        a masked agent's picks among the allowed actions), from each episode's hidden state."""
        own: Any = super()
        act = own.act if self.config.eval_deterministic else own.evaluation_policy()
        return RecurrentActing(act, self.acting_memory(), self.per_state)

    def acting_memory(self) -> Any:
        """What carries the hidden states while the actor acts (`RecurrentEncoder`'s protocol:
        `initial`, `context`, `hiddens`): the actor's encoder, or a world model's actor itself."""
        return self.actor.norm

    def explore_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("the H-term is not available with recurrent policies")

    def recurrent_state(self) -> dict:
        return {"hidden": self.hidden.clone(), "starts": self.starts.clone()}

    def load_recurrent_state(self, state: dict) -> None:
        self.hidden = state["hidden"].to(self.device).clone()
        self.starts = state["starts"].to(self.device).clone()

    def state_dict(self) -> dict:
        return {**super().state_dict(), "recurrent": self.recurrent_state()}  # type: ignore[misc]

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)  # type: ignore[misc]
        self.load_recurrent_state(state["recurrent"])

    def sub_env_state(self) -> dict:
        return {**super().sub_env_state(), "recurrent": self.recurrent_state()}  # type: ignore[misc]

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)  # type: ignore[misc]
        self.load_recurrent_state(state["recurrent"])
