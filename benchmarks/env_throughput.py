"""Random-action steps per second of the bare simulators: gymnasium against xiaoyarl's torch envs.

Measures, for each env:
- gymnasium's single env (`gymnasium.make`), stepped in a Python loop that resets on done;
- gymnasium's own numpy-vectorized env where it registers one
  (`gymnasium.make_vec(id, N, vectorization_mode="vector_entry_point")`, e.g. CartPole-v1);
- xiaoyarl's torch-native env (`xiaoyarl.envs.classic.TORCH_ENVS`) on CPU, and on CUDA when
  available.

Actions are drawn before the clock starts and cycled, so the numbers are of the simulator
(auto-reset included), not of the action sampling. A step of N sub-envs counts as N steps.

    python benchmarks/env_throughput.py --envs CartPole-v1 Pendulum-v1 --seconds 2 \
        --threads 1 --json env_throughput.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable

import gymnasium
import numpy as np
import torch

from xiaoyarl.envs.classic import TORCH_ENVS

NUM_ACTION_BATCHES = 64  # distinct pre-drawn action batches, cycled through
STEPS_PER_CHECK = 16  # steps between clock reads


def _time_steps(step: Callable[[int], None], seconds: float, sync: Callable[[], None]) -> float:
    """Call `step(i)` for about `seconds` (after a short warm-up); returns calls per second."""
    for i in range(STEPS_PER_CHECK):
        step(i)
    sync()
    calls = 0
    start = time.perf_counter()
    while True:
        for _ in range(STEPS_PER_CHECK):
            step(calls)
            calls += 1
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls / elapsed


def bench_gym_single(env_id: str, seconds: float) -> float:
    """Steps/s of one gymnasium env in a Python loop, resetting on done."""
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(1024)]

    def step(i: int) -> None:
        _, _, terminated, truncated, _ = env.step(actions[i % len(actions)])
        if terminated or truncated:
            env.reset()

    rate = _time_steps(step, seconds, lambda: None)
    env.close()
    return rate


def bench_gym_vector(env_id: str, num_envs: int, seconds: float) -> float | None:
    """Steps/s of gymnasium's numpy-vectorized env, or None where it registers none."""
    if gymnasium.spec(env_id).vector_entry_point is None:
        return None
    envs = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    envs.reset(seed=0)
    envs.action_space.seed(0)
    actions = [envs.action_space.sample() for _ in range(NUM_ACTION_BATCHES)]

    def step(i: int) -> None:
        envs.step(actions[i % NUM_ACTION_BATCHES])

    rate = _time_steps(step, seconds, lambda: None)
    envs.close()
    return rate * num_envs


def bench_torch(env_id: str, num_envs: int, device: str, seconds: float) -> float:
    """Steps/s of xiaoyarl's torch-native env, auto-reset included."""
    env = TORCH_ENVS[env_id](num_envs, device=device, seed=0)
    env.reset()
    gen = torch.Generator(device=device).manual_seed(0)
    shape = (NUM_ACTION_BATCHES, num_envs)
    if env.spec.if_discrete:  # (batches, num_envs) int64
        actions = torch.randint(0, env.spec.action_dim, shape, generator=gen, device=device)
    else:  # (batches, num_envs, action_dim) in [-1, 1)
        shape = (*shape, env.spec.action_dim)
        actions = torch.rand(shape, generator=gen, device=device) * 2 - 1

    def step(i: int) -> None:
        env.step(actions[i % NUM_ACTION_BATCHES])

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    return _time_steps(step, seconds, sync) * num_envs


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(TORCH_ENVS), choices=list(TORCH_ENVS))
    parser.add_argument(
        "--num-envs", nargs="+", type=int, default=[1, 64, 1024, 4096], help="vector sizes"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    results: list[dict] = []

    def record(env_id: str, sim: str, device: str, num_envs: int, rate: float) -> None:
        results.append(
            {"env": env_id, "simulator": sim, "device": device, "num_envs": num_envs, "sps": rate}
        )
        print(f"  {env_id:26s} {sim:18s} {device:5s} N={num_envs:<5d} {rate:14,.0f} steps/s")

    for env_id in args.envs:
        record(env_id, "gymnasium", "cpu", 1, bench_gym_single(env_id, args.seconds))
        for n in args.num_envs:
            rate = bench_gym_vector(env_id, n, args.seconds)
            if rate is not None:
                record(env_id, "gymnasium-vector", "cpu", n, rate)
        for device in devices:
            for n in args.num_envs:
                record(
                    env_id,
                    "xiaoyarl-torch",
                    device,
                    n,
                    bench_torch(env_id, n, device, args.seconds),
                )

    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "torch": torch.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": np.__version__,
        "torch_threads": args.threads,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    print()
    print(f"torch {machine['torch']}, gymnasium {machine['gymnasium']}, {args.threads} thread(s)")
    print()
    print("| env | simulator | device | num_envs | steps/s |")
    print("|---|---|---|---:|---:|")
    for r in results:
        print(
            f"| {r['env']} | {r['simulator']} | {r['device']} | {r['num_envs']} | {r['sps']:,.0f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"machine": machine, "seconds": args.seconds, "results": results}, f, indent=2
            )
    return results


if __name__ == "__main__":
    main()
