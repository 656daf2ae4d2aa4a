"""How many torch CPU threads a training process should use: measured, alone and beside others.

Every row trains one workload for a fixed budget through the command line, in a fresh process,
with `--threads N` (or torch's own default, "torch default"), while nothing, a busy Python loop
(any CPU-bound program) or a second identical training (what a user running two seeds at
once does) runs beside it. The figure is the wall-clock seconds of the training process,
start-up included, and the CPU seconds it used.

    python benchmarks/threads.py                               # every workload and setting
    python benchmarks/threads.py --workloads ppo-small --threads 1 0 --neighbours none busy

`--threads 0` means torch's default (as many threads as cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine

# name: (algo, env, extra CLI arguments, env-step budget)
WORKLOADS = {
    "ppo-small": ("ppo", "CartPole-v1", [], 100_000),  # [64, 64] nets, 1,024-step rollouts
    "ppo-large": (
        "ppo",
        "Pendulum-v1",
        ["--num-envs", "256", "--set", "net_dims=[256,256]"],
        100_000,
    ),  # fmt: skip
    "sac": ("sac", "Pendulum-v1", [], 3_000),  # [256, 256] nets, batch 256, 1 step per env step
    "dqn": ("dqn", "CartPole-v1", ["--backend", "gymnasium"], 4_000),
}
NEIGHBOURS = ("none", "busy", "twin")
BUSY = "import time\nend = time.time() + 3600\nwhile time.time() < end:\n    pass\n"


def command(workload: str, threads: int, cwd: Path) -> list[str]:
    algo, env, extra, budget = WORKLOADS[workload]
    args = [sys.executable, "-m", "xiaoyarl", "train", algo, env, *extra, "--quiet",
            "--max-steps", str(budget), "--target-return", "1e12", "--eval-every", str(10**12),
            "--eval-episodes", "2", "--cwd", str(cwd)]  # fmt: skip
    if threads:
        args += ["--threads", str(threads)]
    return args


def run_once(workload: str, threads: int, neighbour: str, root: Path, timeout: float) -> dict:
    """Wall and CPU seconds of one training while `neighbour` runs beside it (a run still going
    after `timeout` seconds is stopped and reported as taking at least that long)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    others: list[subprocess.Popen] = []
    if neighbour in ("busy", "busy2"):
        for _ in range(1 if neighbour == "busy" else 2):
            others.append(subprocess.Popen([sys.executable, "-c", BUSY]))
    elif neighbour == "twin":
        twin = command(workload, threads, root / f"twin_{time.time_ns()}")
        others.append(subprocess.Popen(twin, env=env, stdout=subprocess.DEVNULL))
    try:
        time.sleep(0.5 if others else 0)
        cwd = root / f"run_{time.time_ns()}"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(command(workload, threads, cwd), env=env, capture_output=True,
                                  text=True, timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"wall": timeout, "cpu": float("nan"), "stopped": True}
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
    finally:
        for other in others:
            other.kill()
            other.wait()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "stopped": False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2, 0],
                        help="thread counts to try; 0 = torch's default")  # fmt: skip
    parser.add_argument("--neighbours", nargs="+", choices=NEIGHBOURS, default=list(NEIGHBOURS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds after which a run is stopped ('>= T')")  # fmt: skip
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in args.workloads:
            for neighbour in args.neighbours:
                for threads in args.threads:
                    runs = [run_once(workload, threads, neighbour, Path(tmp), args.timeout)
                            for _ in range(args.repeats)]  # fmt: skip
                    row = {"workload": workload, "neighbour": neighbour, "threads": threads,
                           "wall": statistics.median(r["wall"] for r in runs),
                           "cpu": statistics.median(r["cpu"] for r in runs),
                           "stopped": any(r["stopped"] for r in runs)}  # fmt: skip
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print(f"\n{machine()}, {time.strftime('%Y-%m-%d')}, median of {args.repeats} runs\n")
    print("| workload | beside it | threads | wall s | CPU s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in rows:
        threads = r["threads"] or "torch default"
        wall = f">= {r['wall']:.0f}" if r["stopped"] else f"{r['wall']:.1f}"
        print(f"| {r['workload']} | {r['neighbour']} | {threads} | {wall} | {r['cpu']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
