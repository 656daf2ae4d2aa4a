"""Worker / learner / evaluator processes on one machine (`Config.runner = "parallel"`).

- `num_workers` worker processes each step their own vectorized env (`num_envs` sub-envs,
  seeded apart) with the latest actor weights and write each rollout into one of their
  shared-memory slots. The learner (this process) owns the agent, its optimizers and replay
  buffer, and writes the checkpoints. An evaluator process scores the weights it is sent,
  writes `recorder.csv`, `actor.pt` and the learning curve, and answers with the score.
- Data moves through shared-memory tensors: a worker allocates its slots once and hands them
  over; afterwards only a small message per rollout travels. Weights move as a `state_dict`
  copied into shared tensors under a lock, tagged with a version number. Nothing pickles
  modules.
- Each learner step takes one rollout from every worker, in worker order, and joins them along
  the env axis (the agent sees `num_workers * num_envs` sub-envs). On-policy agents are
  synchronous: a worker starts its next rollout only once the learner has updated on the last
  one and published the new weights, so a run is reproducible for a fixed seed and worker
  count. Off-policy agents are pipelined: a worker has two slots and starts its next rollout as
  soon as one is free, with the newest weights published by then, so the rollouts the learner
  trains on were collected with weights at most one learner step old.
- Faults: a worker whose env raises reports the error and exits; the learner raises a
  `WorkerError` naming the worker and the original message within a second, stops every
  process and keeps the last checkpoint. A worker that dies (e.g. SIGKILL) or delivers no
  rollout within `worker_timeout` seconds (a hung env step) is treated the same way, unless
  `restart_workers` allows restarting it. Children ignore Ctrl-C (the learner stops them)
  and exit on their own when the learner disappears.
- Resuming restores the learner's full state (networks, optimizers, buffer, counters); the
  workers' envs start new episodes, seeded from the step count.
"""

from __future__ import annotations

import dataclasses
import math
import os
import queue
import signal
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.multiprocessing as mp

from xiaoyarl.agents import AgentBase
from xiaoyarl.config import Config
from xiaoyarl.envs import make_env
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.errors import XiaoyaError
from xiaoyarl.train.evaluator import Evaluator
from xiaoyarl.train.run import _Loop, _StopSignals

POLL = 0.1  # seconds between liveness checks while waiting
OFF_POLICY_SLOTS = 2  # rollouts a pipelined worker may have in flight
SPAWN_HINT = (
    " (if it died while starting: child processes are spawned and re-import your main "
    "script, so a script that trains must do so under `if __name__ == '__main__':`)"
)


class WorkerError(XiaoyaError):
    """A worker or the evaluator process failed, died or hung."""


# --- what runs in the child processes --------------------------------------------------------
def _child_setup(name: str, threads: int | None) -> int:
    """Common start of every child: a name `ps` shows, Ctrl-C left to the learner, one torch
    thread. Returns the learner's pid."""
    try:
        Path("/proc/self/comm").write_text(name[:15])  # Linux: the name in ps / top
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads or 1)
    return os.getppid()


def _parent_alive(parent: int) -> bool:
    return os.getppid() == parent


def _worker_main(
    wid: int, seed: int, config_dict: dict, device: str, comm: dict, free: mp.Queue
) -> None:
    """Explore forever: take a free slot, load the newest weights, fill the slot, report it."""
    from xiaoyarl.train.run import agent_class  # the learner imported it already

    parent = _child_setup(f"xyrl-worker-{wid}", config_dict["threads"])
    messages, stop = comm["messages"], comm["stop"]
    try:
        config = Config.from_dict(config_dict)
        torch.manual_seed(seed)
        env = make_env(config.env_id, config.num_envs, device, comm["backend"], seed,
                       config.vector_mode)  # fmt: skip
        agent = agent_class(config.algo, env.spec)(env.spec, config, torch.device(device),
                                                   learner=False)  # fmt: skip
        agent.last_state, _ = env.reset(seed=seed)
        owned = list(range(comm["num_slots"]))  # slot indices this worker may write
        slots: list[tuple[torch.Tensor, ...]] | None = None
        version = -1
        while not stop.is_set() and _parent_alive(parent):
            if not owned:
                try:
                    owned.append(free.get(timeout=POLL))
                except queue.Empty:
                    continue
            with comm["lock"]:
                if comm["version"].value != version:
                    version = comm["version"].value
                    agent.actor.load_state_dict(comm["weights"])
                    agent.explored = comm["explored"].value
            rollout = agent.explore_env(env, config.horizon_len)
            if slots is None:
                slots = [tuple(t.detach().to("cpu").clone().share_memory_() for t in rollout)
                         for _ in range(comm["num_slots"])]  # fmt: skip
                messages.put(("slots", wid, slots, type(rollout)))
            index = owned.pop()
            for dst, src in zip(slots[index], rollout, strict=True):
                dst.copy_(src)
            messages.put(("rollout", wid, index))
        env.close()
    except BaseException as e:  # report, then exit non-zero
        messages.put(("error", wid, f"{type(e).__name__}: {e}", traceback.format_exc()))
        raise SystemExit(1) from None


def _evaluator_main(config_dict: dict, spec: EnvSpec, setup: dict, comm: dict) -> None:
    """Score the newest weights sent; keep recorder, best policy and learning curve."""
    from xiaoyarl.train.run import agent_class

    parent = _child_setup("xyrl-evaluator", config_dict["threads"])
    requests, results, stop = comm["requests"], comm["results"], comm["stop"]
    try:
        config = Config.from_dict(config_dict)
        device = torch.device(setup["device"])
        env = make_env(config.env_id, config.eval_episodes, device, comm["backend"],
                       setup["eval_seed"], config.vector_mode)  # fmt: skip
        agent = agent_class(config.algo, spec)(spec, config, device, learner=False)
        evaluator = Evaluator(env, Path(setup["run_dir"]), setup["target"], setup["eval_seed"],
                              setup["title"], tensorboard=config.tensorboard)  # fmt: skip
        if setup["state"] is not None:
            evaluator.load_state_dict(setup["state"])
        if setup["resume_step"]:
            evaluator.truncate_after(setup["resume_step"])
        while _parent_alive(parent):
            try:
                request = requests.get(timeout=POLL)
            except queue.Empty:
                if stop.is_set():
                    break
                continue
            if request is None:
                break
            while not request["final"]:  # skip to the newest weights
                try:
                    request = requests.get_nowait()
                except queue.Empty:
                    break
                if request is None:
                    request = {"final": True, "skip": True}
            if request.get("skip"):
                break
            agent.actor.load_state_dict(request["weights"])
            mean, std = evaluator.evaluate(agent.act, agent.policy_state, request["step"],
                                           request["elapsed"], request["logs"])  # fmt: skip
            results.put(("eval", request["step"], mean, std, evaluator.state_dict()))
        evaluator.close()
        env.close()
        results.put(("closed",))
    except BaseException as e:
        results.put(("error", "evaluator", f"{type(e).__name__}: {e}", traceback.format_exc()))
        raise SystemExit(1) from None


# --- the learner ------------------------------------------------------------------------------
class _WorkerEnvs:
    """Stands in for the env in the learner: the real envs live in the workers, so there is no
    env state to checkpoint (a resumed run's workers start new episodes)."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec

    def state_dict(self) -> None:
        return None

    def load_state_dict(self, state: object) -> None:
        pass

    def reset(self, seed: int | None = None) -> tuple[None, dict]:
        return None, {}


class ParallelRunner:
    """Starts, feeds and stops the worker and evaluator processes for one training run."""

    def __init__(
        self,
        config: Config,
        agent: AgentBase,
        worker_spec: EnvSpec,
        backend: str,
        evaluator_setup: dict,
        say: Callable[[str], None],
    ) -> None:
        self.config = config
        self.agent = agent
        self.worker_spec = worker_spec
        self.backend = backend
        self.evaluator_setup = evaluator_setup
        self.say = say
        self.ctx = mp.get_context("spawn")
        self.sync = not agent.if_off_policy
        self.num_slots = 1 if self.sync else OFF_POLICY_SLOTS
        # workers run torch-native envs on the learner's device, CPU simulators on the CPU
        self.worker_device = str(agent.device) if backend == "torch" else "cpu"
        ctx = self.ctx
        self.comm = {
            "messages": ctx.Queue(),
            "stop": ctx.Event(),
            "lock": ctx.Lock(),
            "version": ctx.Value("q", 0, lock=False),
            "explored": ctx.Value("q", 0, lock=False),
            "weights": {
                k: v.detach().to("cpu").clone().share_memory_()
                for k, v in agent.actor.state_dict().items()
            },  # fmt: skip
            "num_slots": self.num_slots,
            "backend": backend,
            "requests": ctx.Queue(),
            "results": ctx.Queue(),
        }
        self.workers: list[mp.Process | None] = [None] * config.num_workers
        self.slots: list[list[tuple[torch.Tensor, ...]] | None] = [None] * config.num_workers
        self.pending: list[list[int]] = [[] for _ in range(config.num_workers)]
        self.free: list[mp.Queue | None] = [None] * config.num_workers  # slot indices back
        self.retired: list[mp.Queue] = []  # queues of replaced workers, closed at the end
        self.last_seen = [0.0] * config.num_workers
        self.held: dict[int, int] = {}  # synchronous: worker -> slot read, not yet released
        self.rollout_type: type = tuple  # Rollout or Transitions, told by the first worker
        self.restarts = 0
        self.starts = 0  # worker processes started so far: each gets its own seed
        self.evaluator: mp.Process | None = None
        self.eval_results: list[tuple] = []
        self.closed = False

    # --- processes ---
    def start(self, total_steps: int, evaluator_state: dict | None) -> None:
        self.publish(total_steps)
        setup = {**self.evaluator_setup, "state": evaluator_state, "resume_step": total_steps}
        self.evaluator = self.ctx.Process(
            target=_evaluator_main, name="xiaoyarl-evaluator", daemon=True,
            args=(self.config.to_dict(), self.agent.spec, setup, self.comm),
        )  # fmt: skip
        self.evaluator.start()
        for wid in range(self.config.num_workers):
            self._start_worker(wid, total_steps)

    def _start_worker(self, wid: int, total_steps: int) -> None:
        # Seeds differ per worker, per restart and per resumed step count.
        seed = self.config.seed + 1_000 * (self.starts + 1) + total_steps
        self.starts += 1
        self.slots[wid] = None
        self.pending[wid] = []
        if self.free[wid] is not None:
            self.retired.append(self.free[wid])
        self.free[wid] = self.ctx.Queue()
        self.held.pop(wid, None)
        proc = self.ctx.Process(
            target=_worker_main, name=f"xiaoyarl-worker-{wid}", daemon=True,
            args=(wid, seed, self.config.to_dict(), self.worker_device, self.comm, self.free[wid]),
        )  # fmt: skip
        proc.start()
        self.workers[wid] = proc
        self.last_seen[wid] = time.monotonic()

    def close(self) -> None:
        """Stop every child: ask, wait a little, then terminate and kill what is left."""
        if self.closed:
            return
        self.closed = True
        self.comm["stop"].set()
        self.comm["requests"].put(None)
        children = [p for p in [*self.workers, self.evaluator] if p is not None]
        deadline = time.monotonic() + 5
        for proc in children:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in children:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=2)
            if proc.is_alive():
                proc.kill()
                proc.join()
        queues = [self.comm["messages"], self.comm["requests"], self.comm["results"]]
        for q in [*queues, *self.retired, *(q for q in self.free if q is not None)]:
            q.cancel_join_thread()
            q.close()

    # --- weights ---
    def publish(self, explored: int) -> None:
        """Copy the actor's weights into shared memory under a new version."""
        with self.comm["lock"]:
            for name, value in self.agent.actor.state_dict().items():
                self.comm["weights"][name].copy_(value)
            self.comm["explored"].value = explored
            self.comm["version"].value += 1

    # --- rollouts ---
    def gather(self) -> tuple:
        """One rollout from every worker, joined along the env axis (on the learner's device)."""
        parts: list[tuple[torch.Tensor, ...] | None] = [None] * self.config.num_workers
        while any(p is None for p in parts):
            for wid in range(self.config.num_workers):
                if parts[wid] is None and self.pending[wid]:
                    index = self.pending[wid].pop(0)
                    parts[wid] = tuple(t.clone() for t in self.slots[wid][index])
                    if self.sync:
                        self.held[wid] = index  # freed by `release` once weights are new
                    else:
                        self.free[wid].put(index)  # pipelined: explore on at once
            if any(p is None for p in parts):
                self._receive()
        columns = zip(*parts, strict=True)  # time-major: sub-envs are axis 1
        return self.rollout_type(*(torch.cat(c, dim=1).to(self.agent.device) for c in columns))

    def release(self) -> None:
        """Synchronous agents: let the workers start their next rollout (weights published)."""
        if self.sync:
            for wid, index in self.held.items():
                self.free[wid].put(index)
            self.held = {}

    def _receive(self) -> None:
        """Handle one message from a worker or the evaluator, or check that all are alive."""
        try:
            message = self.comm["messages"].get(timeout=POLL)
        except queue.Empty:
            message = None
        self._drain_results()
        if message is not None:
            kind, wid = message[0], message[1]
            self.last_seen[wid] = time.monotonic()
            if kind == "slots":
                self.slots[wid], self.rollout_type = message[2], message[3]
            elif kind == "rollout":
                self.pending[wid].append(message[2])
            elif kind == "error":
                self._worker_failed(wid, f"raised {message[2]}", message[3])
            return
        self._check_alive()

    def _check_alive(self) -> None:
        now = time.monotonic()
        for wid, proc in enumerate(self.workers):
            if proc is not None and not proc.is_alive():
                self._collect_error_messages()
                if self.workers[wid] is proc:  # no error message explained it
                    self._worker_failed(
                        wid,
                        f"died with exit code {proc.exitcode}"
                        + (SPAWN_HINT if self.slots[wid] is None else ""),
                        "",
                    )
            elif now - self.last_seen[wid] > self.config.worker_timeout and not self.pending[wid]:
                if wid in self.held:
                    continue  # waiting on the learner, not on its env
                proc.kill()
                proc.join()
                self._worker_failed(
                    wid,
                    f"delivered no rollout for {self.config.worker_timeout:g} s (a hung env "
                    f"step?); raise worker_timeout if a rollout really takes that long",
                    "",
                )
        if self.evaluator is not None and not self.evaluator.is_alive():
            self._drain_results()
            raise WorkerError(f"the evaluator process died with exit code "
                              f"{self.evaluator.exitcode}{SPAWN_HINT}")  # fmt: skip

    def _collect_error_messages(self) -> None:
        while True:
            try:
                message = self.comm["messages"].get(timeout=0.2)
            except queue.Empty:
                return
            if message[0] == "error":
                self._worker_failed(message[1], f"raised {message[2]}", message[3])
            elif message[0] == "slots":
                self.slots[message[1]], self.rollout_type = message[2], message[3]
            elif message[0] == "rollout":
                self.pending[message[1]].append(message[2])

    def _worker_failed(self, wid: int, what: str, trace: str) -> None:
        proc = self.workers[wid]
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join()
        self.workers[wid] = None
        if self.restarts < self.config.restart_workers:
            self.restarts += 1
            self.say(f"worker {wid} {what}; restarting it ({self.restarts} of "
                     f"{self.config.restart_workers} restarts allowed)")  # fmt: skip
            self._start_worker(wid, int(self.comm["explored"].value))
            return
        detail = f"\n{trace.strip().splitlines()[-1]}" if trace else ""
        allowed = (f" after {self.restarts} restart(s)" if self.config.restart_workers else
                   "; --restart-workers K lets the run restart crashed workers")  # fmt: skip
        raise WorkerError(
            f"worker {wid} {what}{allowed}. Training stopped; the last checkpoint is kept "
            f"(resume with --resume).{detail if 'raised' not in what else ''}"
        )

    # --- evaluation ---
    def request_eval(self, step: int, elapsed: float, logs: dict, final: bool = False) -> None:
        weights = {
            k: v.detach().to("cpu").clone() for k, v in self.agent.actor.state_dict().items()
        }
        self.comm["requests"].put({"weights": weights, "step": step, "elapsed": elapsed,
                                   "logs": logs, "final": final})  # fmt: skip

    def _drain_results(self) -> None:
        while True:
            try:
                result = self.comm["results"].get_nowait()
            except queue.Empty:
                return
            if result[0] == "error":
                raise WorkerError(f"the evaluator process raised {result[2]}")
            self.eval_results.append(result)

    def take_eval_results(self) -> list[tuple]:
        self._drain_results()
        results, self.eval_results = self.eval_results, []
        return [r for r in results if r[0] == "eval"]

    def wait_eval(self, step: int) -> list[tuple]:
        """Block until the evaluation of `step` is back; return it and any that came before."""
        got: list[tuple] = []
        while not any(result[1] == step for result in got):
            time.sleep(POLL / 2)
            got += self.take_eval_results()
            if not any(result[1] == step for result in got) and not self.evaluator.is_alive():
                got += self.take_eval_results()
                if not any(result[1] == step for result in got):
                    raise WorkerError("the evaluator process died during the final evaluation")
        return got


def worker_spec(spec: EnvSpec, num_workers: int) -> EnvSpec:
    """The spec the learner's agent sees: the workers' sub-envs side by side."""
    return dataclasses.replace(spec, num_envs=spec.num_envs * num_workers)


def eval_due(total_steps: int, next_eval: int, eval_every: int) -> int:
    """The next evaluation step after `total_steps` passed `next_eval`."""
    return next_eval + eval_every * max(1, math.ceil((total_steps - next_eval + 1) / eval_every))


class _RemoteEvaluator:
    """The learner's view of the evaluator process: the state its last answer carried."""

    def __init__(self) -> None:
        self.best_return = -math.inf
        self.state: dict | None = None

    def state_dict(self) -> dict | None:
        return self.state

    def load_state_dict(self, state: dict | None) -> None:
        self.state = state
        if state is not None:
            self.best_return = state["best_return"]

    def truncate_after(self, step: int) -> None:
        pass  # the evaluator process does it when it starts

    def close(self) -> None:
        pass


class ParallelLoop(_Loop):
    """The learner's loop: gather a round of rollouts, update, publish weights, ask for
    evaluations and apply their answers, checkpoint. Shares checkpoints and the summary with the
    single-process `_Loop`."""

    def __init__(
        self,
        config: Config,
        agent: AgentBase,
        backend: str,
        run_dir: Path,
        target: float | None,
        ckpt_path: Path,
        title: str,
        say: Callable[[str], None],
    ) -> None:
        super().__init__(config, agent, _WorkerEnvs(agent.spec), _RemoteEvaluator(), target,
                         ckpt_path, backend, say)  # fmt: skip
        one_worker = dataclasses.replace(agent.spec, num_envs=config.num_envs)
        setup = {"device": str(agent.device) if backend == "torch" else "cpu",
                 "eval_seed": config.seed + 10_000, "run_dir": str(run_dir),
                 "target": target, "title": title}  # fmt: skip
        self.runner = ParallelRunner(config, agent, one_worker, backend, setup, say)
        # one-time costs: until the first round of rollouts is in and learned from
        self.startup_seconds: float | None = None
        self.startup_steps = 0  # the env steps of that first round

    def run(self) -> dict:
        cfg, runner = self.config, self.runner
        stop_reason = "max_steps"
        start = time.perf_counter() - self.train_seconds
        with _StopSignals() as signals:
            try:
                runner.start(self.total_steps, self.evaluator.state_dict())
                while self.total_steps < cfg.max_steps:
                    rollout = runner.gather()
                    steps = rollout.rewards.numel()
                    self.total_steps += steps
                    self.agent.explored += steps
                    self.logs = self.agent.update_net(rollout)
                    self.updates += 1
                    runner.publish(self.agent.explored)
                    runner.release()
                    if self.startup_seconds is None:  # processes up, first round learned from
                        self.startup_seconds = time.perf_counter() - start - self.train_seconds
                        self.startup_steps = steps
                    if self._take_evals(start):
                        stop_reason = "target"
                        break
                    if self.total_steps >= self.next_eval:
                        self.next_eval = eval_due(self.total_steps, self.next_eval,
                                                  cfg.eval_every)  # fmt: skip
                        logs = {k: v.item() for k, v in self.logs.items()}
                        runner.request_eval(self.total_steps, time.perf_counter() - start,
                                            logs)  # fmt: skip
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
                if stop_reason == "max_steps":
                    t0 = time.perf_counter()
                    logs = {k: v.item() for k, v in self.logs.items()}
                    runner.request_eval(self.total_steps, t0 - start, logs, final=True)
                    for result in runner.wait_eval(self.total_steps):
                        self._apply_eval(result, start)
                    self.eval_seconds += time.perf_counter() - t0
                self._take_evals(start)
                self.train_seconds = time.perf_counter() - start
                self.save()
            finally:
                runner.close()
        if stop_reason not in ("target", "max_steps"):
            self.say(f"stopped by {stop_reason} at step {self.total_steps}; checkpoint "
                     f"written")  # fmt: skip
        return self._summary(stop_reason)

    def _summary(self, stop_reason: str) -> dict:
        summary = super()._summary(stop_reason)
        summary["startup_seconds"] = self.startup_seconds
        summary["startup_steps"] = self.startup_steps
        return summary

    def _take_evals(self, start: float) -> bool:
        """Apply the evaluations that came back; True once one reached the target."""
        solved = False
        for result in self.runner.take_eval_results():
            solved = self._apply_eval(result, start) or solved
        return solved

    def _apply_eval(self, result: tuple, start: float) -> bool:
        _, step, mean, std, state = result
        self.evaluator.load_state_dict(state)
        if step < self.last_eval_step:
            return False
        self.last_eval = (mean, std)
        self.last_eval_step = step
        elapsed = time.perf_counter() - start
        sps = self.total_steps / max(elapsed - self.eval_seconds, 1e-9)
        self.say(
            f"step {step:>11,} | {sps:>9,.0f} sps | eval {mean:9.2f} ± {std:7.2f} | "
            f"best {self.evaluator.best_return:9.2f} | {elapsed:7.1f} s"
        )
        solved = self.target is not None and mean >= self.target
        if solved and self.steps_to_target is None:
            self.steps_to_target = step
            self.seconds_to_target = elapsed
            self.say(f"target {self.target:g} reached at step {step:,} in {elapsed:.1f} s")
        return solved
