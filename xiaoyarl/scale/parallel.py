"""Worker / learner / evaluator processes on one machine (`Config.runner = "parallel"`).

- `num_workers` worker processes each step their own vectorized env (`num_envs` sub-envs,
  seeded apart) with the latest actor weights and write each rollout into one of their
  shared-memory slots. The learner (this process) owns the agent, its optimizers and replay
  buffer, and writes the checkpoints. An evaluator process scores the weights it is sent,
  writes `recorder.csv`, `actor.pt` and the learning curve, and answers with the score.
- Data moves through shared-memory tensors: a worker allocates its slots once and hands them
  over; afterwards only a small message per rollout travels. Weights move as a `state_dict`
  copied into shared tensors under a sequence lock (a version number the learner makes odd while
  it writes: a reader killed mid-read blocks nobody). Each worker reports through its own pipe,
  so a worker killed mid-message breaks only its own channel. Nothing pickles modules.
- Each learner step takes one rollout from every worker, in worker order, and joins them along
  the env axis (the agent sees `num_workers * num_envs` sub-envs). On-policy agents are
  synchronous: a worker starts its next rollout only once the learner has updated on the last
  one and published the new weights, so a run is reproducible for a fixed seed and worker
  count. Off-policy agents are pipelined: a worker has two slots and starts its next rollout as
  soon as one is free, with the newest weights published by then, so the rollouts the learner
  trains on were collected with weights at most one learner step old.
- Faults: a worker whose env raises reports the error and exits; the learner raises a
  `WorkerError` naming the worker and the original message within a second and stops every
  process; `train_agent` then writes a checkpoint of the learner's state (see `loop.py`). A
  worker that dies (e.g. SIGKILL) or delivers no rollout within `worker_timeout` seconds (a
  hung env step) is treated the same way, unless `restart_workers` allows restarting it.
  Children ignore Ctrl-C (the learner stops them) and exit on their own when the learner
  disappears.
- Resuming restores the learner's full state (networks, optimizers, buffer, counters); the
  workers' envs start new episodes, seeded from the step count.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import queue
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
import torch.multiprocessing as mp

from xiaoyarl.agents import AgentBase, make_agent
from xiaoyarl.config import Config
from xiaoyarl.config_io import config_from_dict
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.envs.build import build_env
from xiaoyarl.errors import XiaoyaError
from xiaoyarl.machine import keep_freed_memory
from xiaoyarl.train.checkpoint import policy_state
from xiaoyarl.train.evaluator import EvalResult, Evaluator, evaluation_seed
from xiaoyarl.train.loggers import Loggers
from xiaoyarl.train.loop import Callback, TrainLoop
from xiaoyarl.train.progress import Console
from xiaoyarl.train.start import run_title

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Steps
    from xiaoyarl.envs.multi.base import MultiAgentEnvSpec

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
    thread, freed memory kept for reuse. Returns the learner's pid."""
    try:
        Path("/proc/self/comm").write_text(name[:15])  # Linux: the name in ps / top
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads or 1)
    keep_freed_memory()
    return os.getppid()


def _parent_alive(parent: int) -> bool:
    return os.getppid() == parent


def _worker_main(
    wid: int, seed: int, config_dict: dict, device: str, comm: dict, free: mp.Queue,
    messages: Connection,
) -> None:  # fmt: skip
    """Explore forever: take a free slot, load the newest weights, fill the slot, report it
    (through `messages`, this worker's own pipe to the learner)."""
    parent = _child_setup(f"xyrl-worker-{wid}", config_dict["threads"])
    stop = comm["stop"]
    try:
        config = config_from_dict(config_dict)
        assert config.num_envs is not None and config.horizon_len is not None, (
            "the learner sends its resolved config"
        )
        torch.manual_seed(seed)
        env = build_env(config, config.num_envs, torch.device(device), comm["backend"], seed)
        agent = make_agent(config.algo, env.spec, config, torch.device(device), learner=False)
        state, info = env.reset(seed=seed)
        agent.last_state = agent.observe(state, info)  # action masks too
        owned = list(range(comm["num_slots"]))  # slot indices this worker may write
        slots: list[tuple[torch.Tensor | None, ...]] | None = None
        version = -1
        while not stop.is_set() and _parent_alive(parent):
            if not owned:
                try:
                    owned.append(free.get(timeout=POLL))
                except queue.Empty:
                    continue
            version = _read_weights(comm, agent, version)
            rollout = agent.explore_env(env, config.horizon_len)
            if slots is None:
                slots = [tuple(None if t is None else t.detach().to("cpu").clone().share_memory_()
                               for t in rollout) for _ in range(comm["num_slots"])]  # fmt: skip
                messages.send(("slots", wid, slots, type(rollout)))
            index = owned.pop()
            for dst, src in zip(slots[index], rollout, strict=True):
                if dst is not None:  # (a field the agent's rollouts leave out is None)
                    assert src is not None, "the slots were made from this agent's rollouts"
                    dst.copy_(src)
            messages.send(("rollout", wid, index))
        env.close()
    except BaseException as e:  # report, then exit non-zero
        try:
            messages.send(("error", wid, f"{type(e).__name__}: {e}", traceback.format_exc()))
        except OSError:  # the learner is gone
            pass
        raise SystemExit(1) from None


def acting_weights(agent: AgentBase) -> dict[str, torch.Tensor]:
    """The weights of the networks exploring runs (`acting_nets`), each keyed `name/key`."""
    return {f"{name}/{key}": value for name, net in agent.acting_nets().items()
            for key, value in net.state_dict().items()}  # fmt: skip


def _read_weights(comm: dict, agent: AgentBase, have: int) -> int:
    """Load the newest published actor weights unless version `have` is the newest; return the
    version loaded. Lock-free (a sequence lock: the learner makes the version odd while it
    writes), so a worker killed mid-read can never block the learner."""
    while True:
        version = comm["version"].value
        if version == have:
            return have
        if version % 2:  # being written
            time.sleep(0.0005)
            continue
        for name, net in agent.acting_nets().items():
            prefix = f"{name}/"
            net.load_state_dict({k.removeprefix(prefix): v for k, v in comm["weights"].items()
                                 if k.startswith(prefix)})  # fmt: skip
        agent.explored = comm["explored"].value
        if comm["version"].value == version:  # not overwritten meanwhile
            return version


def _evaluator_main(config_dict: dict, spec: EnvSpec | MultiAgentEnvSpec, setup: dict,
                    comm: dict) -> None:  # fmt: skip
    """Score the newest weights sent; keep recorder, best policy and learning curve."""
    parent = _child_setup("xyrl-evaluator", config_dict["threads"])
    requests, results, stop = comm["requests"], comm["results"], comm["stop"]
    try:
        config = config_from_dict(config_dict)
        device = torch.device(setup["device"])
        env = build_env(config, config.eval_episodes, device, comm["backend"],
                        setup["eval_seed"], evaluation=True)  # fmt: skip
        agent = make_agent(config.algo, spec, config, device, learner=False)

        def make_confirm_env():
            return build_env(config, config.confirm_episodes, device, comm["backend"],
                             setup["eval_seed"] + 10_000, evaluation=True)  # fmt: skip

        evaluator = Evaluator(
            env,
            Path(setup["run_dir"]),
            setup["target"],
            setup["eval_seed"],
            setup["title"],
            make_confirm_env if config.confirm_episodes and config.stop_at_target else None,
        )
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
            saved_policy = functools.partial(policy_state, agent)
            result = evaluator.evaluate(agent.evaluation_policy(), saved_policy, request["step"],
                                        request["elapsed"], request["logs"])  # fmt: skip
            results.put(("eval", tuple(result), evaluator.state_dict()))
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

    def __init__(self, spec: EnvSpec | MultiAgentEnvSpec) -> None:
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
        worker_spec: EnvSpec | MultiAgentEnvSpec,
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
            "stop": ctx.Event(),
            "version": ctx.Value("q", 0, lock=False),  # odd while the weights are written
            "explored": ctx.Value("q", 0, lock=False),
            "weights": {
                k: v.detach().to("cpu").clone().share_memory_()
                for k, v in acting_weights(agent).items()
            },  # fmt: skip
            "num_slots": self.num_slots,
            "backend": backend,
            "requests": ctx.Queue(),
            "results": ctx.Queue(),
        }
        self.workers: list[BaseProcess | None] = [None] * config.num_workers
        self.slots: list[list[tuple[torch.Tensor | None, ...]] | None] = [None] * config.num_workers
        self.pending: list[list[int]] = [[] for _ in range(config.num_workers)]
        self.free: list[mp.Queue | None] = [None] * config.num_workers  # slot indices back
        # each worker's own pipe to the learner: a worker killed mid-message breaks only its own
        self.inbox: list[Connection | None] = [None] * config.num_workers
        self.retired: list[mp.Queue] = []  # queues of replaced workers, closed at the end
        self.last_seen = [0.0] * config.num_workers
        self.held: dict[int, int] = {}  # synchronous: worker -> slot read, not yet released
        self.rollout_type: type = tuple  # Rollout or Transitions, told by the first worker
        self.restarts = 0
        self.starts = 0  # worker processes started so far: each gets its own seed
        self.evaluator: BaseProcess | None = None
        self.eval_results: list[tuple] = []
        self.closed = False

    # --- processes ---
    def start(self, total_steps: int, evaluator_state: dict | None) -> None:
        self.publish(total_steps)
        setup = {**self.evaluator_setup, "state": evaluator_state, "resume_step": total_steps}
        self.evaluator = self.ctx.Process(
            target=_evaluator_main, name="xiaoyarl-evaluator", daemon=True,
            args=(self.config.to_dict(), self.agent.env_spec, setup, self.comm),
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
        old_free, old_inbox = self.free[wid], self.inbox[wid]
        if old_free is not None:
            self.retired.append(old_free)
        self.free[wid] = self.ctx.Queue()
        self.held.pop(wid, None)
        if old_inbox is not None:
            old_inbox.close()
        self.inbox[wid], outbox = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(
            target=_worker_main, name=f"xiaoyarl-worker-{wid}", daemon=True,
            args=(wid, seed, self.config.to_dict(), self.worker_device, self.comm, self.free[wid],
                  outbox),
        )  # fmt: skip
        proc.start()
        outbox.close()  # the worker's end: when it dies, reading gives EOF
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
        queues = [self.comm["requests"], self.comm["results"]]
        for q in [*queues, *self.retired, *(q for q in self.free if q is not None)]:
            q.cancel_join_thread()
            q.close()
        for inbox in self.inbox:
            if inbox is not None:
                inbox.close()

    # --- weights ---
    def publish(self, explored: int) -> None:
        """Copy the weights of the networks exploring runs (`acting_nets`: the actor, and a
        recurrent replay agent's critics) into shared memory under a new (even) version."""
        version = self.comm["version"]
        version.value += 1  # odd: readers wait (see `_read_weights`)
        for name, value in acting_weights(self.agent).items():
            self.comm["weights"][name].copy_(value)
        self.comm["explored"].value = explored
        version.value += 1

    # --- rollouts ---
    def gather(self) -> Steps:
        """One rollout from every worker, joined along the env axis (on the learner's device)."""
        parts: list[tuple[torch.Tensor | None, ...] | None] = [None] * self.config.num_workers
        while any(p is None for p in parts):
            for wid in range(self.config.num_workers):
                if parts[wid] is None and self.pending[wid]:
                    index = self.pending[wid].pop(0)
                    slots = self.slots[wid]
                    assert slots is not None, "a worker sends its slots before its rollouts"
                    parts[wid] = tuple(None if t is None else t.clone()
                                       for t in slots[index])  # fmt: skip
                    if self.sync:
                        self.held[wid] = index  # freed by `release` once weights are new
                    else:
                        self._free(wid).put(index)  # pipelined: explore on at once
            if any(p is None for p in parts):
                self._receive()
        columns = zip(*parts, strict=True)  # time-major: sub-envs are axis 1
        device = self.agent.device
        return self.rollout_type(*(None if c[0] is None else torch.cat(c, dim=1).to(device)
                                   for c in columns))  # fmt: skip

    def release(self) -> None:
        """Synchronous agents: let the workers start their next rollout (weights published)."""
        if self.sync:
            for wid, index in self.held.items():
                self._free(wid).put(index)
            self.held = {}

    def _free(self, wid: int) -> mp.Queue:
        """Worker `wid`'s queue of slots given back to it (made when it was started)."""
        free = self.free[wid]
        assert free is not None, "a worker has its queue from its start"
        return free

    def _receive(self) -> None:
        """Handle the messages of the workers that sent any within POLL seconds (or check that
        all are alive), and the evaluator's results."""
        got = self._read_messages(POLL)
        self._drain_results()
        for message in got:
            self._handle(message)
        if not got:
            self._check_alive()

    def _read_messages(self, timeout: float) -> list[tuple]:
        """Every message waiting in the workers' pipes (waiting up to `timeout` for one)."""
        open_ = [c for c in self.inbox if c is not None]
        got: list[tuple] = []
        # `wait` returns those of the objects given that are ready: here, connections
        for conn in cast(list[Connection], wait_for(open_, timeout=timeout)):
            try:
                while conn.poll():
                    got.append(conn.recv())
            except (EOFError, OSError):  # the worker is gone: `_check_alive` says how
                wid = self.inbox.index(conn)
                conn.close()
                self.inbox[wid] = None
        return got

    def _handle(self, message: tuple) -> None:
        kind, wid = message[0], message[1]
        self.last_seen[wid] = time.monotonic()
        if kind == "slots":
            self.slots[wid], self.rollout_type = message[2], message[3]
        elif kind == "rollout":
            self.pending[wid].append(message[2])
        elif kind == "error":
            self._worker_failed(wid, f"raised {message[2]}", message[3])

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
                assert proc is not None, "a failed worker is restarted, or the run stops"
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
        """Handle what dead workers said last (an error message explains a death)."""
        while True:
            got = self._read_messages(0.2)
            if not got:
                return
            for message in got:
                self._handle(message)

    def _worker_failed(self, wid: int, what: str, trace: str) -> None:
        proc = self.workers[wid]
        if proc is not None and proc.is_alive():
            proc.join(timeout=2)  # a worker that reported its error exits by itself
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
            f"worker {wid} {what}{allowed}. Training stopped."
            f"{detail if 'raised' not in what else ''}"
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
        """The evaluations that came back: (EvalResult, evaluator state) pairs, oldest first."""
        self._drain_results()
        results, self.eval_results = self.eval_results, []
        return [(EvalResult(*r[1]), r[2]) for r in results if r[0] == "eval"]

    def wait_eval(self, step: int) -> list[tuple]:
        """Block until the evaluation of `step` is back; return it and any that came before."""
        got: list[tuple] = []
        assert self.evaluator is not None, "the evaluator process runs from `start` on"
        while not any(result.step == step for result, _ in got):
            time.sleep(POLL / 2)
            got += self.take_eval_results()
            if not any(result.step == step for result, _ in got) and not self.evaluator.is_alive():
                got += self.take_eval_results()
                if not any(result.step == step for result, _ in got):
                    raise WorkerError("the evaluator process died during the final evaluation")
        return got


def worker_spec(spec: EnvSpec, num_workers: int) -> EnvSpec:
    """The spec the learner's agent sees: the workers' sub-envs side by side."""
    return dataclasses.replace(spec, num_envs=spec.num_envs * num_workers)


class ParallelLoop(TrainLoop):
    """The learner's loop: `TrainLoop` with rollouts gathered from the worker processes, new
    weights published after each update, and evaluations run by the evaluator process (their
    results are applied when they come back)."""

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
        # `env`: the one that gave the spec (closed); the workers' stand-in gives the loop what
        # it asks of an env (spec, state, reset). The evaluator process evaluates.
        assert evaluator is None, "the evaluator process evaluates a parallel run"
        envs = cast(VecEnv, _WorkerEnvs(agent.env_spec))
        super().__init__(config, agent, envs, None, target, run_dir, backend, console, loggers,
                         callbacks)  # fmt: skip
        assert config.num_envs is not None, "resolve_config sets num_envs"
        one_worker = dataclasses.replace(agent.env_spec, num_envs=config.num_envs)
        setup = {"device": str(agent.device) if backend == "torch" else "cpu",
                 "eval_seed": evaluation_seed(config.seed), "run_dir": str(run_dir),
                 "target": target, "title": run_title(config, backend)}  # fmt: skip
        self.runner = ParallelRunner(config, agent, one_worker, backend, setup, console.line)
        self.remote_state: dict | None = None  # the evaluator process's state, as last sent
        self.received: list[EvalResult] = []
        # one-time costs: until the first round of rollouts is in and learned from
        self.first_round_seconds: float | None = None
        self.first_round_steps = 0

    def start_workers(self) -> None:
        self.runner.start(self.total_steps, self.remote_state)

    def stop_workers(self) -> None:
        self.runner.close()

    def collect(self) -> Steps:
        rollout = self.runner.gather()
        self.agent.explored += rollout.rewards.numel()
        return rollout

    def after_update(self) -> None:
        self.runner.publish(self.agent.explored)
        self.runner.release()
        if self.first_round_seconds is None:  # processes up, first round learned from
            self.first_round_seconds = time.perf_counter() - self.start - self.train_seconds
            self.first_round_steps = self.total_steps

    def request_evaluation(self, final: bool = False) -> None:
        logs = {k: v.item() for k, v in self.logs.items()}
        t0 = time.perf_counter()
        self.runner.request_eval(self.total_steps, t0 - self.start, logs, final=final)
        if final:
            for result, state in self.runner.wait_eval(self.total_steps):
                self._receive(result, state)
            self.eval_seconds += time.perf_counter() - t0

    def evaluations(self) -> list[EvalResult]:
        for result, state in self.runner.take_eval_results():
            self._receive(result, state)
        received, self.received = self.received, []
        return received

    def _receive(self, result: EvalResult, state: dict) -> None:
        self.remote_state = state
        self.received.append(result)

    def evaluator_state(self) -> dict | None:
        return self.remote_state

    def load_evaluator_state(self, state: dict | None) -> None:
        self.remote_state = state
        if state is not None:
            self.best_return = state["best_return"]

    def truncate_records(self, step: int) -> None:
        self.loggers.truncate_after(step)  # the evaluator process truncates its recorder

    def close_evaluator(self) -> None:
        pass  # the evaluator process draws the final curve when it is stopped

    def summary(self, stop_reason: str) -> dict:
        summary = super().summary(stop_reason)
        summary["first_round_seconds"] = self.first_round_seconds
        summary["first_round_steps"] = self.first_round_steps
        return summary
