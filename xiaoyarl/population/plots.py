"""`population.png`: every member's evaluations over env steps (the best highlighted), and each
searched numeric hyper-parameter over env steps, drawn from `population.csv`."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import yaml

from xiaoyarl.population.schemes import Population
from xiaoyarl.train.evaluator import save_figure


def read_population_csv(folder: str | Path) -> list[dict]:
    """The rows of a population folder's population.csv, as dicts."""
    path = Path(folder) / "population.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["step"] = int(row["step"])
        row["score"] = float(row["score"]) if row["score"] else None
        row["hparams"] = yaml.safe_load(row["hparams"]) or {}
    return rows


def plot_population(folder: str | Path) -> Path | None:
    """Draw `folder/population.png`; None when nothing was trained yet."""
    folder = Path(folder)
    rows = [r for r in read_population_csv(folder)
            if r["event"] in ("trained", "exploit", "from_leaderboard")]  # fmt: skip
    if not any(r["event"] == "trained" for r in rows):
        return None
    population = Population(folder)
    numeric = population.space.numeric_log_scale()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_member: dict[str, list[dict]] = {}
    for row in rows:
        by_member.setdefault(row["member"], []).append(row)
    trained = [r for r in rows if r["event"] == "trained"]
    latest = {r["member"]: r for r in trained}  # each member's (pod's) latest score, as the
    # summary ranks them
    best = max(latest.values(), key=lambda r: r["score"] if r["score"] is not None else -math.inf)
    panels = 1 + len(numeric)
    fig, axes = plt.subplots(panels, 1, figsize=(8, 3.6 + 2.4 * (panels - 1)), dpi=110,
                             sharex=True, squeeze=False)  # fmt: skip
    ax = axes[0][0]
    for name, member_rows in sorted(by_member.items()):
        points = [(r["step"], r["score"]) for r in member_rows if r["score"] is not None]
        if not points:
            continue
        is_best = name == best["member"]
        ax.plot(*zip(*points, strict=True), marker="o", markersize=2.5,
                color="tab:red" if is_best else "tab:gray", alpha=1.0 if is_best else 0.45,
                linewidth=2.2 if is_best else 0.9, zorder=3 if is_best else 2,
                label=f"best: {name} ({best['score']:.1f})" if is_best else None)  # fmt: skip
    target = population.config.target_return
    if target is not None:
        ax.axhline(target, color="tab:green", linestyle="--", label=f"target {target:g}")
    ax.set_ylabel("evaluation return")
    ax.set_title(f"{population.pop.scheme} population: {population.config.algo} on "
                 f"{population.config.env_id}")  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    for i, (field, log_scale) in enumerate(sorted(numeric.items()), start=1):
        ax = axes[i][0]
        for name, member_rows in sorted(by_member.items()):
            points = [(r["step"], r["hparams"][field]) for r in member_rows
                      if field in r["hparams"]]  # fmt: skip
            if points:
                is_best = name == best["member"]
                ax.step(
                    *zip(*points, strict=True),
                    where="post",
                    color="tab:red" if is_best else "tab:gray",
                    alpha=1.0 if is_best else 0.45,
                    linewidth=2.0 if is_best else 0.9,
                )
        if log_scale:
            ax.set_yscale("log")
        ax.set_ylabel(field)
        ax.grid(alpha=0.3)
    axes[-1][0].set_xlabel("env steps (of each member)")
    return save_figure(fig, folder / "population.png")
