"""Market data: the `Market` panel, the CSV / Parquet loader that validates it, the real sample.

A `Market` is a complete daily panel: every ticker has a row on every date. That is what the
trading env and the indicators need (one tensor `(num_dates, num_tickers, 5)`), and what real
files often are not, so `load_market` checks a file the slow, explicit way (pandas) and stops at
the first problem with a `MarketDataError` that names the file, the row or date, and the fix:
missing columns, unparseable dates, non-numeric, non-finite or non-positive prices, negative
volume, duplicate or unsorted (date, ticker) rows, tickers missing on some dates, too few dates.

pandas (and pyarrow for Parquet) are needed only here, to read files: the `finance` extra.
The synthetic market (`synthetic.py`) and everything downstream are numpy / torch only.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from xiaoyarl.errors import MarketDataError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("date", "ticker", "open", "high", "low", "close", "volume")
PRICE_COLUMNS = ("open", "high", "low", "close")
FIELDS = ("open", "high", "low", "close", "volume")  # the last axis of `Market.ohlcv`
COLUMN_ALIASES = {"tic": "ticker"}  # FinRL's name for the ticker column
# Fewest dates a panel may have: the longest default indicator window (60 days, close_60_sma)
# plus a training and a backtest period of at least 20 days each.
MIN_DATES = 100
SAMPLES = ("GOOG",)  # real daily samples that `load_sample` can read (`finance-sample` extra)
INSTALL_FINANCE = "pip install -e '.[finance]' (pandas; pyarrow for Parquet)"


@dataclass(frozen=True, eq=False)
class Market:
    """A complete daily OHLCV panel.

    dates: `(num_dates,)` numpy datetime64[D], strictly increasing.
    tickers: `num_tickers` names, in the order of the ticker axis.
    ohlcv: `(num_dates, num_tickers, 5)` float64 or float32 tensor of open, high, low, close,
    volume (`FIELDS`); prices positive and finite, volume finite and >= 0.
    name: where the data came from (a file, "synthetic(...)", a sample), for messages.
    """

    dates: np.ndarray
    tickers: tuple[str, ...]
    ohlcv: torch.Tensor
    name: str = "market"

    def __post_init__(self) -> None:
        dates = np.asarray(self.dates).astype("datetime64[D]")
        object.__setattr__(self, "dates", dates)
        object.__setattr__(self, "tickers", tuple(str(t) for t in self.tickers))
        shape = (len(dates), len(self.tickers), len(FIELDS))
        if self.ohlcv.shape != shape or self.ohlcv.dtype not in (torch.float32, torch.float64):
            raise MarketDataError(
                f"{self.name}: ohlcv must be a float32/float64 tensor of shape (num_dates, "
                f"num_tickers, 5) = {shape}, got {self.ohlcv.dtype} {tuple(self.ohlcv.shape)}."
            )
        if len(dates) > 1 and not (np.diff(dates) > np.timedelta64(0, "D")).all():
            raise MarketDataError(f"{self.name}: dates must be strictly increasing.")
        if len(set(self.tickers)) != len(self.tickers):
            raise MarketDataError(f"{self.name}: ticker names must be unique: {self.tickers}.")
        prices, volume = self.ohlcv[..., :4], self.ohlcv[..., 4]
        if not bool((prices.isfinite() & (prices > 0)).all()):
            t, i, f = (prices.isfinite() & (prices > 0)).logical_not().nonzero()[0].tolist()
            raise MarketDataError(
                f"{self.name}: {FIELDS[f]} of {self.tickers[i]} on {dates[t]} is "
                f"{prices[t, i, f].item()}; prices must be positive and finite."
            )
        if not bool((volume.isfinite() & (volume >= 0)).all()):
            t, i = (volume.isfinite() & (volume >= 0)).logical_not().nonzero()[0].tolist()
            raise MarketDataError(
                f"{self.name}: volume of {self.tickers[i]} on {dates[t]} is "
                f"{volume[t, i].item()}; volume must be finite and >= 0."
            )

    @property
    def num_dates(self) -> int:
        return len(self.dates)

    @property
    def num_tickers(self) -> int:
        return len(self.tickers)

    @property
    def close(self) -> torch.Tensor:
        """Closing prices `(num_dates, num_tickers)`."""
        return self.ohlcv[..., 3]

    def date_index(self, date: str | np.datetime64, side: str = "on_or_after") -> int:
        """Index of the first date on or after `date` (`side="on_or_after"`) or of the last on or
        before it (`"on_or_before"`); a `MarketDataError` naming the data's range if none is."""
        day = _parse_date(date, self.name)
        first, last = self.dates[0], self.dates[-1]
        if side == "on_or_after":
            i = int(np.searchsorted(self.dates, day, side="left"))
            ok = i < self.num_dates
        elif side == "on_or_before":
            i = int(np.searchsorted(self.dates, day, side="right")) - 1
            ok = i >= 0
        else:
            raise ValueError(f"side must be 'on_or_after' or 'on_or_before', got {side!r}.")
        if not ok:
            raise MarketDataError(
                f"{self.name}: date {day} is outside the data, which runs from {first} to {last} "
                f"({self.num_dates} trading days). Choose a date in that range."
            )
        return i

    def to_frame(self) -> pd.DataFrame:
        """The panel in long format (columns `COLUMNS`, sorted by date then ticker): what
        `load_market` reads, and what stockstats / FinRL code expects."""
        import pandas as pd

        t, n = self.num_dates, self.num_tickers
        values = self.ohlcv.detach().cpu().double().numpy().reshape(t * n, len(FIELDS))
        frame = pd.DataFrame(values, columns=list(FIELDS))
        frame.insert(0, "ticker", np.tile(np.asarray(self.tickers, dtype=object), t))
        frame.insert(0, "date", pd.to_datetime(np.repeat(self.dates, n)))
        return frame

    def slice(self, start: int, stop: int) -> Market:
        """The dates `[start, stop)` as a new `Market` (a view of the same tensor)."""
        return Market(self.dates[start:stop], self.tickers, self.ohlcv[start:stop], self.name)


def _parse_date(date: str | np.datetime64, where: str) -> np.datetime64:
    try:
        return np.datetime64(str(date)[:10], "D")  # "2020-01-02", datetime.date, np.datetime64
    except ValueError:
        raise MarketDataError(
            f"{where}: cannot read {date!r} as a date; write dates as YYYY-MM-DD."
        ) from None


def _require_pandas(what: str):
    try:
        import pandas as pd
    except ImportError:
        raise MarketDataError(f"{what} needs pandas: {INSTALL_FINANCE}.") from None
    return pd


def load_market(
    path: str | Path, *, sort: bool = False, min_dates: int = MIN_DATES, dtype=torch.float64
) -> Market:
    """Read and validate a long-format daily panel from a CSV or Parquet file.

    The file has one row per (date, ticker) with columns `COLUMNS` (any case; `tic` is
    accepted for `ticker`; other columns are ignored). Rows must be sorted by date then ticker,
    unless `sort=True` sorts them. Every ticker needs a row on every date. Raises
    `MarketDataError` at the first problem (see the module docstring).
    """
    path = Path(path)
    pd = _require_pandas(f"reading {path}")
    if not path.is_file():
        raise MarketDataError(f"market data file {path} does not exist.")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        else:
            raise MarketDataError(
                f"{path}: unknown file type '{suffix}'; give a .csv or .parquet file."
            )
    except MarketDataError:
        raise
    except ImportError as e:
        raise MarketDataError(
            f"{path}: reading Parquet needs pyarrow ({e}): {INSTALL_FINANCE}."
        ) from None
    except Exception as e:  # pandas raises many parser errors
        raise MarketDataError(
            f"{path} cannot be read as {suffix[1:]}: {type(e).__name__}: {str(e)[:200]}"
        ) from None
    return frame_to_market(frame, source=str(path), sort=sort, min_dates=min_dates, dtype=dtype)


def frame_to_market(
    frame: pd.DataFrame,
    source: str = "DataFrame",
    *,
    sort: bool = False,
    min_dates: int = MIN_DATES,
    dtype=torch.float64,
) -> Market:
    """Validate a long-format pandas panel (see `load_market`) and turn it into a `Market`.

    Row numbers in messages count data rows from 1 in the order given (row 1 is the first line
    after a CSV's header).
    """
    pd = _require_pandas("frame_to_market")
    frame = frame.rename(columns=lambda c: str(c).strip().lower()).rename(columns=COLUMN_ALIASES)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise MarketDataError(
            f"{source}: missing column(s) {', '.join(missing)}; found "
            f"{', '.join(map(str, frame.columns))}. "
            f"A market file needs one row per date and ticker with columns {', '.join(COLUMNS)} "
            f"(long format; 'tic' is accepted for 'ticker')."
        )
    frame = frame.loc[:, list(COLUMNS)].reset_index(drop=True)
    if len(frame) == 0:
        raise MarketDataError(f"{source} has no rows.")

    def row(i: int) -> str:
        return f"row {i + 1} (date {frame['date'].iloc[i]!r}, ticker {frame['ticker'].iloc[i]!r})"

    # dates: one format for the whole column, no times of day
    raw_dates = frame["date"]
    try:
        dates = pd.to_datetime(raw_dates, errors="coerce")
    except (TypeError, ValueError):
        dates = pd.to_datetime(raw_dates.astype(str), errors="coerce", format="mixed")
    if getattr(dates.dt, "tz", None) is not None:
        dates = dates.dt.tz_localize(None)
    bad = dates.isna().to_numpy().nonzero()[0]
    if len(bad):
        raise MarketDataError(
            f"{source}: cannot parse the date {raw_dates.iloc[bad[0]]!r} in {row(bad[0])} "
            f"({len(bad)} unparseable date(s) in all). Write every date in one format, "
            f"preferably YYYY-MM-DD."
        )
    if (dates != dates.dt.normalize()).any():
        i = int((dates != dates.dt.normalize()).to_numpy().nonzero()[0][0])
        raise MarketDataError(
            f"{source}: {row(i)} has a time of day; this loader reads daily bars. Aggregate "
            f"intraday data to one row per day first."
        )
    frame["date"] = dates
    if frame["ticker"].isna().any():
        i = int(frame["ticker"].isna().to_numpy().nonzero()[0][0])
        raise MarketDataError(f"{source}: {row(i)} has no ticker; give every row a ticker.")
    frame["ticker"] = frame["ticker"].astype(str)

    # numbers: numeric, finite, prices > 0, volume >= 0
    for column in (*PRICE_COLUMNS, "volume"):
        values = pd.to_numeric(frame[column], errors="coerce")
        not_numeric = (values.isna() & frame[column].notna()).to_numpy().nonzero()[0]
        if len(not_numeric):
            i = not_numeric[0]
            raise MarketDataError(
                f"{source}: {column} in {row(i)} is {frame[column].iloc[i]!r}, not a number."
            )
        array = values.to_numpy(dtype=np.float64)
        bad = (~np.isfinite(array)).nonzero()[0]
        if len(bad):
            raise MarketDataError(
                f"{source}: {column} in {row(bad[0])} is {array[bad[0]]} ({len(bad)} missing or "
                f"non-finite value(s) in that column). Fill or drop those rows; a ticker must "
                f"then still have a row on every date."
            )
        if column == "volume":
            bad = (array < 0).nonzero()[0]
            rule = "volume must be >= 0"
        else:
            bad = (array <= 0).nonzero()[0]
            rule = "prices must be positive"
        if len(bad):
            raise MarketDataError(
                f"{source}: {column} in {row(bad[0])} is {array[bad[0]]}; {rule} "
                f"({len(bad)} such row(s)). Fix or drop them."
            )
        frame[column] = array

    # (date, ticker) keys: unique, sorted, complete
    duplicated = frame.duplicated(["date", "ticker"]).to_numpy().nonzero()[0]
    if len(duplicated):
        raise MarketDataError(
            f"{source}: {row(duplicated[0])} repeats a (date, ticker) pair that an earlier row "
            f"already has ({len(duplicated)} duplicate row(s)). Keep one row per date and "
            f"ticker, e.g. frame.drop_duplicates(['date', 'ticker'], keep='last')."
        )
    order = frame.sort_values(["date", "ticker"], kind="stable").index.to_numpy()
    if not (order == np.arange(len(frame))).all():
        if not sort:
            i = int((order != np.arange(len(frame))).nonzero()[0][0])
            raise MarketDataError(
                f"{source}: rows are not sorted by date then ticker: {row(i)} is out of place. "
                f"Sort the file (frame.sort_values(['date', 'ticker'])) or pass sort=True (for "
                f"StockTrading-v0: --set env_kwargs={{data: ..., sort: true}})."
            )
        frame = frame.loc[order].reset_index(drop=True)
    tickers = sorted(frame["ticker"].unique())
    counts = frame.groupby("date", sort=True)["ticker"].count()
    short = counts[counts < len(tickers)]
    if len(short):
        day = short.index[0]
        present = set(frame.loc[frame["date"] == day, "ticker"])
        absent = [t for t in tickers if t not in present]
        raise MarketDataError(
            f"{source}: on {day.date()} there is no row for ticker(s) {', '.join(absent[:10])}"
            f"{' ...' if len(absent) > 10 else ''} ({len(short)} date(s) with gaps). Every "
            f"ticker needs a row on every date: drop the tickers that start late or stop early, "
            f"or forward-fill their missing days (pivot to dates x tickers, ffill, melt back)."
        )
    num_dates = len(counts)
    if num_dates < min_dates:
        raise MarketDataError(
            f"{source} has {num_dates} dates; at least {min_dates} are needed (the indicators "
            f"look back up to 60 days, and a training and a backtest period must remain). Give "
            f"a longer history."
        )
    values = frame[list(FIELDS)].to_numpy(dtype=np.float64)
    ohlcv = torch.from_numpy(values.reshape(num_dates, len(tickers), len(FIELDS))).to(dtype)
    dates = counts.index.to_numpy().astype("datetime64[D]")
    return Market(dates, tuple(tickers), ohlcv, name=source)


def sample_path(name: str = "GOOG") -> Path:
    """Path of a real daily sample that an installed package ships (`SAMPLES`).

    GOOG: daily NASDAQ:GOOG bars 2004-08-19 .. 2013-03-01 (2,148 days) shipped by the
    `backtesting` package as `backtesting/test/GOOG.csv`; found without importing the package
    (whose import pulls in bokeh).
    """
    if name.upper() not in SAMPLES:
        raise MarketDataError(f"unknown sample '{name}'; available: {', '.join(SAMPLES)}.")
    spec = importlib.util.find_spec("backtesting")
    if spec is None or not spec.submodule_search_locations:
        raise MarketDataError(
            f"the {name} sample ships with the 'backtesting' package, which is not installed: "
            f"pip install -e '.[finance-sample]' (backtesting>=0.6)."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "test" / f"{name.upper()}.csv"
    if not path.is_file():
        raise MarketDataError(f"the installed backtesting package has no {path}.")
    return path


def load_sample(name: str = "GOOG", dtype=torch.float64) -> Market:
    """A real daily sample as a one-ticker `Market` (see `sample_path`), validated like a file."""
    pd = _require_pandas(f"the {name} sample")
    path = sample_path(name)
    frame = pd.read_csv(path)
    frame = frame.rename(columns={frame.columns[0]: "date"})
    frame.insert(1, "ticker", name.upper())
    return frame_to_market(frame, source=f"sample {name.upper()} ({path})", dtype=dtype)
