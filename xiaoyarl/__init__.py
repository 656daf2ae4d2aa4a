"""xiaoyarl: massively parallel deep reinforcement learning in PyTorch.

The public names below load on first use (PEP 562), so `import xiaoyarl.core.nets` loads the
networks and not the trainer: `from xiaoyarl import train_agent` imports `xiaoyarl.run`
when it runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from xiaoyarl.lazy import lazy_attributes

if TYPE_CHECKING:
    from xiaoyarl.config import Config
    from xiaoyarl.envs import make_env
    from xiaoyarl.envs.base import EnvSpec, VecEnv
    from xiaoyarl.errors import CheckpointError, ConfigError, EnvError, XiaoyaError
    from xiaoyarl.policy import Policy, PolicyEnsemble, evaluate, load_ensemble, load_policy
    from xiaoyarl.run import train_agent
    from xiaoyarl.train.evaluator import EvalResult
    from xiaoyarl.train.loop import Callback, TrainLoop

__version__ = "0.1.0"

# public name -> the module that defines it
_MODULES = {
    "Callback": "xiaoyarl.train.loop",
    "CheckpointError": "xiaoyarl.errors",
    "Config": "xiaoyarl.config",
    "ConfigError": "xiaoyarl.errors",
    "EnvError": "xiaoyarl.errors",
    "EnvSpec": "xiaoyarl.envs.base",
    "EvalResult": "xiaoyarl.train.evaluator",
    "Policy": "xiaoyarl.policy",
    "PolicyEnsemble": "xiaoyarl.policy",
    "TrainLoop": "xiaoyarl.train.loop",
    "VecEnv": "xiaoyarl.envs.base",
    "XiaoyaError": "xiaoyarl.errors",
    "evaluate": "xiaoyarl.policy",
    "load_ensemble": "xiaoyarl.policy",
    "load_policy": "xiaoyarl.policy",
    "make_env": "xiaoyarl.envs",
    "train_agent": "xiaoyarl.run",
}

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


__getattr__, __dir__ = lazy_attributes(globals(), _MODULES)


# Registers the torch-native envs with gymnasium as `xiaoyarl/<EnvId>`, so that `import
# xiaoyarl` is enough for `gymnasium.make_vec("xiaoyarl/CartPole-v1")` (README). Last, once the
# names above exist.
importlib.import_module("xiaoyarl.envs.gym_vector")
