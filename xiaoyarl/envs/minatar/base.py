"""The base of the torch-native MinAtar games: sticky actions and the layout they share.

MinAtar: Young and Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
Reinforcement Learning Experiments", 2019. Each game is a 10x10 grid with one boolean channel
per kind of object; observations are `(channels, 10, 10)` bool (channels first, as the encoders
take them; the `minatar` package gives `(10, 10, channels)`).

As in the package's `Environment`, with probability `sticky_action_prob` (0.1) a step repeats
the previous action instead of the one given. The package keeps the previous action across
episodes; here a new episode starts from "no-op" (as gymnax's MinAtar does), which changes only
the first step of an episode, and only when the repeat is drawn.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from xiaoyarl.envs.base import TorchVecEnv
from xiaoyarl.errors import EnvError
from xiaoyarl.machine import keep_freed_memory

# MinAtar's full action set; a game acts on the indices of its minimal subset (the "-v1" ids)
ACTION_MAP = ("n", "l", "u", "r", "d", "f")


class MinAtarEnv(TorchVecEnv):
    """A MinAtar game stepping all sub-envs as tensors.

    sim_state `(n, 1 + game_dim)`: column 0 holds the previous full action (for sticky actions),
    the rest is the game's own state (`game_dim` numbers of `sim_dtype`, float32 unless the game
    says otherwise, laid out by the game). A game sets `name`, `channels`, `game_dim`,
    `minimal_actions` (letters of `ACTION_MAP`) and implements `_game_initial`, `_game_step` and
    `_game_observe`, with every random draw from `self.generator` (and may implement
    `_game_step_into` too, to write its next states once, and `_new_states`, to store them as
    it reads them fastest).
    """

    if_discrete = True
    obs_shape: ClassVar[tuple[int, ...]]
    obs_dtype: ClassVar[torch.dtype] = torch.bool
    # MinAtar sets no time limit (Freeway ends itself); a long cap keeps a strong agent's
    # episodes finite. Truncation bootstraps, so it does not change what is learnt.
    max_step = 10_000
    target_return = None
    channels: ClassVar[int]
    game_dim: ClassVar[int]
    minimal_actions: ClassVar[tuple[str, ...]]
    _done: torch.Tensor  # (num_envs,) bool: the sub-envs the last step reset

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "channels" in cls.__dict__:  # a game (not an intermediate base)
            cls.obs_shape = (cls.channels, 10, 10)
            cls.state_dim = cls.channels * 100
            cls.sim_dim = 1 + cls.game_dim
            cls.action_dim = len(cls.minimal_actions)

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        sticky_action_prob: float = 0.1,
        difficulty_ramping: bool = True,
    ) -> None:
        if not 0.0 <= sticky_action_prob <= 1.0:
            raise EnvError(
                f"{self.name}: sticky_action_prob must be in [0, 1], got {sticky_action_prob}."
            )
        self.sticky_action_prob = float(sticky_action_prob)
        self.ramping = bool(difficulty_ramping)
        codes = [ACTION_MAP.index(a) for a in self.minimal_actions]
        self._codes = torch.tensor(codes, dtype=torch.int64, device=device)
        self._constants(torch.device(device))
        super().__init__(num_envs, device, seed)
        if self.device.type == "cpu":  # observations of megabytes a step: keep them for reuse
            keep_freed_memory()

    # --- what a game implements ---
    def _constants(self, device: torch.device) -> None:
        """Set the game's constant tensors on `device` (before any state is drawn)."""

    def _game_initial(self, n: int) -> torch.Tensor:
        """`n` initial game states `(n, game_dim)`."""
        raise NotImplementedError

    def _game_step(
        self, game: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of every sub-env: game states `(n, game_dim)` and full action codes `(n,)`
        int64 (indices of `ACTION_MAP`) -> `(next game states, reward (n,), terminated (n,))`."""
        raise NotImplementedError

    def _game_step_into(
        self, game: torch.Tensor, action: torch.Tensor, next_game: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`_game_step` writing the next game states into `next_game` `(n, game_dim)` (the
        columns of the next simulator state) -> `(reward (n,), terminated (n,))`."""
        new, reward, terminated = self._game_step(game, action)
        next_game.copy_(new)
        return reward, terminated

    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        """The grid `(n, channels, 10, 10)` bool of game states `(n, game_dim)`."""
        raise NotImplementedError

    def _new_states(self, n: int) -> torch.Tensor:
        """`n` uninitialised simulator states `(n, sim_dim)` of `sim_dtype`, laid out as the
        game reads them fastest (row-major here)."""
        return torch.empty((n, self.sim_dim), dtype=self.sim_dtype, device=self.device)

    # --- TorchVecEnv ---
    def _sample_initial(self, n: int) -> torch.Tensor:
        state = self._new_states(n)
        state[:, 0] = 0  # no-op
        state[:, 1:] = self._game_initial(n)
        return state

    def _dynamics(
        self, sim_state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        full = self._codes.index_select(0, action)  # (n,) indices of ACTION_MAP
        if self.sticky_action_prob > 0:
            draw = torch.rand(action.shape[0], generator=self.generator, device=self.device)
            repeat = draw < self.sticky_action_prob
            full = torch.where(repeat, sim_state[:, 0].long(), full)
        next_state = self._new_states(sim_state.shape[0])
        reward, terminated = self._game_step_into(sim_state[:, 1:], full, next_state[:, 1:])
        next_state[:, 0] = full
        return next_state, reward, terminated

    def _observe(self, sim_state: torch.Tensor) -> torch.Tensor:
        return self._game_observe(sim_state[:, 1:])

    def _auto_reset(self, sim_state: torch.Tensor, done: torch.Tensor) -> bool:
        self._done = done  # differs: remembers which sub-envs reset, for `_next_outputs`
        return super()._auto_reset(sim_state, done)

    def _next_outputs(self, final: dict[str, torch.Tensor],
                      reset_any: bool) -> tuple[torch.Tensor, dict]:  # fmt: skip
        # differs: on a CPU only the sub-envs that reset are observed again (observing all
        # costs about as much as stepping them)
        if not reset_any or self.device.type != "cpu":
            return super()._next_outputs(final, reset_any)
        state = final["final_state"].clone()
        rows = self._done.nonzero().squeeze(1)
        state[rows] = self._fresh_observations(rows)
        return state, final

    def load_state_dict(self, state: dict) -> None:
        # differs: refuses the states of another layout of the game (saved by another version)
        shape = tuple(state["sim_state"].shape)
        if shape[1:] != (self.sim_dim,):
            raise EnvError(f"{self.name}: the saved game states have shape {shape}, this "
                           f"version's have {self.sim_dim} columns: they were saved by another "
                           "version of the game; start the run afresh.")  # fmt: skip
        super().load_state_dict(state)

    def _fresh_observations(self, rows: torch.Tensor) -> torch.Tensor:
        """The observations of the sub-envs `rows` an auto-reset has just restarted (a game
        whose start is always the same may return that one observation, broadcast)."""
        return self._observe(self.sim_state[rows])

    # 16 pixels a cell, 10 frames a second; a colour per channel, drawn as the package's viewer
    # draws them: where channels overlap, the last one shows
    render_fps: ClassVar[int] = 10
    CELL: ClassVar[int] = 16
    PALETTE: ClassVar[tuple[tuple[int, int, int], ...]] = (
        (230, 90, 60), (250, 200, 60), (90, 190, 90), (70, 150, 230), (190, 110, 220),
        (240, 240, 240), (140, 90, 50), (60, 200, 200), (250, 130, 180), (160, 160, 160),
    )  # fmt: skip

    @classmethod
    def render_state(cls, obs: torch.Tensor) -> np.ndarray:
        """One observation `(channels, 10, 10)` as an RGB picture `(160, 160, 3)` uint8 (the
        observation is the whole screen, so this is what the game looks like; `xiaoyarl
        record` films the games with it)."""
        grid = obs.detach().cpu().bool().numpy()
        picture = np.full((10, 10, 3), 20, dtype=np.uint8)  # the background, near black
        for channel in range(grid.shape[0]):
            picture[grid[channel]] = cls.PALETTE[channel % len(cls.PALETTE)]
        return picture.repeat(cls.CELL, axis=0).repeat(cls.CELL, axis=1)
