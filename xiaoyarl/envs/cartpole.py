"""gymnasium's `CartPole-v1` as a batched torch simulator (see `envs/classic.py` for what the
classic-control envs reproduce and for their variable-major layout)."""

from __future__ import annotations

import math

import torch

from xiaoyarl.envs.base import TorchVecEnv


class CartPoleEnv(TorchVecEnv):
    """gymnasium `CartPole-v1`: push a cart left or right to keep a pole upright (Euler steps).

    sim_state `(n, 4)`: x, x_dot, theta, theta_dot; the observation is the same four numbers.
    Reward 1 every step, the terminating one included; terminates when |x| > 2.4 or
    |theta| > 12 degrees.
    """

    name = "CartPole-v1"
    state_dim = 4
    sim_dim = 4
    action_dim = 2
    if_discrete = True
    max_step = 500
    target_return = 475.0

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02  # seconds per step
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, num_envs: int, device: str | torch.device = "cpu",
                 seed: int | None = None) -> None:  # fmt: skip
        # constants as tensors, so each step is a few fused ops with no Python-scalar operands
        force = torch.tensor([-self.force_mag, self.force_mag], device=device)
        self._force_over_mass = force / self.total_mass
        self._four_thirds_length = torch.tensor([self.length * 4.0 / 3.0], device=device)
        self._thresholds = torch.tensor([[self.x_threshold], [self.theta_threshold]], device=device)
        super().__init__(num_envs, device, seed)

    def _sample_initial(self, n: int) -> torch.Tensor:
        return self.uniform_rows(n, -0.05, 0.05, 4).T  # all four uniform in [-0.05, 0.05)

    def _dynamics(self, sim_state: torch.Tensor, action: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        x, x_dot, theta, theta_dot = sim_state.unbind(1)  # each (n,)
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)
        # gymnasium's formulas, rearranged into fused multiply-adds (fewer passes over the batch):
        # temp = (force + polemass_length * theta_dot^2 * sin) / total_mass
        pml_over_mass = self.polemass_length / self.total_mass
        force_over_mass = self._force_over_mass.index_select(0, action)  # action 1 pushes right
        temp = torch.addcmul(force_over_mass, theta_dot.square(), sintheta, value=pml_over_mass)
        # thetaacc = (g sin - cos temp) / (length (4/3 - masspole / total_mass cos^2))
        numerator = torch.addcmul(sintheta.mul_(self.gravity), costheta, temp, value=-1.0)
        denominator = torch.addcmul(
            self._four_thirds_length, costheta, costheta,
            value=-self.length * self.masspole / self.total_mass,
        )  # fmt: skip
        thetaacc = numerator.div_(denominator)
        # xacc = temp - polemass_length / total_mass * thetaacc * cos
        xacc = torch.addcmul(temp, thetaacc, costheta, value=-pml_over_mass)

        # Euler: every variable moves by tau times its derivative at the start of the step
        derivative = torch.stack([x_dot, xacc, theta_dot, thetaacc])  # (4, n)
        rows = torch.add(sim_state.T, derivative, alpha=self.tau)  # (4, n): x, x_dot, th, th_dot
        # |x| > 2.4 or |theta| > 12 degrees, both rows at once
        terminated = (rows[0::2].abs() > self._thresholds).any(0)
        return rows.T, torch.ones_like(x), terminated

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        return sim_state.clone()  # a copy, so a caller writing into it cannot move the cart
