"""CUDA-graph replay of the off-policy gradient step.

A gradient step of SAC on [256, 256] networks is ~400 small kernels. On a GPU each costs a few
microseconds of CPU time to launch, far more than it runs, so the step is bound by the
launching CPU (~8 ms on an H100). Captured once into a CUDA graph, the same kernels are
launched by one call.

The step runs on fixed tensors: every sampled batch is copied into one static `Batch`, and the
graph writes its logs and TD errors into static outputs. Python decisions inside a step (TD3's
delayed actor update, a target update every k steps) repeat with the gradient-step counter
modulo the agent's `graph_period()`, so one graph is captured per phase of that period. The
first `warmup` steps run eagerly on a side stream, as CUDA graph capture requires; they also
create the optimizers' state, which the graphs then update in place.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from xiaoyarl.train.buffer import Batch

StepFn = Callable[[Batch], tuple[dict[str, torch.Tensor], torch.Tensor]]


class GraphedStep:
    """Runs `step(batch)` through CUDA graphs, one per phase `0 .. period - 1`."""

    def __init__(self, step: StepFn, period: int, warmup: int = 3) -> None:
        self.step = step
        self.period = period
        self.warmup = warmup * period  # eager steps before the first capture
        self.calls = 0
        self.static_batch: Batch | None = None
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, dict, torch.Tensor]] = {}
        self.side_stream = torch.cuda.Stream()

    def __call__(self, batch: Batch, phase: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One gradient step on `batch` at `phase` (the gradient-step counter modulo period)."""
        self.calls += 1
        if self.calls <= self.warmup:
            return self._on_side_stream(batch)
        if self.static_batch is None:
            self.static_batch = Batch(*(t.clone() for t in batch))
        else:
            for static, new in zip(self.static_batch, batch, strict=True):
                static.copy_(new)
        if phase not in self.graphs:
            self.graphs[phase] = self._capture()
        graph, logs, td_errors = self.graphs[phase]
        graph.replay()
        return logs, td_errors

    def _on_side_stream(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        stream = self.side_stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            logs, td_errors = self.step(batch)
        torch.cuda.current_stream().wait_stream(stream)
        return logs, td_errors

    def _capture(self) -> tuple[torch.cuda.CUDAGraph, dict, torch.Tensor]:
        """Record one step on the static batch (capture runs nothing; replay does)."""
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            logs, td_errors = self.step(self.static_batch)
        return graph, logs, td_errors
