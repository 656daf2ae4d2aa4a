"""Figures of several runs.

`xiaoyarl plot RUN RUN ...`: runs compared on one figure (seeds, algorithms), their evaluations
(mean and std band, from `recorder.csv`) above and the mean returns of their training episodes
(`episodes.csv`) below, one colour per run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import yaml


def _run_config(run_dir: Path) -> dict:
    path = run_dir / "config.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def run_labels(run_dirs: Sequence[Path]) -> list[str]:
    """A legend label per run: its folder name; where two runs share one, `algo on env, seed S`
    from their config.yaml; where those clash too, the paths as given."""
    names = [run.resolve().name for run in run_dirs]
    if len(set(names)) == len(names):
        return names
    configs = [_run_config(run) for run in run_dirs]
    names = [f"{c.get('algo')} on {c.get('env_id')}, seed {c.get('seed')}" for c in configs]
    if len(set(names)) == len(names):
        return names
    return [str(run) for run in run_dirs]


def comparison_figure(run_dirs: Sequence[str | Path]):  # noqa: ANN201 - a matplotlib Figure
    """A figure of several runs: evaluation return (mean, with a band of one std) over env steps
    on top, the mean return of the training episodes below; each run in its own colour, labelled
    by `run_labels`. The target is drawn where every run has the same one (`plot.json`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from xiaoyarl.train.evaluator import read_recorder
    from xiaoyarl.train.loggers import read_csv_floats

    runs = [Path(run) for run in run_dirs]
    fig, (evals, train) = plt.subplots(2, 1, figsize=(8, 6.4), dpi=110, sharex=True)
    targets, envs = set(), set()
    trained = False
    for i, (run, label) in enumerate(zip(runs, run_labels(runs), strict=True)):
        color = f"C{i % 10}"
        rows = read_recorder(run)
        steps = [r["step"] for r in rows]
        mean = [r["eval_mean"] for r in rows]
        std = [r.get("eval_std", 0.0) for r in rows]
        evals.plot(steps, mean, color=color, label=label)
        evals.fill_between(steps, [m - s for m, s in zip(mean, std, strict=True)],
                           [m + s for m, s in zip(mean, std, strict=True)], color=color,
                           alpha=0.15, linewidth=0)  # fmt: skip
        episodes = [r for r in read_csv_floats(run / "episodes.csv") if "return_mean" in r]
        if episodes:
            trained = True
            train.plot([r["step"] for r in episodes], [r["return_mean"] for r in episodes],
                       color=color, linewidth=1.0, label=label)  # fmt: skip
        info = run / "plot.json"
        targets.add(json.loads(info.read_text())["target_return"] if info.is_file() else None)
        envs.add(_run_config(run).get("env_id"))
    if len(targets) == 1 and None not in targets:
        target = targets.pop()
        evals.axhline(target, color="tab:red", linestyle="--", label=f"target {target:g}")
    if not trained:
        train.text(0.5, 0.5, "no training episodes recorded (episodes.csv)",
                   transform=train.transAxes, ha="center", va="center", color="gray")  # fmt: skip
    env = envs.pop() if len(envs) == 1 else None
    evals.set_title(f"{env}: {len(runs)} runs" if env else f"{len(runs)} runs")
    evals.set_ylabel("evaluation return")
    train.set_ylabel("training-episode return")
    train.set_xlabel("env steps")
    for ax in (evals, train):
        ax.grid(alpha=0.3)
    evals.legend(loc="lower right", fontsize="small")
    return fig


def plot_runs(run_dirs: Sequence[str | Path], out: str | Path) -> Path:
    """Draw `comparison_figure(run_dirs)` into the image file `out` (PNG, SVG, PDF...)."""
    from xiaoyarl.train.evaluator import save_figure

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(comparison_figure(run_dirs), out)
