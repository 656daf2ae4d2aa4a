"""Hybrid actions and action masks: the learning checks of the tests' small tasks, on several
seeds, against what playing at random earns.

- `action_envs:Kick-v0`, hybrid actions in Platform's layout, `Tuple(Discrete(3), Tuple(Box(1),
  Box(1), Box(1)))`: the kind of kick a target's distance needs, aimed by that kind's own
  parameter (target 9 of 10). PPO with its defaults.
- `action_envs:PickAllowed-v0`, action masks: the allowed action of the largest of four values,
  a random half of the actions allowed each step (target 9 of 10). DQN with its defaults, and
  DQN blind to the masks (`hide_mask`: not shown, a masked action earns 0 like a wrong one).

Every run is `xiaoyarl train ALGO ENV --seed S --max-steps B --threads 1 --summary-json F`, the
tests' envs on the PYTHONPATH; counted solved when an evaluation reaches the target and the
confirming episodes agree. Runs go two at a time (`--jobs`), one torch thread each. The random
baselines are 1,000 episodes each, played here.

Usage: python benchmarks/action_kinds.py [--seeds 0 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import gymnasium
import numpy as np
from machine import machine
from seeded import TEST_ENVS, add_seed_options, run_all, train_cli

# name -> (algorithm, env id, budget in env steps, extra CLI arguments)
RUNS = {
    "hybrid PPO": ("ppo", "action_envs:Kick-v0", 400_000, []),
    "masked DQN": ("dqn", "action_envs:PickAllowed-v0", 20_000, []),
    "DQN blind to the masks": ("dqn", "action_envs:PickAllowed-v0", 20_000,
                               ["--set", "env_kwargs={hide_mask: true}"]),
}  # fmt: skip


def train(name: str, seed: int, scale: float, root: Path) -> dict:
    algo, env_id, budget, extra = RUNS[name]
    cwd = root / f"{name.replace(' ', '_')}_{seed}"
    result = train_cli(algo, env_id, seed, int(budget * scale), cwd, extra)
    return {"run": name, "algo": algo, "env": env_id, "seed": seed, **result}


def random_returns(episodes: int = 1_000) -> dict[str, float]:
    """The mean return of playing at random: over every action, and over the right kinds of
    kick or the allowed actions only."""
    sys.path.insert(0, str(TEST_ENVS))
    import action_envs  # noqa: F401  (registers the envs)

    def play(env_id: str, act: Callable, **kwargs: object) -> float:
        env = gymnasium.make(env_id, **kwargs)
        env.action_space.seed(0)
        rng, total = np.random.default_rng(0), 0.0
        for episode in range(episodes):
            obs, info = env.reset(seed=episode)
            done = False
            while not done:
                obs, reward, terminated, truncated, info = env.step(act(env, obs, info, rng))
                total, done = total + reward, terminated or truncated
        return total / episodes

    def right_kick(env, obs, info, rng):  # noqa: ANN001, ANN202
        kick = min(2, int(3 * obs[1]))
        return kick, tuple(rng.uniform(-1, 1, (1,)).astype(np.float32) for _ in range(3))

    def allowed(env, obs, info, rng):  # noqa: ANN001, ANN202
        return int(rng.choice(np.flatnonzero(info["action_mask"])))

    def anything(env, obs, info, rng):  # noqa: ANN001, ANN202
        return env.action_space.sample()

    return {
        "Kick-v0, random": play("Kick-v0", anything),
        "Kick-v0, the right kinds of kick aimed at random": play("Kick-v0", right_kick),
        "PickAllowed-v0, random over every action": play("PickAllowed-v0", anything,
                                                         hide_mask=True),
        "PickAllowed-v0, random over the allowed actions": play("PickAllowed-v0", allowed),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_seed_options(parser, max_steps=None)  # each run has its own budget
    parser.add_argument("--scale", type=float, default=1.0, help="of every budget (a quick try)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="xiaoyarl-actions-"))
    tasks = [(name, seed, args.scale, root) for name in RUNS for seed in args.seeds]
    results = run_all(train, tasks, args.jobs)
    print("| run | task | env steps | solved | env steps to target | best eval |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (_, env_id, budget, _) in RUNS.items():
        rows = [r for r in results if r["run"] == name]
        solved = sum(r["solved"] for r in rows)
        steps = " / ".join(f"{r['steps_to_target']:,}" if r["solved"] else "-" for r in rows)
        best = " / ".join(f"{r['best_eval_mean']:.2f}" for r in rows)
        print(f"| {name} | {env_id} | {int(budget * args.scale):,} | {solved}/{len(rows)} | "
              f"{steps} | {best} |")  # fmt: skip
    baselines = random_returns()
    for what, value in baselines.items():
        print(f"- {what}: {value:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "runs": results,
                                         "random": baselines}, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
