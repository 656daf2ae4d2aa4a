"""xiaoyarl against Stable-Baselines3: the same tasks, machine, seeds and evaluation protocol.

The protocol, the same for both libraries:
- For every task and seed the two libraries train alternately (xiaoyarl, SB3, xiaoyarl, ...),
  each in a fresh process, so machine drift and warm caches hit both alike. Both train on
  gymnasium's own env, with the CPU threads each library uses by default (xiaoyarl: 1; SB3:
  torch's default, one per core) unless `--threads N` pins both.
- Both evaluate the deterministic policy on 10 episodes (10 sub-envs in lockstep) every
  `eval_every` env steps, the same fine cadence for both (CartPole every 2,500 env steps,
  Pendulum every 1,000): a time to target includes the training on to the next evaluation, so a
  coarse cadence (every 10,000) inflates the time of whichever library learns faster. An
  evaluation at or above the target is confirmed on 50 fresh episodes; the target counts as
  reached only when their mean is at or above it too, and the run then stops. Otherwise it
  stops after the step budget.
- The time to target is wall-clock from the start of the training process (interpreter,
  imports, env and model construction, evaluations and confirmations included): what a user
  waits for. The time from the start of training is reported beside it.
- Stable-Baselines3 uses the hyper-parameters its RL Zoo publishes for the task (tuned against
  tuned); xiaoyarl uses what `xiaoyarl train ALGO ENV` starts from: the task preset of the pair
  where one exists (`xiaoyarl list` names them), else its defaults. `--defaults` gives xiaoyarl
  its defaults everywhere (`--no-preset`: general defaults against the zoo's tuning). Nothing
  else is set but the backend, seed, budget and evaluation schedule.

Reported per task and library: seeds solved, median env steps to the target, seconds to the
target from process start (median, min, max over solved seeds) and from training start, the
final evaluation return, training steps per second (evaluation excluded), peak resident
memory of the training process, and the ratio SB3 / xiaoyarl of the median seconds to target
from process start. Also xiaoyarl-only rows for its torch-native envs (what a user gets by
switching `--backend torch`) and the random-action throughput of each bare simulator.

    pip install -e '.[bench]'
    python benchmarks/compare.py --quick                 # a subset, under ~15 minutes
    python benchmarks/compare.py                         # every task, 3 seeds
    python benchmarks/compare.py --tasks sac-pendulum --seeds 0 1 2 3 4
    python benchmarks/compare.py --defaults              # xiaoyarl without its presets

"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from machine import machine

HERE = Path(__file__).resolve().parent
CONFIRM_EPISODES = 50  # fresh episodes that must confirm an evaluation at the target


@dataclass(frozen=True)
class Task:
    """One row of the comparison. `zoo` holds the RL Zoo's hyper-parameters for SB3."""

    algo: str  # xiaoyarl's name (SB3's class is the upper-case form, see SB3_CLASSES)
    env_id: str
    target: float
    budget: int  # env steps, for both libraries
    eval_every: int
    zoo: dict = field(default_factory=dict)
    n_envs: int = 1  # SB3's number of training envs (the zoo's n_envs)
    backend: str = "gymnasium"  # xiaoyarl's backend
    xiaoyarl_only: bool = False
    xiaoyarl_set: tuple[str, ...] = ()  # only for the xiaoyarl-only rows (num_envs)
    normalize: bool = False  # the zoo's `normalize: true`: SB3 trains in VecNormalize
    stop_at_target: bool = True  # False: a fixed budget; every run trains all of it
    sb3_algo: str | None = None  # SB3's algorithm, where xiaoyarl's has none there (PQN)


# RL Zoo hyper-parameters (rl-baselines3-zoo, hyperparams/*.yml). "lin_X" is a linear schedule
# from X to 0 over the run. The zoo's DQN CartPole budget is 50k env steps; with the 100k budget
# used here its exploration_fraction is halved so epsilon decays over the same 8k steps.
ZOO_PPO_CARTPOLE = dict(
    n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
    learning_rate="lin_0.001", clip_range="lin_0.2",
)  # fmt: skip
ZOO_OFF_POLICY_PENDULUM = dict(  # td3.yml and ddpg.yml, Pendulum
    gamma=0.98, buffer_size=200_000, learning_starts=10_000, noise_std=0.1,
    gradient_steps=-1, train_freq=(1, "episode"), learning_rate=1e-3, net_arch=[400, 300],
)  # fmt: skip
ZOO_PPO_HOPPER = dict(  # ppo.yml, Hopper (tuned by the zoo's authors), with `normalize: true`
    n_steps=512, batch_size=32, gamma=0.999, learning_rate=9.80828e-05, ent_coef=0.00229519,
    clip_range=0.2, n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671,
    log_std_init=-2, ortho_init=False, activation_fn="relu", net_arch=[256, 256],
)  # fmt: skip
ZOO_PPO_HALFCHEETAH = dict(  # ppo.yml, HalfCheetah (tuned by the zoo's authors), `normalize: true`
    n_steps=512, batch_size=64, gamma=0.98, learning_rate=2.0633e-05, ent_coef=0.000401762,
    clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096,
    log_std_init=-2, ortho_init=False, activation_fn="relu", net_arch=[256, 256],
)  # fmt: skip
ZOO_DQN_CARTPOLE = dict(  # dqn.yml, CartPole
    learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.08,
    exploration_final_eps=0.04, net_arch=[256, 256],
)  # fmt: skip
# env steps between evaluations on CartPole (episodes of up to 500 steps), for both libraries
CARTPOLE_EVAL_EVERY = 2_500


def _torch_cartpole_ppo(*xiaoyarl_set: str) -> Task:
    """PPO on the torch-native CartPole, xiaoyarl alone (with `xiaoyarl_set`'s fields)."""
    return Task("ppo", "CartPole-v1", 475, 3_000_000, CARTPOLE_EVAL_EVERY, backend="torch",
                xiaoyarl_only=True, xiaoyarl_set=xiaoyarl_set)  # fmt: skip


TASKS: dict[str, Task] = {
    "ppo-cartpole": Task(
        "ppo", "CartPole-v1", 475, 100_000, CARTPOLE_EVAL_EVERY, ZOO_PPO_CARTPOLE, n_envs=8
    ),
    "a2c-cartpole": Task(
        "a2c", "CartPole-v1", 475, 200_000, CARTPOLE_EVAL_EVERY, dict(ent_coef=0.0), n_envs=8
    ),
    "dqn-cartpole": Task("dqn", "CartPole-v1", 475, 100_000, CARTPOLE_EVAL_EVERY, ZOO_DQN_CARTPOLE),
    # PQN has no Stable-Baselines3 implementation: compared with the zoo's tuned DQN, on
    # gymnasium's CartPole (8 sub-envs) and on the torch-native one (SB3 on gymnasium's)
    "pqn-cartpole": Task(
        "pqn", "CartPole-v1", 475, 100_000, CARTPOLE_EVAL_EVERY, ZOO_DQN_CARTPOLE, sb3_algo="dqn"
    ),  # fmt: skip
    "pqn-cartpole-torch": Task(
        "pqn",
        "CartPole-v1",
        475,
        100_000,
        CARTPOLE_EVAL_EVERY,
        ZOO_DQN_CARTPOLE,
        sb3_algo="dqn",
        backend="torch",
    ),  # fmt: skip
    "sac-pendulum": Task("sac", "Pendulum-v1", -200, 30_000, 1_000, dict(learning_rate=1e-3)),
    # FastTD3 and FastSAC (1,024 torch-native sub-envs) against the zoo's SAC on gymnasium's env
    **{
        f"{algo}-pendulum-torch": Task(
            algo,
            "Pendulum-v1",
            -200,
            300_000,
            1_000,
            dict(learning_rate=1e-3),
            sb3_algo="sac",
            backend="torch",
        )
        for algo in ("fast_td3", "fast_sac")
    },  # fmt: skip
    "td3-pendulum": Task("td3", "Pendulum-v1", -200, 30_000, 1_000, ZOO_OFF_POLICY_PENDULUM),
    "ddpg-pendulum": Task("ddpg", "Pendulum-v1", -200, 30_000, 1_000, ZOO_OFF_POLICY_PENDULUM),
    "sac-hopper": Task("sac", "Hopper-v5", 1_000, 100_000, 5_000, dict(learning_starts=10_000)),
    # fixed budgets (no early stop): the returns both libraries reach in as many env steps
    "sac-hopper-100k": Task(
        "sac",
        "Hopper-v5",
        1_000,
        100_000,
        10_000,
        dict(learning_starts=10_000),
        stop_at_target=False,
    ),
    "ppo-hopper-300k": Task(
        "ppo",
        "Hopper-v5",
        1_000,
        300_000,
        20_000,
        ZOO_PPO_HOPPER,
        normalize=True,
        stop_at_target=False,
    ),
    # the zoo's budget for its tuned MuJoCo PPO; the target only marks when it is first passed
    "ppo-halfcheetah-1m": Task(
        "ppo",
        "HalfCheetah-v5",
        3_000,
        1_000_000,
        100_000,
        ZOO_PPO_HALFCHEETAH,
        normalize=True,
        stop_at_target=False,
    ),
    # xiaoyarl only: the torch-native envs
    "ppo-cartpole-torch": _torch_cartpole_ppo(),
    "ppo-cartpole-torch-1024": _torch_cartpole_ppo("num_envs=1024"),
    "ppo-pendulum-torch-1024": Task(
        "ppo",
        "Pendulum-v1",
        -200,
        8_000_000,
        20_000,
        backend="torch",
        xiaoyarl_only=True,
        xiaoyarl_set=("num_envs=1024",),
    ),  # fmt: skip
}
QUICK = ["ppo-cartpole", "sac-pendulum", "ppo-cartpole-torch"]
# need `pip install -e '.[mujoco]'`; run with --tasks NAME
LONG = ["sac-hopper", "sac-hopper-100k", "ppo-hopper-300k", "ppo-halfcheetah-1m"]
SB3_CLASSES = {"ppo": "PPO", "a2c": "A2C", "dqn": "DQN", "sac": "SAC", "td3": "TD3", "ddpg": "DDPG"}


# --- one training run, inside its own process ---------------------------------------------------
def run_xiaoyarl(task: Task, seed: int, threads: int | None, root: Path,
                 defaults: bool = False) -> dict:  # fmt: skip
    from xiaoyarl import Config, train_agent
    from xiaoyarl.config_io import apply_overrides, config_from_preset

    # what `xiaoyarl train` starts from (with --no-preset: the library's defaults)
    config = (Config(algo=task.algo, env_id=task.env_id) if defaults
              else config_from_preset(task.algo, task.env_id))  # fmt: skip
    for name, value in dict(
        backend=task.backend, seed=seed, threads=threads,
        max_steps=task.budget, target_return=task.target, eval_every=task.eval_every,
        stop_at_target=task.stop_at_target,
        eval_episodes=10, confirm_episodes=CONFIRM_EPISODES, checkpoint_every=10**12,
        cwd=str(root / "xiaoyarl"),
    ).items():  # fmt: skip
        setattr(config, name, value)
    apply_overrides(config, list(task.xiaoyarl_set))
    summary = train_agent(config, log=None)
    with open(root / "xiaoyarl" / "recorder.csv") as f:  # every evaluation: (env steps, mean)
        curve = [[int(r["step"]), float(r["eval_mean"])] for r in csv.DictReader(f)]
    return {
        "curve": curve,
        "solved": summary["solved"],
        "steps_to_target": summary["steps_to_target"],
        "seconds_to_target": summary["process_seconds_to_target"],
        "train_seconds_to_target": summary["seconds_to_target"],
        "final_eval": summary["final_eval_mean"],
        "total_steps": summary["total_steps"],
        "train_seconds": summary["train_seconds"],
        "eval_seconds": summary["eval_seconds"],
        "threads": summary["threads"],
    }


def _sb3_kwargs(task: Task, action_dim: int) -> tuple[dict, dict]:
    """(model kwargs, policy kwargs) from the zoo's entry, with schedules and noise built."""
    import numpy as np
    import torch
    from stable_baselines3.common.noise import NormalActionNoise

    kwargs, policy_kwargs = {}, {}
    for name, value in task.zoo.items():
        if name == "activation_fn":
            policy_kwargs[name] = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[value]
        elif name in ("net_arch", "log_std_init", "ortho_init"):
            policy_kwargs[name] = value
        elif name == "noise_std":
            kwargs["action_noise"] = NormalActionNoise(
                np.zeros(action_dim), value * np.ones(action_dim)
            )
        elif isinstance(value, str) and value.startswith("lin_"):
            start = float(value[4:])
            kwargs[name] = lambda progress, start=start: progress * start
        else:
            kwargs[name] = value
    return kwargs, policy_kwargs


def run_sb3(task: Task, seed: int, threads: int | None, root: Path) -> dict:
    import numpy as np
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    from xiaoyarl.train.evaluator import CONFIRM_SEED_OFFSET, evaluation_seed
    from xiaoyarl.train.progress import process_seconds

    os.environ.setdefault("SB3_LOGDIR", str(root / "sb3"))  # not a new empty folder in /tmp
    env = make_vec_env(task.env_id, n_envs=task.n_envs, seed=seed)
    # Evaluation starts as xiaoyarl's evaluator draws them (`evaluation_seed`): with seeds
    # `seed + 10_000`, runs with neighbouring seeds shared their sub-envs' streams, and the 10
    # runs of a Pendulum table ended on 19 distinct start states (BENCHMARKS.md, stability).
    eval_seed = evaluation_seed(seed)
    eval_env = make_vec_env(task.env_id, n_envs=10, seed=eval_seed)
    confirm_env = make_vec_env(task.env_id, n_envs=CONFIRM_EPISODES,
                               seed=CONFIRM_SEED_OFFSET + eval_seed)  # fmt: skip
    if task.normalize:  # evaluation sees observations scaled with the training statistics
        env = VecNormalize(env)
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
        confirm_env = VecNormalize(confirm_env, training=False, norm_reward=False)
    kwargs, policy_kwargs = _sb3_kwargs(task, int(np.prod(env.action_space.shape)))
    model_class = getattr(stable_baselines3, SB3_CLASSES[task.sb3_algo or task.algo])
    model = model_class(
        "MlpPolicy", env, seed=seed, policy_kwargs=policy_kwargs or None, device="cpu", **kwargs
    )
    result = {"solved": False, "steps_to_target": None, "seconds_to_target": None,
              "train_seconds_to_target": None, "final_eval": math.nan, "eval_seconds": 0.0,
              "threads": torch.get_num_threads(), "curve": []}  # fmt: skip

    class Evaluate(BaseCallback):
        """Every `eval_every` env steps: 10 deterministic episodes; stop at the target."""

        next_eval = task.eval_every

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return True
            self.next_eval += task.eval_every
            return evaluate(self.num_timesteps)

    def evaluate(step: int) -> bool:
        """Evaluate (confirming a score at the target); False once the target is reached."""
        t0 = time.perf_counter()
        if task.normalize:
            eval_env.obs_rms = confirm_env.obs_rms = env.obs_rms.copy()
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
        reached = mean >= task.target and task.stop_at_target
        if reached:
            confirm, _ = evaluate_policy(model, confirm_env, n_eval_episodes=CONFIRM_EPISODES,
                                         deterministic=True)  # fmt: skip
            reached = confirm >= task.target
        result["eval_seconds"] += time.perf_counter() - t0
        result["final_eval"] = float(mean)
        result["last_eval_step"] = step
        result["curve"].append([step, float(mean)])
        if reached and not result["solved"]:
            now = time.perf_counter()
            result.update(solved=True, steps_to_target=step, train_seconds_to_target=now - start,
                          seconds_to_target=startup + now - start)  # fmt: skip
            return False
        return True

    startup = process_seconds()
    start = time.perf_counter()
    model.learn(total_timesteps=task.budget, callback=Evaluate())
    if not result["solved"] and result.get("last_eval_step") != model.num_timesteps:
        evaluate(model.num_timesteps)  # the final evaluation, as xiaoyarl makes one
    result["train_seconds"] = time.perf_counter() - start
    result["total_steps"] = model.num_timesteps
    return result


def child(lib: str, task_name: str, seed: int, threads: int | None, budget: int, out: Path,
          defaults: bool = False) -> None:  # fmt: skip
    """Entry point of a training process: train, then write the result as JSON to `out`."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    task = TASKS[task_name]
    if budget:
        task = Task(**{**task.__dict__, "budget": min(budget, task.budget)})
    with tempfile.TemporaryDirectory() as tmp:
        if lib == "xiaoyarl":
            result = run_xiaoyarl(task, seed, threads, Path(tmp), defaults)
        else:
            result = run_sb3(task, seed, threads, Path(tmp))
    result["steps_per_second"] = result["total_steps"] / max(
        result["train_seconds"] - result["eval_seconds"], 1e-9
    )
    out.write_text(json.dumps(result))


def train(lib: str, task_name: str, seed: int, threads: int | None, budget: int, tmp: Path,
          script: str = __file__, defaults: bool = False) -> dict:  # fmt: skip
    """Run one training in a fresh process (`script --child ...`, which knows the task);
    add its peak resident memory (MiB)."""
    out = tmp / f"{lib}_{task_name}_{seed}.json"
    command = [sys.executable, script, "--child", lib, task_name, str(seed), str(out),
               "--budget", str(budget or 0)] + (["--defaults"] if defaults else [])  # fmt: skip
    env = dict(os.environ)
    if threads:
        command += ["--threads", str(threads)]
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    stderr = process.stderr.read()
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0 or not out.exists():
        raise RuntimeError(f"{lib} {task_name} seed {seed} failed:\n{stderr[-3000:]}")
    result = json.loads(out.read_text())
    result["peak_mib"] = usage.ru_maxrss / 1024  # Linux reports KiB
    return result


# --- the report ------------------------------------------------------------------------------
def summarize(runs: list[dict]) -> dict:
    secs = [r["seconds_to_target"] for r in runs if r["solved"]]
    train_secs = [r["train_seconds_to_target"] for r in runs if r["solved"]]
    steps = [r["steps_to_target"] for r in runs if r["solved"]]
    return {
        "median_train_seconds": statistics.median(train_secs) if train_secs else None,
        "threads": runs[0]["threads"],
        "solved": sum(r["solved"] for r in runs),
        "seeds": len(runs),
        "median_steps": statistics.median(steps) if steps else None,
        "median_seconds": statistics.median(secs) if secs else None,
        "min_seconds": min(secs) if secs else None,
        "max_seconds": max(secs) if secs else None,
        "final_eval": statistics.median(r["final_eval"] for r in runs),
        "steps_per_second": statistics.median(r["steps_per_second"] for r in runs),
        "peak_mib": max(r["peak_mib"] for r in runs),
    }


def table(results: dict[str, dict[str, list[dict]]]) -> str:
    lines = [
        "| task | library | threads | seeds solved | median steps to target | s to target from "
        "process start: median (min-max) | s from training start (median) | final eval | "
        "train steps/s | peak MiB | SB3 / xiaoyarl (median s from process start) |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, by_lib in results.items():
        task = TASKS[name]
        if not task.stop_at_target:
            continue  # in `fixed_budget_table`
        summaries = {lib: summarize(runs) for lib, runs in by_lib.items()}
        ours = summaries["xiaoyarl"]["median_seconds"]
        theirs = summaries.get("sb3", {}).get("median_seconds")
        for lib, s in summaries.items():
            ratio = ""
            if lib == "xiaoyarl" and "sb3" in summaries:
                ratio = f"{theirs / ours:.1f}x" if ours and theirs else "n/a (unsolved)"
            secs = "-"
            if s["median_seconds"] is not None:
                secs = (f"{s['median_seconds']:.1f} ({s['min_seconds']:.1f}-"
                        f"{s['max_seconds']:.1f})")  # fmt: skip
            steps = f"{s['median_steps']:,.0f}" if s["median_steps"] is not None else "-"
            train = s["median_train_seconds"]
            train = f"{train:.1f}" if train is not None else "-"
            sb3_name = "Stable-Baselines3" + (f" {task.sb3_algo}" if task.sb3_algo else "")
            label = f"{task.algo} {task.env_id} ({task.backend}{', ' if task.xiaoyarl_set else ''}"
            label += f"{' '.join(task.xiaoyarl_set)}), target {task.target:g}"
            lines.append(
                f"| {label} | {'xiaoyarl' if lib == 'xiaoyarl' else sb3_name} | "
                f"{s['threads']} | {s['solved']}/{s['seeds']} | {steps} | {secs} | {train} | "
                f"{s['final_eval']:.1f} | {s['steps_per_second']:,.0f} | {s['peak_mib']:,.0f} | "
                f"{ratio} |"
            )
    return "\n".join(lines)


def fixed_budget_table(results: dict[str, dict[str, list[dict]]]) -> str:
    """The fixed-budget tasks: every seed's final evaluation (10 episodes) after the whole
    budget, their median, and the training time per env step (evaluations excluded)."""
    lines = [
        "| task | library | threads | final return per seed | median | us per env step | "
        "peak MiB |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, by_lib in results.items():
        task = TASKS[name]
        if task.stop_at_target:
            continue
        for lib, runs in by_lib.items():
            finals = [r["final_eval"] for r in runs]
            us = statistics.median(1e6 / r["steps_per_second"] for r in runs)
            lines.append(
                f"| {task.algo} {task.env_id}, {task.budget:,} env steps | "
                f"{'xiaoyarl' if lib == 'xiaoyarl' else 'Stable-Baselines3'} | "
                f"{runs[0]['threads']} | {' / '.join(f'{f:.0f}' for f in finals)} | "
                f"{statistics.median(finals):.0f} | {us:,.0f} | "
                f"{max(r['peak_mib'] for r in runs):,.0f} |"
            )
    return "\n".join(lines)


def throughput_table(
    envs: list[str], seconds: float, threads: int | None
) -> tuple[str, list[dict]]:
    import torch
    from env_throughput import bench_gym_single, bench_gym_vector, bench_torch

    torch.set_num_threads(threads or 1)
    rows = []
    for env_id in envs:
        rows.append((env_id, "gymnasium `make`, Python loop", 1,
                     bench_gym_single(env_id, seconds)))  # fmt: skip
        vector = bench_gym_vector(env_id, 4096, seconds)
        if vector is not None:
            rows.append((env_id, "gymnasium numpy-vectorized", 4096, vector))
        rows.append((env_id, "xiaoyarl torch-native, CPU", 4096,
                     bench_torch(env_id, 4096, "cpu", seconds)))  # fmt: skip
    lines = ["| env | simulator | num_envs | random-action steps/s |"]
    lines.append("| --- | --- | ---: | ---: |")
    lines += [f"| {e} | {sim} | {n:,} | {rate:,.0f} |" for e, sim, n, rate in rows]
    raw = [{"env": e, "simulator": s, "num_envs": n, "sps": r} for e, s, n, r in rows]
    return "\n".join(lines), raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS),
                        default=[t for t in TASKS if t not in LONG])  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"tasks {' '.join(QUICK)}, seeds 0 1 2, short throughput",
    )
    parser.add_argument("--threads", type=int, help="pin torch threads in every training "
                        "process (default: each library's own default)")  # fmt: skip
    parser.add_argument("--budget", type=int, help="cap every task's step budget (smoke test)")
    parser.add_argument("--throughput-seconds", type=float, default=1.0)
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="xiaoyarl without its task presets (the library's defaults)",
    )
    parser.add_argument("--child", nargs=4, metavar=("LIB", "TASK", "SEED", "OUT"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.child:
        lib, task_name, seed, out = args.child
        child(lib, task_name, int(seed), args.threads, args.budget or 0, Path(out), args.defaults)
        return
    if args.quick:
        args.tasks = QUICK
    needs_sb3 = any(not TASKS[name].xiaoyarl_only for name in args.tasks)
    if needs_sb3 and importlib.util.find_spec("stable_baselines3") is None:
        raise SystemExit(
            "compare.py trains Stable-Baselines3 beside xiaoyarl, and it is not installed: "
            "pip install -e '.[bench]' (or pick only xiaoyarl-only tasks with --tasks)."
        )

    results: dict[str, dict[str, list[dict]]] = {}
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tasks:
            libs = ["xiaoyarl"] if TASKS[name].xiaoyarl_only else ["xiaoyarl", "sb3"]
            results[name] = {lib: [] for lib in libs}
            for seed in args.seeds:
                for lib in libs:  # alternate: A, B, A, B, ...
                    r = train(lib, name, seed, args.threads, args.budget, Path(tmp),
                              defaults=args.defaults)  # fmt: skip
                    results[name][lib].append(r)
                    secs = r["seconds_to_target"]
                    print(
                        f"{name:24s} {lib:8s} seed {seed}: solved={r['solved']} "
                        f"steps={r['steps_to_target']} s={secs and round(secs, 1)} "
                        f"final={r['final_eval']:.1f} sps={r['steps_per_second']:,.0f} "
                        f"peak={r['peak_mib']:,.0f} MiB",
                        flush=True,
                    )
    envs = sorted({TASKS[n].env_id for n in args.tasks} & {"CartPole-v1", "Pendulum-v1"})
    throughput, raw = throughput_table(envs, args.throughput_seconds, args.threads)

    import torch

    sb3 = "not used"
    if needs_sb3:
        import stable_baselines3

        sb3 = stable_baselines3.__version__
    threads = f"{args.threads} torch thread(s)" if args.threads else "default torch threads"
    settings = "its defaults" if args.defaults else "its task presets where they exist"
    print(
        f"\n{machine()}, xiaoyarl with {settings}, Stable-Baselines3 {sb3}, {threads} per "
        f"process, seeds "
        f"{' '.join(map(str, args.seeds))}, {time.strftime('%Y-%m-%d')}, "
        f"{time.time() - started:,.0f} s in all\n"
    )
    print(table(results))
    print()
    if any(not TASKS[name].stop_at_target for name in results):
        print(fixed_budget_table(results))
        print()
    print(throughput)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": machine(), "torch": torch.__version__, "threads": args.threads,
             "xiaoyarl_settings": "defaults" if args.defaults else "presets",
             "results": results, "throughput": raw}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
