"""Cooperative navigation ("spread"): mpe2's `simple_spread_v3` as a batched torch simulator.

N agents (discs of radius 0.15) must cover N landmarks while avoiding each other. Everything
follows mpe2 1.1.1 (`mpe2/simple_spread/simple_spread.py`, `mpe2/_mpe_utils/core.py` and
`simple_env.py`) step for step; only the random numbers differ, as they come from the env's own
torch generator, and the arithmetic is float32 where mpe2's is float64.

- Initial state: every agent's position, then every landmark's, uniform in `[-1, 1)^2`;
  velocities zero.
- Actions: discrete `SpreadDiscrete-v0`, mpe2's five moves in its order (0 no-op, 1 left
  -x, 2 right +x, 3 down -y, 4 up +y); continuous `SpreadContinuous-v0`, 5 numbers per agent in
  `[-1, 1]`, mapped linearly to mpe2's `Box(0, 1, (5,))` (`a01 = (a + 1) / 2`), where the force
  is `(a01[2] - a01[1], a01[4] - a01[3])` (entry 0 is unused, as in mpe2). The action force is
  times the sensitivity 5.
- Physics (mpe2's `World.step`): a soft contact force between every pair of agents,
  `100 * delta / dist * k * log(1 + exp(-(dist - 0.3) / k))` with `k = 1e-3`, landmarks do not
  collide; then `pos += vel * dt`, `vel = vel * (1 - 0.25) + force * dt` (mass 1, dt 0.1).
- Reward after the move (mpe2 with `local_ratio`): `global * (1 - local_ratio) + local *
  local_ratio`, where `global = -sum over landmarks of the distance to the nearest agent` and
  `local = -(number of other agents closer than 0.3)`. Rewards differ between agents (not a
  shared-reward env) unless `local_ratio = 0`.
- Episodes last `max_cycles` = 25 steps (truncated). With `terminate_on_success` an episode
  terminates once every landmark has an agent within 0.1 (checked after the time limit, as mpe2).
- Observation of agent i `(6N,)` (mpe2's layout): own velocity (2), own position (2), every
  landmark's position relative to agent i (2N), every other agent's position relative to agent
  i in index order (2(N-1)), and the other agents' communication, which is always zero in this
  task (2(N-1)).
- Global state `(6N,)` (xiaoyarl's choice; mpe2's `state()` concatenates the observations
  instead): the positions of every agent (2N), their velocities (2N), the positions of every
  landmark (2N). It is also `sim_state`, the simulator state `set_sim_state` takes.
- Pictures (`render_state`, for `xiaoyarl record`): a global state drawn in mpe2's colours and
  layout, with Pillow instead of pygame, the discs to scale (two agents touch where they collide).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from xiaoyarl.envs.multi.base import TorchMultiAgentVecEnv
from xiaoyarl.errors import EnvError

# mpe2's discrete moves (no-op, -x, +x, -y, +y) as unit force directions
_MOVES = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))


class SpreadEnv(TorchMultiAgentVecEnv):
    """Cooperative navigation (mpe2 `simple_spread_v3`) for `num_envs` sub-envs on `device`.

    num_agents: N, the number of agents and of landmarks (mpe2's `N`).
    local_ratio: weight of each agent's own collision penalty against the global reward.
    max_cycles: steps per episode. terminate_on_success: as mpe2's option of that name.
    See the module docstring for dynamics, observation and state layouts.

    Memory layout: the math runs variable-major, on `(N, 2, n)` tensors whose last axis is the
    sub-env, so every op works on long contiguous rows (row-major `(n, N, 2)` has innermost
    axes of 2 or 3 elements, which makes broadcasting ops several times slower on a CPU).
    `sim_state` is the transpose of a contiguous `(6N, n)` tensor; observations and states are
    returned contiguous `(n, ...)`.
    """

    name = "Spread-v0"
    max_step = 25
    # The team return that counts as solved with the default settings (3 agents, local_ratio
    # 0.5, 25 steps): half way from the uniformly random policy's to a scripted heuristic's
    # (each agent straight to its landmark under the assignment of least total distance),
    # both measured by benchmarks/multi_agent_baselines.py over 1,000 episodes (BENCHMARKS.md);
    # None for other settings, whose references were not measured.
    target_return: float | None = None
    if_discrete = True

    # mpe2 constants (World and simple_spread's Scenario)
    dt = 0.1
    damping = 0.25
    contact_force = 1e2
    contact_margin = 1e-3
    agent_size = 0.15
    sensitivity = 5.0  # mpe2's default when agent.accel is None
    capture_radius = 0.1
    landmark_size = 0.05  # drawn only: landmarks do not collide
    # pictures as mpe2's: 700 pixels square, its colours (times 200), 10 frames a second
    render_fps = 10
    render_size = 700
    agent_color = (70, 70, 170)
    landmark_color = (50, 50, 50)

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        num_agents: int = 3,
        local_ratio: float = 0.5,
        max_cycles: int = 25,
        terminate_on_success: bool = False,
        check_actions: bool = True,
    ) -> None:
        if not isinstance(num_agents, int) or num_agents < 2:
            raise EnvError(f"{self.name}: num_agents must be an integer >= 2, got {num_agents!r}.")
        if not 0.0 <= local_ratio <= 1.0:
            raise EnvError(f"{self.name}: local_ratio must be in [0, 1], got {local_ratio!r}.")
        if not isinstance(max_cycles, int) or max_cycles < 1:
            raise EnvError(
                f"{self.name}: max_cycles must be a positive integer, got {max_cycles!r}."
            )
        n = num_agents
        self.num_agents = n
        self.local_ratio = float(local_ratio)
        self.max_step = max_cycles
        self.terminate_on_success = terminate_on_success
        self.obs_dim = 6 * n
        self.state_dim = 6 * n
        self.sim_dim = 6 * n
        self.action_dim = 5
        self.shared_reward = local_ratio == 0.0
        if (n, self.local_ratio, max_cycles, terminate_on_success) != (3, 0.5, 25, False):
            self.target_return = None  # the class's target holds for the default settings only
        self.agent_names = tuple(f"agent_{i}" for i in range(n))
        if not self.if_discrete:
            self.action_low, self.action_high = (0.0,) * 5, (1.0,) * 5

        device = torch.device(device)
        self._moves = torch.tensor(_MOVES, device=device) * self.sensitivity  # (5, 2)
        self._moves_x, self._moves_y = self._moves.T.contiguous()  # (5,) each
        # (i, k) pairs with k != i, in index order, flattened as i * N + k: (N (N-1),)
        others = [i * n + k for i in range(n) for k in range(n) if k != i]
        self._others = torch.tensor(others, device=device)
        self._off_diagonal = ~torch.eye(n, dtype=torch.bool, device=device).unsqueeze(2)
        super().__init__(num_envs, device, seed, check_actions)

    # --- layout helpers ------------------------------------------------------------------------
    def _split(self, sim_state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Agent positions, agent velocities, landmark positions: each `(n, N, 2)`."""
        pos, vel, landmarks = sim_state.unflatten(1, (3, self.num_agents, 2)).unbind(1)
        return pos, vel, landmarks

    def _rows(self, sim_state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The same three variable-major, `(N, 2, n)` each (see the class docstring)."""
        n = sim_state.shape[0]
        rows = sim_state.T.contiguous().view(3, self.num_agents, 2, n)  # no copy if var-major
        return rows[0], rows[1], rows[2]

    # --- the simulator -------------------------------------------------------------------------
    def _sample_initial(self, n: int) -> torch.Tensor:
        # mpe2 draws each agent's position, then each landmark's, uniform in [-1, 1)
        shape = (2, self.num_agents, 2, n)
        u = torch.rand(shape, generator=self.generator, device=self.device)
        agents, landmarks = u.mul_(2.0).sub_(1.0).unbind(0)
        rows = torch.stack([agents, torch.zeros_like(agents), landmarks])  # (3, N, 2, n)
        return rows.view(self.sim_dim, n).T

    def _action_force(self, actions: torch.Tensor) -> torch.Tensor:
        """The agents' own forces `(N, 2, n)` from actions `(n, N)` or `(n, N, 5)`."""
        if self.if_discrete:
            agent_major = actions.T  # (N, n)
            return torch.stack([self._moves_x[agent_major], self._moves_y[agent_major]], dim=1)
        a = actions.permute(1, 2, 0).clamp(-1.0, 1.0)  # (N, 5, n)
        a01 = (a + 1.0) * 0.5  # xiaoyarl's [-1, 1] -> mpe2's [0, 1]
        force = torch.stack([a01[:, 2] - a01[:, 1], a01[:, 4] - a01[:, 3]], dim=1)
        return force * self.sensitivity

    def _pair_distances(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`delta[a, b] = pos_a - pos_b` `(N, N, 2, n)` and its norm `(N, N, n)`."""
        delta = pos.unsqueeze(1) - pos.unsqueeze(0)
        return delta, _norm(delta)

    def _dynamics(
        self, sim_state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pos, vel, landmarks = self._rows(sim_state)
        force = self._action_force(actions)

        # soft contact between every pair of agents (mpe2's get_collision_force)
        delta, dist = self._pair_distances(pos)
        k = self.contact_margin
        penetration = F.softplus(-(dist - 2 * self.agent_size) / k) * k
        magnitude = torch.where(self._off_diagonal, self.contact_force * penetration / dist, 0.0)
        force = force + (magnitude.unsqueeze(2) * delta).sum(1)  # (N, 2, n)

        # mpe2's integrate_state: the position moves with the old velocity
        new_pos = pos + vel * self.dt
        new_vel = vel * (1.0 - self.damping) + force * self.dt

        # rewards from the new positions
        to_landmarks = _norm(new_pos.unsqueeze(1) - landmarks.unsqueeze(0))  # (agent, lm, n)
        nearest = to_landmarks.amin(dim=0)  # (N landmarks, n): distance to the nearest agent
        global_reward = -nearest.sum(dim=0)  # (n,)
        _, new_dist = self._pair_distances(new_pos)
        collisions = ((new_dist < 2 * self.agent_size) & self._off_diagonal).sum(dim=1)  # (N, n)
        rewards = global_reward * (1.0 - self.local_ratio) - collisions * self.local_ratio

        if self.terminate_on_success:  # mpe2 checks the time limit first
            success = (nearest < self.capture_radius).all(dim=0)
            terminated = success & (self.elapsed + 1 < self.max_step)
        else:
            terminated = torch.zeros(sim_state.shape[0], dtype=torch.bool, device=self.device)
        next_state = torch.cat([new_pos, new_vel, landmarks]).view(self.sim_dim, -1).T
        return next_state, rewards.T.contiguous(), terminated

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        pos, vel, landmarks = self._rows(sim_state)
        num_agents, n = self.num_agents, sim_state.shape[0]
        landmarks_rel = landmarks.unsqueeze(0) - pos.unsqueeze(1)  # (i, landmark, 2, n)
        agents_rel = pos.unsqueeze(0) - pos.unsqueeze(1)  # [i, k] = pos_k - pos_i
        others_rel = agents_rel.flatten(0, 1).index_select(0, self._others)  # (N(N-1), 2, n)
        comm = pos.new_zeros(num_agents, 2 * (num_agents - 1), n)  # silent agents
        parts = [
            vel,
            pos,
            landmarks_rel.flatten(1, 2),
            others_rel.view(num_agents, 2 * (num_agents - 1), n),
            comm,
        ]
        return torch.cat(parts, dim=1).permute(2, 0, 1).contiguous()  # (n, N, 6N)

    def _global_state(self, sim_state: torch.Tensor) -> torch.Tensor:
        return sim_state.clone(memory_format=torch.contiguous_format)

    # --- pictures ------------------------------------------------------------------------------
    def render_state(self, state: torch.Tensor) -> np.ndarray:
        """One sub-env's global state `(6N,)` as a picture `(700, 700, 3)` uint8 in mpe2's
        colours and layout: the agents as blue discs, the landmarks as small dark ones on top,
        outlined in black on white, y pointing up, every disc to scale (mpe2 shrinks them). The
        view holds the square [-1, 1]^2 where the entities start, widened (as mpe2 zooms out)
        when one has left it."""
        from PIL import Image, ImageDraw

        pos, _, landmarks = state.detach().cpu().double().reshape(3, self.num_agents, 2).unbind(0)
        size = self.render_size
        reach = max(1.0, float(torch.cat([pos, landmarks]).abs().max()))
        scale = size / 2 * 0.9 / reach  # pixels per unit, a margin as mpe2's 0.9
        picture = Image.new("RGB", (size, size), (255, 255, 255))
        draw = ImageDraw.Draw(picture)
        entities = [(p, self.agent_size, self.agent_color) for p in pos.tolist()]
        entities += [(p, self.landmark_size, self.landmark_color) for p in landmarks.tolist()]
        for (x, y), radius, color in entities:
            cx, cy, r = size / 2 + x * scale, size / 2 - y * scale, radius * scale
            draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color, outline=(0, 0, 0))
        return np.asarray(picture)


def _norm(delta: torch.Tensor) -> torch.Tensor:
    """Euclidean norm over dim 2 (x, y) of a variable-major `(a, b, 2, n)` tensor, as mpe2's
    `sqrt(sum(square))`."""
    x, y = delta.unbind(2)
    return (x * x + y * y).sqrt()


class SpreadDiscreteEnv(SpreadEnv):
    """`SpreadDiscrete-v0`: mpe2 `simple_spread_v3` with its 5 discrete moves."""

    name = "SpreadDiscrete-v0"
    if_discrete = True
    target_return = -51.0  # R_random -79.48, R_heur -22.49


class SpreadContinuousEnv(SpreadEnv):
    """`SpreadContinuous-v0`: mpe2 `simple_spread_v3(continuous_actions=True)`; 5 action
    numbers in [-1, 1] per agent, rescaled to mpe2's [0, 1]."""

    name = "SpreadContinuous-v0"
    if_discrete = False
    target_return = -46.7  # R_random -75.61, R_heur -17.76
