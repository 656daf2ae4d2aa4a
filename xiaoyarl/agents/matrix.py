"""What works with what: each single-agent algorithm against each kind of observation and of
action, action masks and memory, and each multi-agent one against each kind of action, masks and
memory, read from the agents themselves. For a cell, an env spec of
that kind is made; the registry picks the agent class for it (`agent_class`), the config's checks
run (`resolve_config`, the agent's own `check`) and the agent is built on the spec. A cell works
when all of that does; otherwise the refusal's message is the cell's reason. The docs' matrix page
shows the cells, and `tests/test_matrix.py` trains every cell said to work on a small env of its
kind, so that no cell changes state unnoticed."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import torch

from xiaoyarl.agents.registry import ALGORITHMS, make_agent
from xiaoyarl.agents.settings import agent_of_name, resolve_config
from xiaoyarl.config import Config
from xiaoyarl.envs.base import EnvSpec
from xiaoyarl.envs.multi.base import MultiAgentEnvSpec
from xiaoyarl.errors import XiaoyaError

IMAGE = (8, 8, 3)  # an RGB image, channels last, uint8
# each kind of observation, as the env adapters describe it (`EnvSpec`)
OBSERVATIONS: dict[str, dict] = {
    "vector": {"state_dim": 4},
    "image": {"state_dim": math.prod(IMAGE), "obs_shape": IMAGE, "obs_dtype": torch.uint8,
              "channels_last": True},
    "Dict": {"state_dim": 2 + math.prod(IMAGE),
             "obs_keys": (("image", IMAGE, "uint8"), ("position", (2,), "float"))},
    # a Tuple's parts are read as a Dict's keys "0", "1", ... (the gymnasium adapter's)
    "Tuple": {"state_dim": 2 + math.prod(IMAGE),
              "obs_keys": (("0", IMAGE, "uint8"), ("1", (2,), "float"))},
}  # fmt: skip
# each kind of action
ACTIONS: dict[str, dict] = {
    "Discrete": {"action_dim": 3, "if_discrete": True},
    "Box": {"action_dim": 2, "if_discrete": False, "action_low": (-1.0, -1.0),
            "action_high": (1.0, 1.0)},
    "MultiDiscrete": {"action_dim": 5, "if_discrete": True, "action_nvec": (3, 2)},
    "MultiBinary": {"action_dim": 6, "if_discrete": True, "action_nvec": (2, 2, 2)},
    # a Dict of a discrete part and a continuous one (`envs/actions.py`)
    "hybrid": {"action_dim": 2, "if_discrete": False, "action_nvec": (3,),
               "action_low": (-1.0, -1.0), "action_high": (1.0, 1.0),
               "action_parts": ((("choice",), "discrete", (), (3,), (0,)),
                                (("value",), "continuous", (2,), (), ()))},
}  # fmt: skip
MEMORIES = ("lstm", "gru")

# name -> (algorithm, env id, Config fields): a kind of run every tool takes; the tests' small
# envs (`module:Id`, from the tests folder) where no built-in env is of that kind
RUN_KINDS: dict[str, tuple[str, str, dict]] = {
    "single-agent": ("ppo", "CartPole-v1", {}),
    "recurrent": ("sac", "PendulumNoVelocity-v1", {"recurrent": "gru", "recurrent_dim": 8}),
    "pixel": ("ppo", "MinAtar/Breakout-v1", {"net_dims": [16]}),
    "Dict": ("sac", "control_envs:Reach-v0", {}),
    "hybrid actions": ("ppo", "action_envs:Kick-v0", {}),
    "action masks": ("dqn", "action_envs:PickAllowed-v0", {"recurrent": "gru",
                                                          "recurrent_dim": 8}),
    "multi-agent": ("mappo", "SpreadDiscrete-v0", {}),
    "multi-agent, recurrent": ("qmix", "SpreadDiscrete-v0", {"recurrent": "gru",
                                                             "recurrent_dim": 8}),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Cell:
    """One kind of env and policy: its observations, actions, whether the env says which
    actions are allowed (`masked`), and the policy's memory (None: feed-forward)."""

    observation: str = "vector"
    action: str = "Discrete"
    masked: bool = False
    memory: str | None = None

    def spec(self, num_envs: int = 2) -> EnvSpec:
        """An env spec of this kind (what an adapter of such an env gives)."""
        return EnvSpec(name="this env", num_envs=num_envs, max_step=10, target_return=None,
                       action_mask=self.masked, **OBSERVATIONS[self.observation],
                       **ACTIONS[self.action])  # fmt: skip


def single_agent_algorithms() -> list[str]:
    """The registered single-agent algorithms, in the registry's order."""
    return [name for name in ALGORITHMS if not agent_of_name(name).if_multi_agent]


def own_action(algo: str) -> str:
    """The kind of action an algorithm's columns other than the actions' use: Discrete where it
    has an agent for discrete actions, else Box."""
    return "Discrete" if ALGORITHMS[algo][1] is not None else "Box"


def refusal(algo: str, cell: Cell) -> str | None:
    """Why `algo` cannot train in an env and with a policy of the kind `cell`, or None where it
    can: the message of the first refusal among choosing its agent class, checking the config
    and building the agent."""
    config = Config(algo=algo, env_id="CartPole-v1", recurrent=cell.memory)
    try:
        resolved = resolve_config(config, batched=False)
        make_agent(algo, cell.spec(), resolved, torch.device("cpu"), learner=False)
    except (XiaoyaError, ValueError) as error:
        return str(error)
    return None


def columns(algo: str) -> dict[str, dict[str, Cell]]:
    """The matrix's tables and their cells for `algo`: each kind of action (vector
    observations), each kind of observation (its own kind of action), action masks, and memory
    (vector observations): with its own kind of action, and a GRU with masks, multi-discrete
    and hybrid actions."""
    own = own_action(algo)
    return {
        "actions": {action: Cell(action=action) for action in ACTIONS},
        "observations": {obs: Cell(observation=obs, action=own) for obs in OBSERVATIONS},
        "masks": {"masked": Cell(action="Discrete", masked=True)},
        "memory": {
            **{memory: Cell(action=own, memory=memory) for memory in MEMORIES},
            "gru, masked": Cell(action="Discrete", masked=True, memory="gru"),
            "gru, MultiDiscrete": Cell(action="MultiDiscrete", memory="gru"),
            "gru, hybrid": Cell(action="hybrid", memory="gru"),
        },
    }


def cells() -> Iterator[tuple[str, str, str, Cell]]:
    """Every (algorithm, table, column, cell) of the matrix."""
    for algo in single_agent_algorithms():
        for table, row in columns(algo).items():
            for column, cell in row.items():
                yield algo, table, column, cell


# --- the multi-agent algorithms: vector observations (each agent's), one action kind each ---
def multi_agent_algorithms() -> list[str]:
    """The registered multi-agent algorithms, in the registry's order."""
    return [name for name in ALGORITHMS if agent_of_name(name).if_multi_agent]


@dataclasses.dataclass(frozen=True)
class MultiAgentCell:
    """A kind of multi-agent env and policy: discrete or continuous actions (None: the
    algorithm's own), whether the env says which actions each agent may take (`masked`), and
    the agents' memory (None: feed-forward)."""

    discrete: bool | None = None
    masked: bool = False
    memory: str | None = None

    def spec(self, algo: str, num_envs: int = 2) -> MultiAgentEnvSpec:
        """A spec of this kind (3 agents of 6 observation numbers), as its adapters give."""
        discrete = own_action(algo) == "Discrete" if self.discrete is None else self.discrete
        low, high = (None, None) if discrete else ((-1.0, -1.0), (1.0, 1.0))
        return MultiAgentEnvSpec(
            name="this env", num_envs=num_envs, num_agents=3, obs_dim=6, state_dim=18,
            action_dim=5 if discrete else 2, if_discrete=discrete, max_step=10,
            target_return=None, shared_reward=True, action_low=low, action_high=high,
            has_action_mask=self.masked,
        )  # fmt: skip


MULTI_AGENT_COLUMNS = {
    "Discrete": MultiAgentCell(discrete=True),
    "Box": MultiAgentCell(discrete=False),
    "masked": MultiAgentCell(discrete=True, masked=True),
    "lstm": MultiAgentCell(memory="lstm"),
    "gru": MultiAgentCell(memory="gru"),
    "gru, masked": MultiAgentCell(discrete=True, masked=True, memory="gru"),
}


def multi_agent_refusal(algo: str, cell: MultiAgentCell) -> str | None:
    """Why the multi-agent `algo` cannot train with an env and policy of the kind `cell`, or
    None where it can (as `refusal`)."""
    config = Config(algo=algo, env_id="SpreadDiscrete-v0", recurrent=cell.memory)
    try:
        resolved = resolve_config(config, batched=True)
        make_agent(algo, cell.spec(algo), resolved, torch.device("cpu"), learner=False)
    except (XiaoyaError, ValueError) as error:
        return str(error)
    return None
