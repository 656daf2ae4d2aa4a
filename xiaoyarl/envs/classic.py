"""Gymnasium's classic-control tasks as batched torch simulators.

Each class reproduces one gymnasium 1.x environment step for step: the same dynamics, reward,
termination rule, time limit and initial-state distribution (only the random numbers differ,
as they come from the env's own torch generator). `sim_state` holds the same physical state
as gymnasium's `env.unwrapped.state`, so a transition can be checked against gymnasium by
putting both into one state. Everything runs as tensor ops over all sub-envs at once; ties
that gymnasium settles with `if` are settled with `torch.where` / `clamp`.

CartPole lives in its own module (`envs/cartpole.py`), so that the smallest example loads only
it. Layout: every `(n, d)` tensor these envs make (`sim_state` and observations) is the transpose
of a contiguous `(d, n)` one, so each physical variable is one contiguous row. On CPU this makes
the elementwise math and the auto-reset `torch.where` two to three times faster than row-major
`(n, d)`, where the innermost dimension has only d = 2..6 elements. Shapes and values are
unchanged; call `.contiguous()` where row-major memory is needed (e.g. before `.view(-1)`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from xiaoyarl.envs.base import TorchVecEnv
from xiaoyarl.envs.cartpole import CartPoleEnv
from xiaoyarl.envs.targets import DEFAULT_TARGET_RETURNS


def _rows_to_batch(*rows: torch.Tensor) -> torch.Tensor:
    """`d` tensors `(n,)` -> `(n, d)`, stored variable-major (see the module docstring)."""
    return torch.stack(rows).T


def _angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Angle mapped into [-pi, pi), as gymnasium's pendulum `angle_normalize`."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class PendulumEnv(TorchVecEnv):
    """gymnasium `Pendulum-v1`: swing a frictionless pendulum up and hold it there.

    sim_state `(n, 2)`: th (unbounded angle, 0 = upright), thdot. Observation
    `(cos th, sin th, thdot)`. The action in [-1, 1] is scaled to a torque in [-2, 2]; the cost
    `angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2` is paid before the step. Never terminates.
    """

    name = "Pendulum-v1"
    state_dim = 3
    sim_dim = 2
    action_dim = 1
    if_discrete = False
    max_step = 200
    target_return = DEFAULT_TARGET_RETURNS["Pendulum-v1"]
    action_low = (-2.0,)
    action_high = (2.0,)

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    g = 10.0
    m = 1.0
    l = 1.0

    def _sample_initial(self, n: int) -> torch.Tensor:
        th, thdot = self.uniform_rows(n, -1.0, 1.0, 2)  # th in [-pi, pi), thdot in [-1, 1)
        return _rows_to_batch(math.pi * th, thdot)

    def _dynamics(
        self, sim_state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        th, thdot = sim_state.unbind(1)  # each (n,)
        u = (action[:, 0] * self.max_torque).clamp(-self.max_torque, self.max_torque)  # (n,)
        costs = _angle_normalize(th).square() + 0.1 * thdot.square() + 0.001 * u.square()

        g, m, l, dt = self.g, self.m, self.l, self.dt
        newthdot = thdot + (3 * g / (2 * l) * torch.sin(th) + 3.0 / (m * l**2) * u) * dt
        newthdot = newthdot.clamp(-self.max_speed, self.max_speed)
        newth = th + newthdot * dt

        terminated = torch.zeros_like(th, dtype=torch.bool)
        return _rows_to_batch(newth, newthdot), -costs, terminated

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        th, thdot = sim_state.unbind(1)
        return _rows_to_batch(torch.cos(th), torch.sin(th), thdot)  # (n, 3)


class AcrobotEnv(TorchVecEnv):
    """gymnasium `Acrobot-v1`: swing the free end of a two-link chain above a line.

    sim_state `(n, 4)`: th1, th2 (wrapped to [-pi, pi]), dth1, dth2. Observation
    `(cos th1, sin th1, cos th2, sin th2, dth1, dth2)`. Actions 0, 1, 2 apply torque -1, 0, +1
    at the joint; one RK4 step of dt = 0.2 with the "book" equations of motion. Reward -1 per
    step, 0 on the step that reaches `-cos th1 - cos(th1 + th2) > 1`, which terminates.
    """

    name = "Acrobot-v1"
    state_dim = 6
    sim_dim = 4
    action_dim = 3
    if_discrete = True
    max_step = 500
    target_return = -100.0

    dt = 0.2
    link_length_1 = 1.0
    link_mass_1 = 1.0
    link_mass_2 = 1.0
    link_com_pos_1 = 0.5
    link_com_pos_2 = 0.5
    link_moi = 1.0
    max_vel_1 = 4 * math.pi
    max_vel_2 = 9 * math.pi
    avail_torque = (-1.0, 0.0, 1.0)

    def __init__(
        self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None
    ) -> None:
        self._torques = torch.tensor(self.avail_torque, device=device)  # (3,)
        super().__init__(num_envs, device, seed)

    def _sample_initial(self, n: int) -> torch.Tensor:
        return self.uniform_rows(n, -0.1, 0.1, 4).T  # all four uniform in [-0.1, 0.1)

    def _dsdt(self, s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Time derivative `(n, 4)` of states `(n, 4)` under joint torques `(n,)` ("book")."""
        m1, m2 = self.link_mass_1, self.link_mass_2
        l1, lc1, lc2 = self.link_length_1, self.link_com_pos_1, self.link_com_pos_2
        i1 = i2 = self.link_moi
        g = 9.8
        theta1, theta2, dtheta1, dtheta2 = s.unbind(1)
        cos2, sin2 = torch.cos(theta2), torch.sin(theta2)

        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + i1 + i2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + i2
        phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dtheta2.square() * sin2
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
            + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - math.pi / 2)
            + phi2
        )
        ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1.square() * sin2 - phi2) / (
            m2 * lc2**2 + i2 - d2.square() / d1
        )
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return _rows_to_batch(dtheta1, dtheta2, ddtheta1, ddtheta2)

    def _dynamics(
        self, sim_state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # torque (n,) is held constant over the step (gymnasium appends it to the RK4 state)
        torque = self._torques.index_select(0, action)
        dt, s = self.dt, sim_state
        k1 = self._dsdt(s, torque)
        k2 = self._dsdt(s + dt / 2 * k1, torque)
        k3 = self._dsdt(s + dt / 2 * k2, torque)
        k4 = self._dsdt(s + dt * k3, torque)
        ns = s + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)  # (n, 4)

        th1, th2, dth1, dth2 = ns.unbind(1)
        th1 = torch.remainder(th1 + math.pi, 2 * math.pi) - math.pi  # gymnasium `wrap`
        th2 = torch.remainder(th2 + math.pi, 2 * math.pi) - math.pi
        dth1 = dth1.clamp(-self.max_vel_1, self.max_vel_1)
        dth2 = dth2.clamp(-self.max_vel_2, self.max_vel_2)

        terminated = -torch.cos(th1) - torch.cos(th2 + th1) > 1.0
        reward = terminated.to(torch.float32) - 1.0  # -1, or 0 when the goal is reached
        return _rows_to_batch(th1, th2, dth1, dth2), reward, terminated

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        th1, th2, dth1, dth2 = sim_state.unbind(1)
        trig = (torch.cos(th1), torch.sin(th1), torch.cos(th2), torch.sin(th2))
        return _rows_to_batch(*trig, dth1, dth2)  # (n, 6)


class MountainCarContinuousEnv(TorchVecEnv):
    """gymnasium `MountainCarContinuous-v0`: drive an underpowered car up the right hill.

    sim_state `(n, 2)`: position, velocity; the observation is the same two numbers. Force is
    the action clipped to [-1, 1]; reward `-0.1 * action^2` (of the unclipped action), plus 100
    on the step that reaches position >= 0.45 with velocity >= 0, which terminates. Hitting the
    left wall at -1.2 stops the car.
    """

    name = "MountainCarContinuous-v0"
    state_dim = 2
    sim_dim = 2
    action_dim = 1
    if_discrete = False
    max_step = 999
    target_return = 90.0
    action_low = (-1.0,)
    action_high = (1.0,)

    min_action = -1.0
    max_action = 1.0
    min_position = -1.2
    max_position = 0.6
    max_speed = 0.07
    goal_position = 0.45
    goal_velocity = 0.0
    power = 0.0015

    def _sample_initial(self, n: int) -> torch.Tensor:
        position = self.uniform_rows(n, -0.6, -0.4, 1)[0]  # (n,) in [-0.6, -0.4)
        return _rows_to_batch(position, torch.zeros_like(position))  # velocity 0

    def _dynamics(
        self, sim_state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        position, velocity = sim_state.unbind(1)  # each (n,)
        a = action[:, 0]  # (n,)
        force = a.clamp(self.min_action, self.max_action)

        velocity = velocity + force * self.power - 0.0025 * torch.cos(3 * position)
        velocity = velocity.clamp(-self.max_speed, self.max_speed)
        position = (position + velocity).clamp(self.min_position, self.max_position)
        at_left_wall = (position <= self.min_position) & (velocity < 0)
        velocity = torch.where(at_left_wall, 0.0, velocity)

        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        reward = 100.0 * terminated.to(torch.float32) - 0.1 * a.square()
        return _rows_to_batch(position, velocity), reward, terminated

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        return sim_state.clone()  # a copy, so a caller writing into it cannot move the car


class CartPoleNoVelocityEnv(CartPoleEnv):
    """CartPole-v1 observed without its velocities: the cart's position and the pole's angle
    only, `(n, 2)`. One observation does not tell where the cart and pole are heading, so a
    policy must remember (recurrent PPO); the dynamics, rewards and limits are CartPole-v1's.
    As RL Zoo's `CartPoleNoVel-v1` (its recurrent PPO benchmark).

    gymnasium has no env of this id, so the env draws its own pictures (`render_state`, for
    `xiaoyarl record`) with gymnasium's CartPole-v1 renderer."""

    name = "CartPoleNoVelocity-v1"
    state_dim = 2
    render_fps = 50  # gymnasium CartPole-v1's metadata["render_fps"]: its 0.02 s steps
    _painter: Any = None  # gymnasium's CartPole-v1, made on the first picture

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        return sim_state[:, 0::2].clone()  # x and theta

    def render_state(self, state: torch.Tensor) -> np.ndarray:
        """One observation `(2,)` (the cart's position, the pole's angle) as gymnasium's
        CartPole-v1 draws it, `(400, 600, 3)` uint8 (its picture shows no velocities). Needs
        pygame, as gymnasium's renderer does (`pip install -e '.[render]'`)."""
        if self._painter is None:
            import gymnasium

            self._painter = gymnasium.make("CartPole-v1", render_mode="rgb_array").unwrapped
        x, theta = state.tolist()
        self._painter.state = np.array([x, 0.0, theta, 0.0])  # gymnasium's (x, x_dot, th, th_dot)
        return self._painter.render()

    def close(self) -> None:
        """Close gymnasium's renderer, if a picture was drawn."""
        if self._painter is not None:
            self._painter.close()
            self._painter = None


class PendulumNoVelocityEnv(PendulumEnv):
    """Pendulum-v1 observed without its angular velocity: `(cos th, sin th)` only, `(n, 2)`. One
    observation does not tell which way the pendulum swings or how fast, so a policy must
    remember (recurrent SAC or TD3); the dynamics, costs and limits are Pendulum-v1's. As RL
    Zoo's `PendulumNoVel-v1` (sb3-contrib's recurrent benchmarks).

    gymnasium has no env of this id, so the env draws its own pictures (`render_state`, for
    `xiaoyarl record`) with gymnasium's Pendulum-v1 renderer."""

    name = "PendulumNoVelocity-v1"
    state_dim = 2
    render_fps = 30  # gymnasium Pendulum-v1's metadata["render_fps"]
    _painter: Any = None  # gymnasium's Pendulum-v1, made on the first picture

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        th = sim_state[:, 0]
        return _rows_to_batch(torch.cos(th), torch.sin(th))  # (n, 2)

    def render_state(self, state: torch.Tensor) -> np.ndarray:
        """One observation `(2,)` (cos and sin of the angle) as gymnasium's Pendulum-v1 draws
        it, `(500, 500, 3)` uint8, without its torque arrow. Needs pygame, as gymnasium's
        renderer does (`pip install -e '.[render]'`)."""
        if self._painter is None:
            import gymnasium

            self._painter = gymnasium.make("Pendulum-v1", render_mode="rgb_array").unwrapped
        cos, sin = state.tolist()
        self._painter.state = np.array([math.atan2(sin, cos), 0.0])
        self._painter.last_u = None
        return self._painter.render()

    def close(self) -> None:
        """Close gymnasium's renderer, if a picture was drawn."""
        if self._painter is not None:
            self._painter.close()
            self._painter = None


TORCH_ENVS: dict[str, type[TorchVecEnv]] = {
    "CartPole-v1": CartPoleEnv,
    "CartPoleNoVelocity-v1": CartPoleNoVelocityEnv,
    "Pendulum-v1": PendulumEnv,
    "PendulumNoVelocity-v1": PendulumNoVelocityEnv,
    "Acrobot-v1": AcrobotEnv,
    "MountainCarContinuous-v0": MountainCarContinuousEnv,
}
