"""The processes of a population (see `population.py`): slots, member processes, the launcher.

A slot is one process of a torchrun job. It loops: claim a task from the population folder,
run it as a member process, record the result, until the population is done. The member
process is a child (forked from a server that has the library imported, so it starts in
milliseconds) that runs `train_agent` in the member's run folder; if it is killed, the slot
lives on and the scheme replaces or resumes the member. The member dies with its slot
(parent-death signal: SIGTERM, so it writes a checkpoint first).

A slot that receives SIGTERM or SIGINT (torchrun restarting the job for a new node, or
stopping it) stops its member, which checkpoints, frees its claim, and exits: the member
continues in another slot, or when the population is resumed.
"""

from __future__ import annotations

import ctypes
import json
import math
import multiprocessing as mp
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from xiaoyarl.config_io import config_from_dict
from xiaoyarl.population.leaderboard import locked
from xiaoyarl.population.schemes import Population
from xiaoyarl.train.loop import Callback, TrainLoop

HEARTBEAT_SECONDS = 2.0
POLL_SECONDS = 0.5
_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR",
                  "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT")  # fmt: skip


def under_torchrun() -> bool:
    """Whether this process is a slot that torchrun started."""
    return "TORCHELASTIC_RUN_ID" in os.environ


# --- claims ----------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale(claim: dict | None, lease_seconds: float) -> bool:
    """Whether a claim's slot is gone: a dead process on this host, or no recent heartbeat."""
    if claim is None:
        return False
    if claim["host"] == socket.gethostname() and not _alive(claim["pid"]):
        return True
    return time.time() - claim["heartbeat"] > lease_seconds


def _records(state: dict) -> list[dict]:
    return state.get("members") or state.get("pods") or []


def free_stale_claims(state: dict, lease_seconds: float) -> None:
    """Drop the claims whose holder sent no heartbeat for `lease_seconds`."""
    for record in _records(state):
        if stale(record.get("claim"), lease_seconds):
            record["claim"] = None


# --- the member process ----------------------------------------------------------------------
def _die_with_parent() -> None:
    """Ask Linux to send SIGTERM to this process when its parent dies (no orphans)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def member_main(config_dict: dict, resume: bool, seconds: float | None, result_path: str) -> None:
    """Body of a member process: train, then write the run's summary to `result_path`."""
    _die_with_parent()
    for name in _TORCHRUN_VARS:  # a member is one agent, not a rank of a learner job
        os.environ.pop(name, None)
    from xiaoyarl.run import train_agent

    config = config_from_dict(config_dict, source="member")
    assert config.cwd is not None  # the population gives every member its run folder
    log_path = Path(config.cwd) / "log.txt"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", buffering=1) as log:
        callbacks = [] if seconds is None else [StopAfter(seconds)]
        try:
            summary = train_agent(config, resume=resume, log=lambda s: print(s, file=log),
                                  callbacks=callbacks)  # fmt: skip
        except BaseException as e:
            print(f"member failed: {type(e).__name__}: {e}", file=log)
            raise
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in summary.items()}  # fmt: skip
    Path(result_path).write_text(json.dumps(clean))


class StopAfter(Callback):
    """Ends a generation after `seconds` of training, with an evaluation at that step."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.perf_counter() + seconds

    def on_update(self, loop: TrainLoop, logs: dict) -> bool | None:
        if time.perf_counter() < self.deadline:
            return None
        loop.next_eval = loop.total_steps  # the loop evaluates now, then stops
        return False


# --- a slot ----------------------------------------------------------------------------------
class Slot:
    """One slot's loop (see the module's docstring)."""

    def __init__(
        self, population: Population, name: str, log: Callable[[str], None] | None
    ) -> None:
        self.p = population
        self.name = name
        self.log = log or (lambda s: None)
        self.stop_signal: str | None = None
        self.context = mp.get_context("forkserver")
        self.context.set_forkserver_preload(["xiaoyarl.run"])

    def claim(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid(), "slot": self.name,
                "heartbeat": time.time()}  # fmt: skip

    batch = 1  # tasks claimed at once (a vmapped slot trains a batch of members together)

    def run(self) -> None:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            while self.stop_signal is None:
                tasks: list[dict] = []
                with locked(self.p.folder):
                    state = self.p.read_state()
                    free_stale_claims(state, self.p.pop.lease_seconds)
                    if self.p.scheme.finished(state):
                        self.p.write_state(state)
                        return
                    while len(tasks) < self.batch:
                        task = self.p.scheme.next_task(state)
                        if task is None:
                            break
                        self._record(state, task["member"])["claim"] = self.claim()
                        tasks.append(task)
                    self.p.write_state(state)
                if not tasks:
                    time.sleep(POLL_SECONDS)
                    continue
                self.run_tasks(tasks)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def run_tasks(self, tasks: list[dict]) -> None:
        """Train the claimed tasks, record their results and free their claims."""
        self._run_task(tasks[0])

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stop_signal = signal.Signals(signum).name

    def _record(self, state: dict, name: str) -> dict:
        return next(r for r in _records(state) if r["name"] == name)

    def _run_task(self, task: dict) -> None:
        folder = self.p.member_dir(task["member"])
        resume = (folder / "checkpoint" / "state.pt").is_file()
        config = self.p.member_config(task["member"], task["seed"], task["hparams"],
                                      task["max_steps"])  # fmt: skip
        result_path = folder / ".segment.json"
        folder.mkdir(parents=True, exist_ok=True)
        result_path.unlink(missing_ok=True)
        process = self.context.Process(
            target=member_main, name=f"xiaoyarl-{task['member']}",
            args=(config.to_dict(), resume, task["seconds"], str(result_path)),
        )  # fmt: skip
        try:
            process.start()
        except (EOFError, OSError):  # the process group was signalled while the child forked
            if self.stop_signal is None:
                raise
            with locked(self.p.folder):
                state = self.p.read_state()
                self._record(state, task["member"])["claim"] = None
                self.p.write_state(state)
            return
        stopped = False
        while process.is_alive():
            process.join(HEARTBEAT_SECONDS)
            if self.stop_signal is not None and not stopped:
                process.terminate()  # SIGTERM: the member checkpoints and returns
                stopped = True
            self.heartbeat([task["member"]])
        result = None
        if process.exitcode == 0 and result_path.is_file():
            result = json.loads(result_path.read_text())
        with locked(self.p.folder):
            state = self.p.read_state()
            record = self._record(state, task["member"])
            record["claim"] = None
            if result is not None and result["stop_reason"] in ("SIGTERM", "SIGINT"):
                stopped = True
            if not stopped:  # a finished segment, or a failed process (result None)
                self.p.scheme.finish(state, task, result)
            self.p.write_state(state)
        if stopped:
            self.log(f"{self.name}: {task['member']} stopped with a checkpoint")
        elif result is None:
            self.log(f"{self.name}: {task['member']} failed (exit code {process.exitcode})")
        else:
            self.log(f"{self.name}: {task['member']} step {result['total_steps']:,}: eval "
                     f"{result['final_eval_mean']:.2f} | {_short(task['hparams'])}")  # fmt: skip

    def heartbeat(self, members: list[str]) -> None:
        """Renew this slot's claims of `members`."""
        with locked(self.p.folder):
            state = self.p.read_state()
            for member in members:
                record = self._record(state, member)
                if record["claim"] is not None and record["claim"]["pid"] == os.getpid():
                    record["claim"]["heartbeat"] = time.time()
            self.p.write_state(state)


def _short(hparams: dict) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in hparams.items()) or "defaults"  # fmt: skip
