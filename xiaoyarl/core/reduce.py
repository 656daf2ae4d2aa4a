"""Whole-batch statistics of an update, supplied to an agent from above.

An agent's update reads a few statistics of its whole batch: the mean and spread of PPO's
advantages, the mini-batches it cuts, ModSAC's critic loss, a normaliser's moments. In one
process those are the batch's own (`Local`). When several processes share one update on the
union of their data, the layer above (`scale/distributed.py`) hands the agent a reducer that
takes them over the union, so the agent's code reads the same either way. The contract is
`Reducer` (`agents/protocols.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple

import torch


class MiniBatches(NamedTuple):
    """The mini-batches of one on-policy update: index tensors into this process's flattened
    rollout, and the mean of a per-sample loss over one mini-batch (of the whole batch, where
    this process holds a part of it)."""

    indices: list[torch.Tensor]
    mean: Callable[[torch.Tensor], torch.Tensor]


def shuffled_minibatches(size: int, batch_size: int, repeat_times: float,
                         device: torch.device) -> list[torch.Tensor]:  # fmt: skip
    """`repeat_times` passes over `size` transitions in mini-batches of `batch_size` (at most
    `size`), each pass a new permutation (the last mini-batches may run into the next one)."""
    batch_size = min(batch_size, size)
    num_updates = max(1, int(repeat_times * size / batch_size))
    num_perms = -(-num_updates * batch_size // size)
    order = torch.cat([torch.randperm(size, device=device) for _ in range(num_perms)])
    return [order[i * batch_size : (i + 1) * batch_size] for i in range(num_updates)]


class Local:
    """One process holds the whole batch: each statistic is its own."""

    def shared_random(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def average_gradients(self, groups: Sequence[Sequence[torch.nn.Parameter]]) -> None:
        """One process: its gradients are already the whole batch's."""

    def average(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def every(self, flag: bool) -> bool:
        return flag

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        return x.mean(0), x.var(0, unbiased=False), float(x.shape[0])

    def mean_std(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.mean(), x.std()

    def minibatches(self, size: int, num_envs: int, batch_size: int, repeat_times: float,
                    device: torch.device) -> MiniBatches:  # fmt: skip
        return MiniBatches(shuffled_minibatches(size, batch_size, repeat_times, device), torch.mean)
