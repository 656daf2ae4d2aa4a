"""The public names of `xiaoyarl.agents` (its `__init__.py` loads them on first use,
`xiaoyarl/lazy.py`); what type checkers read."""

from xiaoyarl.agents.a2c import AgentA2C, AgentDiscreteA2C
from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.ddpg import AgentDDPG
from xiaoyarl.agents.dqn import AgentD3QN, AgentDoubleDQN, AgentDQN
from xiaoyarl.agents.dreamerv3 import AgentDreamerV3, AgentDreamerV3Discrete
from xiaoyarl.agents.fast_td3 import AgentFastSAC, AgentFastTD3
from xiaoyarl.agents.multi import (
    AgentDiscreteMAPPO,
    AgentMADDPG,
    AgentMADDPGDiscrete,
    AgentMAPPO,
    AgentMATD3,
    AgentMATD3Discrete,
    AgentQMIX,
    AgentVDN,
)
from xiaoyarl.agents.ppo import AgentDiscretePPO, AgentPPO
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.agents.redq import AgentREDQ
from xiaoyarl.agents.registry import ALGORITHMS, agent_class, make_agent
from xiaoyarl.agents.sac import AgentModSAC, AgentSAC, AgentSACDiscrete
from xiaoyarl.agents.td3 import AgentTD3
from xiaoyarl.agents.tdmpc2 import AgentTDMPC2

__all__ = [
    "ALGORITHMS",
    "AgentA2C",
    "AgentBase",
    "AgentD3QN",
    "AgentDDPG",
    "AgentDQN",
    "AgentDiscreteA2C",
    "AgentDiscreteMAPPO",
    "AgentDiscretePPO",
    "AgentDoubleDQN",
    "AgentDreamerV3",
    "AgentDreamerV3Discrete",
    "AgentFastSAC",
    "AgentFastTD3",
    "AgentMADDPG",
    "AgentMADDPGDiscrete",
    "AgentMAPPO",
    "AgentMATD3",
    "AgentMATD3Discrete",
    "AgentModSAC",
    "AgentPPO",
    "AgentPQN",
    "AgentQMIX",
    "AgentREDQ",
    "AgentSAC",
    "AgentSACDiscrete",
    "AgentTD3",
    "AgentTDMPC2",
    "AgentVDN",
    "agent_class",
    "make_agent",
]
