"""Averaged policies over seeds: do several independently trained runs, acting as one, end
more reliably than one run?

For each task (the stability study's, `stability.py`: the same budgets, no early stop), 10
seeds train with xiaoyarl's defaults and keep their run folders. Each run's *final* policy
(the agent at the end of the budget, taken out of its last checkpoint by a one-run
`fuse_runs`, which gives it back bit for bit) is then scored on the same 100 fresh episodes
(start states no training evaluation used), alone and in ensembles (`PolicyEnsemble`:
continuous actions averaged, discrete ones by majority vote):
- alone: the 10 single runs;
- ensembles of 3: seeds (i, i+1, i+2 mod 10) for i = 0..9, ten ensembles (each seed in three);
- the ensemble of all 10;
- the parameter fusion of all 10 (`xiaoyarl fuse`: one network whose weights are the mean of
  the 10 networks': sound for members that share an ancestry, as a population's do, and
  expected to fail for seeds trained apart; it is measured, not assumed).
Reported, over the ten singles and the ten 3-ensembles: mean, IQM, CVaR of the worst 25%, the
worst, and how many are at or above the task's target (`xiaoyarl/stats.py`).

Run folders are kept under `--runs` (a later invocation reuses finished ones); the results go
to `--out` as JSON and the report is printed as markdown.

    python benchmarks/ensembles.py --tasks dqn-cartpole ppo-pendulum ppo-hopper
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from machine import machine  # noqa: E402
from stability import TASKS  # noqa: E402

from xiaoyarl import Config, evaluate, train_agent  # noqa: E402
from xiaoyarl.scale.fusion import fuse_runs  # noqa: E402
from xiaoyarl.stats import cvar, iqm  # noqa: E402

EPISODES = 100
# Training evaluations and confirmations reset with seeds below 2**31 (`evaluation_seed`,
# `CONFIRM_SEED_OFFSET`): the scores here start from states none of them used.
EVAL_SEED = 2**31 + 17


def final_policy(run_dir: Path) -> Path:
    """The folder holding a run's final policy (written by `train`)."""
    return run_dir.with_name(f"{run_dir.name}-final")


def train(name: str, seed: int, root: Path, threads: int, budget: int) -> Path:
    """Train one seed of the task with xiaoyarl's defaults (as the stability study does), keep
    its final policy in `final_policy(run_dir)`, and return the run folder."""
    task = TASKS[name]
    run_dir = root / name / f"seed{seed}"
    if (final_policy(run_dir) / "actor.pt").is_file():
        return run_dir  # done in an earlier invocation
    shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted run starts again
    config = Config(
        algo=task.algo, env_id=task.env_id, backend=task.backend, seed=seed, threads=threads,
        max_steps=budget, target_return=task.target,
        eval_every=task.eval_every, stop_at_target=False, eval_episodes=10, cwd=str(run_dir),
    )  # fmt: skip
    started = time.perf_counter()
    summary = train_agent(config, log=None)
    print(f"{name} seed {seed}: trained {summary['total_steps']:,} env steps in "
          f"{time.perf_counter() - started:.0f} s, last evaluation "
          f"{summary['final_eval_mean']:.1f}", flush=True)  # fmt: skip
    fuse_runs([run_dir], final_policy(run_dir))  # the final agent, bit for bit
    return run_dir


def stats(scores: list[float], target: float) -> dict:
    x = np.array(scores)
    return {
        "mean": float(x.mean()),
        "iqm": iqm(x),
        "cvar25": cvar(x, 0.25),
        "worst": float(x.min()),
        "at_target": int((x >= target).sum()),
        "n": len(x),
    }


def study(name: str, seeds: list[int], root: Path, threads: int, cap: int | None) -> dict:
    budget = min(cap or TASKS[name].budget, TASKS[name].budget)
    runs = [train(name, seed, root, threads, budget) for seed in seeds]
    finals = [final_policy(run) for run in runs]
    score = lambda runs: evaluate(runs, episodes=EPISODES, seed=EVAL_SEED)["mean"]  # noqa: E731
    singles = [score(run) for run in finals]
    k = len(finals)
    triples = [score([finals[(i + j) % k] for j in range(3)]) for i in range(k)]
    fused_dir = root / name / "fused-all"
    shutil.rmtree(fused_dir, ignore_errors=True)
    fuse_runs(runs, fused_dir)
    target = TASKS[name].target
    return {
        "singles": singles,
        "ensembles_of_3": triples,
        "ensemble_of_all": score(finals),
        "fusion_of_all": score(fused_dir),
        "singles_stats": stats(singles, target),
        "ensembles_of_3_stats": stats(triples, target),
        "target": target,
        "seeds": seeds,
        "budget": budget,
    }


def report(results: dict) -> str:
    lines = [
        "| task | policies | mean | IQM | CVaR 25% | worst | at target |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        task = TASKS[name]
        label = f"{task.algo} {task.env_id}, {r['budget']:,} steps, target {task.target:g}"
        for what, key in (
            ("single runs", "singles_stats"),
            ("3-ensembles", "ensembles_of_3_stats"),
        ):
            s = r[key]
            lines.append(
                f"| {label} | {what} ({s['n']}) | {s['mean']:.1f} | {s['iqm']:.1f} | "
                f"{s['cvar25']:.1f} | {s['worst']:.1f} | {s['at_target']}/{s['n']} |"
            )
        for what, key in (("ensemble of", "ensemble_of_all"), ("fusion of", "fusion_of_all")):
            hit = "yes" if r[key] >= r["target"] else "no"
            lines.append(f"| {label} | {what} all {len(r['seeds'])} | {r[key]:.1f} | | | | {hit} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS),
                        default=["dqn-cartpole", "ppo-pendulum", "ppo-hopper"])  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--budget", type=int, help="cap every budget (a smoke test)")
    parser.add_argument("--runs", type=Path, default=Path("runs") / "ensembles")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "ensembles.json")
    args = parser.parse_args()
    if len(args.seeds) < 3:
        parser.error("give at least 3 seeds (the report has ensembles of 3).")
    results = json.loads(args.out.read_text())["results"] if args.out.is_file() else {}
    for name in args.tasks:
        results[name] = study(name, args.seeds, args.runs, args.threads, args.budget)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"machine": machine(), "date": time.strftime("%Y-%m-%d"),
                                        "episodes": EPISODES, "results": results}))  # fmt: skip
    print(f"\n{machine()}, {args.threads} torch thread(s), {EPISODES} episodes per score\n")
    print(report(results))


if __name__ == "__main__":
    main()
