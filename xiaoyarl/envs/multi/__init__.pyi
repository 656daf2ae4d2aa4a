"""The public names of `xiaoyarl.envs.multi` (its `__init__.py` loads them on first use,
`xiaoyarl/lazy.py`); what type checkers read."""

from xiaoyarl.envs.multi.base import (
    MultiAgentEnvSpec,
    MultiAgentVecEnv,
    TorchMultiAgentVecEnv,
    team_reward,
)
from xiaoyarl.envs.multi.registry import (
    MULTI_AGENT_ENVS,
    is_multi_agent,
    is_pettingzoo_id,
    make_multi_agent_env,
)
from xiaoyarl.envs.multi.spread import SpreadContinuousEnv, SpreadDiscreteEnv, SpreadEnv
from xiaoyarl.envs.multi.two_step import TwoStepGameEnv

__all__ = [
    "MULTI_AGENT_ENVS",
    "MultiAgentEnvSpec",
    "MultiAgentVecEnv",
    "SpreadContinuousEnv",
    "SpreadDiscreteEnv",
    "SpreadEnv",
    "TorchMultiAgentVecEnv",
    "TwoStepGameEnv",
    "is_multi_agent",
    "is_pettingzoo_id",
    "make_multi_agent_env",
    "team_reward",
]
