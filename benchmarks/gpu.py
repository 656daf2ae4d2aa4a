"""The GPU measurement in one command: every massively parallel path, sized for the few minutes a
GPU machine is lent, with the goals each row is held against.

    python benchmarks/gpu.py                         # on a GPU machine: about 7 minutes
    python benchmarks/gpu.py --dry-run               # every row at tiny sizes on the CPU
    python benchmarks/gpu.py --only cartpole pqn     # some groups (names: --help)

How it travels to a bare GPU machine (wheels of what it lacks, the one-line command):
docs/guides/devices.md, "Measuring a GPU machine".

Each training row is one `train_agent` run in this process with the settings a user gets
(`xiaoyarl train ALGO ENV`: the task preset where there is one, the device's automatic sizes)
and what the row names; the `command` column is that command line. Rates are steady-state, as
the PufferLib and LeanRL authors measure: env steps (and updates) per second between the end of
the first fifth of a row's updates and its last one, the device synchronised at each update
(warm-up, graph capture and the first kernels excluded); a row stops at its time cap. The
seconds to a target are the run's own (`seconds_to_target`: from the loop's start, evaluation
included). The population rows are whole processes (start-up included on both sides), as
benchmarks/vmap_population.py times them.

Writes gpu.json and gpu.md into --out (default benchmarks/results/gpu); prints the table last,
and every row it skipped, with the reason.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from machine import machine
from training_throughput import simulator_rate
from vmap_population import one_member, vmapped

from xiaoyarl import Config, train_agent
from xiaoyarl.config_io import load_config
from xiaoyarl.presets import preset_path
from xiaoyarl.train.loop import Callback, TrainLoop

MINATAR_GAMES = ["Breakout", "Asterix", "Freeway", "Seaquest", "SpaceInvaders"]
# the goals of the GPU rows (one H100 or H200)
GOAL_CARTPOLE = 50e6  # PPO env steps/s end to end
GOAL_MINATAR = 20e6  # PPO env steps/s end to end on MinAtar Breakout
GOAL_PQN_SECONDS = 60.0  # PQN to the MinAtar paper's DQN score on Breakout
PQN_SCORE = 10.0  # the MinAtar paper's DQN on Breakout (Young and Tian 2019), about 10
GOAL_POPULATION = 2.0  # 256 vmapped PPO members in at most 2x one member's wall time
PENDULUM_TARGET = -200.0


class Clock(Callback):
    """Stamps (time, env steps, updates) after every update, the device synchronised; stops the
    run once `seconds` have passed since the first update."""

    def __init__(self, seconds: float, device: str) -> None:
        self.seconds = seconds
        self.sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        self.marks: list[tuple[float, int, int]] = []

    def on_update(self, loop: TrainLoop, logs: dict[str, torch.Tensor]) -> bool:
        self.sync()
        self.marks.append((time.perf_counter(), loop.total_steps, loop.updates))
        return self.marks[-1][0] - self.marks[0][0] < self.seconds

    def steady(self) -> dict:
        """Env steps/s and updates/s after the first fifth of the updates (None: too few)."""
        if len(self.marks) < 3:
            return {"steady_sps": None, "steady_ups": None, "timed_updates": len(self.marks)}
        (t0, s0, u0), (t1, s1, u1) = self.marks[max(1, len(self.marks) // 5)], self.marks[-1]
        return {"steady_sps": (s1 - s0) / (t1 - t0), "steady_ups": (u1 - u0) / (t1 - t0),
                "timed_updates": len(self.marks)}  # fmt: skip


@dataclass
class Row:
    """One measured row: its group, name, the command a user would type, a goal and the numbers."""

    group: str
    name: str
    command: str
    goal: str = ""
    met: bool | None = None
    numbers: dict = field(default_factory=dict)
    error: str | None = None


@dataclass
class Bench:
    """The device, sizes (full or dry-run), the scratch folder and the deadline of the rows."""

    device: str
    dry: bool
    root: Path
    deadline: float
    rows: list[Row] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def size(self, full: float, dry: float) -> float:
        return dry if self.dry else full

    def train(self, algo: str, env_id: str, seconds: float, max_steps: int,
              target: float | None = None, simulator: bool = False,
              **fields: object) -> dict:  # fmt: skip
        """One run as `xiaoyarl train ALGO ENV --device DEV` with `fields` set, stopped at
        `max_steps`, at `target` (when given) or after `seconds` of updates; its summary and
        steady-state rates (with `simulator`, also the bare env's random-action rate at the same
        sub-envs: what the learner leaves of it says which of the two limits the row)."""
        preset = preset_path(algo, env_id)
        config = load_config(preset) if preset else Config()
        config.algo, config.env_id, config.device, config.backend = (
            algo,
            env_id,
            self.device,
            "torch",
        )
        config.max_steps, config.checkpoint_every = max_steps, 10**15
        config.target_return = target if target is not None else 1e12  # never reached
        config.stop_at_target, config.confirm_episodes = True, 0
        config.eval_every = fields.pop("eval_every", 10**15)  # type: ignore[assignment]
        config.eval_episodes = fields.pop("eval_episodes", 10)  # type: ignore[assignment]
        for name, value in fields.items():
            setattr(config, name, value)
        config.cwd = str(self.root / f"{algo}_{env_id.replace('/', '_')}_{time.time_ns()}")
        clock = Clock(seconds, self.device)
        start = time.perf_counter()
        summary = train_agent(config, log=None, callbacks=[clock])
        seconds = self.size(1, 0.1)
        sim = simulator_rate(env_id, config.num_envs, self.device, seconds) if simulator else None
        return {"simulator_sps": sim, "wall_seconds": time.perf_counter() - start,
                "total_steps": summary["total_steps"],
                "updates": summary["updates"], "end_to_end_sps": summary["steps_per_second"],
                "seconds_to_target": summary["seconds_to_target"],
                "steps_to_target": summary["steps_to_target"],
                "final_eval": summary["final_eval_mean"], "num_envs": config.num_envs,
                "preset": preset.name if preset else None, **clock.steady()}  # fmt: skip

    def measure(self, group: str, name: str, command: str, goal: str,
                run: Callable[[], tuple[dict, bool | None]]) -> None:  # fmt: skip
        """Run one row unless the deadline passed; a failing row is kept with its error."""
        if time.perf_counter() > self.deadline:
            self.skipped.append(f"{group} / {name}: the time for the rows ran out (--seconds)")
            return
        row = Row(group, name, command, goal)
        try:
            row.numbers, row.met = run()
        except Exception as error:  # noqa: BLE001 - the other rows still run; the error is kept
            row.error = f"{type(error).__name__}: {error}"
            traceback.print_exc()
        self.rows.append(row)
        print(f"{group:10s} {name:34s} {_numbers(row)}", flush=True)


def _cli(algo: str, env_id: str, *extra: str) -> str:
    return " ".join(["xiaoyarl train", algo, env_id, "--device cuda", *filter(None, extra)])


def cartpole(b: Bench) -> None:
    """PPO end to end on torch-native CartPole-v1, 2^14-2^17 sub-envs, CUDA graphs on and off."""
    sizes = [64, 128] if b.dry else [2**14, 2**15, 2**16, 2**17]
    for n in sizes:
        for graphs in (True, False):

            def run(n: int = n, graphs: bool = graphs) -> tuple[dict, bool | None]:
                out = b.train("ppo", "CartPole-v1", b.size(8, 1), 10**12, num_envs=n,
                              cuda_graph=graphs, simulator=graphs)  # fmt: skip
                return out, (out["steady_sps"] or 0) >= GOAL_CARTPOLE if not b.dry else None

            b.measure("cartpole", f"ppo {n:,} sub-envs, graphs {'on' if graphs else 'off'}",
                      _cli("ppo", "CartPole-v1", f"--num-envs {n}",
                           "" if graphs else "--set cuda_graph=false"),
                      f">= {GOAL_CARTPOLE / 1e6:.0f}M steps/s", run)  # fmt: skip


def minatar(b: Bench) -> None:
    """PPO end to end on the five torch-native MinAtar games; Breakout's return after a budget."""
    n = 16 if b.dry else 8192
    for game in MINATAR_GAMES:
        env_id = f"MinAtar/{game}-v1"

        def run(env_id: str = env_id) -> tuple[dict, bool | None]:
            out = b.train("ppo", env_id, b.size(8, 1), 10**12, num_envs=n, simulator=True)
            met = (out["steady_sps"] or 0) >= GOAL_MINATAR if "Breakout" in env_id else None
            return out, None if b.dry else met

        goal = f">= {GOAL_MINATAR / 1e6:.0f}M steps/s" if game == "Breakout" else ""
        b.measure(
            "minatar",
            f"ppo {game} {n:,} sub-envs",
            _cli("ppo", env_id, f"--num-envs {n}"),
            goal,
            run,
        )
    budget = int(b.size(10_000_000, 2_048))

    def learn() -> tuple[dict, bool | None]:
        return b.train("ppo", "MinAtar/Breakout-v1", b.size(60, 5), budget, eval_episodes=64), None

    b.measure(
        "minatar",
        f"ppo Breakout return after {budget:,} steps",
        _cli("ppo", "MinAtar/Breakout-v1", f"--max-steps {budget}"),
        "",
        learn,
    )


def pqn(b: Bench) -> None:
    """PQN on MinAtar Breakout: seconds to the MinAtar paper's DQN score."""

    def run() -> tuple[dict, bool | None]:
        out = b.train("pqn", "MinAtar/Breakout-v1", b.size(75, 5), int(b.size(10**7, 4096)),
                      target=PQN_SCORE, eval_every=int(b.size(100_000, 2048)))  # fmt: skip
        seconds = out["seconds_to_target"]
        return out, None if b.dry else (seconds is not None and seconds <= GOAL_PQN_SECONDS)

    b.measure("pqn", f"pqn Breakout to {PQN_SCORE:g}",
              _cli("pqn", "MinAtar/Breakout-v1", f"--target-return {PQN_SCORE:g}"),
              f"<= {GOAL_PQN_SECONDS:.0f} s", run)  # fmt: skip


def fast_td3(b: Bench) -> None:
    """FastTD3 and FastSAC on Pendulum-v1, 1,024 and 4,096 sub-envs: updates/s, seconds to -200."""
    for algo in ("fast_td3", "fast_sac"):
        for n in [16, 32] if b.dry else [1024, 4096]:

            def run(algo: str = algo, n: int = n) -> tuple[dict, bool | None]:
                out = b.train(algo, "Pendulum-v1", b.size(30, 2), int(b.size(10**8, 2048)),
                              target=PENDULUM_TARGET, num_envs=n,
                              eval_every=int(b.size(50 * n, 1024)))  # fmt: skip
                return out, None

            b.measure(
                "fast_td3",
                f"{algo} {n:,} sub-envs to {PENDULUM_TARGET:g}",
                _cli(algo, "Pendulum-v1", f"--num-envs {n}"),
                "",
                run,
            )


def population(b: Bench) -> None:
    """A vmapped PPO population of 1, 16, 64 and 256 members against one member's `train` run."""
    budget = int(b.size(500_000, 1024))
    members = [1, 4] if b.dry else [1, 16, 64, 256]
    timeout = max(b.deadline - time.perf_counter(), 30)
    root = b.root / "population"
    base: dict = {}

    def alone() -> tuple[dict, bool | None]:
        base.update(one_member("ppo", "CartPole-v1", root, budget, 1, b.device, timeout))
        return base, None

    b.measure(
        "population",
        "train 1 member",
        _cli("ppo", "CartPole-v1", f"--max-steps {budget}"),
        "",
        alone,
    )
    for m in members:

        def run(m: int = m) -> tuple[dict, bool | None]:
            out = vmapped("ppo", "CartPole-v1", root, m, budget, 1, b.device, timeout)
            out["ratio"] = out["seconds"] / base["seconds"] if base else None
            met = out["ratio"] is not None and out["ratio"] <= GOAL_POPULATION
            return out, (met if m == 256 and not b.dry else None)

        b.measure(
            "population",
            f"vmap {m} members",
            f"xiaoyarl population ppo CartPole-v1 --members {m} --population-backend vmap "
            f"--max-steps {budget} --generation-steps {budget} --select-fraction 0 "
            f"--device cuda",
            f"<= {GOAL_POPULATION:g}x one" if m == 256 else "",
            run,
        )


def recurrent(b: Bench) -> None:
    """Recurrent PPO (LSTM) end to end on CartPole-v1 against feed-forward, same sub-envs."""
    n = 64 if b.dry else 16384
    for kind in (None, "lstm"):

        def run(kind: str | None = kind) -> tuple[dict, bool | None]:
            return b.train("ppo", "CartPole-v1", b.size(10, 1), 10**12, num_envs=n,
                           recurrent=kind), None  # fmt: skip

        b.measure("recurrent", f"ppo {kind or 'feed-forward'} {n:,} sub-envs",
                  _cli("ppo", "CartPole-v1", f"--num-envs {n}",
                       f"--set recurrent={kind}" if kind else ""), "", run)  # fmt: skip


def atari(b: Bench) -> None:
    """Atari PPO through EnvPool on the machine's CPU cores, where EnvPool is installed."""
    try:
        import envpool  # noqa: F401
    except ImportError:
        b.skipped.append(
            "atari / ppo Pong through EnvPool: EnvPool is not installed (its wheel "
            "is 64 MB, more than travels with a call; see docs/guides/devices.md)"
        )
        return
    n = 8 if b.dry else 64

    def run() -> tuple[dict, bool | None]:
        out = b.train("ppo", "Pong-v5", b.size(60, 2), int(b.size(10**8, 1024)), num_envs=n,
                      backend="envpool")  # fmt: skip
        return out, None

    b.measure(
        "atari",
        f"ppo Pong-v5 EnvPool {n} envs",
        f"xiaoyarl train ppo Pong-v5 --backend envpool --num-envs {n}",
        "",
        run,
    )


GROUPS: dict[str, Callable[[Bench], None]] = {
    "cartpole": cartpole, "minatar": minatar, "pqn": pqn, "population": population,
    "recurrent": recurrent, "fast_td3": fast_td3, "atari": atari,
}  # fmt: skip


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


SHOWN = ["steady_sps", "steady_ups", "end_to_end_sps", "simulator_sps", "seconds_to_target",
         "final_eval", "seconds", "ratio", "median_eval"]  # fmt: skip


def _numbers(row: Row) -> str:
    if row.error:
        return f"FAILED {row.error}"
    shown = [
        f"{k} {_fmt(row.numbers[k])}"
        for k in SHOWN
        if row.numbers.get(k) is not None and row.numbers[k] == row.numbers[k]
    ]  # not NaN
    verdict = {True: " [goal met]", False: " [goal missed]", None: ""}[row.met]
    return ", ".join(shown) + verdict


def table(rows: list[Row]) -> str:
    lines = [
        "| group | row | numbers | goal | met | command |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        met = {True: "yes", False: "**no**", None: "-"}[r.met]
        lines.append(f"| {r.group} | {r.name} | {_numbers(r)} | {r.goal or '-'} | {met} | "
                     f"`{r.command}` |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="every row at tiny sizes on the CPU (what the tests run)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(GROUPS),
        metavar="GROUP",
        help=f"these groups only, of: {', '.join(GROUPS)}",
    )
    parser.add_argument("--device", help="default: cuda where torch sees one (cpu with --dry-run)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=400,
        help="rows that would start after this many seconds are skipped (400)",
    )
    parser.add_argument(
        "--out",
        default=str(Path(__file__).parent / "results" / "gpu"),
        help="the folder for gpu.json and gpu.md (benchmarks/results/gpu)",
    )
    args = parser.parse_args(argv)
    device = args.device or ("cpu" if args.dry_run or not torch.cuda.is_available() else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("torch sees no CUDA device: run on a GPU machine, or pass --dry-run")
    if device == "cpu":
        torch.set_num_threads(1)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{machine()}, device {device}{', dry run' if args.dry_run else ''}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(device, args.dry_run, Path(tmp), time.perf_counter() + args.seconds)
        bench.train("ppo", "CartPole-v1", 1, 2048, num_envs=64)  # CUDA context, first kernels
        for name in args.only or list(GROUPS):
            GROUPS[name](bench)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine(), "device": device, "dry_run": args.dry_run, "date": started,
              "python": platform.python_version(), "torch": torch.__version__,
              "command": " ".join(["python benchmarks/gpu.py", *(argv or sys.argv[1:])]),
              "rows": [r.__dict__ for r in bench.rows], "skipped": bench.skipped}  # fmt: skip
    (out / "gpu.json").write_text(json.dumps(report, indent=2) + "\n")
    text = table(bench.rows)
    skipped = "".join(f"\n- skipped: {s}" for s in bench.skipped)
    (out / "gpu.md").write_text(f"{report['machine']}, {started}\n\n{text}\n{skipped}\n")
    print(f"\n{report['machine']}\n\n{text}\n{skipped}")
    failed = [r for r in bench.rows if r.error]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
