"""A run's start: its parts built in one step from its resolved settings (`build_run`: the
console, the checkpoint it resumes from, its envs, its agent, its evaluator and loggers, and its
run folder), and a loop made of them run from that checkpoint (`run_loop`). `run.py` chooses the
loop (this process's, the worker processes' or one learner's of several)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch

from xiaoyarl.agents import AgentBase, make_agent
from xiaoyarl.agents.settings import RunSettings
from xiaoyarl.config import Config
from xiaoyarl.config_io import save_config
from xiaoyarl.core.graphs import capture_updates
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.envs.build import build_env, check_state
from xiaoyarl.train.checkpoint import open_checkpoint
from xiaoyarl.train.evaluator import Evaluator, evaluation_seed
from xiaoyarl.train.loggers import Loggers
from xiaoyarl.train.loop import TrainLoop
from xiaoyarl.train.progress import Console, warn
from xiaoyarl.train.schedules import scheduled


@dataclasses.dataclass
class RunParts:
    """What a run's loop is made of (`build_run`)."""

    settings: RunSettings
    console: Console
    checkpoint: dict | None  # the state it resumes from; None: a new run
    env: VecEnv  # parallel runner: the spec's stand-in, closed (the workers step the envs)
    agent: AgentBase
    evaluator: Evaluator | None  # this process's (None: the evaluator process's, or rank > 0)
    loggers: Loggers
    target: float | None
    title: str
    rank: int  # several learners: this one's rank

    def loop_args(self) -> tuple[Config, AgentBase, VecEnv, Evaluator | None, float | None,
                                 Path, str, Console, Loggers]:  # fmt: skip
        """`TrainLoop`'s arguments, but its callbacks."""
        s = self.settings
        return (s.config, self.agent, self.env, self.evaluator, self.target, s.run_dir,
                s.backend, self.console, self.loggers)  # fmt: skip


def run_title(config: Config, backend: str) -> str:
    """The title of a run's learning curve."""
    return f"{config.algo} on {config.env_id} ({backend}, seed {config.seed})"


@contextmanager
def build_run(
    settings: RunSettings,
    resume: bool,
    log: Callable[[str], None] | None,
    rank: int = 0,
    share_agent: Callable[[AgentBase], None] | None = None,
    learners: int = 1,
) -> Iterator[RunParts]:
    """The parts of a run of `settings` (its envs closed when the block ends). `resume`: from
    the run folder's checkpoint. `share_agent`: several learners' (rank 0's weights on every
    rank, updates shared) where there are `learners` of them, this one of `rank`."""
    config, device, backend, run_dir = (
        settings.config, settings.device, settings.backend, settings.run_dir)  # fmt: skip
    main = rank == 0
    console = Console(log if main else None)
    for name in settings.ignored if main else ():
        warn(f"{name}={getattr(config, name)!r} is ignored by {config.algo} (see `xiaoyarl list "
             f"--fields` for the fields each algorithm reads)")  # fmt: skip
    checkpoint = open_checkpoint(settings, run_dir, resume)
    eval_seed, title = evaluation_seed(config.seed), run_title(config, backend)
    graphed = share_agent is None and set(scheduled(config)) <= {"learning_rate"}  # see schedules
    seed = config.seed + 1000 * rank  # several learners: each rank's envs and exploration
    torch.manual_seed(config.seed)  # the agent's initial weights: alike on every rank
    parallel = config.runner == "parallel"
    assert config.num_envs is not None, "resolve_run sets num_envs"
    with ExitStack() as envs:
        # parallel: the workers step the envs; this one gives the spec and checks a first reset
        env = build_env(config, config.num_envs, device, backend, seed)
        envs.callback(env.close)
        eval_env = None
        if not parallel and main:
            eval_env = build_env(config, config.eval_episodes, device, backend, eval_seed,
                                 evaluation=True)  # fmt: skip
            envs.callback(eval_env.close)
        make_confirm_env = None
        if config.confirm_episodes and config.stop_at_target:  # a run that will not stop there

            def make_confirm_env() -> VecEnv:  # built only when an evaluation needs it
                return build_env(config, config.confirm_episodes, device, backend,
                                 config.seed + 20_000, evaluation=True)  # fmt: skip

        spec = env.spec
        agent_spec = spec
        if parallel:  # the learner sees the workers' sub-envs side by side
            agent_spec = dataclasses.replace(spec, num_envs=spec.num_envs * config.num_workers)
        agent = make_agent(config.algo, agent_spec, config, device)
        if share_agent is not None:
            share_agent(agent)
            torch.manual_seed(seed)
        target = config.target_return if config.target_return is not None else spec.target_return
        state, info = env.reset(seed=seed)
        check_state(state, spec, "reset")
        if not parallel:
            agent.last_state = agent.observe(state, info)
        else:
            env.close()

        run_dir.mkdir(parents=True, exist_ok=True)
        if main:
            save_config(config, run_dir / "config.yaml")
        if graphed:
            capture_updates(agent)
        console.line(startup_line(settings, spec, target, learners))  # rank 0's console only
        loggers = Loggers(run_dir, config, title, enabled=main)
        evaluator = None
        if eval_env is not None:
            evaluator = Evaluator(eval_env, run_dir, target, eval_seed, title=title,
                                  make_confirm_env=make_confirm_env)  # fmt: skip
        yield RunParts(settings, console, checkpoint, env, agent, evaluator, loggers, target,
                       title, rank)  # fmt: skip


def startup_line(settings: RunSettings, spec: EnvSpec, target: float | None,
                 learners: int = 1) -> str:  # fmt: skip
    """The line a run starts with: what trains on what, where, with which budget and goal."""
    config, threads = settings.config, settings.threads
    envs = f"{spec.num_envs} envs"
    if config.runner == "parallel":
        envs = f"{config.num_workers} workers x {spec.num_envs} envs"
    if learners > 1:
        envs = f"{learners} learners x {spec.num_envs} envs"
    if target is None:
        goal = "no target"
    else:
        goal = f"target {target:g}" + ("" if config.stop_at_target else " (no early stop)")
    return (f"{config.algo} on {config.env_id} | backend {settings.backend} | {envs} | "
            f"{settings.device} | {threads} thread{'s' if threads > 1 else ''} | run folder "
            f"{settings.run_dir} | budget {config.max_steps:,} steps | {goal}")  # fmt: skip


def run_loop(loop: TrainLoop, parts: RunParts) -> dict:
    """Run `loop` (made of `parts`) from their checkpoint; its summary. A failure saves what the
    state allows and says so (after the error's message)."""
    console, run_dir = parts.console, parts.settings.run_dir
    main = parts.rank == 0
    if parts.checkpoint is not None:
        loop.load(parts.checkpoint)
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
        parts.loggers.close()
    return summary | {"run_dir": str(run_dir), "rank": parts.rank}


def _say_error(text: str) -> None:
    try:
        print(f"xiaoyarl: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
