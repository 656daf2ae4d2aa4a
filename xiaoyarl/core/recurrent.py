"""Recurrent layers: one step or a whole sequence of a GRU or an LSTM with a hidden state that
restarts where episodes start, and `RecurrentEncoder`, an encoder whose features carry the
episode so far (the on-policy agents with memory, `agents/recurrent.py`; the replay agents,
`agents/recurrent_replay.py`, which read replayed windows of steps through `ReplayWindow`).

A hidden state is one tensor per sequence, `(batch, hidden_size)`: a GRU's h, or an LSTM's h and
c side by side (`2 * hidden_size` wide), so rollouts and checkpoints store either the same way.
A zero hidden state starts every episode.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn


def make_rnn(kind: str, input_dim: int, hidden_dim: int) -> nn.GRU | nn.LSTM:
    """One GRU or LSTM layer (time-major), orthogonal recurrent weights, zero biases."""
    rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(input_dim, hidden_dim)
    for name, weight in rnn.named_parameters():
        if name.startswith("weight_hh"):
            nn.init.orthogonal_(weight)
        elif name.startswith("bias"):
            nn.init.zeros_(weight)
    return rnn


def state_width(rnn: nn.GRU | nn.LSTM) -> int:
    """The width of the one-tensor hidden state of `rnn` (an LSTM's h and c side by side)."""
    return rnn.hidden_size * (2 if isinstance(rnn, nn.LSTM) else 1)


def rnn_step(rnn: nn.GRU | nn.LSTM, x: torch.Tensor, hidden: torch.Tensor,
             ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """One time step: inputs `(B, F)`, hidden state `(B, state_width)` -> outputs `(B, H)` and
    the next hidden state."""
    if isinstance(rnn, nn.LSTM):
        h, c = hidden.chunk(2, dim=-1)
        out, (h, c) = rnn(
            x.unsqueeze(0), (h.unsqueeze(0).contiguous(), c.unsqueeze(0).contiguous())
        )
        return out[0], torch.cat([h[0], c[0]], dim=-1)
    out, _ = rnn(x.unsqueeze(0), hidden.unsqueeze(0).contiguous())
    return out[0], out[0]


def rnn_sequence(rnn: nn.GRU | nn.LSTM, x: torch.Tensor, hidden: torch.Tensor,
                 starts: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """A sequence: inputs `(T, B, F)` from hidden state `(B, state_width)`, with `starts` `(T, B)`
    bool marking the steps that begin an episode (the hidden state is zeroed before them; None:
    one episode throughout) -> outputs `(T, B, H)` and the hidden state after each step
    `(T, B, state_width)`. A GRU runs as one call per stretch of steps without an episode start
    (its outputs are its hidden states; finding the stretches reads `starts` back, so under
    CUDA-graph capture it goes step by step); an LSTM step by step (its cell states are not
    among its outputs)."""
    if starts is None and isinstance(rnn, nn.GRU):
        outputs, _ = rnn(x, hidden.unsqueeze(0).contiguous())
        return outputs, outputs
    capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
    if isinstance(rnn, nn.GRU) and not capturing:
        assert starts is not None
        cuts = (starts[1:].any(1).nonzero().squeeze(1) + 1).tolist()  # stretches' first steps
        pieces = []
        for first, end in zip([0, *cuts], [*cuts, x.shape[0]], strict=True):
            hidden = hidden * (~starts[first]).unsqueeze(-1)
            out, _ = rnn(x[first:end], hidden.unsqueeze(0).contiguous())
            pieces.append(out)
            hidden = out[-1]
        outputs = torch.cat(pieces)
        return outputs, outputs
    if starts is None:
        starts = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
    outputs, hiddens = [], []
    for t in range(x.shape[0]):
        hidden = hidden * (~starts[t]).unsqueeze(-1)
        out, hidden = rnn_step(rnn, x[t], hidden)
        outputs.append(out)
        hiddens.append(hidden)
    return torch.stack(outputs), torch.stack(hiddens)


class HiddenStates:
    """The hidden states `(batch, width)` of a batch of sequences, carried from call to call: the
    one carrier of every recurrent policy (exploring, evaluating, a saved policy), single- or
    multi-agent. `current(batch)` is what the next step continues from: zero states (from
    `initial`) for a new batch, one of another size, or after `reset()`; `keep` takes the
    states after that step, and `restart(ended)` zeroes those whose episode ended."""

    def __init__(self, initial: Callable[[int], torch.Tensor]) -> None:
        self.initial = initial
        self.value: torch.Tensor | None = None

    def reset(self) -> None:
        self.value = None

    def current(self, batch: int) -> torch.Tensor:
        if self.value is None or self.value.shape[0] != batch:
            self.value = self.initial(batch)
        return self.value

    def keep(self, hidden: torch.Tensor | None) -> None:
        self.value = hidden

    def restart(self, ended: torch.Tensor) -> None:
        """Zero the states of the sequences where `ended` `(batch,)` bool is set."""
        assert self.value is not None, "a step started them before an episode could end"
        self.value = self.value * (~ended).unsqueeze(1)

    @contextlib.contextmanager
    def continued(self, encoder: RecurrentEncoder, batch: int) -> Iterator[None]:
        """Calls of `encoder` inside continue each of the `batch` sequences by one step from
        its current state; the states after it are kept."""
        hidden = self.current(batch)
        starts = torch.zeros(1, batch, dtype=torch.bool, device=hidden.device)
        with encoder.context(hidden, starts):
            yield
        assert encoder.hiddens is not None, "the encoder ran inside its context"
        self.keep(encoder.hiddens[0])


class RecurrentEncoder(nn.Module):
    """Observations through an inner encoder (the running normaliser of vectors, or a CNN),
    then a GRU or an LSTM of `hidden_dim` units: features `(batch, hidden_dim)` that carry the
    episode so far.

    What it continues from is set for each call by `context(hidden, starts)`: inputs arrive
    flat and time-major, `(T * B, ...)` for `starts` of shape `(T, B)` (T = 1: one step of B
    sequences); after the call `hiddens` `(T, B, state_width)` holds the hidden state after each
    step. An actor and a critic that share it run the same sequence.
    """

    def __init__(self, inner: nn.Module, hidden_dim: int, kind: str) -> None:
        super().__init__()
        self.inner = inner
        self.kind = kind
        self.rnn = make_rnn(kind, int(inner.out_dim), hidden_dim)  # type: ignore[arg-type]
        self.out_dim = hidden_dim
        self.state_dim = state_width(self.rnn)
        self._context: tuple[torch.Tensor, torch.Tensor] | None = None
        self._replay: ReplayWindow | None = None
        self.hiddens: torch.Tensor | None = None
        # which of its agent's stored hidden states it continues in replay (a target network's
        # copy continues its online network's)
        self.slot = 0

    def init_kwargs(self) -> dict:
        """Its constructor's arguments besides `inner` (a saved policy rebuilds it from them)."""
        return {"hidden_dim": self.out_dim, "kind": self.kind}

    def initial(self, batch: int) -> torch.Tensor:
        """Zero hidden states `(batch, state_dim)` on the encoder's device."""
        return torch.zeros(batch, self.state_dim, device=next(self.rnn.parameters()).device)

    @contextlib.contextmanager
    def context(self, hidden: torch.Tensor, starts: torch.Tensor) -> Iterator[RecurrentEncoder]:
        """Calls inside continue `hidden` `(B, state_dim)` over `starts` `(T, B)` steps."""
        self._context = (hidden, starts)
        try:
            yield self
        finally:
            self._context = None

    @contextlib.contextmanager
    def replaying(self, window: ReplayWindow) -> Iterator[RecurrentEncoder]:
        """Calls inside read the replayed `window`'s states or next states (`ReplayWindow`)."""
        self._replay = window
        try:
            yield self
        finally:
            self._replay = None

    def update(self, obs: torch.Tensor) -> None:
        """No statistics of its own (the agent updates its running normaliser)."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self._replay is not None:
            return self._replay.features(self, obs)
        if self._context is None:
            raise RuntimeError(
                "a recurrent encoder needs its context (hidden state and episode starts): call "
                "it inside `encoder.context(hidden, starts)`"
            )
        hidden, starts = self._context
        features = self.inner(obs).view(*starts.shape, -1)  # (T, B, F)
        outputs, self.hiddens = rnn_sequence(self.rnn, features, hidden, starts)
        return outputs.flatten(0, 1)


class ReplayWindow:
    """One gradient step's replayed windows (`core/sequence_replay.py`, R2D2) as the recurrent
    encoders of an agent read them, so that a loss written for transitions runs unchanged: an
    encoder called on the batch's `states` `(L * B, ...)` runs its memory along each window from
    its stored hidden state (`first[encoder.slot]`), the burn-in without gradients, and returns
    the trained steps' features; called on the batch's `next_states`, it continues, by one step,
    the hidden state after each transition's last step (without gradients through it). Any other
    input is refused: a loss must hand the batch's tensors to its networks as they are.

    `states` `(W * B, ...)` and `starts` `(W, B)` are the windows' (`Sequences`), `last`
    `(L * B,)` each transition's last step in the window (flat)."""

    def __init__(self, states: torch.Tensor, starts: torch.Tensor, first: list[torch.Tensor],
                 burn_in: int, last: torch.Tensor, train_states: torch.Tensor,
                 next_states: torch.Tensor) -> None:  # fmt: skip
        self.states, self.starts, self.first = states, starts, first
        self.burn_in, self.last = burn_in, last
        self.train_states, self.next_states = train_states, next_states
        self.trained = last.shape[0] // starts.shape[1]  # L
        self.after: dict[int, torch.Tensor] = {}  # each encoder's hidden states after each step

    def features(self, encoder: RecurrentEncoder, obs: torch.Tensor) -> torch.Tensor:
        if obs is self.train_states:
            return self._along(encoder)
        if obs is self.next_states:
            hidden = self._after(encoder).flatten(0, 1).index_select(0, self.last)
            return rnn_step(encoder.rnn, encoder.inner(obs), hidden)[0]
        raise RuntimeError(
            "a recurrent encoder replaying sequences reads the batch's states or next states "
            "themselves (it finds each one's hidden state by which of them it is); pass "
            "batch.states or batch.next_states to the network as they are"
        )

    def _along(self, encoder: RecurrentEncoder) -> torch.Tensor:
        """The trained steps' features `(L * B, H)`, the burn-in run without gradients."""
        burn, batch = self.burn_in, self.starts.shape[1]
        hidden, afters = self.first[encoder.slot], []
        if burn:
            with torch.no_grad():
                x = encoder.inner(self.states[: burn * batch]).unflatten(0, (burn, batch))
                _, after = rnn_sequence(encoder.rnn, x, hidden, self.starts[:burn])
            hidden = after[-1]
            afters.append(after)
        x = encoder.inner(self.states[burn * batch :]).unflatten(0, (-1, batch))
        outputs, after = rnn_sequence(encoder.rnn, x, hidden, self.starts[burn:])
        afters.append(after.detach())
        self.after.setdefault(id(encoder), torch.cat(afters))
        return outputs[: self.trained].flatten(0, 1)

    @torch.no_grad()
    def _after(self, encoder: RecurrentEncoder) -> torch.Tensor:
        """The encoder's hidden states after each window step `(W, B, state_dim)`."""
        if id(encoder) not in self.after:
            batch = self.starts.shape[1]
            x = encoder.inner(self.states).unflatten(0, (-1, batch))
            _, after = rnn_sequence(encoder.rnn, x, self.first[encoder.slot], self.starts)
            self.after[id(encoder)] = after
        return self.after[id(encoder)]


class RecurrentActing:
    """A recurrent actor's policy over one batch of episodes: `(state (B, ...)) -> action` of
    `act` (the greedy action, or a sample), carrying a hidden state per sub-env from call to
    call (`per_state` of them where each state holds several sequences: a multi-agent env's
    `(B, A, O)` observations, one per agent); `reset()` (the evaluator calls it when its env
    resets) starts new episodes."""

    def __init__(self, act: Callable[..., torch.Tensor], memory: RecurrentEncoder,
                 per_state: int = 1) -> None:  # fmt: skip
        self.act, self.memory, self.per_state = act, memory, per_state
        self.hiddens = HiddenStates(memory.initial)

    def reset(self) -> None:
        self.hiddens.reset()

    @torch.no_grad()
    def __call__(self, state: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
        """`act(state, *args)` (the env's action masks, where it gives them) from each
        episode's hidden state."""
        with self.hiddens.continued(self.memory, state.shape[0] * self.per_state):
            return self.act(state, *args)
