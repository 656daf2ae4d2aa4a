"""The training loop every runner shares: collect -> update -> evaluate -> checkpoint.

`TrainLoop` holds the state of one run between checkpoints (agent, env, counters, evaluator)
and advances it until the step budget, a confirmed target (unless `stop_at_target` is off), a
stop signal, a `stop` file or a callback ends it. A runner changes where rollouts come from and
where evaluations run: the single-process runner (`run.py`) uses this class as it is; the
parallel runner (`parallel.py`) gathers rollouts from worker processes and evaluates in another
process. Nothing here imports a runner.

Failures: when anything raises inside the loop, `TrainLoop.failure_report` says what is kept.
A checkpoint is written if the state is consistent: between iterations, or while collecting a
rollout (the agent's networks, optimizers and buffer are as after the last update; the
half-collected rollout is dropped and the envs start new episodes on resume). A failure in the
middle of an update keeps the last checkpoint instead.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch

from xiaoyarl.agents import AgentBase
from xiaoyarl.config import Config
from xiaoyarl.config_io import preset_differences
from xiaoyarl.envs.base import VecEnv
from xiaoyarl.train.checkpoint import CHECKPOINT_FORMAT, policy_state, save_atomic
from xiaoyarl.train.divergence import ADVICE, DivergenceGuard
from xiaoyarl.train.evaluator import EvalResult, EvaluationStopped, Evaluator
from xiaoyarl.train.loggers import EpisodeStats, Loggers
from xiaoyarl.train.progress import (
    Console,
    TrainingSpeed,
    process_seconds,
    progress_text,
    warn,
)
from xiaoyarl.train.schedules import Schedules

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Steps


# what `signal.signal` takes and returns
SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class StopSignals:
    """Turns SIGINT / SIGTERM into a flag the loop checks, so it can stop with a checkpoint;
    says at once that it will (an evaluation gives up its games for it). A second SIGINT
    raises KeyboardInterrupt at once."""

    def __init__(self) -> None:
        self.received: str | None = None
        self.previous: dict[int, SignalHandler] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        first = self.received is None
        self.received = signal.Signals(signum).name
        if first:  # os.write: print() may be in the middle of a line of its own
            os.write(2, f"\nxiaoyarl: {self.received} received: stopping after this step with a "
                        f"checkpoint (Ctrl-C again to stop at once)\n".encode())  # fmt: skip

    def stopping(self) -> bool:
        """Whether a signal asked the run to stop."""
        return self.received is not None

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class Callback:
    """Hooks into `train_agent`. Each receives the running `TrainLoop` (read `loop.total_steps`,
    `loop.updates`, `loop.agent`, `loop.config`, `loop.last_eval`, `loop.run_dir`); a hook that
    returns False stops training cleanly, with a checkpoint (stop reason "callback")."""

    def on_rollout(self, loop: TrainLoop, rollout: Steps) -> bool | None:
        """After each rollout is collected, before the update on it."""

    def on_update(self, loop: TrainLoop, logs: dict[str, torch.Tensor]) -> bool | None:
        """After each update (`logs`: the update's named scalars, as tensors)."""

    def on_evaluation(self, loop: TrainLoop, result: EvalResult) -> bool | None:
        """After each evaluation."""


class TrainLoop:
    """The state of one training run between checkpoints, and the loop that advances it."""

    def __init__(
        self,
        config: Config,
        agent: AgentBase,
        env: VecEnv,
        evaluator: Evaluator | None,
        target: float | None,
        run_dir: Path,
        backend: str,
        console: Console,
        loggers: Loggers,
        callbacks: Sequence[Callback] = (),
    ) -> None:
        self.config = config
        self.agent = agent
        self.env = env
        self.evaluator = evaluator
        self.target = target
        self.run_dir = run_dir
        self.ckpt_path = run_dir / "checkpoint" / "state.pt"
        self.stop_path = run_dir / "stop"
        self.backend = backend
        self.console = console
        self.loggers = loggers
        self.callbacks = list(callbacks)
        self.episodes = EpisodeStats(env.spec.num_envs, agent.device)
        self.total_steps = 0
        self.updates = 0
        self.train_seconds = 0.0  # wall-clock of the whole loop, evaluation included
        self.eval_seconds = 0.0
        assert config.eval_every is not None, "resolve_config sets eval_every"
        self.next_eval = config.eval_every
        self.next_checkpoint = config.checkpoint_every
        self.steps_to_target: int | None = None
        self.seconds_to_target: float | None = None
        self.process_seconds_to_target: float | None = None
        self.last_eval: EvalResult | None = None
        self.best_return = -math.inf
        self.logs: dict[str, torch.Tensor] = {}
        self.signals = StopSignals()  # entered by `run`: until then, no signal was received
        self.guard: DivergenceGuard | None = DivergenceGuard(config.gamma, env.spec.max_step,
                                                             agent.device)  # fmt: skip
        self.saved_step = -1  # the step of the newest checkpoint on disk
        self.phase = "idle"  # idle | collect | update: where a failure happened
        self.explored_before = 0  # agent.explored before the rollout being collected
        self.start = 0.0  # perf_counter at the loop's start, less the seconds of earlier runs
        self.startup_seconds = 0.0  # from the process's start to the loop's
        self.recent_return: float | None = None
        self.speed = TrainingSpeed()  # env steps per second, evaluations and checkpoints left out
        self.flushed_at = time.perf_counter()  # when training episodes were last written
        self._results: list[EvalResult] = []  # evaluations not yet reported
        self.schedules = Schedules(config, agent)  # learning rate, clip range, entropy bonus

    # --- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The whole training state: agent, env, counters, RNG states, evaluator and config."""
        rng = {"torch": torch.get_rng_state()}
        if self.agent.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.agent.device)
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.config.to_dict(),
            "agent": self.agent.state_dict(),
            "env": self.env.state_dict(),
            "evaluator": self.evaluator_state(),
            "episodes": self.episodes.state_dict(),
            "counters": {
                "total_steps": self.total_steps,
                "updates": self.updates,
                "train_seconds": self.train_seconds,
                "eval_seconds": self.eval_seconds,
                "next_eval": self.next_eval,
                "next_checkpoint": self.next_checkpoint,
                "steps_to_target": self.steps_to_target,
                "seconds_to_target": self.seconds_to_target,
                "process_seconds_to_target": self.process_seconds_to_target,
                "last_eval": list(self.last_eval) if self.last_eval else None,
                "best_return": self.best_return,
            },
            "rng": rng,
        }

    def load(self, checkpoint: dict) -> None:
        """Restore a checkpoint's state (a CheckpointError names what does not fit)."""
        from xiaoyarl.errors import CheckpointError

        try:
            self.agent.load_state_dict(checkpoint["agent"])
            if checkpoint["env"]:
                self.env.load_state_dict(checkpoint["env"])
            else:  # the env could not save its state (gymnasium), or it was lost in a failure
                self.agent.last_state = None
            self.load_evaluator_state(checkpoint["evaluator"])
            if checkpoint.get("episodes") is not None:
                self.episodes.load_state_dict(checkpoint["episodes"])
            counters = dict(checkpoint["counters"])
            last_eval = counters.pop("last_eval")
            for name, value in counters.items():
                setattr(self, name, value)
            if last_eval is not None:
                last_eval = EvalResult(*last_eval) if len(last_eval) == 6 else None
            self.last_eval = last_eval
            torch.set_rng_state(checkpoint["rng"]["torch"])
            if "cuda" in checkpoint["rng"] and self.agent.device.type == "cuda":
                torch.cuda.set_rng_state(checkpoint["rng"]["cuda"], self.agent.device)
        except (KeyError, RuntimeError, ValueError, TypeError) as e:
            raise CheckpointError(
                f"checkpoint {self.ckpt_path} does not fit this run ({type(e).__name__}: "
                f"{str(e)[:160]}). Resume with the config it was written with, or start anew."
            ) from None
        self.saved_step = self.total_steps
        # Steps beyond the checkpoint were lost with the crash; so are their rows.
        self.truncate_records(self.total_steps)
        if self.agent.last_state is None:  # the envs start new episodes
            state, info = self.env.reset(seed=self.config.seed + self.total_steps)
            self.agent.last_state = self.agent.observe(state, info)
            self.episodes.reset()
        # A restored schedule may lie behind a smaller eval_every / checkpoint_every given now.
        assert self.config.eval_every is not None, "resolve_config sets eval_every"
        self.next_eval = min(self.next_eval, self.total_steps + self.config.eval_every)
        self.next_checkpoint = min(
            self.next_checkpoint, self.total_steps + self.config.checkpoint_every
        )

    def resume_notes(self) -> tuple[str | None, str | None]:
        """What a resumed run should be told before training on: (a warning that the budget is
        already spent, so nothing will be trained; a note that the target was already reached,
        so the run stops at the next evaluation that reaches it), each None when it does not
        apply. Both say how to train on."""
        cfg = self.config
        if self.total_steps >= cfg.max_steps:
            return (
                f"nothing was trained: the budget of {cfg.max_steps:,} env steps (max_steps) is "
                f"already spent (the run is at step {self.total_steps:,}). To train on, resume "
                f"with a larger budget (max_steps), e.g. --max-steps {2 * max(cfg.max_steps, 1)}.",
                None,
            )
        last = self.last_eval
        if cfg.stop_at_target and last is not None and last.reached(self.target):
            return None, (
                f"the target {self.target:g} was already reached at step {last.step:,}: "
                f"training stops at the next evaluation that reaches "
                f"it again; --target-return none trains on to the budget of "
                f"{cfg.max_steps:,} env steps."
            )
        return None, None

    def save(self, state: dict | None = None) -> None:
        """Write a checkpoint (this state, or `state`) atomically."""
        save_atomic(state if state is not None else self.state_dict(), self.ckpt_path)
        self.saved_step = self.total_steps

    # --- what a runner may change --------------------------------------------------------------
    def start_workers(self) -> None:
        """Start whatever runs beside the loop (the parallel runner's processes)."""

    def stop_workers(self) -> None:
        """Stop it again; called however the loop ends."""

    def collect(self) -> Steps:
        """One rollout (time-major) of `horizon_len` steps of every sub-env."""
        assert self.config.horizon_len is not None, "resolve_config sets horizon_len"
        return self.agent.explore_env(self.env, self.config.horizon_len)

    def count_steps(self, rollout: Steps) -> int:
        """The env steps a rollout adds to the run's total (several learners: all ranks')."""
        return rollout.rewards.numel()

    def agree_on_stop(self, stop_reason: str) -> str:
        """The stop reason every process of the run acts on (several learners must agree)."""
        return stop_reason

    def after_update(self) -> None:
        """Right after each update (the parallel runner publishes the new weights)."""

    def request_evaluation(self, final: bool = False) -> None:
        """Evaluate the current policy (here, now); results come back from `evaluations`."""
        t0 = time.perf_counter()
        logs = {k: v.item() for k, v in self.logs.items()}
        try:
            result = self.own_evaluator().evaluate(
                self.agent.evaluation_policy(), functools.partial(policy_state, self.agent),
                self.total_steps, t0 - self.start, logs, stop=self.signals.stopping,
            )  # fmt: skip
            self._results = [result]
        except EvaluationStopped:  # a signal: the run stops without this evaluation
            self._results = []
        self.eval_seconds += time.perf_counter() - t0

    def evaluations(self) -> list[EvalResult]:
        """The evaluations finished since the last call, oldest first."""
        results, self._results = self._results, []
        return results

    def own_evaluator(self) -> Evaluator:
        """The evaluator of this process (runners that evaluate elsewhere, or on one rank
        only, override every method that uses it)."""
        assert self.evaluator is not None, "this loop evaluates in its own process"
        return self.evaluator

    def evaluator_state(self) -> dict | None:
        """The evaluator's state for the checkpoint."""
        return self.own_evaluator().state_dict()

    def load_evaluator_state(self, state: dict | None) -> None:
        """Restore the evaluator's state; None starts its evaluations anew."""
        if state is not None:  # None: a run that starts its evaluations anew (a fusion)
            evaluator = self.own_evaluator()
            evaluator.load_state_dict(state)
            self.best_return = evaluator.best_return

    def truncate_records(self, step: int) -> None:
        """Drop the recorded rows after `step` (a resume continues from the checkpoint's step)."""
        self.own_evaluator().truncate_after(step)
        self.loggers.truncate_after(step)

    def close_evaluator(self) -> None:
        """Close the evaluator: last plot, envs closed."""
        self.own_evaluator().close()

    # --- the loop ------------------------------------------------------------------------------
    def run(self) -> dict:
        """Train until the budget, the target, a stop request or a callback ends it; the summary."""
        cfg = self.config
        assert cfg.eval_every is not None, "resolve_config sets eval_every"
        stop_reason = "max_steps"
        self.start = time.perf_counter() - self.train_seconds
        self.startup_seconds = process_seconds()
        self.speed.restart(self.total_steps)
        self.flushed_at = time.perf_counter()
        with StopSignals() as signals:
            self.signals = signals
            try:
                self.start_workers()
                while self.total_steps < cfg.max_steps:
                    self.phase = "collect"  # until the update starts: dropped on a failure
                    self.explored_before = self.agent.explored
                    rollout = self.collect()
                    steps = self.count_steps(rollout)
                    if self._call("on_rollout", rollout):
                        stop_reason = "callback"
                    self.phase = "update"
                    self.schedules.apply(self.total_steps + steps)
                    self.logs = self.agent.update_net(rollout)
                    stop_reason = self._check_divergence(rollout.rewards) or stop_reason
                    self.total_steps += steps
                    self.updates += 1
                    self.phase = "idle"
                    self.after_update()
                    self.episodes.add(rollout.rewards, rollout.terminals | rollout.truncates)
                    if self._call("on_update", self.logs):
                        stop_reason = "callback"
                    if self.total_steps >= self.next_eval:
                        self.next_eval = eval_due(self.total_steps, self.next_eval,
                                                  cfg.eval_every)  # fmt: skip
                        with self.speed.paused():
                            self.request_evaluation()
                    with self.speed.paused():  # the evaluations' lines, logs and callbacks
                        stop_reason = self._take_evaluations() or stop_reason
                    self._progress()
                    if self.total_steps >= self.next_checkpoint:
                        self.next_checkpoint = self.total_steps + cfg.checkpoint_every
                        self.train_seconds = time.perf_counter() - self.start
                        with self.speed.paused():
                            self.save()
                    if signals.received:
                        stop_reason = signals.received
                    elif self.stop_path.exists():
                        self.stop_path.unlink(missing_ok=True)
                        stop_reason = "stop_file"
                    stop_reason = self.agree_on_stop(stop_reason)
                    if stop_reason != "max_steps":
                        break
                if stop_reason == "max_steps" and self._last_eval_step() != self.total_steps:
                    self.request_evaluation(final=True)
                    self._take_evaluations()
                self._flush_episodes()
                if self.console.live:
                    self._progress(force=True)  # the bar's last state stays on screen
                self.train_seconds = time.perf_counter() - self.start
                if stop_reason != "diverged":  # keep the last checkpoint from before it did
                    self.save()
                self.close_evaluator()
            finally:
                self.console.close()
                self.stop_workers()
        if stop_reason == "diverged":
            kept = f"the checkpoint of step {self.saved_step:,}, " if self.saved_step > 0 else ""
            self.console.line(f"stopped: diverged at step {self.total_steps:,}; kept {kept}the "
                              f"best policy (actor.pt) and the run folder")  # fmt: skip
        elif stop_reason not in ("target", "max_steps"):
            stopped = f"stopped by {stop_reason} at step {self.total_steps:,}. {self.kept_line()}"
            if self.console.enabled:
                self.console.line(stopped)
            elif stop_reason in ("SIGINT", "SIGTERM"):  # quiet: still the answer to the signal
                print(f"xiaoyarl: {stopped}", file=sys.stderr)
        return self.summary(stop_reason)

    def _check_divergence(self, rewards: torch.Tensor) -> str | None:
        """After an update: "diverged" when the guard finds its logs diverged and the config
        says stop; it warns once either way (`train/divergence.py`)."""
        if self.guard is None:
            return None
        found = self.guard.observe(self.logs, rewards)
        if found is None:
            return None
        self.guard = None  # one warning per run
        stop = self.config.on_divergence == "stop"
        then = ("Stopping (on_divergence: stop)" if stop else
                "Training goes on (on_divergence: warn)")  # fmt: skip
        warn(
            f"the run diverged at step {self.total_steps:,}: {found}. {ADVICE}"
            f"{self._preset_advice()} {then}."
        )
        return "diverged" if stop else None

    def _preset_advice(self) -> str:
        """A sentence naming the preset of this run's algorithm and task and the settings the
        run holds other values in, when there is one and they differ, else ""."""
        found = preset_differences(self.config)
        if found is None or not found[1]:
            return ""
        path, fields = found
        return (
            f" The task's preset for {self.config.algo}, {path}, learnt it in BENCHMARKS.md's "
            f"runs and sets other values for: {', '.join(fields)} (`xiaoyarl train` starts "
            f"from it unless given --no-preset or --config)."
        )

    def _call(self, hook: str, arg: object) -> bool:
        """Run `hook` of every callback; True when one asks to stop."""
        stop = False
        for callback in self.callbacks:
            if getattr(callback, hook)(self, arg) is False:
                stop = True
        return stop

    def _last_eval_step(self) -> int:
        return self.last_eval.step if self.last_eval is not None else -1

    def _take_evaluations(self) -> str | None:
        """Report the evaluations that came back; the stop reason they give, if any."""
        stop = None
        for result in self.evaluations():
            stop = self._apply_evaluation(result) or stop
        return stop

    def _apply_evaluation(self, result: EvalResult) -> str | None:
        if result.step < self._last_eval_step():
            return None
        self.last_eval = result
        self.best_return = max(self.best_return, result.mean)
        elapsed = time.perf_counter() - self.start
        sps = self.total_steps / max(elapsed - self.eval_seconds, 1e-9)
        line = (f"step {result.step:>11,} | {sps:>9,.0f} sps | eval {result.mean:9.2f} ± "
                f"{result.std:7.2f} | best {self.best_return:9.2f} | {elapsed:7.1f} s")  # fmt: skip
        if result.confirmed is not None:
            line += (f" | confirm {result.confirm_mean:.2f} ± {result.confirm_std:.2f} "
                     f"({self.config.confirm_episodes} episodes)")  # fmt: skip
        self.console.line(line)
        self._flush_episodes()
        scalars = {"eval/return_mean": result.mean, "eval/return_std": result.std,
                   **{f"loss/{k}": v.item() for k, v in self.logs.items()}}  # fmt: skip
        if result.confirmed is not None:
            assert result.confirm_mean is not None, "a confirmation gives its mean"
            scalars["eval/confirm_mean"] = result.confirm_mean
        self.loggers.scalars(result.step, scalars)
        stop = None
        if result.reached(self.target):
            if self.steps_to_target is None:
                self.steps_to_target = result.step
                self.seconds_to_target = elapsed
                self.process_seconds_to_target = self.startup_seconds + elapsed
                self.console.line(f"target {self.target:g} reached at step {result.step:,} in "
                                  f"{elapsed:.1f} s")  # fmt: skip
            if self.config.stop_at_target:
                stop = "target"
        if self._call("on_evaluation", result):
            stop = stop or "callback"
        return stop

    def _flush_episodes(self) -> None:
        stats = self.episodes.flush()
        if stats is not None:
            self.recent_return = stats["return_mean"]
            self.loggers.episodes(self.total_steps, time.perf_counter() - self.start, stats)

    def _progress(self, force: bool = False) -> None:
        """Refresh the progress bar (and, with it, a row of training-episode statistics)."""
        sps = self.speed.update(self.total_steps)
        now = time.perf_counter()
        if now - self.flushed_at >= 1.0 or force:
            self.flushed_at = now
            self._flush_episodes()
        if self.console.status_due(force):
            eval_mean = self.last_eval.mean if self.last_eval is not None else None
            self.console.status(progress_text(self.total_steps, self.config.max_steps, sps,
                                              eval_mean, self.recent_return))  # fmt: skip

    # --- failures ------------------------------------------------------------------------------
    def save_after_failure(self, error: BaseException) -> str:
        """After `error` ended `run`: write what can be written safely; say what is kept."""
        checkpoint = "no checkpoint"
        try:
            if self.phase in ("idle", "collect") and self.total_steps > max(self.saved_step, 0):
                env_state = None
                if self.phase == "collect":  # drop the half-collected rollout
                    self.agent.explored = self.explored_before
                    self.agent.last_state = None
                else:
                    env_state = self.env.state_dict()
                self.train_seconds = time.perf_counter() - self.start
                state = self.state_dict()
                state["env"] = env_state
                if env_state is None:
                    state["episodes"] = None
                self.save(state)
            if self.saved_step > 0:
                checkpoint = f"checkpoint/ (step {self.saved_step:,})"
        except Exception as e:  # the disk may be the problem: say so, keep the first error
            checkpoint = f"no new checkpoint ({type(e).__name__}: {e})"
        try:
            self._flush_episodes()
            self.close_evaluator()
        except Exception:
            pass
        return (f"training stopped by {type(error).__name__} at step {self.total_steps:,}. "
                f"{self.kept_line(checkpoint)}")  # fmt: skip

    def kept_line(self, checkpoint: str | None = None) -> str:
        """ "Kept in RUN: ...; continue with --resume RUN.": what the run folder holds now
        (`checkpoint`: how to name the checkpoint, by default its step)."""
        kept = []
        for name in ("config.yaml", "recorder.csv", "actor.pt", "episodes.csv",
                     "learning_curve.png"):  # fmt: skip
            if (self.run_dir / name).exists():
                kept.append(name)
        if self.best_return > -math.inf and "actor.pt" in kept:
            kept[kept.index("actor.pt")] = f"actor.pt (best eval {self.best_return:.2f})"
        if checkpoint is None:
            saved = self.saved_step > 0
            checkpoint = f"checkpoint/ (step {self.saved_step:,})" if saved else "no checkpoint"
        kept.append(checkpoint)
        resume = f"; continue with --resume {self.run_dir}" if self.saved_step > 0 else ""
        return f"Kept in {self.run_dir}: {', '.join(kept)}{resume}."

    def summary(self, stop_reason: str) -> dict:
        """The run's summary dict (what `train_agent` returns)."""
        last = self.last_eval
        return {
            "algo": self.config.algo,
            "env": self.config.env_id,
            "backend": self.backend,
            "seed": self.config.seed,
            "device": str(self.agent.device),
            "threads": torch.get_num_threads(),
            "solved": self.steps_to_target is not None,
            "steps_to_target": self.steps_to_target,
            "seconds_to_target": self.seconds_to_target,
            "process_seconds_to_target": self.process_seconds_to_target,
            "startup_seconds": self.startup_seconds,
            "total_steps": self.total_steps,
            "train_seconds": self.train_seconds,
            "eval_seconds": self.eval_seconds,
            "final_eval_mean": last.mean if last else float("nan"),
            "final_eval_std": last.std if last else float("nan"),
            "best_eval_mean": self.best_return,
            "steps_per_second": self.total_steps
            / max(self.train_seconds - self.eval_seconds, 1e-9),
            "target_return": self.target,
            "stop_reason": stop_reason,
            "updates": self.updates,
        }


def eval_due(total_steps: int, next_eval: int, eval_every: int) -> int:
    """The next evaluation step after `total_steps` passed `next_eval`."""
    return next_eval + eval_every * max(1, math.ceil((total_steps - next_eval + 1) / eval_every))
