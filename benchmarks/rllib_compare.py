"""xiaoyarl against Ray RLlib's PPO: CartPole-v1 and Pendulum-v1, each library with its tuned
settings, on the protocol of `compare.py`.

- RLlib runs the settings of its own tuned examples (ray-project/ray, rllib/tuned_examples/ppo/):
  `cartpole_ppo.py` (at commit 772ef67: lr 3e-4, 6 epochs, vf_loss_coeff 0.01, one hidden layer
  of 32 linear units shared by policy and value) and `pendulum_ppo.py` (at commit 7d35bf7: 2 env
  runners x 20 envs, observations through a running mean/std filter, batches of 1,024 in
  mini-batches of 128, lr 2e-4, gamma 0.95, lambda 0.5, ReLU), its defaults otherwise, on its
  new API stack.
- xiaoyarl runs what `xiaoyarl train ppo ENV --backend gymnasium` starts from: its task preset
  where the pair has one (`xiaoyarl list`), else its defaults.
- Both on gymnasium's env, one torch thread per process (RLlib's env runners are processes of
  their own, which Ray gives one thread each), alternating fresh processes per seed (xiaoyarl,
  RLlib, xiaoyarl, ...). Both evaluate the deterministic policy on 10 episodes about every
  `eval_every` env steps (RLlib: every training iteration whose batches add up to it); an
  evaluation at the target counts only when 50 fresh episodes confirm it, and the run stops
  there; otherwise after the step budget.
- Reported: seeds solved, env steps to the target, seconds to it from the start of training
  (evaluations included), and the library's start-up (interpreter, imports, Ray's processes,
  env and model construction) separately; the ratio RLlib / xiaoyarl of the median seconds from
  training start.

RLlib pins its own gymnasium, so it lives in a virtual environment of its own:

    python -m venv .venv-rllib && .venv-rllib/bin/pip install torch==2.13.0 "ray[rllib]==2.60.0"
    python benchmarks/rllib_compare.py --rllib-python .venv-rllib/bin/python --seeds 0 1 2

Usage: python benchmarks/rllib_compare.py --rllib-python PATH [--tasks ppo-cartpole
           ppo-pendulum] [--seeds 0 1 2] [--budget N] [--json out.json]
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

CONFIRM_EPISODES = 50
# name -> env, target, env-step budget (both libraries), env steps between evaluations
TASKS = {
    "ppo-cartpole": ("CartPole-v1", 475.0, 300_000, 10_000),
    "ppo-pendulum": ("Pendulum-v1", -200.0, 400_000, 10_000),
}


# --- RLlib, inside its own process and virtual environment --------------------------------------
def rllib_config(env_id: str, seed: int, eval_every: int):  # noqa: ANN201 - RLlib's PPOConfig
    """The tuned example's settings (module docstring), with evaluation as the protocol says."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    config = PPOConfig().environment(env_id).debugging(seed=seed)
    if env_id == "CartPole-v1":
        config = config.training(lr=0.0003, num_epochs=6, vf_loss_coeff=0.01).rl_module(
            model_config=DefaultModelConfig(fcnet_hiddens=[32], fcnet_activation="linear",
                                            vf_share_layers=True))  # fmt: skip
    else:
        from ray.rllib.connectors.env_to_module import MeanStdFilter

        config = (
            config.env_runners(
                num_env_runners=2,
                num_envs_per_env_runner=20,
                env_to_module_connector=lambda env, spaces=None, device=None: MeanStdFilter(),
            )  # fmt: skip
            .training(
                train_batch_size_per_learner=1024,
                minibatch_size=128,
                lr=0.0002,
                gamma=0.95,
                lambda_=0.5,
            )  # fmt: skip
            .rl_module(model_config=DefaultModelConfig(fcnet_activation="relu"))
        )
    batch = config.train_batch_size_per_learner
    return config.evaluation(
        evaluation_interval=max(1, round(eval_every / batch)), evaluation_duration=10,
        evaluation_duration_unit="episodes", evaluation_num_env_runners=0,
        evaluation_config=PPOConfig.overrides(explore=False),
    )  # fmt: skip


def run_rllib(task: str, seed: int, budget: int, launched: float) -> dict:
    import ray
    import torch
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        EPISODE_RETURN_MEAN,
        EVALUATION_RESULTS,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
    )

    env_id, target, _, eval_every = TASKS[task]
    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # fmt: skip
    algo = rllib_config(env_id, seed, eval_every).build_algo()
    start = time.time()
    steps, curve = 0, []
    solved = False
    while steps < budget:
        result = algo.train()
        steps = result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME]
        evaluation = result.get(EVALUATION_RESULTS, {}).get(ENV_RUNNER_RESULTS, {})
        if EPISODE_RETURN_MEAN not in evaluation:
            continue
        mean = float(evaluation[EPISODE_RETURN_MEAN])
        curve.append([int(steps), mean])
        if mean >= target:  # confirmed on 50 fresh episodes (5 evaluations of 10)
            confirm = [algo.evaluate()[ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN]
                       for _ in range(CONFIRM_EPISODES // 10)]  # fmt: skip
            if statistics.mean(confirm) >= target:
                solved = True
                break
    seconds = time.time() - start
    algo.stop()
    ray.shutdown()
    return {"solved": solved, "steps_to_target": int(steps) if solved else None,
            "seconds_to_target": seconds if solved else None, "startup_seconds": start - launched,
            "total_steps": int(steps), "train_seconds": seconds, "curve": curve}  # fmt: skip


# --- xiaoyarl, through its command line ---------------------------------------------------------
def run_xiaoyarl(task: str, seed: int, budget: int, folder: Path) -> dict:
    env_id, target, _, eval_every = TASKS[task]
    summary = folder / "summary.json"
    command = [sys.executable, "-m", "xiaoyarl", "train", "ppo", env_id, "--backend", "gymnasium",
               "--seed", str(seed), "--max-steps", str(budget), "--eval-every", str(eval_every),
               "--target-return", str(target), "--threads", "1", "--cwd", str(folder / "run"),
               "--summary-json", str(summary), "--quiet",
               "--set", f"confirm_episodes={CONFIRM_EPISODES}"]  # fmt: skip
    subprocess.run(command, check=True)
    s = json.loads(summary.read_text())
    return {"solved": s["solved"], "steps_to_target": s["steps_to_target"],
            "seconds_to_target": s["seconds_to_target"], "startup_seconds": s["startup_seconds"],
            "total_steps": s["total_steps"], "train_seconds": s["train_seconds"]}  # fmt: skip


# --- the comparison -------------------------------------------------------------------------------
def describe(runs: list[dict]) -> tuple[str, float | None]:
    solved = [r for r in runs if r["solved"]]
    median = statistics.median(r["seconds_to_target"] for r in solved) if solved else None
    steps = f"{statistics.median(r['steps_to_target'] for r in solved):,.0f}" if solved else "-"
    secs = "-" if median is None else (
        f"{median:.1f} ({min(r['seconds_to_target'] for r in solved):.1f}-"
        f"{max(r['seconds_to_target'] for r in solved):.1f})")  # fmt: skip
    startup = statistics.median(r["startup_seconds"] for r in runs)
    return f"{len(solved)}/{len(runs)} | {steps} | {secs} | {startup:.1f}", median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rllib-python", help="the Python of RLlib's virtual environment")
    parser.add_argument("--budget", type=int, help="cap every task's env-step budget")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=4, metavar=("TASK", "SEED", "BUDGET", "OUT"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--launched", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        task, seed, budget, out = args.child
        result = run_rllib(task, int(seed), int(budget), args.launched)
        Path(out).write_text(json.dumps(result))
        return
    if not args.rllib_python:
        sys.exit("name RLlib's Python with --rllib-python (see this script's docstring)")
    results: dict[str, dict[str, list[dict]]] = {}
    root = Path(tempfile.mkdtemp(prefix="xiaoyarl-rllib-"))
    for task in args.tasks:
        budget = min(args.budget or TASKS[task][2], TASKS[task][2])
        results[task] = {"xiaoyarl": [], "rllib": []}
        for seed in args.seeds:
            folder = root / f"{task}_{seed}"
            run = run_xiaoyarl(task, seed, budget, folder / "xiaoyarl")
            results[task]["xiaoyarl"].append(run)
            print(task, "xiaoyarl", seed, json.dumps(run), flush=True)
            out = folder / "rllib.json"
            subprocess.run([args.rllib_python, __file__, "--child", task, str(seed), str(budget),
                            str(out), "--launched", str(time.time())], check=True)  # fmt: skip
            run = json.loads(out.read_text())
            results[task]["rllib"].append(run)
            print(task, "rllib", seed, json.dumps({k: v for k, v in run.items() if k != "curve"}),
                  flush=True)  # fmt: skip
    print(
        "\n| task | library | seeds solved | median env steps to target | s to target from "
        "training start: median (min-max) | start-up s (median) | RLlib / xiaoyarl |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for task, by_lib in results.items():
        ours, ours_median = describe(by_lib["xiaoyarl"])
        theirs, theirs_median = describe(by_lib["rllib"])
        ratio = f"{theirs_median / ours_median:.1f}x" if ours_median and theirs_median else "-"
        print(f"| {task} | xiaoyarl | {ours} | {ratio} |")
        print(f"| {task} | RLlib | {theirs} | |")
    if args.json:
        args.json.write_text(json.dumps({"seeds": args.seeds, "results": results}, indent=1))


if __name__ == "__main__":
    main()
