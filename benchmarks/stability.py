"""Stability over seeds: fixed budgets with no early stop, for xiaoyarl with its defaults, xiaoyarl
with the H-term (`h_term: true`, where it applies), xiaoyarl with its task preset (where the
task has one) and Stable-Baselines3 with the RL Zoo's settings, trained alternately in fresh
processes (the harness of `compare.py`).

Every run trains its whole budget, evaluating the deterministic policy on 10 episodes every
`eval_every` env steps. Per task and variant the report gives, over seeds (rliable's
conventions, `xiaoyarl/stats.py`): the final return's mean and interquartile mean (IQM) with
95% percentile-bootstrap intervals, the CVaR of the worst 25% of seeds, the seeds at or above
the target at the end, the seeds that *collapsed* (an evaluation reached the target, the final
one is below it), the seeds that *fell back* below the target at some evaluation after first
reaching it (a dip they may recover from), and the spread of the env steps to the first
evaluation at the target (median and interquartile range over the seeds that got there); and
a plot per task of every seed's curve with each variant's median and interquartile band.

Runs resume: each finished run is a JSON file in `--out`, and a later invocation skips it, so
a study can be spread over several sessions (each table should come from one machine).

    pip install -e '.[bench]' (and pip install -e '.[mujoco]' for the Hopper tasks)
    python benchmarks/stability.py --tasks ppo-cartpole sac-pendulum --seeds 0 1 2 3 4 5 6 7 8 9
    python benchmarks/stability.py --report-only           # tables and plots from --out
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import compare  # noqa: E402
from compare import ZOO_OFF_POLICY_PENDULUM, ZOO_PPO_CARTPOLE, Task  # noqa: E402

from xiaoyarl.presets import preset_path  # noqa: E402
from xiaoyarl.stats import bootstrap_ci, cvar, iqm  # noqa: E402

ZOO_PPO_PENDULUM = dict(  # ppo.yml, Pendulum (n_envs 4, normalize, gSDE)
    n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3,
    clip_range=0.2, use_sde=True, sde_sample_freq=4,
)  # fmt: skip

# The studied tasks: fixed budgets (no early stop). DQN's zoo entry is compare.py's.
TASKS: dict[str, Task] = {
    "dqn-cartpole": replace(
        compare.TASKS["dqn-cartpole"], eval_every=5_000, stop_at_target=False
    ),  # fmt: skip
    "ppo-cartpole": Task(
        "ppo", "CartPole-v1", 475, 100_000, 5_000, ZOO_PPO_CARTPOLE, n_envs=8, stop_at_target=False
    ),  # fmt: skip
    "ppo-pendulum": Task(
        "ppo",
        "Pendulum-v1",
        -200,
        200_000,
        10_000,
        ZOO_PPO_PENDULUM,
        n_envs=4,
        normalize=True,
        stop_at_target=False,
    ),  # fmt: skip
    "sac-pendulum": Task(
        "sac", "Pendulum-v1", -200, 30_000, 2_000, dict(learning_rate=1e-3), stop_at_target=False
    ),  # fmt: skip
    "td3-pendulum": Task(
        "td3", "Pendulum-v1", -200, 30_000, 2_000, ZOO_OFF_POLICY_PENDULUM, stop_at_target=False
    ),  # fmt: skip
    # the Hopper tasks are compare.py's fixed-budget ones
    "ppo-hopper": compare.TASKS["ppo-hopper-300k"],
    # SAC Hopper at 100k env steps is ~20 hours of one core for 30 runs: the 2-core machine's
    # table is at 30k (the off-policy Pendulum budget), where a target of 1,000 is out of reach
    # of every seed, so its target is 500 (set before the runs), where reaching it and falling
    # back below it can be seen within the budget
    "sac-hopper": replace(
        compare.TASKS["sac-hopper-100k"], target=500, budget=30_000, eval_every=2_000
    ),  # fmt: skip
    "sac-hopper-100k": compare.TASKS["sac-hopper-100k"],
}
H_TERM_ALGOS = ("ppo", "a2c", "ddpg", "td3", "sac", "modsac", "redq")
# xiaoyarl and xiaoyarl+h_term: the library's defaults (`--no-preset`); xiaoyarl+preset: the
# task preset `xiaoyarl train` starts from, for the tasks that have one
VARIANTS = ("xiaoyarl", "xiaoyarl+h_term", "xiaoyarl+preset", "sb3")


def register() -> None:
    """Make the studied tasks (and their H-term variants) known to compare.py's runners."""
    for name, task in TASKS.items():
        compare.TASKS[f"stability-{name}"] = task
        compare.TASKS[f"stability-{name}-h_term"] = replace(task, xiaoyarl_set=("h_term=true",))


def variants(name: str) -> list[str]:
    task = TASKS[name]
    applies = {"xiaoyarl+h_term": task.algo in H_TERM_ALGOS,
               "xiaoyarl+preset": preset_path(task.algo, task.env_id) is not None}  # fmt: skip
    return [v for v in VARIANTS if applies.get(v, True)]


def run_once(name: str, variant: str, seed: int, args, tmp: Path) -> dict:
    lib = "sb3" if variant == "sb3" else "xiaoyarl"
    task_name = f"stability-{name}" + ("-h_term" if variant == "xiaoyarl+h_term" else "")
    result = compare.train(lib, task_name, seed, args.threads, args.budget, tmp, script=__file__,
                           defaults=variant != "xiaoyarl+preset")  # fmt: skip
    result.update(task=name, variant=variant, seed=seed, date=time.strftime("%Y-%m-%d"))
    return result


# --- the report ---------------------------------------------------------------------------
def summarize(task: Task, runs: list[dict]) -> dict:
    """The stability statistics of one variant's runs (see the module docstring)."""
    finals = np.array([r["final_eval"] for r in runs])
    reached = [next((s for s, v in r["curve"] if v >= task.target), None) for r in runs]
    to_target = [s for s in reached if s is not None]
    at_end = finals >= task.target
    # seeds with an evaluation below the target after their first one at it (a dip, or worse)
    fell = sum(
        1
        for r, first in zip(runs, reached, strict=True)
        if first is not None and any(v < task.target for s, v in r["curve"] if s > first)
    )
    return {
        "seeds": len(runs),
        "mean": float(finals.mean()),
        "mean_ci": bootstrap_ci(finals, np.mean),
        "iqm": iqm(finals),
        "iqm_ci": bootstrap_ci(finals, iqm),
        "cvar25": cvar(finals, 0.25),
        "at_target": int(at_end.sum()),
        "collapsed": sum(1 for s, end in zip(reached, at_end, strict=True) if s and not end),
        "fell_back": fell,
        "steps_to_target": to_target,
        "us_per_step": statistics.median(1e6 / r["steps_per_second"] for r in runs),
    }


def table(results: dict[str, dict[str, list[dict]]]) -> str:
    lines = [
        "| task | variant | seeds | final mean [95% CI] | final IQM [95% CI] | CVaR 25% | "
        "at target at the end | collapsed | fell back (then or later) | env steps to target: "
        "median (IQR), reached | us per env step |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, by_variant in results.items():
        task = TASKS[name]
        for variant, runs in by_variant.items():
            if not runs:
                continue
            s = summarize(task, runs)
            steps = s["steps_to_target"]
            if steps:
                q1, med, q3 = np.percentile(steps, [25, 50, 75])
                spread = f"{med:,.0f} ({q1:,.0f}-{q3:,.0f}), {len(steps)}/{s['seeds']}"
            else:
                spread = f"-, 0/{s['seeds']}"
            lines.append(
                f"| {task.algo} {task.env_id}, {task.budget:,} steps, target {task.target:g} | "
                f"{variant} | {s['seeds']} | {s['mean']:.1f} [{s['mean_ci'][0]:.1f}, "
                f"{s['mean_ci'][1]:.1f}] | {s['iqm']:.1f} [{s['iqm_ci'][0]:.1f}, "
                f"{s['iqm_ci'][1]:.1f}] | {s['cvar25']:.1f} | {s['at_target']}/{s['seeds']} | "
                f"{s['collapsed']} | {s['fell_back']} | {spread} | {s['us_per_step']:,.0f} |"
            )
    return "\n".join(lines)


def plot(name: str, by_variant: dict[str, list[dict]], path: Path) -> None:
    """Every seed's evaluations (thin), each variant's median and interquartile band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task = TASKS[name]
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {"xiaoyarl": "C0", "xiaoyarl+h_term": "C2", "xiaoyarl+preset": "C3", "sb3": "C1"}
    for variant, runs in by_variant.items():
        color = colors[variant]
        if not runs:
            continue
        steps = sorted({s for r in runs for s, _ in r["curve"]})
        grid = np.array([[np.interp(s, *np.array(r["curve"]).T) for s in steps] for r in runs])
        for row in grid:
            ax.plot(steps, row, color=color, alpha=0.15, linewidth=0.8)
        q1, med, q3 = np.percentile(grid, [25, 50, 75], axis=0)
        ax.plot(steps, med, color=color, linewidth=2, label=f"{variant} (median, {len(runs)})")
        ax.fill_between(steps, q1, q3, color=color, alpha=0.25)
    ax.axhline(task.target, color="grey", linestyle="--", linewidth=1, label="target")
    ax.set(xlabel="env steps", ylabel="evaluation return (10 episodes)",
           title=f"{task.algo} {task.env_id}: every seed, median and IQR")  # fmt: skip
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load(out: Path, names: list[str]) -> dict[str, dict[str, list[dict]]]:
    results: dict[str, dict[str, list[dict]]] = {}
    for name in names:
        results[name] = {v: [] for v in variants(name)}
        for path in sorted(out.glob(f"{name}__*.json")):
            run = json.loads(path.read_text())
            if run["variant"] in results[name]:
                results[name][run["variant"]].append(run)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--budget", type=int, help="cap every budget (a smoke test)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "stability")
    parser.add_argument("--report-only", action="store_true", help="no training: report --out")
    parser.add_argument("--json", type=Path, help="also write the summaries here")
    parser.add_argument("--child", nargs=4, metavar=("LIB", "TASK", "SEED", "OUT"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--defaults", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    register()
    if args.child:
        lib, task_name, seed, out = args.child
        compare.child(lib, task_name, int(seed), args.threads, args.budget or 0, Path(out),
                      args.defaults)  # fmt: skip
        return
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.tasks:
                for seed in args.seeds:
                    for variant in variants(name):
                        if variant not in args.variants:
                            continue
                        path = args.out / f"{name}__{variant}__{seed}.json"
                        if path.exists():
                            continue  # done in an earlier invocation
                        result = run_once(name, variant, seed, args, Path(tmp))
                        path.write_text(json.dumps(result))
                        print(f"{name:14s} {variant:16s} seed {seed}: final "
                              f"{result['final_eval']:.1f}", flush=True)  # fmt: skip
    results = load(args.out, args.tasks)
    print(f"\n{compare.machine()}, {args.threads} torch thread(s) per process\n")
    print(table(results))
    for name, by_variant in results.items():
        if any(by_variant.values()):
            plot(name, by_variant, args.out / f"{name}.png")
    if args.json:
        summaries = {name: {v: summarize(TASKS[name], runs) for v, runs in by_v.items() if runs}
                     for name, by_v in results.items()}  # fmt: skip
        args.json.write_text(json.dumps({"machine": compare.machine(), "results": summaries}))


if __name__ == "__main__":
    main()
