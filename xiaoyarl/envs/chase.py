"""`ChaseEnv` ("Chase-v0"): one point chases another that wanders off, the chasing task of
ElegantRL's tutorial on GPU vector envs, with the tutorial's dynamics and rewards, and with
its Python loop over finished sub-envs replaced by tensor ops (`TorchVecEnv` resets them).

Two point masses in a `dim`-dimensional plane (dim = 2 by default); all sub-envs step at once.
- Start: the target at p0 ~ N(0, 1)^dim, the chaser at p1 ~ N(-8, 1)^dim, both at rest.
- The target: a random push a0 ~ U[0, 1)^dim scaled to length <= 1; v0 <- 0.5 v0 + a0;
  p0 <- p0 + 0.01 v0 (so it drifts away along +x, +y at about 0.013 a step).
- The chaser: the action a in [-1, 1]^dim scaled to length <= 1; v1 <- 0.75 v1 + a;
  p1 <- p1 + 0.01 v1 (top speed 0.04 a step).
- Reward: the distance closed this step, minus 0.02 |a| (the action's length before scaling);
  plus 8 (the starting distance) on the step that catches the target.
- Terminates when the distance falls below 1 (caught); truncated after 1,024 steps.

Observation `(p0, v0, p1, v1)`, 4 dim numbers, the same as `sim_state`. Over 1,000 episodes:
chasing in a straight line at full speed (`heuristic_action`) returns 10.45 (caught after ~400
steps); standing still, -13.9 (the target drifts away); uniformly random actions, -29.6. The
target return is the tutorial's 6.3.
"""

from __future__ import annotations

import torch

from xiaoyarl.envs.base import TorchVecEnv
from xiaoyarl.errors import EnvError


class ChaseEnv(TorchVecEnv):
    """`Chase-v0`: steer a point mass (the chaser) to catch a randomly drifting one."""

    name = "Chase-v0"
    if_discrete = False
    max_step = 1024
    target_return = 6.3
    start_distance = 8.0  # per coordinate between the two starting means; also the catch bonus
    catch_distance = 1.0

    def __init__(
        self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
        dim: int = 2,
    ) -> None:  # fmt: skip
        if not (isinstance(dim, int) and dim >= 1):
            raise EnvError(f"Chase-v0: dim must be a positive integer, got {dim!r}.")
        self.dim = dim
        self.state_dim = self.sim_dim = 4 * dim
        self.action_dim = dim
        self.action_low, self.action_high = (-1.0,) * dim, (1.0,) * dim
        super().__init__(num_envs, device, seed)

    def _split(self, sim_state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`(n, 4 dim)` -> p0, v0, p1, v1, each `(n, dim)`."""
        return sim_state.split(self.dim, dim=1)

    def _sample_initial(self, n: int) -> torch.Tensor:
        noise = torch.randn((n, 2, self.dim), generator=self.generator, device=self.device)
        p0, p1 = noise[:, 0], noise[:, 1] - self.start_distance
        rest = torch.zeros_like(p0)
        return torch.cat([p0, rest, p1, rest], dim=1)

    def _dynamics(
        self, sim_state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        p0, v0, p1, v1 = self._split(sim_state)
        push = torch.rand(p0.shape, generator=self.generator, device=self.device)
        v0 = 0.5 * v0 + push / push.norm(dim=1, keepdim=True).clamp_min(1.0)
        p0 = p0 + 0.01 * v0

        length = action.norm(dim=1)
        v1 = 0.75 * v1 + action / length.clamp_min(1.0).unsqueeze(1)
        p1 = p1 + 0.01 * v1

        before = (sim_state[:, : self.dim] - sim_state[:, 2 * self.dim : 3 * self.dim]).norm(dim=1)
        after = (p0 - p1).norm(dim=1)
        caught = after < self.catch_distance
        reward = before - after - 0.02 * length + self.start_distance * caught.float()
        return torch.cat([p0, v0, p1, v1], dim=1), reward, caught

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        return sim_state.clone()

    @staticmethod
    def heuristic_action(obs: torch.Tensor) -> torch.Tensor:
        """Full speed straight at the target: the unit vector from the chaser to it."""
        p0, _, p1, _ = obs.chunk(4, dim=1)
        direction = p0 - p1
        return direction / direction.norm(dim=1, keepdim=True).clamp_min(1e-8)
