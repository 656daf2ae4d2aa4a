"""The single-process runner: explore -> update -> evaluate until the target or the step budget."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from xiaoyarl.agents import ALGORITHMS, AgentBase
from xiaoyarl.config import Config
from xiaoyarl.envs import is_torch_native, make_env
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.errors import CheckpointError, ConfigError, EnvError
from xiaoyarl.train.checkpoint import load_plain, save_atomic
from xiaoyarl.train.evaluator import Evaluator

CHECKPOINT_FORMAT = "xiaoyarl-checkpoint-1"
# Fields that may change when a run is resumed; every other field must match the checkpoint's.
RESUMABLE_CHANGES = {
    "max_steps", "target_return", "eval_every", "eval_episodes", "checkpoint_every", "cwd",
    "device", "threads", "tensorboard", "vector_mode", "restart_workers", "worker_timeout",
}  # fmt: skip


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


def default_run_dir(config: Config) -> Path:
    env = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.env_id)
    return Path("runs") / f"{env}_{config.algo}_{config.seed}"


def agent_class(algo: str, spec: EnvSpec) -> type[AgentBase]:
    """The agent for `algo` that fits the env's action space, or a ConfigError naming the fits."""
    continuous, discrete = ALGORITHMS[algo]
    chosen = discrete if spec.if_discrete else continuous
    if chosen is None:
        kind = "discrete" if spec.if_discrete else "continuous"
        fits = sorted(n for n, pair in ALGORITHMS.items() if pair[int(spec.if_discrete)])
        raise ConfigError(
            f"algorithm '{algo}' cannot act in {spec.name}, whose actions are {kind}. "
            f"Algorithms for {kind} actions: {', '.join(fits)}."
        )
    return chosen


def check_state(state: torch.Tensor, spec: EnvSpec, where: str) -> None:
    """Reject an observation batch with the wrong shape or non-finite values, naming the env."""
    expected = (spec.num_envs, spec.state_dim)
    if tuple(state.shape) != expected:
        raise EnvError(
            f"env {spec.name} returned observations of shape {tuple(state.shape)} on {where}, "
            f"expected {expected}; check the env's observation_space against what it returns."
        )
    if not torch.isfinite(state).all():
        raise EnvError(
            f"env {spec.name} returned NaN or infinite observations on {where}; fix the env "
            f"or wrap it so it returns finite values."
        )


class _StopSignals:
    """Turns SIGINT / SIGTERM into a flag the loop checks, so it can stop with a checkpoint.
    A second SIGINT raises KeyboardInterrupt at once."""

    def __init__(self) -> None:
        self.received: str | None = None
        self.previous: dict[int, object] = {}

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def train_agent(
    config: Config, resume: bool = False, log: Callable[[str], None] | None = print
) -> dict:
    """Train `config.algo` on `config.env_id`; return the run's summary (see `summary` keys below).

    Everything that can be rejected (config values, env id, algorithm/env fit, resume state) is
    checked before the run folder is touched. `log=None` silences progress lines.
    """
    say = log or (lambda _msg: None)
    config.validate()
    torch_native = is_torch_native(config.env_id, config.backend)
    device = resolve_device(config.device)
    config = config.resolve(torch_native, device.type)
    if config.threads:
        torch.set_num_threads(config.threads)
    backend = "torch" if torch_native else "gymnasium"
    if config.backend == "envpool":
        backend = "envpool"
    if config.backend == "torch" and not torch_native:
        backend = "torch"  # make_env refuses it with the list of torch-native envs
    run_dir = Path(config.cwd) if config.cwd else default_run_dir(config)
    ckpt_path = run_dir / "checkpoint" / "state.pt"

    checkpoint = None
    if resume:
        checkpoint = load_plain(ckpt_path)
        _check_resumable(checkpoint, config, run_dir)
    elif ckpt_path.exists():
        raise CheckpointError(
            f"run folder {run_dir} already holds a run with a checkpoint. Pass --resume to "
            f"continue it, choose another folder with --cwd, or delete {run_dir}."
        )

    torch.manual_seed(config.seed)
    parallel = config.runner == "parallel"
    # parallel: the workers step the envs; this one gives the spec and checks a first reset
    env = make_env(config.env_id, config.num_envs, device, backend, config.seed, config.vector_mode)
    eval_env = None
    created_dir = False
    try:
        if not parallel:
            eval_env = make_env(config.env_id, config.eval_episodes, device, backend,
                                config.seed + 10_000, config.vector_mode)  # fmt: skip
        spec = env.spec
        agent_spec = spec
        if parallel:  # the learner sees the workers' sub-envs side by side
            agent_spec = dataclasses.replace(spec, num_envs=spec.num_envs * config.num_workers)
        agent = agent_class(config.algo, spec)(agent_spec, config, device)
        target = config.target_return if config.target_return is not None else spec.target_return
        if config.tensorboard:
            if importlib.util.find_spec("tensorboard") is None:
                raise ConfigError(
                    "tensorboard=true needs the tensorboard package: pip install -e .[tensorboard]"
                )
        state, _ = env.reset(seed=config.seed)
        check_state(state, spec, "reset")
        if not parallel:
            agent.last_state = state

        created_dir = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
        config.save(run_dir / "config.yaml")
        title = f"{config.algo} on {config.env_id} ({backend}, seed {config.seed})"
        if parallel:
            from xiaoyarl.train.parallel import ParallelLoop

            env.close()
            loop = ParallelLoop(config, agent, backend, run_dir, target, ckpt_path, title, say)
        else:
            evaluator = Evaluator(eval_env, run_dir, target, eval_seed=config.seed + 10_000,
                                  title=title, tensorboard=config.tensorboard)  # fmt: skip
            loop = _Loop(config, agent, env, evaluator, target, ckpt_path, backend, say)
        if checkpoint is not None:
            loop.load(checkpoint)
            say(f"resumed from step {loop.total_steps}")
        else:
            (run_dir / "stop").unlink(missing_ok=True)
        summary = loop.run()
        summary["run_dir"] = str(run_dir)
        return summary
    except BaseException:
        if created_dir and not ckpt_path.exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # leave no half-written run behind
        raise
    finally:
        env.close()
        if eval_env is not None:
            eval_env.close()


def _check_resumable(checkpoint: dict, config: Config, run_dir: Path) -> None:
    if checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{run_dir}/checkpoint/state.pt is not a xiaoyarl checkpoint.")
    saved = checkpoint["config"]
    now = config.to_dict()
    diffs = [
        f"{k}: checkpoint {saved.get(k)!r}, now {now[k]!r}"
        for k in now
        if k not in RESUMABLE_CHANGES and saved.get(k) != now[k]
    ]
    if diffs:
        raise CheckpointError(
            f"cannot resume {run_dir}: the config differs from the one it was trained with "
            f"({'; '.join(diffs)}). Resume with the same settings, e.g. --config "
            f"{run_dir}/config.yaml, or start a new run with another --cwd."
        )


class _Loop:
    """The state of one training run between checkpoints, and the loop that advances it."""

    def __init__(
        self,
        config: Config,
        agent: AgentBase,
        env: VecEnv,
        evaluator: Evaluator,
        target: float | None,
        ckpt_path: Path,
        backend: str,
        say: Callable[[str], None],
    ) -> None:
        self.config = config
        self.agent = agent
        self.env = env
        self.evaluator = evaluator
        self.target = target
        self.ckpt_path = ckpt_path
        self.stop_path = ckpt_path.parent.parent / "stop"
        self.backend = backend
        self.say = say
        self.total_steps = 0
        self.updates = 0
        self.train_seconds = 0.0  # wall-clock of the whole loop, evaluation included
        self.eval_seconds = 0.0
        self.next_eval = config.eval_every
        self.next_checkpoint = config.checkpoint_every
        self.steps_to_target: int | None = None
        self.seconds_to_target: float | None = None
        self.last_eval: tuple[float, float] | None = None
        self.last_eval_step = -1
        self.logs: dict[str, torch.Tensor] = {}

    # --- checkpoints ---
    def state_dict(self) -> dict:
        rng = {"torch": torch.get_rng_state()}
        if self.agent.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.agent.device)
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.config.to_dict(),
            "agent": self.agent.state_dict(),
            "env": self.env.state_dict(),
            "evaluator": self.evaluator.state_dict(),
            "counters": {
                "total_steps": self.total_steps,
                "updates": self.updates,
                "train_seconds": self.train_seconds,
                "eval_seconds": self.eval_seconds,
                "next_eval": self.next_eval,
                "next_checkpoint": self.next_checkpoint,
                "steps_to_target": self.steps_to_target,
                "seconds_to_target": self.seconds_to_target,
                "last_eval": list(self.last_eval) if self.last_eval else None,
                "last_eval_step": self.last_eval_step,
            },
            "rng": rng,
        }

    def load(self, checkpoint: dict) -> None:
        try:
            self.agent.load_state_dict(checkpoint["agent"])
            self.env.load_state_dict(checkpoint["env"])
            self.evaluator.load_state_dict(checkpoint["evaluator"])
            counters = checkpoint["counters"]
            for name, value in counters.items():
                setattr(self, name, value)
            self.last_eval = tuple(counters["last_eval"]) if counters["last_eval"] else None
            torch.set_rng_state(checkpoint["rng"]["torch"])
            if "cuda" in checkpoint["rng"] and self.agent.device.type == "cuda":
                torch.cuda.set_rng_state(checkpoint["rng"]["cuda"], self.agent.device)
        except (KeyError, RuntimeError, ValueError, TypeError) as e:
            raise CheckpointError(
                f"checkpoint {self.ckpt_path} does not fit this run ({type(e).__name__}: "
                f"{str(e)[:160]}). Resume with the config it was written with, or start anew."
            ) from None
        # Steps beyond the checkpoint were lost with the crash; so are their recorder rows.
        self.evaluator.truncate_after(self.total_steps)
        if self.agent.last_state is None:
            self.agent.last_state, _ = self.env.reset(seed=self.config.seed)
        # A restored schedule may lie behind a smaller eval_every / checkpoint_every given now.
        self.next_eval = min(self.next_eval, self.total_steps + self.config.eval_every)
        self.next_checkpoint = min(
            self.next_checkpoint, self.total_steps + self.config.checkpoint_every
        )

    def save(self) -> None:
        save_atomic(self.state_dict(), self.ckpt_path)

    # --- the loop ---
    def run(self) -> dict:
        cfg = self.config
        steps_per_rollout = cfg.horizon_len * self.env.spec.num_envs
        stop_reason = "max_steps"
        start = time.perf_counter() - self.train_seconds
        with _StopSignals() as signals:
            while self.total_steps < cfg.max_steps:
                rollout = self.agent.explore_env(self.env, cfg.horizon_len)
                self.total_steps += steps_per_rollout
                self.logs = self.agent.update_net(rollout)
                self.updates += 1

                if self.total_steps >= self.next_eval:
                    self.next_eval += cfg.eval_every * max(
                        1, math.ceil((self.total_steps - self.next_eval + 1) / cfg.eval_every)
                    )
                    if self._evaluate(start):
                        stop_reason = "target"
                        break
                if self.total_steps >= self.next_checkpoint:
                    self.next_checkpoint = self.total_steps + cfg.checkpoint_every
                    self.train_seconds = time.perf_counter() - start
                    self.save()
                if signals.received:
                    stop_reason = signals.received
                    break
                if self.stop_path.exists():
                    self.stop_path.unlink(missing_ok=True)
                    stop_reason = "stop_file"
                    break
            if self.last_eval_step != self.total_steps and stop_reason == "max_steps":
                self._evaluate(start)
            self.train_seconds = time.perf_counter() - start
            self.save()
            self.evaluator.close()
        if stop_reason not in ("target", "max_steps"):
            self.say(f"stopped by {stop_reason} at step {self.total_steps}; checkpoint written")
        return self._summary(stop_reason)

    def _evaluate(self, start: float) -> bool:
        """Evaluate and log a progress line; True when the evaluation reaches the target."""
        t0 = time.perf_counter()
        logs = {k: v.item() for k, v in self.logs.items()}
        mean, std = self.evaluator.evaluate(
            self.agent.act, self.agent.policy_state, self.total_steps, t0 - start, logs
        )
        self.eval_seconds += time.perf_counter() - t0
        self.last_eval = (mean, std)
        self.last_eval_step = self.total_steps
        elapsed = time.perf_counter() - start
        sps = self.total_steps / max(elapsed - self.eval_seconds, 1e-9)
        self.say(
            f"step {self.total_steps:>11,} | {sps:>9,.0f} sps | eval {mean:9.2f} ± {std:7.2f} | "
            f"best {self.evaluator.best_return:9.2f} | {elapsed:7.1f} s"
        )
        solved = self.target is not None and mean >= self.target
        if solved and self.steps_to_target is None:
            self.steps_to_target = self.total_steps
            self.seconds_to_target = elapsed
            self.say(
                f"target {self.target:g} reached at step {self.total_steps:,} in {elapsed:.1f} s"
            )
        return solved

    def _summary(self, stop_reason: str) -> dict:
        mean, std = self.last_eval if self.last_eval else (float("nan"), float("nan"))
        return {
            "algo": self.config.algo,
            "env": self.config.env_id,
            "backend": self.backend,
            "seed": self.config.seed,
            "solved": self.steps_to_target is not None,
            "steps_to_target": self.steps_to_target,
            "seconds_to_target": self.seconds_to_target,
            "total_steps": self.total_steps,
            "train_seconds": self.train_seconds,
            "eval_seconds": self.eval_seconds,
            "final_eval_mean": mean,
            "final_eval_std": std,
            "best_eval_mean": self.evaluator.best_return,
            "steps_per_second": self.total_steps
            / max(self.train_seconds - self.eval_seconds, 1e-9),
            "target_return": self.target,
            "stop_reason": stop_reason,
            "updates": self.updates,
        }
