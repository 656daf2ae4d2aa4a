"""Statistics over seeds for stability studies, after the conventions of rliable (Agarwal et
al., "Deep Reinforcement Learning at the Edge of the Statistical Precipice", 2021): the
interquartile mean, the conditional value at risk of the worst seeds, and percentile bootstrap
confidence intervals over seeds.

    from xiaoyarl.stats import iqm, cvar, bootstrap_ci
    finals = [...]  # one final return per seed
    iqm(finals), cvar(finals, 0.25), bootstrap_ci(finals, iqm)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def _scores(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("no scores: pass one value per seed")
    if not np.isfinite(x).all():
        raise ValueError("scores must be finite numbers")
    return x


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle half, floor(n / 4) scores cut from each end
    (`scipy.stats.trim_mean(x, 0.25)`, as rliable computes it)."""
    # Not scipy.stats.trim_mean: it can differ in the last bit (it partitions where this sorts), and
    # scipy is not a core dependency (tests/test_stats.py compares the two).
    x = np.sort(_scores(values))
    cut = x.size // 4
    return float(x[cut : x.size - cut].mean())


def cvar(values: Sequence[float] | np.ndarray, alpha: float = 0.25) -> float:
    """Conditional value at risk (expected shortfall) of the lower tail: the mean over the
    worst `alpha` fraction of the scores, with the boundary score weighted by the fraction of
    it that falls inside (for 10 scores and alpha 0.25: (x1 + x2 + x3 / 2) / 2.5)."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    x = np.sort(_scores(values))
    tail = alpha * x.size  # how many scores the tail holds, possibly fractional
    whole = math.floor(tail + 1e-9)
    total = x[:whole].sum()
    if whole < x.size and tail - whole > 1e-9:
        total += (tail - whole) * x[whole]
    return float(total / tail)


def bootstrap_ci(values: Sequence[float] | np.ndarray,
                 statistic: Callable[[np.ndarray], float] = np.mean, confidence: float = 0.95,
                 resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Percentile bootstrap interval of `statistic` over the scores (seeds resampled with
    replacement `resamples` times)."""
    # Not scipy.stats.bootstrap: from this rng it draws the same resamples but can differ in the
    # last bit, and scipy is not a core dependency (tests/test_stats.py compares the two).
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = _scores(values)
    rng = np.random.default_rng(seed)
    samples = x[rng.integers(0, x.size, size=(resamples, x.size))]
    if statistic is np.mean:
        stats = samples.mean(1)
    else:
        stats = np.array([statistic(s) for s in samples])
    tail = (1 - confidence) / 2
    low, high = np.quantile(stats, [tail, 1 - tail])
    return float(low), float(high)
