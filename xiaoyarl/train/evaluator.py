"""Evaluation: score the deterministic policy, record it, keep the best policy, draw the curve."""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch

from xiaoyarl.envs.base import VecEnv
from xiaoyarl.train.checkpoint import save_atomic

RECORDER_FIELDS = ["step", "time", "eval_mean", "eval_std"]


@torch.no_grad()
def run_episodes(
    env: VecEnv, policy: Callable[[torch.Tensor], torch.Tensor], seed: int | None = None
) -> torch.Tensor:
    """Return of the first episode of every sub-env `(num_envs,)`, acting with `policy`.

    All sub-envs run in parallel; the loop ends when each has finished one episode (at the
    latest after `spec.max_step` steps). Finished sub-envs keep stepping but no longer count.
    """
    state, _ = env.reset(seed=seed)
    n = env.spec.num_envs
    returns = torch.zeros(n, device=env.device)
    running = torch.ones(n, dtype=torch.bool, device=env.device)
    for t in range(env.spec.max_step):
        state, reward, terminal, truncate, _ = env.step(policy(state))
        returns += reward * running
        running &= ~(terminal | truncate)
        if t % 16 == 15 and not running.any():  # check (a host sync) only now and then
            break
    return returns


class Evaluator:
    """Runs `eval_episodes` deterministic episodes every time it is asked, on its own env.

    Writes a row per evaluation to `recorder.csv`, saves the best policy to `actor.pt`, redraws
    `learning_curve.png` (at most every `plot_every` seconds, and at the end) and optionally
    writes TensorBoard scalars. Evaluation `k` resets the env with seed `eval_seed + k`, so
    scores are reproducible and independent of what happened before.
    """

    def __init__(
        self,
        env: VecEnv,
        run_dir: Path,
        target_return: float | None,
        eval_seed: int,
        title: str,
        tensorboard: bool = False,
        plot_every: float = 10.0,
    ) -> None:
        self.env = env
        self.run_dir = run_dir
        self.target_return = target_return
        self.eval_seed = eval_seed
        self.title = title
        self.plot_every = plot_every
        self.best_return = -math.inf
        self.num_evals = 0
        self.last_plot = time.monotonic()  # first redraw after plot_every s: matplotlib is slow
        self.recorder_path = run_dir / "recorder.csv"
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # checked by the runner

            self.writer = SummaryWriter(str(run_dir / "tensorboard"))

    def evaluate(
        self,
        policy: Callable,
        policy_state: Callable[[], dict],
        step: int,
        elapsed: float,
        logs: dict[str, float],
    ) -> tuple[float, float]:
        """Score `policy`; record `step`, `elapsed` seconds and `logs`; return (mean, std)."""
        returns = run_episodes(self.env, policy, seed=self.eval_seed + self.num_evals)
        self.num_evals += 1
        mean = returns.mean().item()
        std = returns.std(unbiased=False).item()
        row = {"step": step, "time": round(elapsed, 3), "eval_mean": mean, "eval_std": std, **logs}
        self._append_row(row)
        if mean > self.best_return:
            self.best_return = mean
            save_atomic(policy_state(), self.run_dir / "actor.pt")
        if self.writer is not None:
            for name, value in row.items():
                if name != "step":
                    self.writer.add_scalar(name, value, step)
        if time.monotonic() - self.last_plot >= self.plot_every:
            self.plot()
        return mean, std

    def _append_row(self, row: dict) -> None:
        new = not self.recorder_path.exists()
        if new:
            fields = RECORDER_FIELDS + sorted(k for k in row if k not in RECORDER_FIELDS)
        else:
            with open(self.recorder_path, newline="") as f:
                fields = next(csv.reader(f), RECORDER_FIELDS)
        with open(self.recorder_path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", restval="")
            if new:
                writer.writeheader()
            writer.writerow(
                {k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
            )

    def truncate_after(self, step: int) -> None:
        """Drop recorder rows newer than `step` (written after the checkpoint resumed from)."""
        if not self.recorder_path.exists():
            return
        with open(self.recorder_path, newline="") as f:
            rows = list(csv.reader(f))
        if not rows:
            return
        kept = [rows[0]] + [r for r in rows[1:] if r and int(float(r[0])) <= step]
        with open(self.recorder_path, "w", newline="") as f:
            csv.writer(f).writerows(kept)

    def plot(self) -> None:
        self.last_plot = time.monotonic()
        plot_learning_curve(self.run_dir, self.title, self.target_return)

    def close(self) -> None:
        self.plot()
        if self.writer is not None:
            self.writer.close()

    def state_dict(self) -> dict:
        return {"best_return": self.best_return, "num_evals": self.num_evals}

    def load_state_dict(self, state: dict) -> None:
        self.best_return = state["best_return"]
        self.num_evals = state["num_evals"]


def read_recorder(run_dir: str | Path) -> list[dict[str, float]]:
    """Rows of `recorder.csv` as dicts of floats (empty cells skipped)."""
    path = Path(run_dir) / "recorder.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [
            {k: float(v) for k, v in row.items() if v not in ("", None)}
            for row in csv.DictReader(f)
        ]


def plot_learning_curve(
    run_dir: str | Path, title: str = "", target_return: float | None = None
) -> Path | None:
    """Draw `learning_curve.png` from `recorder.csv`: evaluation return (mean ± std) over env
    steps, with the target as a dashed line. Returns the PNG's path, or None with no data yet."""
    rows = read_recorder(run_dir)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    mean = [r["eval_mean"] for r in rows]
    std = [r["eval_std"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.plot(steps, mean, color="tab:blue", label="evaluation return")
    ax.fill_between(
        steps,
        [m - s for m, s in zip(mean, std, strict=False)],
        [m + s for m, s in zip(mean, std, strict=False)],
        color="tab:blue",
        alpha=0.2,
        linewidth=0,
    )
    if target_return is not None:
        ax.axhline(
            target_return, color="tab:red", linestyle="--", label=f"target {target_return:g}"
        )
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path = Path(run_dir) / "learning_curve.png"
    tmp = path.with_name(".learning_curve.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path
