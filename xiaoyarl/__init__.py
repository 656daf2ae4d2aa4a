"""xiaoyarl: massively parallel deep reinforcement learning in PyTorch."""

from xiaoyarl.config import Config
from xiaoyarl.envs import EnvSpec, VecEnv, make_env
from xiaoyarl.errors import CheckpointError, ConfigError, EnvError, XiaoyaError
from xiaoyarl.policy import Policy, PolicyEnsemble, evaluate, load_ensemble, load_policy
from xiaoyarl.train.evaluator import EvalResult
from xiaoyarl.train.loop import Callback, TrainLoop
from xiaoyarl.train.run import train_agent

__version__ = "0.1.0"

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
    "evaluate",
    "load_ensemble",
    "load_policy",
    "make_env",
    "train_agent",
]
