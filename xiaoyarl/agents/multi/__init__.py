"""Multi-agent algorithms on the single-agent ones: VDN and QMIX (value decomposition),
MADDPG and MATD3 (centralized critics), MAPPO (PPO with a centralized value)."""

from xiaoyarl.agents.multi.centralized_critic import (
    AgentMADDPG,
    AgentMADDPGDiscrete,
    AgentMATD3,
    AgentMATD3Discrete,
)
from xiaoyarl.agents.multi.common import JointLayout, with_agent_ids
from xiaoyarl.agents.multi.mappo import AgentDiscreteMAPPO, AgentMAPPO
from xiaoyarl.agents.multi.value_decomposition import AgentQMIX, AgentVDN, QMixer, VDNMixer

__all__ = [
    "AgentDiscreteMAPPO",
    "AgentMADDPG",
    "AgentMADDPGDiscrete",
    "AgentMAPPO",
    "AgentMATD3",
    "AgentMATD3Discrete",
    "AgentQMIX",
    "AgentVDN",
    "JointLayout",
    "QMixer",
    "VDNMixer",
    "with_agent_ids",
]
