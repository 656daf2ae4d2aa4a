"""Peak memory of a DQN run on an Atari game with a replay buffer of a million transitions.

The run is

    xiaoyarl train dqn ALE/Pong-v5 --seed 0 --threads 1 --num-envs 8 --max-steps BUDGET
        --set buffer_size=1000000 --set learning_starts=1000000 --eval-every BUDGET ...

so the buffer fills with a million transitions of the game (random actions, as every DQN run's
first `learning_starts` steps are) before the updates begin, and `BUDGET - 1,000,000` env steps
of learning follow, each update sampling from the full buffer. The process's peak resident
memory (`ru_maxrss`) is read when it ends. The buffer stores each of the game's frames once (the
4-frame stacks rebuilt when sampled); what a buffer of whole stacks would need is computed
by `ReplayBuffer.bytes_needed`, the number the agent checks against free memory before it
allocates.

Usage: python benchmarks/atari_memory.py [--env ALE/Pong-v5] [--max-steps 1004000] [--json F]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine

from xiaoyarl.core.buffer import ReplayBuffer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--backend", default="gymnasium")
    parser.add_argument("--buffer-size", type=int, default=1_000_000)
    parser.add_argument("--max-steps", type=int, default=1_004_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="xiaoyarl-atari-memory-"))
    command = [sys.executable, "-m", "xiaoyarl", "train", "dqn", args.env, "--seed", "0",
               "--threads", "1", "--num-envs", "8", "--backend", args.backend,
               "--max-steps", str(args.max_steps), "--eval-every", str(args.max_steps),
               "--set", f"buffer_size={args.buffer_size}",
               "--set", f"learning_starts={args.buffer_size}", "--set", "eval_episodes=1",
               "--set", "confirm_episodes=0", "--cwd", str(folder / "run"), "--quiet",
               "--summary-json", str(folder / "summary.json")]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    summary = json.loads((folder / "summary.json").read_text())
    sizes = (args.buffer_size, 8, 4 * 84 * 84, 6, True, 27_000, 1)
    result = {
        "env": args.env,
        "backend": args.backend,
        "buffer_size": args.buffer_size,
        "env_steps": summary["total_steps"],
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(peak / 2**30, 2),
        "buffer_frames_once_gib": round(ReplayBuffer.bytes_needed(*sizes, 4) / 2**30, 2),
        "buffer_whole_stacks_gib": round(ReplayBuffer.bytes_needed(*sizes) / 2**30, 2),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), **result}, indent=1) + "\n")


if __name__ == "__main__":
    main()
