"""Multi-agent algorithms on the single-agent ones: VDN and QMIX (value decomposition),
MADDPG and MATD3 (centralized critics), MAPPO (PPO with a centralized value).

Names load on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xiaoyarl.lazy import lazy_attributes

if TYPE_CHECKING:
    from xiaoyarl.agents.multi.centralized_critic import (
        AgentMADDPG,
        AgentMADDPGDiscrete,
        AgentMATD3,
        AgentMATD3Discrete,
    )
    from xiaoyarl.agents.multi.common import JointLayout, with_agent_ids
    from xiaoyarl.agents.multi.mappo import AgentDiscreteMAPPO, AgentMAPPO
    from xiaoyarl.agents.multi.value_decomposition import AgentQMIX, AgentVDN, QMixer, VDNMixer

# public name -> the module that defines it
_MODULES = {
    "AgentDiscreteMAPPO": "xiaoyarl.agents.multi.mappo",
    "AgentMADDPG": "xiaoyarl.agents.multi.centralized_critic",
    "AgentMADDPGDiscrete": "xiaoyarl.agents.multi.centralized_critic",
    "AgentMAPPO": "xiaoyarl.agents.multi.mappo",
    "AgentMATD3": "xiaoyarl.agents.multi.centralized_critic",
    "AgentMATD3Discrete": "xiaoyarl.agents.multi.centralized_critic",
    "AgentQMIX": "xiaoyarl.agents.multi.value_decomposition",
    "AgentVDN": "xiaoyarl.agents.multi.value_decomposition",
    "JointLayout": "xiaoyarl.agents.multi.common",
    "QMixer": "xiaoyarl.agents.multi.value_decomposition",
    "VDNMixer": "xiaoyarl.agents.multi.value_decomposition",
    "with_agent_ids": "xiaoyarl.agents.multi.common",
}

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


__getattr__, __dir__ = lazy_attributes(globals(), _MODULES)
