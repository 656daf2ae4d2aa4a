"""The public names of `xiaoyarl.finance` (its `__init__.py` loads them on first use,
`xiaoyarl/lazy.py`); what type checkers read."""

from xiaoyarl.finance.data import Market, frame_to_market, load_market, load_sample
from xiaoyarl.finance.indicators import DEFAULT_INDICATORS, compute_indicators, turbulence
from xiaoyarl.finance.metrics import performance
from xiaoyarl.finance.synthetic import STRUCTURES, synthetic_market

__all__ = [
    "DEFAULT_INDICATORS",
    "Market",
    "STRUCTURES",
    "compute_indicators",
    "frame_to_market",
    "load_market",
    "load_sample",
    "performance",
    "synthetic_market",
    "turbulence",
]
