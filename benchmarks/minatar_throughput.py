"""Random-action steps per second of MinAtar: the `minatar` package against xiaoyarl's
torch-native games (`xiaoyarl/envs/minatar/`), at 1 to 4,096 sub-envs.

The package steps one game per `Environment`; N sub-envs are N of them in a Python loop (what a
vector env of them does), so its rate hardly depends on N and is measured at 1 and 16, acting
only, and at 16 also reading each game's observation after its step (`Environment.state()`),
as a vector env that gives an agent its observations does and as a torch step does. The
torch-native games step all N sub-envs as one batch of tensor operations, on the CPU here, and
on CUDA when available. Both with sticky actions (0.1), difficulty ramping and auto-reset; a
step of N sub-envs counts as N steps. Actions are drawn before the clock starts.

    python benchmarks/minatar_throughput.py --seconds 2 --threads 1 --json out.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from env_throughput import _time_steps
from machine import machine

from xiaoyarl.envs import make_env
from xiaoyarl.envs.registry import MINATAR_GAMES

SUB_ENVS = (1, 16, 256, 4096)


def bench_package(game: str, num_envs: int, seconds: float, observe: bool = False) -> float:
    """Steps/s of `num_envs` `minatar.Environment`s in a Python loop, resetting on done (and
    reading each step's observation where `observe`)."""
    from minatar import Environment

    envs = [Environment(game, sticky_action_prob=0.1) for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.seed(i)
        env.reset()
    actions = np.random.default_rng(0).integers(6, size=(64, num_envs)).tolist()

    def step(i: int) -> None:
        for env, action in zip(envs, actions[i % 64], strict=True):
            _, done = env.act(action)
            if observe:
                env.state()
            if done:
                env.reset()

    return num_envs * _time_steps(step, seconds, lambda: None)


def bench_torch(env_id: str, num_envs: int, seconds: float, device: str) -> float:
    env = make_env(env_id, num_envs, device=device, seed=0)
    env.reset(seed=0)
    generator = torch.Generator(device=device).manual_seed(0)
    actions = torch.randint(env.spec.action_dim, (64, num_envs), generator=generator,
                            device=device)  # fmt: skip

    def step(i: int) -> None:
        env.step(actions[i % 64])

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return num_envs * _time_steps(step, seconds, sync)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(MINATAR_GAMES))
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    rows = []
    print(f"{machine()}, {args.threads} thread(s)")
    for game in args.games:
        env_id = f"MinAtar/{game}-v1"
        row = {"game": game, "package": {}, **{device: {} for device in devices}}
        for n in (1, 16):
            row["package"][n] = bench_package(MINATAR_GAMES[game], n, args.seconds)
        row["package_observed"] = {16: bench_package(MINATAR_GAMES[game], 16, args.seconds, True)}
        for device in devices:
            for n in SUB_ENVS:
                row[device][n] = bench_torch(env_id, n, args.seconds, device)
        rows.append(row)
        cells = [f"package x{n}: {row['package'][n]:,.0f}" for n in (1, 16)]
        cells += [f"package x16 observed: {row['package_observed'][16]:,.0f}"]
        for device in devices:
            cells += [f"{device} x{n}: {row[device][n]:,.0f}" for n in SUB_ENVS]
        print(f"{game}: " + " | ".join(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "threads": args.threads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
