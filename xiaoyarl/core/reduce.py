"""What an update needs when several ranks share it: an interface that the layer above
(`scale/distributed.py`'s `DataParallel`) implements and hands to the agent, so that the agent
imports no process group."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import torch


class Ranks(Protocol):
    """This rank's part in a group of ranks that compute one update on the union of their data."""

    rank: int
    world_size: int

    def shared_random(self) -> AbstractContextManager[None]:
        """A block (an update) run on the random state the ranks share."""
        ...

    def average_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Every gradient replaced by its mean over the ranks."""
        ...

    def average(self, x: torch.Tensor) -> torch.Tensor:
        """The mean of `x` over the ranks, alike on every rank."""
        ...

    def every(self, flag: bool) -> bool:
        """Whether `flag` holds on every rank."""
        ...

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Mean, population variance and size of the union of the ranks' batches `x`."""
        ...

    def mean_std(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and unbiased standard deviation of the union of the ranks' values `x`."""
        ...

    def local_part(self, indices: torch.Tensor, num_envs: int) -> torch.Tensor:
        """The entries of `indices` into the union's rollouts that are this rank's, as indices
        into its own rollout."""
        ...
