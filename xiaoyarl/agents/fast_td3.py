"""FastTD3: Seo, Sferrazza, Geng, Nauman, Yin and Abbeel, "FastTD3: Simple, Fast, and Capable
Reinforcement Learning for Humanoid Control", 2025; and FastSAC, the same recipe on SAC from
the same authors' repository.

The algorithms are TD3's and SAC's, unchanged; what the paper changes is how they are run, for
a thousand or more parallel envs on one GPU:
- many sub-envs stepped at once and a few very large gradient steps per parallel step (2 steps
  of 32,768 transitions), so the replay holds a broad, fresh mix of every sub-env's data;
- each sub-env explores with its own noise std, drawn from [0.001, 0.4] and drawn anew when its
  episode ends (`explore_noise_std_max`), so some sub-envs act nearly greedily, others widely;
- fast-moving targets (tau 0.1), almost no target-policy smoothing (0.001), and, task by task,
  n-step returns (`n_step`) and a C51 distributional critic (`critic_atoms`, with the task's
  return range as `critic_v_min` and `critic_v_max`).

The sub-envs, batch, update ratio and network sizes, which `Config` leaves automatic, are the
defaults below. The settings `Config` gives a value for every algorithm (tau, the noise, the
warm-up) come from the recipe preset `xiaoyarl/configs/parallel/` that `xiaoyarl train` applies
to these algorithms (printed at start; `--no-preset` keeps the library's TD3 and SAC values).
"""

from __future__ import annotations

from xiaoyarl.agents.sac import AgentSAC
from xiaoyarl.agents.td3 import AgentTD3
from xiaoyarl.config import Config


def parallel_defaults(config: Config, batched: bool, device_type: str) -> dict:
    """1,024 sub-envs where the env is batched (16 gymnasium envs otherwise), one step each per
    rollout. On a GPU the paper's gradient steps: 2 of 32,768 transitions per parallel step on
    [1024, 512, 256] networks (its critic's widths). On a CPU a large step costs as much as
    many small ones, so the same data feeds 16 steps of 256 per 1,024 env steps on
    [256, 256] networks (TD3 and SAC's widths here). Observations normalised, as the paper's;
    evaluations every 10 parallel steps (at least 2,000 env steps apart)."""
    num_envs = config.num_envs or (1024 if batched else 16)
    gpu = device_type == "cuda"
    return {
        "num_envs": num_envs,
        "horizon_len": 1,
        "batch_size": 32_768 if gpu else 256,
        "repeat_times": (2 if gpu else 16) / 1024,
        "learning_rate": 3e-4,
        "net_dims": [1024, 512, 256] if gpu else [256, 256],
        "state_norm": True,
        "reward_norm": False,
        "num_critics": 2,
        "eval_every": max(2_000, 10 * num_envs),  # every 10 parallel steps, or 2,000 env steps
    }


class AgentFastTD3(AgentTD3):
    """TD3 run as FastTD3: see the module docstring."""

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        return parallel_defaults(config, batched, device_type)


class AgentFastSAC(AgentSAC):
    """SAC run as FastSAC: see the module docstring."""

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        return parallel_defaults(config, batched, device_type)
