"""Evaluation: score the policy (its best actions, or sampled: `eval_deterministic`), record
it, keep the best policy, draw the curve.

A target is declared reached only when an evaluation reaches it *and* a confirming evaluation
on `confirm_episodes` fresh episodes (50 by default) also does: the mean of 10 noisy episodes
is often lucky (a SAC Pendulum policy scored -190 ± 116 on 10 and -203 on the next 10).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, cast

import torch

from xiaoyarl.envs.base import VecEnv
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec, MultiAgentVecEnv, team_reward
from xiaoyarl.train.checkpoint import save_atomic
from xiaoyarl.train.loggers import append_csv_row, read_csv_floats, truncate_csv_after

# The columns of `recorder.csv` from its first row on (the README's promise), whether or not that
# row has a value (confirm_*: empty where the evaluation was not confirmed); the update's named
# losses follow, sorted, and a loss first logged later widens the header (`append_csv_row`).
RECORDER_FIELDS = ["step", "time", "eval_mean", "eval_std", "confirm_mean", "confirm_std"]
# Confirmations draw their seeds from eval_seed + CONFIRM_SEED_OFFSET on (evaluations below it).
CONFIRM_SEED_OFFSET = 2**30


def evaluation_seed(run_seed: int) -> int:
    """The first seed of a run's evaluation episodes, in [0, 2**30): derived from the run's seed
    through numpy's SeedSequence, so runs with neighbouring seeds evaluate on unrelated episodes.

    Every evaluation resets its sub-envs with seeds none before it used (`Evaluator`), and a
    gymnasium sub-env `i` is reset with `seed + i`: with bases `run_seed + k` instead, one run's
    evaluations shared 9 of their 10 start states with the one before, and runs with seeds s
    and s + 1 evaluated on the same starts, so that every run's final evaluation on Pendulum
    fell on the same few hard starts (BENCHMARKS.md, stability)."""
    import numpy as np

    return int(np.random.SeedSequence([run_seed, 10_000]).generate_state(1)[0]) % 2**30


class EvalResult(NamedTuple):
    """One evaluation. `confirmed` is None when no confirmation was run (the evaluation missed
    the target, or confirmations are off), else whether `confirm_mean` reached the target."""

    step: int  # env steps trained when the policy was scored
    mean: float  # mean return over `eval_episodes` episodes
    std: float
    confirmed: bool | None
    confirm_mean: float | None  # mean return over `confirm_episodes` fresh episodes
    confirm_std: float | None

    def reached(self, target: float | None) -> bool:
        """Whether this evaluation counts as reaching `target` (confirmed where it was checked)."""
        return target is not None and self.mean >= target and self.confirmed is not False


class EvaluationStopped(Exception):
    """An evaluation given up part-way because the run was asked to stop (its `stop()`)."""


@torch.no_grad()
def run_episodes(
    env: VecEnv | MultiAgentVecEnv,
    policy: Callable[..., torch.Tensor],
    seed: int | None = None,
    stop: Callable[[], bool] | None = None,
) -> torch.Tensor:
    """Return of the first episode of every sub-env `(num_envs,)`, acting with `policy`.

    All sub-envs run in parallel; the loop ends when each has finished one episode (at the
    latest after `spec.max_step` steps). Finished sub-envs keep stepping but no longer count.
    In a multi-agent env the policy is called with the observations `(num_envs, A, O)` and the
    action masks (or None), and the return is the team's (`team_reward`). A policy with a
    `reset()` (a recurrent one, `RecurrentGreedy`) is reset when the env is. `stop`, asked
    before each step, gives the evaluation up (`EvaluationStopped`): a signal need not wait
    for whole games.
    """
    state, info = env.reset(seed=seed)
    if hasattr(policy, "reset"):  # a recurrent policy: new episodes, new hidden states
        policy.reset()
    multi = isinstance(env.spec, MultiAgentEnvSpec)
    n = env.spec.num_envs
    returns = torch.zeros(n, device=env.device)
    running = torch.ones(n, dtype=torch.bool, device=env.device)
    for t in range(env.spec.max_step):
        if stop is not None and stop():
            raise EvaluationStopped
        mask = info.get("avail_actions" if multi else "action_mask")  # the allowed actions
        action = policy(state) if mask is None and not multi else policy(state, mask)
        state, reward, terminal, truncate, info = env.step(action)
        if multi:
            reward = team_reward(cast(MultiAgentEnvSpec, env.spec), reward)
        returns += reward * running
        running &= ~(terminal | truncate)
        if t % 16 == 15 and not running.any():  # check (a host sync) only now and then
            break
    return returns


class Evaluator:
    """Runs `eval_episodes` episodes of the agent's evaluation policy every time it is asked,
    on its own env.

    Writes a row per evaluation to `recorder.csv`, saves the best policy to `actor.pt` and
    redraws `learning_curve.png` (at most every `plot_every` seconds, and at the end).
    Evaluation `k` resets the env with seed `eval_seed + k * num_envs` (sub-env `i` of a
    gymnasium env gets that plus `i`), so scores are reproducible, independent of what happened
    before, and no two evaluations of a run start from the same states (`evaluation_seed`).
    When an evaluation reaches `target_return` and `make_confirm_env` is given, the policy is
    scored again on the env it makes (of `confirm_episodes` sub-envs, fresh seeds) before the
    target counts as reached.
    """

    def __init__(
        self,
        env: VecEnv,
        run_dir: Path,
        target_return: float | None,
        eval_seed: int,
        title: str,
        make_confirm_env: Callable[[], VecEnv] | None = None,
        plot_every: float = 10.0,
    ) -> None:
        self.env = env
        self.run_dir = run_dir
        self.target_return = target_return
        self.eval_seed = eval_seed
        self.title = title
        self.make_confirm_env = make_confirm_env
        self.confirm_env: VecEnv | None = None
        self.plot_every = plot_every
        self.best_return = -math.inf
        self.num_evals = 0
        self.num_confirms = 0
        self.last_plot = time.monotonic()  # first redraw after plot_every s: matplotlib is slow
        self.recorder_path = run_dir / "recorder.csv"
        write_plot_info(run_dir, title, target_return)

    def evaluate(
        self,
        policy: Callable,
        policy_state: Callable[[], dict],
        step: int,
        elapsed: float,
        logs: dict[str, float],
        stop: Callable[[], bool] | None = None,
    ) -> EvalResult:
        """Score `policy` (confirming a score at the target); record `step`, `elapsed` seconds
        and `logs`; keep the policy if it is the best so far. `stop()` true gives it up
        (`EvaluationStopped`, nothing recorded)."""
        # evaluation k resets its n sub-envs with seeds eval_seed + k n, ..., + k n + n - 1
        seed = self.eval_seed + self.num_evals * self.env.spec.num_envs
        returns = run_episodes(self.env, policy, seed=seed, stop=stop)
        self.num_evals += 1
        mean = returns.mean().item()
        std = returns.std(unbiased=False).item()
        confirmed = confirm_mean = confirm_std = None
        target = self.target_return
        if target is not None and mean >= target and self.make_confirm_env is not None:
            self.confirm_env = self.confirm_env or self.make_confirm_env()
            n = self.confirm_env.spec.num_envs
            seed = self.eval_seed + CONFIRM_SEED_OFFSET + self.num_confirms * n
            confirm = run_episodes(self.confirm_env, policy, seed=seed, stop=stop)
            self.num_confirms += 1
            confirm_mean = confirm.mean().item()
            confirm_std = confirm.std(unbiased=False).item()
            confirmed = confirm_mean >= target
        row: dict[str, float | None] = {"step": step, "time": round(elapsed, 3), "eval_mean": mean,
                                        "eval_std": std, **logs}  # fmt: skip
        if confirmed is not None:
            row.update(confirm_mean=confirm_mean, confirm_std=confirm_std)
        append_csv_row(self.recorder_path, row, RECORDER_FIELDS)
        if mean > self.best_return:
            self.best_return = mean
            save_atomic(policy_state(), self.run_dir / "actor.pt")
        if time.monotonic() - self.last_plot >= self.plot_every:
            self.plot()
        return EvalResult(step, mean, std, confirmed, confirm_mean, confirm_std)

    def truncate_after(self, step: int) -> None:
        """Drop recorder rows newer than `step` (written after the checkpoint resumed from)."""
        truncate_csv_after(self.recorder_path, step)

    def plot(self) -> None:
        """Redraw learning_curve.png from recorder.csv."""
        self.last_plot = time.monotonic()
        plot_learning_curve(self.run_dir)

    def close(self) -> None:
        """Draw the last plot and close the evaluation envs."""
        self.plot()
        if self.confirm_env is not None:
            self.confirm_env.close()
            self.confirm_env = None

    def state_dict(self) -> dict:
        """The best return and the evaluation counters (so seeds continue after a resume)."""
        return {"best_return": self.best_return, "num_evals": self.num_evals,
                "num_confirms": self.num_confirms}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        self.best_return = state["best_return"]
        self.num_evals = state["num_evals"]
        self.num_confirms = state.get("num_confirms", 0)


def read_recorder(run_dir: str | Path) -> list[dict[str, float]]:
    """Rows of `recorder.csv` as dicts of floats (empty cells skipped)."""
    return read_csv_floats(Path(run_dir) / "recorder.csv")


def write_plot_info(run_dir: Path, title: str, target_return: float | None) -> None:
    """Keep the curve's title and target line in the run folder (`plot.json`), so that
    `xiaoyarl plot` draws exactly what training drew, whatever decided the target."""
    path = run_dir / "plot.json"
    tmp = path.with_name(".plot.json.tmp")
    tmp.write_text(json.dumps({"title": title, "target_return": target_return}) + "\n")
    tmp.replace(path)


def plot_learning_curve(
    run_dir: str | Path,
    title: str | None = None,
    target_return: float | None = None,
    out: str | Path | None = None,
) -> Path | None:
    """Draw `learning_curve.png` (or `out`) from `recorder.csv`: evaluation return (mean ± std)
    over env steps, with the target as a dashed line, and the training episodes' mean return
    from `episodes.csv` (a row per progress update, many more than evaluations) with its
    min-max band. Title and target default to what the run stored in `plot.json`. Returns the
    image's path, or None with no data yet."""
    run_dir = Path(run_dir)
    rows = read_recorder(run_dir)
    if not rows:
        return None
    info_path = run_dir / "plot.json"
    if info_path.is_file() and (title is None or target_return is None):
        info = json.loads(info_path.read_text())
        title = info["title"] if title is None else title
        target_return = info["target_return"] if target_return is None else target_return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    mean = [r["eval_mean"] for r in rows]
    std = [r["eval_std"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    episodes = [r for r in read_csv_floats(run_dir / "episodes.csv") if "return_mean" in r]
    if episodes:  # behind the evaluations
        at = [r["step"] for r in episodes]
        ax.plot(
            at,
            [r["return_mean"] for r in episodes],
            color="tab:gray",
            linewidth=1.0,
            marker="." if len(at) <= 20 else None,
            label="training episodes (mean return)",
        )
        ax.fill_between(at, [r.get("return_min", r["return_mean"]) for r in episodes],
                        [r.get("return_max", r["return_mean"]) for r in episodes],
                        color="tab:gray", alpha=0.12, linewidth=0)  # fmt: skip
    # few evaluations (a short run) are drawn as points too: one alone would draw no line
    ax.plot(steps, mean, color="tab:blue", label="evaluation return",
            marker="o" if len(steps) <= 20 else None, markersize=4)  # fmt: skip
    ax.fill_between(
        steps,
        [m - s for m, s in zip(mean, std, strict=True)],
        [m + s for m, s in zip(mean, std, strict=True)],
        color="tab:blue",
        alpha=0.2,
        linewidth=0,
    )
    confirms = [(r["step"], r["confirm_mean"]) for r in rows if "confirm_mean" in r]
    if confirms:
        confirm_steps, confirm_means = zip(*confirms, strict=True)
        ax.scatter(confirm_steps, confirm_means, color="tab:green", marker="o", s=18, zorder=3,
                   label="confirming evaluation")  # fmt: skip
    if target_return is not None:
        ax.axhline(
            target_return, color="tab:red", linestyle="--", label=f"target {target_return:g}"
        )
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title or "")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    if out is None:
        return save_figure(fig, run_dir / "learning_curve.png")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, Path(out))


def save_figure(fig, path: Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    """Lay out, write and close `fig` as `path`, atomically (a reader never sees half a PNG). The
    temporary file is this process's own: the workers of one study write the same plots."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path
