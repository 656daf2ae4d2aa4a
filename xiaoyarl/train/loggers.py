"""What a run records besides its evaluations: training-episode statistics (`episodes.csv`), and
scalars for TensorBoard and Weights & Biases when they are switched on.

Training episodes are counted from the rollouts themselves (rewards and episode flags), on the
device, with no host sync per step: each rollout adds to a few running sums, which are read
once per progress update and written as one row of `episodes.csv`: step, time, the number of
training episodes that ended since the last row, their mean, min and max return (the env's own
rewards, before any reward scaling) and their mean length.
"""

from __future__ import annotations

import csv
import math
import os
import secrets
from pathlib import Path

import torch

from xiaoyarl.config import Config

EPISODE_FIELDS = ["step", "time", "episodes", "return_mean", "return_min", "return_max",
                  "length_mean"]  # fmt: skip


class EpisodeStats:
    """Returns and lengths of the training episodes of `num_envs` sub-envs, from time-major
    rollouts `(T, num_envs)`; each sub-env's running return and length carry over rollouts."""

    def __init__(self, num_envs: int, device: torch.device) -> None:
        self.device = device
        self.running_return = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.running_length = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self._clear()

    def _clear(self) -> None:
        """Zero what `flush` reports: episode count, sum of returns, sum of lengths, min, max."""
        self.sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        self.low = torch.tensor(math.inf, dtype=torch.float64, device=self.device)
        self.high = torch.tensor(-math.inf, dtype=torch.float64, device=self.device)

    @torch.no_grad()
    def add(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        """Count the episodes that end in a rollout: `rewards`, `dones` `(T, num_envs)`."""
        steps = rewards.shape[0]
        t = torch.arange(steps, device=self.device).unsqueeze(1).expand_as(rewards)
        cum = rewards.double().cumsum(0) + self.running_return
        last_done = torch.where(dones, t, -1).cummax(0).values  # last end at or before t
        prev = torch.cat([torch.full_like(last_done[:1], -1), last_done[:-1]])  # before t
        base = torch.where(prev >= 0, cum.gather(0, prev.clamp(min=0)), 0.0)
        returns = cum - base  # the return of an episode that ends at t (where dones)
        lengths = torch.where(prev >= 0, t - prev, t + 1 + self.running_length).double()
        ended = dones.double()
        self.sums += torch.stack([ended.sum(), (returns * ended).sum(), (lengths * ended).sum()])
        self.low = torch.minimum(self.low, torch.where(dones, returns, math.inf).min())
        self.high = torch.maximum(self.high, torch.where(dones, returns, -math.inf).max())
        last = last_done[-1]
        at_last = cum.gather(0, last.clamp(min=0).unsqueeze(0)).squeeze(0)
        self.running_return = cum[-1] - torch.where(last >= 0, at_last, 0.0)
        self.running_length = torch.where(last >= 0, steps - 1 - last, self.running_length + steps)

    def flush(self) -> dict[str, float] | None:
        """The statistics of the episodes ended since the last flush (None if there were none)."""
        count, total, length, low, high = torch.cat(
            [self.sums, self.low.view(1), self.high.view(1)]
        ).tolist()  # one read from the device
        if count == 0:
            return None
        self._clear()
        return {"episodes": int(count), "return_mean": total / count, "return_min": low,
                "return_max": high, "length_mean": length / count}  # fmt: skip

    def reset(self) -> None:
        """Forget the running episodes (their sub-envs start new ones)."""
        self.running_return.zero_()
        self.running_length.zero_()

    def state_dict(self) -> dict:
        return {"running_return": self.running_return.clone(),
                "running_length": self.running_length.clone()}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.running_return = state["running_return"].to(self.device).clone()
        self.running_length = state["running_length"].to(self.device).clone()


# --- files and loggers ---------------------------------------------------------------------------
def append_csv_row(path: Path, row: dict, first_fields: list[str]) -> None:
    """Append `row` to the CSV at `path`; a new file gets `first_fields` then the rest, sorted.

    A row with a key the header does not name (a loss that an off-policy agent logs only once
    learning starts) widens the header: the file is rewritten with the new columns appended,
    sorted, and empty cells in the earlier rows. Numbers are written with 6 significant digits.
    """
    if path.exists():
        with open(path, newline="") as f:
            fields = next(csv.reader(f), None) or list(first_fields)
    else:
        fields = list(first_fields)
    new_fields = sorted(k for k in row if k not in fields)
    if new_fields:
        _rewrite_with_header(path, fields + new_fields)
    fields = fields + new_fields
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, restval="")
        if new:
            writer.writeheader()
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def _rewrite_with_header(path: Path, fields: list[str]) -> None:
    """Rewrite the CSV at `path` (if there is one) under the wider header `fields`, atomically."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    _write_rows_atomic(path, [fields] + [[row.get(k) or "" for k in fields] for row in rows])


def _write_rows_atomic(path: Path, rows: list[list]) -> None:
    """Replace the CSV at `path` by `rows` (the header first) through a temporary file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    os.replace(tmp, path)


def read_csv_floats(path: Path) -> list[dict[str, float]]:
    """Rows of a run CSV as dicts of floats (empty cells left out); [] without the file."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)}
                for row in csv.DictReader(f)]  # fmt: skip


def truncate_csv_after(path: Path, step: int) -> None:
    """Drop the rows of a run CSV whose step is after `step` (written after the checkpoint a run
    resumes from)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return
    kept = [rows[0]] + [r for r in rows[1:] if r and int(float(r[0])) <= step]
    _write_rows_atomic(path, kept)


class Loggers:
    """Scalars of a run for `episodes.csv`, TensorBoard (`run_dir/tensorboard`) and Weights &
    Biases (`run_dir/wandb`; offline with WANDB_MODE=offline). A resumed run appends to the same
    TensorBoard folder and W&B run."""

    def __init__(self, run_dir: Path, config: Config, title: str, enabled: bool = True) -> None:
        self.run_dir = run_dir
        self.enabled = enabled  # several learners: only rank 0 records
        self.episodes_path = run_dir / "episodes.csv"
        self.tensorboard = None
        self.wandb = None
        if config.tensorboard and enabled:
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
        if config.wandb and enabled:
            import wandb

            id_path = run_dir / "wandb" / "run_id"
            id_path.parent.mkdir(parents=True, exist_ok=True)
            run_id = id_path.read_text().strip() if id_path.exists() else secrets.token_hex(8)
            id_path.write_text(run_id + "\n")
            self.wandb = wandb.init(
                project=config.wandb_project, dir=str(run_dir), id=run_id, resume="allow",
                name=run_dir.name, notes=title, config=config.to_dict(),
            )  # fmt: skip

    def scalars(self, step: int, values: dict[str, float], prefix: str = "") -> None:
        """Log named numbers at env step `step` (TensorBoard and W&B)."""
        named = {f"{prefix}{k}": v for k, v in values.items() if isinstance(v, int | float)}
        if self.tensorboard is not None:
            for name, value in named.items():
                self.tensorboard.add_scalar(name, value, step)
        if self.wandb is not None:
            self.wandb.log({**named, "env_step": step})

    def episodes(self, step: int, elapsed: float, stats: dict[str, float]) -> None:
        """A row of `episodes.csv`, and the same numbers as `train/...` scalars."""
        if not self.enabled:
            return
        append_csv_row(self.episodes_path, {"step": step, "time": round(elapsed, 3), **stats},
                       EPISODE_FIELDS)  # fmt: skip
        self.scalars(step, stats, prefix="train/")

    def truncate_after(self, step: int) -> None:
        if self.enabled:
            truncate_csv_after(self.episodes_path, step)

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
            self.tensorboard = None
        if self.wandb is not None:
            self.wandb.finish()
            self.wandb = None
