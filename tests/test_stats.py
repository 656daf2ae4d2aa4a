"""Statistics over seeds against known values."""

import numpy as np
import pytest

from xiaoyarl.stats import bootstrap_ci, cvar, iqm


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm(range(1, 11)) == pytest.approx(5.5)  # 3..8
    assert iqm([100, 1, 2, 3, -50, 4, 5, 6]) == pytest.approx(3.5)  # 2..5
    assert iqm([7.0]) == 7.0
    assert iqm([1, 2, 3]) == pytest.approx(2.0)  # floor(3 / 4) = 0: the plain mean


def test_iqm_matches_scipy_trim_mean():
    """To rounding: scipy partitions where `iqm` sorts, so the last bit can differ."""
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for n in [*range(1, 41), 101, 1000]:
        x = rng.normal(100.0, 50.0, size=n)
        assert iqm(x) == pytest.approx(scipy_stats.trim_mean(x, 0.25), rel=1e-14, abs=0)


def test_cvar_of_the_worst_quarter():
    x = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5]
    assert cvar(x, 0.25) == pytest.approx((1 + 2 + 0.5 * 3) / 2.5)  # 2.5 of 10 scores
    assert cvar(x, 0.2) == pytest.approx(1.5)  # exactly the 2 worst
    assert cvar(x, 1.0) == pytest.approx(5.5)  # the mean
    assert cvar([4.0], 0.25) == 4.0
    with pytest.raises(ValueError, match="alpha"):
        cvar(x, 0)


def test_bootstrap_interval_of_the_mean_matches_the_normal_approximation():
    x = np.random.default_rng(1).normal(3.0, 2.0, size=400)
    low, high = bootstrap_ci(x, np.mean, resamples=4000)
    half = 1.96 * x.std() / np.sqrt(x.size)
    assert low == pytest.approx(x.mean() - half, abs=0.03)
    assert high == pytest.approx(x.mean() + half, abs=0.03)


def test_bootstrap_matches_scipy_percentile_bootstrap():
    """From the same generator scipy draws the same resamples: the intervals agree to rounding."""
    pytest.importorskip("scipy", minversion="1.15")  # bootstrap's `rng` argument
    from scipy import stats as scipy_stats

    def mean(s, axis):
        return np.mean(s, axis=axis)

    def trimmed(s, axis):
        return scipy_stats.trim_mean(s, 0.25, axis=axis)

    x = np.random.default_rng(2).normal(3.0, 2.0, size=12)
    for statistic, vectorized in ((np.mean, mean), (iqm, trimmed)):
        for seed in (0, 5):
            ours = bootstrap_ci(x, statistic, resamples=2000, seed=seed)
            rng = np.random.default_rng(seed)
            result = scipy_stats.bootstrap(
                (x,), vectorized, n_resamples=2000, rng=rng, method="percentile"
            )
            low, high = result.confidence_interval
            assert ours == pytest.approx((low, high), rel=1e-12, abs=0)


def test_bootstrap_interval_edge_cases():
    assert bootstrap_ci([2.0] * 10, iqm, resamples=200) == (2.0, 2.0)
    low, high = bootstrap_ci([0, 0, 0, 0, 10], np.mean, resamples=5000, seed=3)
    # P(mean >= 6) = 5.8 % and P(mean >= 8) = 0.7 %: the 97.5 % quantile is 6
    assert low == 0.0 and high == 6.0
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="no scores"):
        iqm([])
