"""One population across several torchrun launchers ("nodes" on this machine) with a c10d
rendezvous on 127.0.0.1: two start it, a third joins later (its slots take members) and is
stopped (its members go back to the others) while the population goes on to the end."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xiaoyarl.population.plots import read_population_csv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launcher(port: int, out: Path, log: Path) -> subprocess.Popen:
    """The several-machine command of docs/guides/populations.md, with this machine as every
    node."""
    args = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2:3",
            "--nproc-per-node", "1", "--max-restarts", "100", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "elastic-test",
            "--rdzv-conf", "last_call_timeout=1", "--monitor-interval", "0.5",
            "-m", "xiaoyarl", "population", "ppo", "CartPole-v1", "--scheme", "tournament",
            "--members", "3", "--max-steps", "120000", "--pod-steps", "20000", "--cwd", str(out),
            "--target-return", "none"]  # fmt: skip
    # torchrun shares its rendezvous store with the workers by default, and then a node that
    # joins later waits forever for the store address of the new round: opt out (slots do
    # not use the store)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    return subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)  # fmt: skip


def _parent(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid")))


def _claims_by_launcher(out: Path, launchers: dict[str, int]) -> dict[str, int]:
    """How many members each launcher's slots hold right now."""
    try:
        state = json.loads((out / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    held = {name: 0 for name in launchers}
    for pod in state.get("pods", []):
        claim = pod.get("claim")
        if claim is None:
            continue
        parent = _parent(claim["pid"])
        for name, pid in launchers.items():
            if parent == pid:
                held[name] += 1
    return held


def _wait(condition, timeout: float, what: str):  # noqa: ANN001, ANN202
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _slots_of(launchers: list[int]) -> list[int]:
    """The live worker processes (slots) of these torchrun launchers."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and _parent(int(pid)) in launchers:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "xiaoyarl" in cmd:
                found.append(int(pid))
    return found


def _processes_of(out: Path) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(out) in cmd:
                found.append(int(pid))
    return found


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_launchers_join_and_leave_one_population(tmp_path, library_frames):
    out = tmp_path / "pop"
    port = _free_port()
    logs = {name: tmp_path / f"{name}.log" for name in "abc"}
    procs = {name: _launcher(port, out, logs[name]) for name in "ab"}
    try:
        pids = {name: p.pid for name, p in procs.items()}
        _wait(lambda: all(_claims_by_launcher(out, pids).get(n) for n in "ab"), 180,
              "both launchers' slots to hold members")  # fmt: skip
        procs["c"] = _launcher(port, out, logs["c"])
        pids["c"] = procs["c"].pid
        _wait(lambda: all(_claims_by_launcher(out, pids).get(n) for n in "abc"), 180,
              "the third launcher's slot to hold a member beside the others'")  # fmt: skip
        os.kill(procs["c"].pid, signal.SIGTERM)  # the third node leaves
        procs["c"].wait(timeout=60)
        left = time.time()
        assert _claims_by_launcher(out, pids).get("c", 0) == 0  # its members were given back
        slots = set(_slots_of([pids["a"], pids["b"]]))
        time.sleep(3)
        assert len(slots) == 2 and set(_slots_of([pids["a"], pids["b"]])) == slots  # not restarted
        # the others finish the population, and their slots exit. torchrun's launchers then
        # wait in its exit barrier for every node of their last rendezvous round, c included,
        # for 300 s, deaf to SIGTERM (a blocking store call): nothing is left to lose, kill them
        _wait(lambda: json.loads((out / "state.json").read_text())["done"], 300,
              "the population to finish without the third launcher")  # fmt: skip
        _wait(lambda: not _slots_of([procs["a"].pid, procs["b"].pid]), 60, "the slots to exit")
        for name in "ab":
            text = logs[name].read_text()
            assert not library_frames(text), text[-3000:]  # no traceback through the library
            if procs[name].poll() is None:
                os.killpg(procs[name].pid, signal.SIGKILL)
            procs[name].wait(timeout=60)
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    rows = read_population_csv(out)
    trained = [r for r in rows if r["event"] == "trained"]
    assert len(trained) == 18  # the whole budget: 3 x 120k env steps in pods of 20k
    assert any(float(r["time"]) > left for r in trained)  # the population went on without c
    state = json.loads((out / "state.json").read_text())
    assert state["done"]
    time.sleep(1)
    assert not _processes_of(out), "processes of the population are left"


def test_the_traceback_check_is_not_fooled_by_the_clone_path(library_frames, package_dir):
    """A clone whose path holds 'xiaoyarl/' prints it in torch's C++ traces: not a library frame
    (the earlier check, `"xiaoyarl/" not in text`, failed there)."""
    cpp_trace = "frame #3: c10::Error in /home/me/xiaoyarl/.venv/lib/torch/lib/libtorch_cpu.so"
    assert not library_frames(cpp_trace)
    frame = f'  File "{package_dir}{os.sep}train{os.sep}population.py", line 3, in run'
    assert library_frames(f"Traceback (most recent call last):\n{frame}\nValueError") == [frame]
