"""Milliseconds per SAC gradient step (sample 256 transitions + critic, actor and temperature
updates): xiaoyarl against Stable-Baselines3, same machine, same run, same sizes.

Both use Pendulum-v1's sizes (state 3, action 1), twin critics and an actor of [256, 256]
hidden units, batch 256, Adam, a learned temperature, and a replay buffer of 100k random
transitions. xiaoyarl times `buffer.sample` + `AgentSAC.update_step`; Stable-Baselines3 times
`SAC.train(gradient_steps=N, batch_size=256)`, which samples and updates the same way. The two
are measured alternately (A, B, A, B, ...) and the median of `--repeats` rounds is reported.
Stable-Baselines3 comes with the bench extra: `pip install -e '.[bench]'`.

    python benchmarks/sac_update.py --threads 1 --steps 200 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from machine import machine

from xiaoyarl import Config
from xiaoyarl.agents.sac import AgentSAC
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.core.buffer import Transitions
from xiaoyarl.envs import make_env

FILL = 100_000


def xiaoyarl_sac() -> callable:
    spec = make_env("Pendulum-v1", 1, backend="gymnasium").spec
    config = resolve_config(Config(algo="sac", env_id="Pendulum-v1", backend="gymnasium"), False)
    agent = AgentSAC(spec, config, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    agent.buffer.add(
        Transitions(
            states=torch.randn(FILL, 1, 3, generator=g),
            actions=torch.rand(FILL, 1, 1, generator=g) * 2 - 1,
            rewards=torch.randn(FILL, 1, generator=g),
            terminals=torch.zeros(FILL, 1, dtype=torch.bool),
            truncates=torch.zeros(FILL, 1, dtype=torch.bool),
            next_states=torch.randn(FILL, 1, 3, generator=g),
        )
    )

    def steps(n: int) -> None:
        for _ in range(n):
            agent.update_step(agent.buffer.sample(config.batch_size))
            agent.updates += 1

    return steps


def sb3_sac() -> callable | None:
    try:
        import gymnasium
        from stable_baselines3 import SAC
    except ImportError:
        return None
    model = SAC("MlpPolicy", gymnasium.make("Pendulum-v1"), batch_size=256, buffer_size=FILL,
                learning_starts=0, seed=0, device="cpu", verbose=0)  # fmt: skip
    from stable_baselines3.common.logger import configure

    model.set_logger(configure(folder=None, format_strings=[]))
    buf, rng = model.replay_buffer, np.random.default_rng(0)
    buf.observations[:] = rng.standard_normal(buf.observations.shape)
    buf.next_observations[:] = rng.standard_normal(buf.next_observations.shape)
    buf.actions[:] = rng.uniform(-2, 2, buf.actions.shape)
    buf.rewards[:] = rng.standard_normal(buf.rewards.shape)
    buf.full, buf.pos = True, 0

    def steps(n: int) -> None:
        model.train(gradient_steps=n, batch_size=256)

    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200, help="gradient steps per round")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    libraries = {"xiaoyarl": xiaoyarl_sac(), "stable-baselines3": sb3_sac()}
    libraries = {name: fn for name, fn in libraries.items() if fn is not None}
    for fn in libraries.values():
        fn(20)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in libraries}
    for _ in range(args.repeats):
        for name, fn in libraries.items():
            start = time.perf_counter()
            fn(args.steps)
            times[name].append((time.perf_counter() - start) / args.steps * 1e3)

    print(
        f"\nSAC gradient step, batch 256, [256, 256], {machine()}, {args.threads} torch "
        f"thread(s), {time.strftime('%Y-%m-%d')}\n"
    )
    print("| library | ms per gradient step (median) | min-max |")
    print("| --- | --- | --- |")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |")
    if "stable-baselines3" in times:
        ratio = statistics.median(times["stable-baselines3"]) / statistics.median(times["xiaoyarl"])
        print(f"\nStable-Baselines3 / xiaoyarl: {ratio:.2f}x")
    else:
        print("\n(stable-baselines3 is not installed: pip install -e '.[bench]')")
    if args.json:
        Path(args.json).write_text(json.dumps(times, indent=2))


if __name__ == "__main__":
    main()
