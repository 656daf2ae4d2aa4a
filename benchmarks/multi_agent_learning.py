"""Multi-agent algorithms through the CLI on cooperative navigation (3 agents): seeds that reach
a fraction of the way from the random policy's team return to the heuristic's.

For each env, R_random and R_heur are measured first (`multi_agent_baselines.py`: 1,000
episodes each); the target of a run is R_random + f (R_heur - R_random), with f = 0.8 for
MAPPO and 0.5 for VDN, QMIX, MADDPG, MATD3 and PQN-VDN. Every run is

    xiaoyarl train ALGO ENV --seed S --target-return TARGET --max-steps BUDGET --threads 1 \
        --summary-json F

(mpe2's continuous-action variant, named `mpe2:simple_spread_v3+continuous` here, adds `--set
'env_kwargs={continuous_actions: true}'`), which starts from the task's preset, and counts as
solved when an evaluation (10 deterministic episodes) reaches the target and 50
fresh episodes confirm it (the library's usual rule). The presets are the papers' settings for
this task, written out in `xiaoyarl/configs/multi_agent/` (`xiaoyarl/presets.py` applies them
to the built-in envs and to mpe2's ids alike; nothing is tuned in the library's defaults).

Usage: python benchmarks/multi_agent_learning.py [--runs mappo:SpreadDiscrete-v0 ...]
       [--seeds 0 1 2] [--json out.json] [--max-steps N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import machine
from multi_agent_baselines import env_arguments, mean_team_return

from xiaoyarl.presets import preset_path

# algo -> (fraction of the random-to-heuristic gap to reach, env-step budget)
ALGOS = {
    "mappo": (0.8, 3_000_000),
    "vdn": (0.5, 1_000_000),
    "qmix": (0.5, 1_000_000),
    "maddpg": (0.5, 1_000_000),
    "matd3": (0.5, 1_000_000),
    "pqn_vdn": (0.5, 1_000_000),
}
DEFAULT_RUNS = [
    "mappo:SpreadDiscrete-v0", "mappo:SpreadContinuous-v0", "vdn:SpreadDiscrete-v0",
    "maddpg:SpreadContinuous-v0", "matd3:SpreadContinuous-v0", "qmix:SpreadDiscrete-v0",
    "pqn_vdn:SpreadDiscrete-v0",
]  # fmt: skip


def train(algo: str, env: str, seed: int, target: float, budget: int, root: Path) -> dict:
    env_id, kwargs = env_arguments(env)
    if preset_path(algo, env_id, kwargs) is None:
        raise SystemExit(f"no task preset for {algo} on {env}: see `xiaoyarl list`")
    name = f"{algo}_{env.replace(':', '_').replace('+', '_')}_{seed}"
    summary = root / f"{name}.json"
    command = [
        sys.executable, "-m", "xiaoyarl", "train", algo, env_id, "--seed", str(seed),
        f"--target-return={target:.2f}", "--max-steps", str(budget), "--threads", "1",
        "--cwd", str(root / name), "--summary-json", str(summary), "--quiet",
    ]  # fmt: skip
    if kwargs:
        command += ["--set", "env_kwargs={continuous_actions: true}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(summary.read_text())


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", nargs="*", default=DEFAULT_RUNS, help="ALGO:ENV pairs")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=1000, help="for R_random and R_heur")
    parser.add_argument("--max-steps", type=int, default=None, help="cap every budget")
    parser.add_argument("--json", default=None, help="write every run's summary here")
    parser.add_argument("--runs-dir", default=None, help="keep the run folders here")
    args = parser.parse_args(argv)

    print(machine())
    references: dict[str, tuple[float, float]] = {}
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        runs_dir = Path(args.runs_dir or tmp)
        for run in args.runs:
            algo, env_id = run.split(":", 1)
            if algo not in ALGOS:
                parser.error(f"unknown algorithm '{algo}' in --runs; choose from {list(ALGOS)}")
            if env_id not in references:
                references[env_id] = tuple(
                    mean_team_return(env_id, policy, args.episodes, 0)[0]
                    for policy in ("random", "heuristic")
                )
                print(f"{env_id}: R_random {references[env_id][0]:.2f}, "
                      f"R_heur {references[env_id][1]:.2f}")  # fmt: skip
            r_random, r_heur = references[env_id]
            fraction, budget = ALGOS[algo]
            target = r_random + fraction * (r_heur - r_random)
            budget = min(budget, args.max_steps or budget)
            for seed in args.seeds:
                s = train(algo, env_id, seed, target, budget, runs_dir)
                # the benchmark's env name (with "+continuous") over the summary's env id
                row = {**s, "algo": algo, "env": env_id, "seed": seed,
                       "target": round(target, 2), "fraction": fraction}  # fmt: skip
                results.append(row)
                print(f"{algo:7s} {env_id:22s} seed {seed}: solved {s['solved']}, "
                      f"{s['steps_to_target']} steps, {s['process_seconds_to_target']} s, "
                      f"best eval {s['best_eval_mean']:.1f} (target {target:.1f})",
                      flush=True)  # fmt: skip
    print()
    print("| algo | env | target (fraction) | seeds solved | env steps to target | "
          "s to target from process start | best eval per seed |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for run in args.runs:
        algo, env_id = run.split(":", 1)
        rows = [r for r in results if r["algo"] == algo and r["env"] == env_id]
        solved = [r for r in rows if r["solved"]]
        steps = ", ".join(f"{r['steps_to_target']:,}" for r in solved) or "-"
        secs = [r["process_seconds_to_target"] for r in solved]
        span = (f"{statistics.median(secs):.0f} ({min(secs):.0f}-{max(secs):.0f})"
                if secs else "-")  # fmt: skip
        best = ", ".join(f"{r['best_eval_mean']:.1f}" for r in rows)
        print(f"| {algo} | {env_id} | {rows[0]['target']:.1f} ({rows[0]['fraction']}) | "
              f"{len(solved)}/{len(rows)} | {steps} | {span} | {best} |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
