"""`train_agent`: set up a run (config, device, threads, envs, agent, run folder) and train it,
in this process (`train/loop.py`) or with worker processes (`scale/parallel.py`)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from xiaoyarl.agents import agent_class, make_agent
from xiaoyarl.agents.settings import RunSettings, resolve_run
from xiaoyarl.config import Config
from xiaoyarl.config_io import save_config
from xiaoyarl.core.graphs import capture_updates
from xiaoyarl.envs import make_env
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.envs.multi import (
    MultiAgentEnvSpec,
    MultiAgentVecEnv,
    is_multi_agent,
    make_multi_agent_env,
)
from xiaoyarl.errors import EnvError
from xiaoyarl.scale import distributed
from xiaoyarl.train.checkpoint import open_checkpoint
from xiaoyarl.train.evaluator import Evaluator, evaluation_seed
from xiaoyarl.train.loggers import Loggers
from xiaoyarl.train.loop import Callback, TrainLoop
from xiaoyarl.train.progress import Console, warn
from xiaoyarl.train.schedules import scheduled

__all__ = ["Callback", "agent_class", "train_agent"]


def run_title(config: Config, backend: str) -> str:
    """The title of a run's learning curve."""
    return f"{config.algo} on {config.env_id} ({backend}, seed {config.seed})"


def build_env(config: Config, num_envs: int, device: torch.device, backend: str, seed: int,
              evaluation: bool = False) -> VecEnv | MultiAgentVecEnv:  # fmt: skip
    """The run's env (or, `evaluation`, an env to evaluate on) of `num_envs` sub-envs: single- or
    multi-agent."""
    if is_multi_agent(config.env_id):
        return make_multi_agent_env(config.env_id, num_envs, device, seed, config.env_kwargs)
    return make_env(config.env_id, num_envs, device, backend, seed, config.vector_mode,
                    config.env_kwargs, evaluation)  # fmt: skip


def check_state(state: torch.Tensor, spec: EnvSpec | MultiAgentEnvSpec, where: str) -> None:
    """Reject an observation batch with the wrong shape or non-finite values, naming the env."""
    expected: tuple[int, ...] = (spec.num_envs, spec.state_dim)
    if isinstance(spec, EnvSpec):
        expected = (spec.num_envs, *spec.obs_shape)
    if isinstance(spec, MultiAgentEnvSpec):
        expected = (spec.num_envs, spec.num_agents, spec.obs_dim)
    if tuple(state.shape) != expected:
        raise EnvError(
            f"env {spec.name} returned observations of shape {tuple(state.shape)} on {where}, "
            f"expected {expected}; check the env's observation_space against what it returns."
        )
    if state.is_floating_point() and not torch.isfinite(state).all():
        raise EnvError(
            f"env {spec.name} returned NaN or infinite observations on {where}; fix the env "
            f"or wrap it so it returns finite values."
        )


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
    data_parallel = None
    if ranks is not None:
        data_parallel = distributed.start(settings.device, ranks[0], ranks[1], config.seed)
    try:
        return _run(settings, resume, log, callbacks, data_parallel)
    finally:
        if data_parallel is not None:
            distributed.stop()


def _run(
    settings: RunSettings,
    resume: bool,
    log: Callable[[str], None] | None,
    callbacks: Sequence[Callback],
    data_parallel: distributed.DataParallel | None,
) -> dict:
    """Open the run folder, build the envs, the agent and the loop of a run's settings, and run
    it."""
    config, device, backend, run_dir = (
        settings.config, settings.device, settings.backend, settings.run_dir)  # fmt: skip
    rank = data_parallel.rank if data_parallel is not None else 0
    main = rank == 0
    if data_parallel is not None and distributed.restarted_by_launcher():  # --max-restarts
        resume = resume or (run_dir / "checkpoint" / "state.pt").is_file()
    console = Console(log if main else None)
    for name in settings.ignored if main else ():
        warn(f"{name}={getattr(config, name)!r} is ignored by {config.algo} (see `xiaoyarl list "
             f"--fields` for the fields each algorithm reads)")  # fmt: skip
    checkpoint = open_checkpoint(settings, run_dir, resume)
    seed = config.seed + 1000 * rank  # several learners: each rank's envs and exploration
    torch.manual_seed(config.seed)  # the agent's initial weights: alike on every rank
    parallel = config.runner == "parallel"
    # parallel: the workers step the envs; this one gives the spec and checks a first reset
    assert config.num_envs is not None, "resolve_config sets num_envs"
    env = build_env(config, config.num_envs, device, backend, seed)
    eval_env: VecEnv | None = None
    loop: TrainLoop
    try:
        if not parallel and main:
            eval_env = build_env(config, config.eval_episodes, device, backend,
                                 evaluation_seed(config.seed), evaluation=True)  # fmt: skip
        spec = env.spec
        agent_spec = spec
        if parallel:  # the learner sees the workers' sub-envs side by side
            agent_spec = dataclasses.replace(spec, num_envs=spec.num_envs * config.num_workers)
        agent = make_agent(config.algo, agent_spec, config, device)
        if data_parallel is not None:
            data_parallel.broadcast_agent(agent)
            data_parallel.attach(agent)
            torch.manual_seed(seed)
        elif not scheduled(config):  # a graph would replay the scheduled values it captured
            capture_updates(agent)
        target = config.target_return if config.target_return is not None else spec.target_return
        state, info = env.reset(seed=seed)
        check_state(state, spec, "reset")
        if not parallel:
            agent.last_state = agent.observe(state, info)

        run_dir.mkdir(parents=True, exist_ok=True)
        title = run_title(config, backend)
        if main:
            save_config(config, run_dir / "config.yaml")
            console.line(_startup_line(settings, spec, run_dir, target, data_parallel))
        loggers = Loggers(run_dir, config, title, enabled=main)
        make_confirm_env = None
        if config.confirm_episodes and config.stop_at_target:  # a run that will not stop there

            def make_confirm_env():  # noqa: E306 - built only when an evaluation needs it
                return build_env(config, config.confirm_episodes, device, backend,
                                 config.seed + 20_000, evaluation=True)  # fmt: skip

        evaluator = None
        if main and not parallel:
            assert eval_env is not None, "built above for the main process of this runner"
            evaluator = Evaluator(eval_env, run_dir, target, evaluation_seed(config.seed),
                                  title=title, make_confirm_env=make_confirm_env)  # fmt: skip
        common = (config, agent, env, evaluator, target, run_dir, backend, console, loggers,
                  callbacks)  # fmt: skip
        if parallel:
            from xiaoyarl.scale.parallel import ParallelLoop

            env.close()
            loop = ParallelLoop(config, agent, backend, run_dir, target, title, console,
                                loggers, callbacks)  # fmt: skip
        elif data_parallel is not None:
            loop = distributed.DistributedLoop(*common, data_parallel=data_parallel)
        else:
            loop = TrainLoop(*common)
        if checkpoint is not None:
            loop.load(checkpoint)
            console.line(f"resumed from step {loop.total_steps}")
            spent, reached = loop.resume_notes()
            if spent is not None and main:
                warn(spent)  # shown even with --quiet: the command did nothing
            if reached is not None:
                console.line(reached)
        elif main:
            (run_dir / "stop").unlink(missing_ok=True)
        try:
            summary = loop.run()
        except BaseException as e:
            note = loop.save_after_failure(e)
            if hasattr(e, "add_note"):  # shown after the traceback / error message
                e.add_note(note)
            else:
                _say_error(note)
            raise
        finally:
            loggers.close()
        summary["run_dir"] = str(run_dir)
        summary["rank"] = rank
        return summary
    finally:
        env.close()
        if eval_env is not None:
            eval_env.close()


def _startup_line(
    settings: RunSettings,
    spec: EnvSpec,
    run_dir: Path,
    target: float | None,
    data_parallel: distributed.DataParallel | None = None,
) -> str:
    config, threads = settings.config, settings.threads
    envs = f"{spec.num_envs} envs"
    if config.runner == "parallel":
        envs = f"{config.num_workers} workers x {spec.num_envs} envs"
    if data_parallel is not None:
        envs = f"{data_parallel.world_size} learners x {spec.num_envs} envs"
    if target is None:
        goal = "no target"
    else:
        goal = f"target {target:g}" + ("" if config.stop_at_target else " (no early stop)")
    return (f"{config.algo} on {config.env_id} | backend {settings.backend} | {envs} | "
            f"{settings.device} | {threads} thread{'s' if threads > 1 else ''} | run folder "
            f"{run_dir} | budget {config.max_steps:,} steps | {goal}")  # fmt: skip


def _say_error(text: str) -> None:
    try:
        print(f"xiaoyarl: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
