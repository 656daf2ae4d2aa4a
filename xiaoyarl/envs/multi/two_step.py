"""The two-step cooperative matrix game of QMIX (Rashid et al., 2018, "QMIX: Monotonic Value
Function Factorisation for Deep Multi-Agent Reinforcement Learning", section "Representational
Complexity", Figure 3), batched in torch.

Two agents with two actions each (0 and 1, the paper's A and B) and a shared reward:

- step 1, state 1: agent 1's action picks the next state, 0 -> 2A, 1 -> 2B; agent 2's action
  has no effect; reward 0.
- step 2, state 2A: every joint action pays 7. State 2B pays `[[0, 1], [1, 8]][a1][a2]`.
  The episode then terminates.

The optimal team return is 8 (B, then (B, B)); the safe choice 2A gives 7, and a value
decomposition that cannot represent 2B's payoffs (VDN) settles for it, which is the point of the
game. Under uniformly random actions the mean return is 4.75.

Observation: as in the paper's setup, each agent sees the full state, here a one-hot over
(1, 2A, 2B, end), the same for both agents; the "end" entry is set only in `final_obs` of the
terminal step (the paper has no terminal state; it gives terminal transitions a well-defined
observation). The algorithms append the agent id. Global state: the same one-hot `(4,)`.
`sim_state (n, 1)`: the state index 0..3 as a float.
"""

from __future__ import annotations

import torch

from xiaoyarl.envs.multi.base import TorchMultiAgentVecEnv

STATE_1, STATE_2A, STATE_2B, STATE_END = 0, 1, 2, 3
PAYOFF_2A = ((7.0, 7.0), (7.0, 7.0))
PAYOFF_2B = ((0.0, 1.0), (1.0, 8.0))


class TwoStepGameEnv(TorchMultiAgentVecEnv):
    """`TwoStepGame-v0`: QMIX's two-step game for `num_envs` sub-envs (see the module docstring)."""

    name = "TwoStepGame-v0"
    num_agents = 2
    obs_dim = 4
    state_dim = 4
    sim_dim = 1
    action_dim = 2
    if_discrete = True
    max_step = 2
    target_return = 8.0  # the optimum; a greedy joint policy reaches it exactly
    shared_reward = True
    agent_names = ("agent_0", "agent_1")

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        check_actions: bool = True,
    ) -> None:
        # payoff of the second step by (state, action of agent 1, action of agent 2)
        self._payoff = torch.tensor([PAYOFF_2A, PAYOFF_2B], device=device)  # (2, 2, 2)
        super().__init__(num_envs, device, seed, check_actions)

    def _sample_initial(self, n: int) -> torch.Tensor:
        return torch.full((n, 1), float(STATE_1), device=self.device)  # deterministic start

    def _dynamics(
        self, sim_state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        state = sim_state[:, 0].long()  # (n,)
        a1, a2 = actions.unbind(1)  # each (n,)
        first = state == STATE_1
        # step 1: agent 1 picks 2A (action 0) or 2B (action 1); step 2: the game ends
        next_state = torch.where(first, STATE_2A + a1, STATE_END)
        game = (state - STATE_2A).clamp(0, 1)  # 0 for 2A, 1 for 2B (ignored in state 1)
        payoff = self._payoff[game, a1, a2]
        reward = torch.where(first, 0.0, payoff)  # (n,)
        terminated = ~first
        rewards = reward.unsqueeze(1).expand(-1, self.num_agents).contiguous()
        return next_state.to(torch.float32).unsqueeze(1), rewards, terminated

    def _one_hot(self, sim_state: torch.Tensor) -> torch.Tensor:
        """`(n, 4)` one-hot of states 1, 2A, 2B, end."""
        return torch.nn.functional.one_hot(sim_state[:, 0].long(), 4).to(torch.float32)

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        return self._one_hot(sim_state).unsqueeze(1).repeat(1, self.num_agents, 1)  # (n, 2, 4)

    def _global_state(self, sim_state: torch.Tensor) -> torch.Tensor:
        return self._one_hot(sim_state)
