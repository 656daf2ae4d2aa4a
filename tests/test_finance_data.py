"""Market data: the file loader's validation, the synthetic generator, the real sample."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xiaoyarl.errors import ConfigError, MarketDataError
from xiaoyarl.finance.data import MIN_DATES, Market, load_market, load_sample
from xiaoyarl.finance.synthetic import STRUCTURES, synthetic_market


def small_frame(num_dates: int = MIN_DATES, tickers: tuple[str, ...] = ("AAA", "BBB")):
    """A valid long-format panel sorted by date then ticker (the file tests need pandas)."""
    pytest.importorskip("pandas")
    return (
        synthetic_market(len(tickers), num_dates, seed=3)
        .to_frame()
        .assign(ticker=lambda f: f["ticker"].map(dict(zip(["SYN0", "SYN1"], tickers, strict=True))))
    )


def write(frame, tmp_path, name: str = "panel.csv"):
    path = tmp_path / name
    if name.endswith(".csv"):
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("name", ["panel.csv", "panel.parquet"])
def test_round_trip_through_a_file_keeps_every_value(tmp_path, name):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    market = synthetic_market(3, MIN_DATES, seed=1)
    loaded = load_market(write(market.to_frame(), tmp_path, name))
    assert loaded.tickers == market.tickers
    assert (loaded.dates == market.dates).all()
    assert loaded.ohlcv.shape == (MIN_DATES, 3, 5) and loaded.ohlcv.dtype == torch.float64
    torch.testing.assert_close(loaded.ohlcv, market.ohlcv, rtol=1e-15, atol=0)


def test_finrl_column_names_and_case_are_accepted(tmp_path):
    frame = small_frame().rename(columns={"ticker": "tic", "close": "Close"})
    assert load_market(write(frame, tmp_path)).tickers == ("AAA", "BBB")


def expect(frame, tmp_path, *fragments: str, **kwargs) -> MarketDataError:
    with pytest.raises(MarketDataError) as caught:
        load_market(write(frame, tmp_path), **kwargs)
    for fragment in fragments:
        assert fragment in str(caught.value), str(caught.value)
    return caught.value


def test_missing_columns_are_named(tmp_path):
    expect(small_frame().drop(columns=["volume", "low"]), tmp_path, "low, volume", "long format")


def test_unparseable_date_names_the_row(tmp_path):
    frame = small_frame().astype({"date": str})
    frame.loc[5, "date"] = "not a date"
    expect(frame, tmp_path, "'not a date'", "row 6", "YYYY-MM-DD")


def test_unsorted_rows_are_refused_unless_sort_is_asked(tmp_path):
    frame = small_frame()
    shuffled = frame.iloc[::-1]
    expect(shuffled, tmp_path, "not sorted", "sort=True")
    market = load_market(write(shuffled, tmp_path), sort=True)
    assert (market.dates == load_market(write(frame, tmp_path, "b.csv")).dates).all()


def test_duplicate_rows_are_named(tmp_path):
    frame = small_frame()
    import pandas as pd

    frame = pd.concat([frame.iloc[:7], frame.iloc[6:7], frame.iloc[7:]], ignore_index=True)
    expect(frame, tmp_path, "row 8", "repeats a (date, ticker)", "drop_duplicates")


def test_a_ticker_missing_on_a_date_is_a_gap(tmp_path):
    frame = small_frame()
    frame = frame.drop(index=21).reset_index(drop=True)  # date 10, ticker BBB
    error = expect(frame, tmp_path, "no row for ticker(s) BBB", "forward-fill")
    assert str(small_frame()["date"].iloc[21].date()) in str(error)


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("close", 0.0, "prices must be positive"),
        ("open", -3.0, "prices must be positive"),
        ("high", np.inf, "non-finite"),
        ("low", np.nan, "non-finite"),
        ("close", "abc", "not a number"),
        ("volume", -1.0, "volume must be >= 0"),
    ],
)
def test_bad_numbers_are_named_with_their_row(tmp_path, column, value, fragment):
    frame = small_frame().astype({column: object})
    frame.loc[4, column] = value
    expect(frame, tmp_path, fragment, column, "row 5")


def test_too_few_dates(tmp_path):
    expect(small_frame(num_dates=30), tmp_path, "30 dates", f"at least {MIN_DATES}")


def test_file_problems(tmp_path):
    pytest.importorskip("pandas")
    with pytest.raises(MarketDataError, match="does not exist"):
        load_market(tmp_path / "nothing.csv")
    (tmp_path / "panel.xlsx").write_text("x")
    with pytest.raises(MarketDataError, match="csv or .parquet"):
        load_market(tmp_path / "panel.xlsx")
    assert issubclass(MarketDataError, ConfigError)  # the CLI reports it as a config problem


def test_market_checks_its_own_tensor():
    dates = np.arange(np.datetime64("2020-01-01"), np.datetime64("2020-01-05"))
    ohlcv = torch.ones(4, 1, 5, dtype=torch.float64)
    Market(dates, ("A",), ohlcv)
    with pytest.raises(MarketDataError, match="shape"):
        Market(dates, ("A", "B"), ohlcv)
    bad = ohlcv.clone()
    bad[2, 0, 3] = -1.0
    with pytest.raises(MarketDataError, match="close of A on 2020-01-03"):
        Market(dates, ("A",), bad)


# --- synthetic markets ------------------------------------------------------------------------
@pytest.mark.parametrize("structure", STRUCTURES)
def test_synthetic_market_is_seeded_and_consistent(structure):
    market = synthetic_market(4, 300, seed=7, structure=structure)
    again = synthetic_market(4, 300, seed=7, structure=structure)
    assert torch.equal(market.ohlcv, again.ohlcv) and (market.dates == again.dates).all()
    assert not torch.equal(market.ohlcv, synthetic_market(4, 300, 8, structure).ohlcv)
    o, h, low, c, v = market.ohlcv.unbind(-1)
    assert (low <= torch.minimum(o, c)).all() and (torch.maximum(o, c) <= h).all()
    assert (v > 0).all() and (low > 0).all()
    assert str(market.dates[0]) == "2015-01-02"
    weekday = (market.dates.astype("datetime64[D]").view("int64") - 4) % 7  # 1970-01-05: Mon
    assert (weekday < 5).all()  # business days only


def log_returns(market: Market) -> np.ndarray:
    return np.diff(np.log(market.close.numpy()), axis=0)


def test_planted_structures_are_there_and_the_random_walk_has_none():
    def autocorrelation(x: np.ndarray) -> float:
        return float(np.corrcoef(x[:-1], x[1:])[0, 1])

    days = 3000
    mean_reverting = log_returns(synthetic_market(3, days, 0, "mean_reversion"))
    # an AR(1) deviation with phi 0.8 gives daily returns a clearly negative autocorrelation
    assert autocorrelation(mean_reverting[:, 0]) < -0.04
    walk = log_returns(synthetic_market(3, days, 0, "random_walk"))
    limit = 3.5 / np.sqrt(days)  # 3.5 standard errors of a sample autocorrelation
    assert all(abs(autocorrelation(walk[:, i])) < limit for i in range(3))
    assert abs(np.corrcoef(walk.T)[0, 1]) < limit  # independent assets
    correlated = log_returns(synthetic_market(3, days, 0, "regimes"))
    assert np.corrcoef(correlated.T)[0, 1] > 0.2  # the market factor correlates the assets
    # volatility clustering: squared returns are autocorrelated in the regime model only
    assert autocorrelation(correlated[:, 1] ** 2) > 0.1
    assert abs(autocorrelation(walk[:, 1] ** 2)) < limit


# --- the real sample ---------------------------------------------------------------------------
def test_goog_sample_loads_and_validates():
    pytest.importorskip("backtesting", reason="the GOOG sample ships with `backtesting`")
    market = load_sample("GOOG")
    assert market.tickers == ("GOOG",)
    assert market.num_dates == 2148
    assert str(market.dates[0]) == "2004-08-19" and str(market.dates[-1]) == "2013-03-01"
    torch.testing.assert_close(market.ohlcv[0, 0], torch.tensor(
        [100.0, 104.06, 95.96, 100.34, 22351900.0], dtype=torch.float64))  # fmt: skip
