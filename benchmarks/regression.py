"""Fixed-seed runs of every algorithm and runner, recorded so that a change that should alter no
number (a refactor, a move of code between files) can be shown to alter none.

`record` trains each run below through the command line (seed 0, 1 torch thread, short budgets,
the whole budget: no early stop) and writes, per run, the rows of its `recorder.csv` (every
evaluation and loss as the file has it, 6 significant digits; the wall-clock column left out)
and the run's final summary numbers. `compare` trains them again and reports every run whose
numbers differ from a recorded file, cell by cell. On a CPU each run is deterministic: two
records on the same machine agree to the digit.

    python benchmarks/regression.py record --out benchmarks/results/regression.json
    python benchmarks/regression.py compare --baseline benchmarks/results/regression.json

`--runs NAME ...` limits either to some runs; `--keep DIR` keeps the run folders (their
checkpoints, to check that a later version still loads and resumes them).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMON = ["--seed", "0", "--threads", "1", "--target-return", "none", "--eval-episodes", "4",
          "--quiet"]  # fmt: skip
OFF = ["--set", "learning_starts=500"]

# name -> the command line after `xiaoyarl` (COMMON and the run folder are added)
RUNS: dict[str, list[str]] = {
    "ppo-cartpole": ["train", "ppo", "CartPole-v1", "--max-steps", "8192", "--eval-every", "2048"],
    # --no-preset where a pair gained a task preset after the baseline was recorded
    "ppo-pendulum": ["train", "ppo", "Pendulum-v1", "--max-steps", "8192", "--eval-every", "2048",
                     "--no-preset"],
    "ppo-cartpole-gymnasium": ["train", "ppo", "CartPole-v1", "--backend", "gymnasium",
                               "--max-steps", "4096", "--eval-every", "1024"],
    "a2c-cartpole": ["train", "a2c", "CartPole-v1", "--max-steps", "8192", "--eval-every", "2048"],
    "dqn-cartpole": ["train", "dqn", "CartPole-v1", "--max-steps", "3000", "--eval-every", "1000",
                     "--no-preset", *OFF],
    "double_dqn-cartpole": ["train", "double_dqn", "CartPole-v1", "--max-steps", "3000",
                            "--eval-every", "1000", *OFF],
    "d3qn-cartpole-per": ["train", "d3qn", "CartPole-v1", "--max-steps", "3000", "--eval-every",
                          "1000", "--set", "per=true", *OFF],
    "sac_discrete-cartpole": ["train", "sac_discrete", "CartPole-v1", "--max-steps", "2000",
                              "--eval-every", "1000", *OFF],
    "ddpg-pendulum": ["train", "ddpg", "Pendulum-v1", "--max-steps", "2000", "--eval-every",
                      "1000", "--no-preset", *OFF],
    "td3-pendulum": ["train", "td3", "Pendulum-v1", "--max-steps", "2000", "--eval-every", "1000",
                     "--no-preset", *OFF],
    "sac-pendulum": ["train", "sac", "Pendulum-v1", "--max-steps", "2000", "--eval-every", "1000",
                     "--no-preset", *OFF],
    "sac-pendulum-hterm": ["train", "sac", "Pendulum-v1", "--max-steps", "3000", "--eval-every",
                           "1000", "--set", "h_term=true", "--set", "h_term_start=500", *OFF],
    "modsac-pendulum": ["train", "modsac", "Pendulum-v1", "--max-steps", "2000", "--eval-every",
                        "1000", *OFF],
    "redq-pendulum": ["train", "redq", "Pendulum-v1", "--max-steps", "1000", "--eval-every",
                      "500", *OFF],
    "vdn-spread": ["train", "vdn", "SpreadDiscrete-v0", "--max-steps", "6000", "--eval-every",
                   "2000", "--no-preset", *OFF],
    "qmix-spread": ["train", "qmix", "SpreadDiscrete-v0", "--max-steps", "6000", "--eval-every",
                    "2000", "--no-preset", *OFF],
    "maddpg-spread": ["train", "maddpg", "SpreadContinuous-v0", "--max-steps", "3000",
                      "--eval-every", "1000", "--no-preset", *OFF],
    "matd3-spread": ["train", "matd3", "SpreadContinuous-v0", "--max-steps", "3000",
                     "--eval-every", "1000", "--no-preset", *OFF],
    "mappo-spread": ["train", "mappo", "SpreadDiscrete-v0", "--max-steps", "20000",
                     "--eval-every", "5000", "--no-preset"],
    "ppo-cartpole-parallel": ["train", "ppo", "CartPole-v1", "--runner", "parallel",
                              "--num-workers", "2", "--max-steps", "4096", "--eval-every",
                              "1024"],
    "ppo-cartpole-2-learners": ["train", "ppo", "CartPole-v1", "--learners", "2", "--max-steps",
                                "8192", "--eval-every", "2048"],
    "ppo-cartpole-vmap-population": ["population", "ppo", "CartPole-v1", "--members", "2",
                                     "--population-backend", "vmap", "--max-steps", "8192",
                                     "--eval-every", "2048"],
    # added before the composable-agents work (issue 49), with the baseline re-recorded then
    "pqn-cartpole": ["train", "pqn", "CartPole-v1", "--max-steps", "8192", "--eval-every", "2048"],
    "fast_td3-pendulum": ["train", "fast_td3", "Pendulum-v1", "--num-envs", "64", "--max-steps",
                          "4096", "--eval-every", "2048", "--set", "learning_starts=512"],
    "fast_td3-pendulum-c51": ["train", "fast_td3", "Pendulum-v1", "--num-envs", "64",
                              "--max-steps", "4096", "--eval-every", "2048", "--config",
                              "xiaoyarl/configs/parallel/fast_td3.yaml", "--set",
                              "learning_starts=512"],
    "fast_sac-pendulum": ["train", "fast_sac", "Pendulum-v1", "--num-envs", "64", "--max-steps",
                          "4096", "--eval-every", "2048", "--set", "learning_starts=512"],
    "ppo-cartpolenovelocity-lstm": ["train", "ppo", "CartPoleNoVelocity-v1", "--set",
                                    "recurrent=lstm", "--max-steps", "8192", "--eval-every",
                                    "4096"],
    "ppo-minatar-breakout": ["train", "ppo", "MinAtar/Breakout-v1", "--max-steps", "8192",
                             "--eval-every", "4096"],
    "qmix-spread-td-lambda": ["train", "qmix", "SpreadDiscrete-v0", "--set", "recurrent=gru",
                              "--set", "net_dims=[64]", "--set", "recurrent_dim=64", "--set",
                              "td_lambda=0.6", "--max-steps", "6000", "--eval-every", "2000",
                              "--no-preset", *OFF],
    # the tests' own envs (tests/action_envs.py): action masks, MultiDiscrete actions
    "ppo-masked": ["train", "ppo", "action_envs:PickAllowed-v0", "--max-steps", "4096",
                   "--eval-every", "2048"],
    "ppo-multidiscrete": ["train", "ppo", "action_envs:CopyDigits-v0", "--max-steps", "4096",
                          "--eval-every", "2048"],
}  # fmt: skip
ROOT = Path(__file__).resolve().parent.parent
ENV_MODULES = ROOT / "tests"  # where `action_envs:...` ids are found (on the runs' PYTHONPATH)


def run_numbers(name: str, root: Path) -> dict:
    """Train run `name` into `root / name` and return its numbers: every `recorder.csv` under the
    run folder (a population has one per member) without its wall-clock column."""
    folder = root / name
    command = [sys.executable, "-m", "xiaoyarl", *RUNS[name], *COMMON, "--cwd", str(folder)]
    start = time.perf_counter()
    path = os.pathsep.join(filter(None, [str(ENV_MODULES), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {' '.join(command)} failed:\n{done.stderr[-3000:]}")
    tables = {}
    for path in sorted(folder.rglob("recorder.csv")):
        with open(path, newline="") as f:
            rows = [{k: v for k, v in row.items() if k != "time"} for row in csv.DictReader(f)]
        tables[str(path.relative_to(folder))] = rows
    if not tables:
        raise RuntimeError(f"{name}: no recorder.csv under {folder}")
    return {"command": command[3:], "recorders": tables,
            "seconds": round(time.perf_counter() - start, 1)}  # fmt: skip


def differences(want: dict, got: dict) -> list[str]:
    """The cells where `got`'s recorders differ from `want`'s, as readable lines."""
    lines = []
    for file, rows in want["recorders"].items():
        other = got["recorders"].get(file)
        if other is None:
            lines.append(f"{file}: missing")
            continue
        if len(other) != len(rows):
            lines.append(f"{file}: {len(other)} rows, recorded {len(rows)}")
        for i, (a, b) in enumerate(zip(rows, other, strict=False)):
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    lines.append(f"{file} row {i + 1} {key}: {b.get(key)!r}, recorded "
                                 f"{a.get(key)!r}")  # fmt: skip
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["record", "compare"])
    parser.add_argument("--out", type=Path, help="record: the JSON file to write")
    parser.add_argument("--baseline", type=Path, help="compare: a JSON file written by record")
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument("--keep", type=Path, help="keep the run folders here")
    args = parser.parse_args()
    if args.action == "record" and args.out is None:
        parser.error("record needs --out FILE.json")
    if args.action == "compare" and args.baseline is None:
        parser.error("compare needs --baseline FILE.json")
    baseline = json.loads(args.baseline.read_text()) if args.baseline else {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        results, failed = {}, []
        for name in args.runs:
            results[name] = run_numbers(name, root)
            if args.action == "compare":
                if name not in baseline:
                    print(f"{name}: not in {args.baseline}")
                    continue
                lines = differences(baseline[name], results[name])
                failed += [name] if lines else []
                verdict = "identical" if not lines else f"{len(lines)} differences"
                print(f"{name}: {verdict} ({results[name]['seconds']} s)", flush=True)
                for line in lines[:20]:
                    print(f"    {line}")
            else:
                print(f"{name}: recorded ({results[name]['seconds']} s)", flush=True)
    if args.action == "record":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        return 0
    print(f"{len(args.runs) - len(failed)} of {len(args.runs)} runs identical"
          + (f"; differ: {', '.join(failed)}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
