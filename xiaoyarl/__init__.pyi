"""The public names of `xiaoyarl` (its `__init__.py` loads them on first use,
`xiaoyarl/lazy.py`); what type checkers read."""

from xiaoyarl.config import Config
from xiaoyarl.config_io import config_from_preset, load_config, save_config
from xiaoyarl.envs import make_env
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.errors import CheckpointError, ConfigError, EnvError, XiaoyaError
from xiaoyarl.policy import Policy, PolicyEnsemble, evaluate, load_ensemble, load_policy
from xiaoyarl.run import train_agent
from xiaoyarl.train.evaluator import EvalResult
from xiaoyarl.train.loop import Callback, TrainLoop

__version__: str

__all__ = [
    "Callback",
    "CheckpointError",
    "Config",
    "ConfigError",
    "EnvError",
    "EnvSpec",
    "EvalResult",
    "Policy",
    "PolicyEnsemble",
    "TrainLoop",
    "VecEnv",
    "XiaoyaError",
    "config_from_preset",
    "evaluate",
    "load_ensemble",
    "load_config",
    "load_policy",
    "make_env",
    "save_config",
    "train_agent",
]
