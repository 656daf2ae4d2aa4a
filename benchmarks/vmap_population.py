"""Vmapped populations: the wall time of M members trained together against one member.

Every row trains ALGO (`--algo`: ppo, the default, pqn, or a replay algorithm such as sac) on
ENV (`--env`: torch-native CartPole-v1 by default; Pendulum-v1 for continuous actions) for a
fixed budget of env steps per member,
through the command line in a fresh process (start-up included), with the defaults:
- `train`: one member, `xiaoyarl train ALGO CartPole-v1` (what a user runs for one agent);
- `vmap M`: M members, `xiaoyarl population ALGO CartPole-v1 --members M --population-backend
  vmap`, in one generation (`--select-fraction 0`: no selection, only the training).
Each row gives its wall seconds, the ratio to the `train` row, and the median member's final
evaluation (10 episodes each).

    python benchmarks/vmap_population.py --members 1 16 --threads 1 2
    python benchmarks/vmap_population.py --algo pqn --members 1 16 --threads 1 2
    python benchmarks/vmap_population.py --algo sac --env Pendulum-v1 --budget 12000 \
        --members 1 8 --threads 2
    python benchmarks/vmap_population.py --device cuda --members 1 64 256 1024
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine


def timed(args: list[str], timeout: float) -> float:
    start = time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return time.perf_counter() - start


def one_member(algo: str, env: str, root: Path, budget: int, threads: int, device: str,
               timeout: float) -> dict:  # fmt: skip
    run = root / "train"
    seconds = timed([sys.executable, "-m", "xiaoyarl", "train", algo, env, "--quiet",
                     "--max-steps", str(budget), "--target-return", "none", "--threads",
                     str(threads), "--device", device, "--cwd", str(run)], timeout)  # fmt: skip
    rows = (run / "recorder.csv").read_text().splitlines()
    final = float(rows[-1].split(",")[2])
    return {"row": "train", "members": 1, "seconds": seconds, "median_eval": final}


def vmapped(algo: str, env: str, root: Path, members: int, budget: int, threads: int,
            device: str, timeout: float) -> dict:  # fmt: skip
    out = root / f"vmap{members}"
    summary = root / f"vmap{members}.json"
    seconds = timed([sys.executable, "-m", "xiaoyarl", "population", algo, env,
                     "--members", str(members), "--population-backend", "vmap", "--quiet",
                     "--max-steps", str(budget), "--generation-steps", str(budget),
                     "--select-fraction", "0", "--target-return", "none", "--threads",
                     str(threads), "--device", device, "--cwd", str(out), "--summary-json",
                     str(summary)], timeout)  # fmt: skip
    result = json.loads(summary.read_text())
    scores = [m["score"] for m in result["members"].values()]
    return {"row": f"vmap {members}", "members": members, "seconds": seconds,
            "median_eval": statistics.median(scores)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--algo", default="ppo", help="any algorithm (multi-agent ones with a multi-agent env)"
    )
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--members", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget", type=int, default=100_000, help="env steps per member")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    print(machine())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in args.threads:
            root = Path(tmp) / f"threads{threads}"
            base = one_member(args.algo, args.env, root, args.budget, threads, args.device,
                              args.timeout)  # fmt: skip
            found = [base] + [vmapped(args.algo, args.env, root, m, args.budget, threads,
                                      args.device, args.timeout) for m in args.members]  # fmt: skip
            for row in found:
                row.update(threads=threads, ratio=row["seconds"] / base["seconds"])
                rows.append(row)
                print(f"| {row['row']} | {threads} | {row['seconds']:.1f} | {row['ratio']:.2f}x"
                      f" | {row['median_eval']:.1f} |", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
