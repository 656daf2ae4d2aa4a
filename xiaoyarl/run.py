"""`train_agent`: resolve a run's settings (`agents/settings.py`), build its parts
(`train/start.py`) and train them with the loop its runner asks for: in this process
(`train/loop.py`), with worker processes (`scale/parallel.py`) or as one of several learners
(`scale/distributed.py`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from xiaoyarl.agents import agent_class
from xiaoyarl.agents.settings import resolve_run
from xiaoyarl.config import Config
from xiaoyarl.machine import keep_freed_memory
from xiaoyarl.scale import distributed
from xiaoyarl.train.loop import Callback, TrainLoop
from xiaoyarl.train.start import build_run, run_loop

__all__ = ["Callback", "agent_class", "train_agent"]


def train_agent(
    config: Config,
    resume: bool = False,
    log: Callable[[str], None] | None = print,
    callbacks: Sequence[Callback] = (),
) -> dict:
    """Train `config.algo` on `config.env_id`; return the run's summary (see `TrainLoop.summary`).

    Everything that can be rejected (config values, env id, algorithm/env fit, resume state) is
    checked before the run folder is touched. `log` receives progress lines (`print`: the
    console, with a live progress bar on a terminal; None: silent). `callbacks` are called after
    each rollout, update and evaluation, and can stop training (see `Callback`).

    A run folder is never deleted: if training fails, what it wrote stays, a checkpoint is
    written where the state allows it, and a message on standard error says what was kept.
    """
    ranks = distributed.rank_from_environment()  # (rank, world, local rank) under torchrun
    settings = resolve_run(config, ranks)
    torch.set_num_threads(settings.threads)
    keep_freed_memory()
    if ranks is not None:  # one learner of several
        checkpoint = settings.run_dir / "checkpoint" / "state.pt"
        resume = resume or (distributed.restarted_by_launcher() and checkpoint.is_file())
        data_parallel = distributed.start(settings.device, ranks[0], ranks[1], config.seed)
        try:
            with build_run(settings, resume, log, ranks[0], data_parallel.share,
                           ranks[1]) as parts:  # fmt: skip
                loop: TrainLoop = distributed.DistributedLoop(
                    *parts.loop_args(), callbacks, data_parallel=data_parallel
                )
                return run_loop(loop, parts)
        finally:
            distributed.stop()
    with build_run(settings, resume, log) as parts:
        if settings.config.runner == "parallel":
            from xiaoyarl.scale.parallel import ParallelLoop

            loop = ParallelLoop(*parts.loop_args(), callbacks)
        else:
            loop = TrainLoop(*parts.loop_args(), callbacks)
        return run_loop(loop, parts)
