"""`train_agent`: set up a run (config, device, threads, envs, agent, run folder) and train it,
in this process (`train/loop.py`) or with worker processes (`scale/parallel.py`)."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from xiaoyarl.agents import agent_class, make_agent
from xiaoyarl.agents.settings import (
    budget_fields,
    check_config,
    ignored_fields,
    resolve_config,
    saved_run_values,
)
from xiaoyarl.config import Config
from xiaoyarl.config_io import save_config
from xiaoyarl.core.graphs import capture_updates
from xiaoyarl.envs import is_batched, is_torch_native, make_env
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.envs.multi import (
    MULTI_AGENT_ENVS,
    MultiAgentEnvSpec,
    MultiAgentVecEnv,
    is_multi_agent,
    make_multi_agent_env,
)
from xiaoyarl.errors import CheckpointError, ConfigError, EnvError
from xiaoyarl.scale import distributed
from xiaoyarl.train.checkpoint import load_plain
from xiaoyarl.train.evaluator import Evaluator, evaluation_seed
from xiaoyarl.train.loggers import Loggers, check_logger_packages
from xiaoyarl.train.loop import CHECKPOINT_FORMAT, Callback, TrainLoop
from xiaoyarl.train.progress import Console, warn
from xiaoyarl.train.schedules import scheduled

# Fields that may change when a run is resumed; every other field must match the checkpoint's.
RESUMABLE_CHANGES = {
    "max_steps", "target_return", "stop_at_target", "eval_every", "eval_episodes",
    "eval_deterministic", "confirm_episodes", "checkpoint_every", "cwd", "device", "threads",
    "tensorboard", "wandb", "wandb_project", "vector_mode", "restart_workers", "worker_timeout",
}  # fmt: skip

__all__ = ["Callback", "agent_class", "default_run_dir", "resolve_device", "train_agent"]


def resolve_device(name: str) -> torch.device:
    """The run's one device: `auto` is cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device '{name}' was requested but CUDA is not available to this torch "
            f"({torch.__version__}); use --device cpu (or auto)."
        )
    if device.type == "cuda" and device.index is not None:
        if device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"device '{name}' does not exist: {torch.cuda.device_count()} GPU(s) visible."
            )
    return device


def choose_threads(threads: int | None) -> int:
    """Torch's CPU threads for this process: `threads`, or 1 when None (automatic).

    One thread is the fastest choice measured for every workload tried on a 2-core machine,
    alone and beside other processes (see BENCHMARKS.md, "CPU threads"): the networks of RL
    are small, so a second thread mostly spins, and beside another busy process torch's
    default of one thread per core makes training several times slower."""
    return threads if threads else 1


def run_title(config: Config, backend: str) -> str:
    """The title of a run's learning curve."""
    return f"{config.algo} on {config.env_id} ({backend}, seed {config.seed})"


def default_run_dir(config: Config) -> Path:
    """`runs/<env>_<algo>_<seed>`, the run folder when `cwd` is not given."""
    env = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.env_id)
    return Path("runs") / f"{env}_{config.algo}_{config.seed}"


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
    main = ranks is None or ranks[0] == 0
    console = Console(log if main else None)
    check_config(config)
    for name in ignored_fields(config) if main else ():
        warn(f"{name}={getattr(config, name)!r} is ignored by {config.algo} (see `xiaoyarl list "
             f"--fields` for the fields each algorithm reads)")  # fmt: skip
    multi_agent = is_multi_agent(config.env_id)
    torch_native = is_torch_native(config.env_id, config.backend) or (
        config.env_id in MULTI_AGENT_ENVS
    )
    device = resolve_device(config.device)
    if multi_agent and (ranks is not None or config.runner == "parallel"):
        raise ConfigError(
            f"{config.env_id} is a multi-agent env: it trains in one process for now (runner "
            f"single, no torchrun / --learners)."
        )
    if ranks is not None:
        if config.runner == "parallel":
            raise ConfigError(
                "several learners (torchrun, --learners) and runner=parallel cannot be combined: "
                "each learner rank steps its own envs; use runner=single."
            )
        if device.type == "cuda":
            device = torch.device("cuda", ranks[2])  # one GPU per rank of this machine
    follow_budget = budget_fields(config)  # a resumed run keeps its own values of these
    config = resolve_config(
        config, torch_native or is_batched(config.env_id, config.backend), device.type
    )
    threads = choose_threads(config.threads)
    torch.set_num_threads(threads)
    check_logger_packages(config)
    backend = "torch" if torch_native else "gymnasium"
    if config.backend in ("envpool", "torch", "playground"):
        backend = config.backend  # make_env refuses a torch backend without a torch-native env
    if multi_agent and not torch_native:
        backend = "pettingzoo"
    if backend == "gymnasium":  # an Atari game's preprocessing, written in its config.yaml
        from xiaoyarl.envs.gym import atari_env_kwargs

        config = dataclasses.replace(
            config, env_kwargs=atari_env_kwargs(config.env_id, config.env_kwargs)
        )
    run_dir = Path(config.cwd) if config.cwd else default_run_dir(config)
    ckpt_path = run_dir / "checkpoint" / "state.pt"
    if ranks is not None and distributed.restarted_by_launcher() and ckpt_path.is_file():
        resume = True  # torchrun --max-restarts brought the job back: from the last checkpoint

    checkpoint = None
    if resume:
        if not ckpt_path.is_file():
            raise CheckpointError(
                f"cannot resume: there is no checkpoint in {run_dir} (looked for {ckpt_path}). "
                f"Name the run folder to resume with --resume RUN_DIR (or --cwd RUN_DIR)."
            )
        checkpoint = load_plain(ckpt_path)
        for name in follow_budget:
            setattr(config, name, checkpoint["config"].get(name, getattr(config, name)))
        _check_resumable(checkpoint, config, run_dir)
    elif ckpt_path.exists():
        raise CheckpointError(
            f"run folder {run_dir} already holds a run with a checkpoint. Pass --resume to "
            f"continue it, choose another folder with --cwd, or delete {run_dir}."
        )
    data_parallel = None
    if ranks is not None:
        data_parallel = distributed.start(device, ranks[0], ranks[1], config.seed)
    try:
        return _run(config, device, backend, run_dir, checkpoint, console, callbacks,
                    data_parallel, threads)  # fmt: skip
    finally:
        if data_parallel is not None:
            distributed.stop()


def _run(
    config: Config,
    device: torch.device,
    backend: str,
    run_dir: Path,
    checkpoint: dict | None,
    console: Console,
    callbacks: Sequence[Callback],
    data_parallel: distributed.DataParallel | None,
    threads: int,
) -> dict:
    """Build the envs, the agent and the loop of a checked config, and run it."""
    rank = data_parallel.rank if data_parallel is not None else 0
    main = rank == 0
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
            console.line(_startup_line(config, spec, backend, device, threads, run_dir, target,
                                       data_parallel))  # fmt: skip
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
    config: Config,
    spec: EnvSpec,
    backend: str,
    device: torch.device,
    threads: int,
    run_dir: Path,
    target: float | None,
    data_parallel: distributed.DataParallel | None = None,
) -> str:
    envs = f"{spec.num_envs} envs"
    if config.runner == "parallel":
        envs = f"{config.num_workers} workers x {spec.num_envs} envs"
    if data_parallel is not None:
        envs = f"{data_parallel.world_size} learners x {spec.num_envs} envs"
    if target is None:
        goal = "no target"
    else:
        goal = f"target {target:g}" + ("" if config.stop_at_target else " (no early stop)")
    return (f"{config.algo} on {config.env_id} | backend {backend} | {envs} | {device} | "
            f"{threads} thread{'s' if threads > 1 else ''} | run folder {run_dir} | budget "
            f"{config.max_steps:,} steps | {goal}")  # fmt: skip


def _say_error(text: str) -> None:
    try:
        print(f"xiaoyarl: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _check_resumable(checkpoint: dict, config: Config, run_dir: Path) -> None:
    if checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{run_dir}/checkpoint/state.pt is not a xiaoyarl checkpoint.")
    saved = {**checkpoint["config"], **saved_run_values(checkpoint["config"])}
    unsaved = Config().to_dict()  # fields it predates
    now = config.to_dict()
    diffs = [
        f"{k}: checkpoint {saved.get(k, unsaved[k])!r}, now {now[k]!r}"
        for k in now
        if k not in RESUMABLE_CHANGES and saved.get(k, unsaved[k]) != now[k]
    ]
    if diffs:
        raise CheckpointError(
            f"cannot resume {run_dir}: the config differs from the one it was trained with "
            f"({'; '.join(diffs)}). Resume with the same settings, e.g. --config "
            f"{run_dir}/config.yaml, or start a new run with another --cwd."
        )
