"""Stock trading: market data, indicators, synthetic markets, the trading env and backtests.

- `data`: the `Market` panel `(num_dates, num_tickers, 5)`, `load_market` (CSV / Parquet,
  validated), `load_sample` (a real daily sample an installed package ships);
- `indicators`: FinRL's technical indicators (stockstats definitions) and turbulence index,
  as causal torch tensors over the whole panel;
- `synthetic`: seeded factor-model markets with regimes, volatility clustering and optional
  planted structure (the default data: nothing is downloaded);
- `metrics`: Sharpe, Sortino, drawdown, ... of daily account values;
- `env`: `StockTradingEnv` (`StockTrading-v0`), FinRL's MDP as batched tensors;
- `backtest`: score a trained run on the held-out period against buy-and-hold.

Names load on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xiaoyarl.lazy import lazy_attributes

if TYPE_CHECKING:
    from xiaoyarl.finance.data import Market, frame_to_market, load_market, load_sample
    from xiaoyarl.finance.indicators import DEFAULT_INDICATORS, compute_indicators, turbulence
    from xiaoyarl.finance.metrics import performance
    from xiaoyarl.finance.synthetic import STRUCTURES, synthetic_market

# public name -> the module that defines it
_MODULES = {
    "DEFAULT_INDICATORS": "xiaoyarl.finance.indicators",
    "STRUCTURES": "xiaoyarl.finance.synthetic",
    "Market": "xiaoyarl.finance.data",
    "compute_indicators": "xiaoyarl.finance.indicators",
    "frame_to_market": "xiaoyarl.finance.data",
    "load_market": "xiaoyarl.finance.data",
    "load_sample": "xiaoyarl.finance.data",
    "performance": "xiaoyarl.finance.metrics",
    "synthetic_market": "xiaoyarl.finance.synthetic",
    "turbulence": "xiaoyarl.finance.indicators",
}

__all__ = [
    "DEFAULT_INDICATORS",
    "STRUCTURES",
    "Market",
    "compute_indicators",
    "frame_to_market",
    "load_market",
    "load_sample",
    "performance",
    "synthetic_market",
    "turbulence",
]


__getattr__, __dir__ = lazy_attributes(globals(), _MODULES)
