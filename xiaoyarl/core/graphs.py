"""CUDA-graph replay of an agent's update.

A gradient step of SAC on [256, 256] networks is ~400 small kernels, a PPO update on one
rollout thousands. On a GPU each costs a few microseconds of CPU time to launch, often more than
it runs, so the update is bound by the launching CPU (a SAC step took ~8 ms on an H100).
Captured once into a CUDA graph, the same kernels are launched by one call.

The update runs on fixed tensors: every input (an off-policy batch, a PPO rollout) is copied
into one static copy, and the graph writes its outputs (logs, TD errors) into static tensors.
Python decisions inside an update (TD3's delayed actor step, a target update every k steps)
repeat with the update counter modulo the agent's `update_cycle()`, so one graph is captured
per phase of that period. The first `warmup` updates run eagerly on a side stream, as CUDA
graph capture requires; they also create the optimizers' state, which the graphs then update
in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch


class GraphedStep:
    """Runs `update(inputs)` through CUDA graphs, one per phase `0 .. period - 1`.

    `inputs` is a NamedTuple of tensors (or None) whose shapes never change; `update` returns
    tensors (in any nesting of dicts and tuples), which after a replay hold that replay's values.
    """

    def __init__(self, update: Callable[[NamedTuple], Any], period: int, warmup: int = 3) -> None:
        self.update = update
        self.period = period
        self.warmup = warmup * period  # eager calls before the first capture
        self.calls = 0
        self.static_inputs: NamedTuple | None = None
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, Any]] = {}
        self.side_stream = torch.cuda.Stream()

    def __call__(self, inputs: NamedTuple, phase: int) -> Any:
        """`update(inputs)` at `phase` (the agent's update counter modulo `period`)."""
        self.calls += 1
        if self.calls <= self.warmup:
            return self._on_side_stream(inputs)
        if self.static_inputs is None:
            self.static_inputs = inputs._make(t if t is None else t.clone() for t in inputs)
        else:
            for static, new in zip(self.static_inputs, inputs, strict=True):
                if static is not None:
                    static.copy_(new)
        if phase not in self.graphs:
            self.graphs[phase] = self._capture()
        graph, outputs = self.graphs[phase]
        graph.replay()
        return outputs

    def _on_side_stream(self, inputs: NamedTuple) -> Any:
        stream = self.side_stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            outputs = self.update(inputs)
        torch.cuda.current_stream().wait_stream(stream)
        return outputs

    def _capture(self) -> tuple[torch.cuda.CUDAGraph, Any]:
        """Record one update on the static inputs (capture runs nothing; replay does)."""
        assert self.static_inputs is not None, "__call__ copies the inputs before a capture"
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # synchronizes the device first
            outputs = self.update(self.static_inputs)
        return graph, outputs


class GraphedUpdates:
    """An agent's update runner that replays its updates as CUDA graphs: one `GraphedStep` for
    the agent's update, its phase the agent's update counter modulo `period` (the agent's
    `update_cycle()`)."""

    def __init__(self, counter: Callable[[], int], period: int) -> None:
        self.counter = counter
        self.period = period
        self.step: GraphedStep | None = None

    def __call__(self, update: Callable[[Any], Any], inputs: Any) -> Any:
        self.step = self.step or GraphedStep(update, self.period)
        return self.step(inputs, self.counter() % self.period)

    def reset(self) -> None:
        """Capture anew: the optimizer state tensors the graphs update were replaced."""
        self.step = None


# An update whose choices repeat with a longer period (e.g. a hard target copy every 1,000
# gradient steps) runs eagerly rather than holding that many graphs; REDQ with the paper's
# update-to-data ratio of 20 still fits.
MAX_GRAPHS = 32


def capture_updates(agent: Any) -> bool:
    """Replay `agent`'s updates as CUDA graphs where they can be (`config.cuda_graph`, a CUDA
    device, an update whose choices repeat within `MAX_GRAPHS` updates, no auxiliary loss whose
    sampled batches change size); returns whether it does. Called by the trainer once the agent
    is built, before its first update. A scheduled learning rate becomes a tensor on the device,
    which the schedule fills in place and every replay reads (`train/schedules.py`)."""
    period = agent.update_cycle()
    if not (agent.learner and agent.config.cuda_graph and agent.device.type == "cuda"
            and period is not None and period <= MAX_GRAPHS
            and agent.auxiliary is None):  # fmt: skip
        return False
    scheduled_lr = agent.config.learning_rate_schedule != "constant"
    for optimizer in agent.optimizers.values():
        for group in optimizer.param_groups:
            group["capturable"] = True  # its state on the device, stepped inside the graph
            if scheduled_lr:
                group["lr"] = torch.tensor(float(group["lr"]), device=agent.device)
    agent.update_runner = GraphedUpdates(lambda: agent.updates, period)
    return True
