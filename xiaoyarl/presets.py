"""Task presets: settings known to learn an (algorithm, env) pair, like the RL Zoo's files.

The library's defaults are general (`Config`); some tasks need other settings, e.g. the
multi-agent navigation task, whose 25-step episodes want a shorter horizon (gamma) and the
papers' batch sizes. Each preset is a plain config file in `xiaoyarl/configs/` (it explains its
values in its comments, and `--config` takes it like any other file); this table says which
(algorithm, env) pairs it was measured on (BENCHMARKS.md). `xiaoyarl train` starts from the
preset of its pair when there is one and no `--config` is given, says so, and writes the
resolved values into the run's `config.yaml`; `--no-preset` keeps the library's defaults.
From Python, `config_from_preset(algo, env_id)` (`xiaoyarl/config_io.py`) does the same;
`Config()` never applies one.
"""

from __future__ import annotations

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent / "configs"

_SPREAD_MAPPO = "multi_agent/spread_mappo.yaml"
_SPREAD_VALUE_DECOMPOSITION = "multi_agent/spread_value_decomposition.yaml"
_SPREAD_CENTRALIZED_CRITIC = "multi_agent/spread_centralized_critic.yaml"

# (algorithm, env id) -> config file under CONFIG_DIR; only pairs measured to learn with it
PRESETS: dict[tuple[str, str], str] = {
    ("mappo", "SpreadDiscrete-v0"): _SPREAD_MAPPO,
    ("mappo", "SpreadContinuous-v0"): _SPREAD_MAPPO,
    ("mappo", "mpe2:simple_spread_v3"): _SPREAD_MAPPO,
    ("vdn", "SpreadDiscrete-v0"): _SPREAD_VALUE_DECOMPOSITION,
    ("qmix", "SpreadDiscrete-v0"): _SPREAD_VALUE_DECOMPOSITION,
    ("maddpg", "SpreadContinuous-v0"): _SPREAD_CENTRALIZED_CRITIC,
    ("matd3", "SpreadContinuous-v0"): _SPREAD_CENTRALIZED_CRITIC,
}


def preset_path(algo: str, env_id: str) -> Path | None:
    """The preset config file of `algo` on `env_id`, or None when there is none."""
    name = PRESETS.get((algo.lower(), env_id))
    return CONFIG_DIR / name if name else None
