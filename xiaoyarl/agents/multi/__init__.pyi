"""The public names of `xiaoyarl.agents.multi` (its `__init__.py` loads them on first use,
`xiaoyarl/lazy.py`); what type checkers read."""

from xiaoyarl.agents.multi.centralized_critic import (
    AgentMADDPG,
    AgentMADDPGDiscrete,
    AgentMATD3,
    AgentMATD3Discrete,
)
from xiaoyarl.agents.multi.common import JointLayout, with_agent_ids
from xiaoyarl.agents.multi.mappo import AgentDiscreteMAPPO, AgentMAPPO
from xiaoyarl.agents.multi.pqn_vdn import AgentPQNVDN
from xiaoyarl.agents.multi.recurrent_decomposition import AgentRecurrentQMIX, AgentRecurrentVDN
from xiaoyarl.agents.multi.value_decomposition import AgentQMIX, AgentVDN, QMixer, VDNMixer

__all__ = [
    "AgentDiscreteMAPPO",
    "AgentMADDPG",
    "AgentMADDPGDiscrete",
    "AgentMAPPO",
    "AgentMATD3",
    "AgentMATD3Discrete",
    "AgentPQNVDN",
    "AgentQMIX",
    "AgentRecurrentQMIX",
    "AgentRecurrentVDN",
    "AgentVDN",
    "JointLayout",
    "QMixer",
    "VDNMixer",
    "with_agent_ids",
]
