"""The H-term ("Hamiltonian term"): a stability add-on for the actor of PPO, A2C, DDPG, TD3
and SAC (ElegantRL's description: "a generic add-on that trades computing power for
stability"), switched on with `h_term: true`.

A second buffer keeps the most recent whole trajectories (episodes, at most `h_term_capacity`
states); the lowest `h_term_drop` fraction of them by return is left out, and the rewards of the
rest are min-max normalised over the rest: r~ = (r - r_min) / (r_max - r_min). Over windows
w = (t, ..., t + K - 1) of K = `h_term_k` consecutive steps of one kept trajectory, drawn
uniformly (`batch_size // K` of them per actor step):

    H = mean_w sum_{k=1..K} gamma_h^k r~_{t+k-1} clamp(sum_{j<k} log pi(a_{t+j}|s_{t+j}), -16, 2)

the normalised reward of each step of the window times the policy's log-probability of the
window's actions so far, discounted by gamma_h = `h_term_gamma` (the clamp of the cumulative
log-probability is ElegantRL's). The actor's loss becomes `loss - lambda_h * H`
(`h_term_lambda`) once the kept trajectories hold `h_term_start` states; before that it is
unchanged. Maximising H raises the probability of the action sequences of the better
trajectories, most where their rewards are highest.

log pi is the agent's `explore_logprob`: PPO and A2C, their own (Gaussian or categorical); SAC,
the squashed Gaussian's density of the stored action; DDPG and TD3 (deterministic actors), the
density of their exploration distribution N(actor(s), explore_noise_std^2) at the stored action.

The H-term is an auxiliary loss plugged into an agent (`AgentBase.auxiliary`, by `make_agent`
in `agents/__init__.py` when `h_term` is on): the agent shows it each rollout
(`observe_auxiliary`) and adds `auxiliary_loss()` to its actor's loss.

The windows are drawn from a generator of the H-term's own (seeded from the run's seed,
part of the checkpoint with the buffer), never from torch's global one: whether the H-term is
on must not shift the random numbers the rest of the run draws. With several learners each
rank keeps its own trajectories and draws its windows from a generator of its own (seeded
by rank), so the random state the ranks share for their update (`scale/distributed.py`) stays
alike (`join`); the objective starts on every rank together, once every rank's kept
trajectories suffice. CUDA-graph replay is off while the H-term is on (the sampled windows
change size as the buffer fills).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Reducer, Steps

LOGPROB_CLAMP = (-16.0, 2.0)  # ElegantRL's bounds on a window's cumulative log-probability
SEED_OFFSET = 50_000  # the windows' generator: run seed + this (+ rank), apart from the others


# the Config fields of the H-term (the agents that take it read them)
FIELDS = frozenset({
    "h_term", "h_term_k", "h_term_gamma", "h_term_lambda", "h_term_drop", "h_term_start",
    "h_term_capacity",
})  # fmt: skip


class HTerm:
    """The trajectory buffer and the H-term objective (see the module docstring)."""

    name = "h_term"  # its key in the agent's checkpoint state and its log column

    def __init__(self, config, device: torch.device) -> None:
        self.k = config.h_term_k
        self.gamma = config.h_term_gamma
        self.lam = config.h_term_lambda
        self.drop = config.h_term_drop
        self.start = config.h_term_start
        self.capacity = config.h_term_capacity
        self.windows = max(1, config.batch_size // self.k)
        self.device = device
        # rollout blocks (states, actions, rewards) that open episodes still start in, with the
        # global index of the first; where each sub-env's open episode starts (block, step)
        self.blocks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.first_block = 0
        self.open_from: list[tuple[int, int]] | None = None
        # closed trajectories, oldest first: (states, actions, rewards)
        self.trajectories: deque[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = deque()
        self.stored = 0  # states in `trajectories`
        # several learners: whether every rank's buffer is ready (`observe`); one process: always
        self.all_ranks_ready = True
        self.generator = torch.Generator(device=device)
        self.seed(config.seed)
        self._rebuild()

    def seed(self, seed: int, rank: int = 0) -> None:
        """Restart the windows' generator from run seed `seed` (rank `rank` of several)."""
        self.generator.manual_seed(seed + SEED_OFFSET + rank)

    # --- as an agent's auxiliary loss ---
    def join(self, seed: int, part: int) -> None:
        """This agent is rank `part` of several that share one update: draw the windows from a
        stream of its own, and start the objective once every rank's buffer is ready."""
        self.seed(seed, part)
        self.all_ranks_ready = False

    def observe(self, rollout: Steps, reducer: Reducer) -> None:
        """Keep the rollout's episodes; with several ranks, check whether all are ready."""
        dones = rollout.terminals | rollout.truncates
        self.add(rollout.states, rollout.actions, rollout.rewards, dones)
        if not self.all_ranks_ready:
            self.all_ranks_ready = reducer.every(self.ready)

    # --- the buffer ---
    @torch.no_grad()
    def add(self, states: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor,
            dones: torch.Tensor) -> None:  # fmt: skip
        """Take a rollout `(T, N, ...)`; every episode that ends in it (`dones (T, N)`) joins
        the buffer whole, with the steps earlier rollouts held of it."""
        horizon, num_envs = rewards.shape
        if self.open_from is None:
            self.open_from = [(self.first_block, 0)] * num_envs
        if len(self.open_from) != num_envs:
            raise ValueError(f"H-term: rollouts of {num_envs} sub-envs after "
                             f"{len(self.open_from)}")  # fmt: skip
        block = self.first_block + len(self.blocks)
        self.blocks.append((states, actions, rewards))
        ends = dones.T.nonzero().tolist()  # (env, step) pairs, by env then step
        for env, step in ends:
            self._close(env, block, step)
            self.open_from[env] = (block, step + 1)
        # forget the blocks no open episode starts in any more
        oldest = min(b if s < horizon else b + 1 for b, s in self.open_from)
        oldest = min(oldest, block + 1)
        del self.blocks[: oldest - self.first_block]
        self.first_block = oldest
        self.open_from = [(b + 1, 0) if s >= horizon else (b, s) for b, s in self.open_from]
        if ends:
            while self.stored > self.capacity and len(self.trajectories) > 1:
                self.stored -= self.trajectories.popleft()[2].shape[0]
            self._rebuild()

    def _close(self, env: int, block: int, step: int) -> None:
        """Append sub-env `env`'s episode that ends at `step` of `block`."""
        assert self.open_from is not None, "`add` knows the sub-envs before it closes episodes"
        first, offset = self.open_from[env]
        parts = []
        for b in range(first, block + 1):
            lo = offset if b == first else 0
            hi = step + 1 if b == block else None
            parts.append([x[lo:hi, env] for x in self.blocks[b - self.first_block]])
        states, actions, rewards = (torch.cat(p) for p in zip(*parts, strict=True))
        self.trajectories.append((states, actions, rewards))
        self.stored += rewards.shape[0]

    def kept(self) -> list[int]:
        """Indices (into `trajectories`) of the trajectories the objective uses: all but the
        lowest `drop` fraction by return (ties: the older one is dropped first)."""
        returns = torch.stack([r.sum() for _, _, r in self.trajectories])
        order = torch.sort(returns, stable=True).indices  # equal returns: the older first
        return sorted(order[int(len(order) * self.drop) :].tolist())

    def _rebuild(self) -> None:
        """Flatten the kept trajectories; normalise their rewards; list the window starts."""
        self.states = self.actions = self.r_norm = self.starts = None
        self.kept_states = 0
        if not self.trajectories:
            return
        kept = [self.trajectories[i] for i in self.kept()]
        self.states = torch.cat([s for s, _, _ in kept])
        self.actions = torch.cat([a for _, a, _ in kept])
        rewards = torch.cat([r for _, _, r in kept]).float()
        low, high = rewards.min(), rewards.max()
        self.r_norm = (rewards - low) / (high - low) if high > low else torch.zeros_like(rewards)
        starts, offset = [], 0
        for _, _, r in kept:
            length = r.shape[0]
            if length >= self.k:
                starts.append(torch.arange(offset, offset + length - self.k + 1))
            offset += length
        self.kept_states = offset
        if starts:
            self.starts = torch.cat(starts).to(self.device)

    @property
    def ready(self) -> bool:
        """Whether this buffer can feed the objective: enough kept states, and at least one
        whole window."""
        return self.starts is not None and self.kept_states >= self.start

    @property
    def active(self) -> bool:
        """Whether the objective is on: this buffer is ready, and (several learners) every
        rank's is."""
        return self.ready and self.all_ranks_ready

    # --- the objective ---
    def sample(self, num_windows: int) -> torch.Tensor:
        """Flat indices `(num_windows, K)` of windows drawn uniformly."""
        assert self.starts is not None, "windows are drawn once the buffer is `ready`"
        pick = torch.randint(self.starts.shape[0], (num_windows,), device=self.device,
                             generator=self.generator)  # fmt: skip
        return self.starts[pick].unsqueeze(1) + torch.arange(self.k, device=self.device)

    def objective(self, logprob: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                  index: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """H over the windows `index (W, K)`; `logprob(states, actions) -> (n,)` is the
        policy's log-probability of the stored actions."""
        assert self.states is not None and self.actions is not None and self.r_norm is not None, (
            "the objective is taken once the buffer holds trajectories (`ready`)"
        )
        flat = index.flatten()
        logp = logprob(self.states[flat], self.actions[flat]).view(index.shape)
        cumulative = logp.cumsum(1).clamp(*LOGPROB_CLAMP)
        discount = self.gamma ** torch.arange(1, self.k + 1, device=logp.device)
        return (cumulative * self.r_norm[index] * discount).sum(1).mean()

    def loss(self, logprob: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
             ) -> tuple[torch.Tensor | float, dict[str, torch.Tensor]]:  # fmt: skip
        """-lambda_h * H on freshly drawn windows, under `logprob` (the agent's
        `explore_logprob`), and H's log; 0 and NaN while the buffer fills (so the log column
        exists from the first row on)."""
        if not self.active:
            return 0.0, {self.name: torch.tensor(float("nan"), device=self.device)}
        h = self.objective(logprob, self.sample(self.windows))
        return -self.lam * h, {self.name: h.detach()}

    # --- checkpoint ---
    def state_dict(self) -> dict:
        return {
            "blocks": list(self.blocks),
            "first_block": self.first_block,
            "open_from": self.open_from,
            "trajectories": list(self.trajectories),
            "generator": {"device": self.device.type, "state": self.generator.get_state()},
        }

    def load_state_dict(self, state: dict) -> None:
        def to_device(parts):
            return tuple(x.to(self.device) for x in parts)

        self.blocks = [to_device(b) for b in state["blocks"]]
        self.first_block = state["first_block"]
        self.open_from = state["open_from"]
        self.trajectories = deque(to_device(t) for t in state["trajectories"])
        self.stored = sum(r.shape[0] for _, _, r in self.trajectories)
        self._rebuild()
        # absent from checkpoints that drew the windows from torch's global generator; a CPU
        # and a CUDA generator's states differ in kind: the generator goes on from its seed
        generator = state.get("generator")
        if generator is not None and generator["device"] == self.device.type:
            self.generator.set_state(generator["state"])
