"""The contracts between an agent and what is plugged into it from above, for type checkers
(agents/base.py names them; nothing imports this module when the code runs): how an update is
run, the whole-batch statistics it reads, what a rollout holds, what an optimizer gives, and an
auxiliary actor loss."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from xiaoyarl.core.reduce import MiniBatches


class UpdateRunner(Protocol):
    """How an agent's update is run: as it is (`Eager`), or as the layers above supply it."""

    def __call__(self, update: Callable[[Any], Any], inputs: Any) -> Any: ...

    def reset(self) -> None:
        """Forget what was kept of earlier updates (the agent's state was replaced)."""
        ...


class Steps(Iterable[torch.Tensor | None], Protocol):
    """What every agent's rollout (its `rollout_class`, a NamedTuple of tensors, None for a
    field an agent leaves out) has: time-major fields, `(horizon_len, num_envs, ...)`; the
    team's reward and flags for multi-agent ones."""

    @property
    def states(self) -> torch.Tensor: ...
    @property
    def actions(self) -> torch.Tensor: ...
    @property
    def rewards(self) -> torch.Tensor: ...
    @property
    def terminals(self) -> torch.Tensor: ...
    @property
    def truncates(self) -> torch.Tensor: ...


class Optimizer(Protocol):
    """What an agent asks of its optimizers: `torch.optim.Optimizer` and xiaoyarl's lean `Adam`
    (`core/optim.py`), which share no base class, both give it."""

    param_groups: list[dict[str, Any]]

    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def step(self) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


class AuxiliaryLoss(Protocol):
    """An extra term of an actor's loss, plugged into an agent from above (`agents/hterm.py`)."""

    name: str  # its key in the agent's checkpoint state

    def observe(self, rollout: Steps, reducer: Reducer) -> None: ...

    def loss(self, logprob: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
             ) -> tuple[torch.Tensor | float, dict[str, torch.Tensor]]:  # fmt: skip
        """The term (to add to the actor's loss) and its log, under the log-density `logprob`
        of stored states and actions that the agent's exploring policy gives."""
        ...

    def join(self, seed: int, part: int) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class Reducer(Protocol):
    """The whole-batch statistics an update reads (see the module docstring)."""

    def shared_random(self) -> AbstractContextManager[None]:
        """A block (an update) run on the random state every part of the batch shares."""
        ...

    def average_gradients(self, groups: Sequence[Sequence[torch.nn.Parameter]]) -> None:
        """Every gradient of these groups of parameters replaced by the whole batch's."""
        ...

    def average(self, x: torch.Tensor) -> torch.Tensor:
        """The whole batch's value of a statistic `x` of this part (such as its loss)."""
        ...

    def every(self, flag: bool) -> bool:
        """Whether `flag` holds for every part."""
        ...

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Mean, population variance and size of the whole batch of rows `x` `(batch, dim)`."""
        ...

    def mean_std(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and unbiased standard deviation of the whole batch of values `x`."""
        ...

    def minibatches(
        self, size: int, num_envs: int, batch_size: int, repeat_times: float, device: torch.device
    ) -> MiniBatches:
        """`repeat_times` passes over a time-major rollout of `size` transitions (`num_envs`
        per step) in shuffled mini-batches of `batch_size`."""
        ...


class OptimizerKit(Protocol):
    """How an agent builds its optimizers and clips gradients (`AgentBase.kit`): torch's own
    (`agents/base.TorchKit`) or, from the trainer, xiaoyarl's lean ones (`core/optim.LeanKit`)."""

    def optimizer(self, kind: str, params: Iterable[torch.nn.Parameter], lr: float,
                  weight_decay: float = 0.0) -> Optimizer:  # fmt: skip
        """A new optimizer of `kind` (Config.optimizer: "adam", AdamW where `weight_decay` is
        not 0, or "radam") over `params`."""
        ...

    def clip_grad_norm(self, params: list[torch.nn.Parameter], max_norm: float) -> None:
        """Scale the gradients of `params` so that their global 2-norm is at most `max_norm`."""
        ...
