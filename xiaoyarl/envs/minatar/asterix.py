"""MinAtar Asterix as a batched torch simulator.

The player moves freely in four directions on rows 1..8 while enemies and gold enter from the
left or right edge, one per lane, and cross the screen horizontally. Picking up gold gives +1;
touching an enemy ends the episode. Every 100 steps or so the game gets harder: things spawn
more often and, every other time, move faster. A trail channel shows where each moving object
came from. From MinAtar: Young and Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and
Reproducible Reinforcement Learning Experiments", 2019 (the `minatar` package's `asterix.py`,
whose dynamics this reproduces step for step).
"""

from __future__ import annotations

import torch

from xiaoyarl.envs.minatar.base import MinAtarEnv

RAMP_INTERVAL = 100
INIT_SPAWN_SPEED = 10
INIT_MOVE_INTERVAL = 5

# game state columns (all small integers stored as float32); slot i is the lane in row i + 1
PLAYER_X, PLAYER_Y, SPAWN_SPEED, SPAWN_TIMER, MOVE_SPEED, MOVE_TIMER, RAMP_TIMER, RAMP_INDEX = (
    range(8)
)
N_SCALARS = 8
N_SLOTS = 8
PRESENT = slice(8, 16)  # 1 where the lane holds an object
OBJ_X = slice(16, 24)
OBJ_RIGHT = slice(24, 32)  # 1: moves right (entered on the left); 0: moves left
OBJ_GOLD = slice(32, 40)  # 1: gold; 0: enemy


class AsterixEnv(MinAtarEnv):
    """MinAtar Asterix (`minatar`'s `asterix`); minimal actions no-op, left, up, right, down.

    Game state `(n, 40)`: player x, player y, spawn interval, spawn timer, move interval, move
    timer, ramp timer, ramp index, then for the 8 lanes (lane i in row i + 1): present, x,
    moves-right and gold flags (the fields of an absent lane are stale and never read).
    Channels: player, enemy, trail, gold. With difficulty ramping the intervals shrink as in
    the package; without it they stay at 10 (spawn) and 5 (move).
    """

    name = "MinAtar/Asterix-v1"
    channels = 4
    game_dim = N_SCALARS + 4 * N_SLOTS
    minimal_actions = ("n", "l", "u", "r", "d")

    def _constants(self, device: torch.device) -> None:
        self._rows = torch.arange(1, N_SLOTS + 1, device=device, dtype=torch.float32)

    def _spawn_draws(self, n: int) -> torch.Tensor:
        """`(n, 3)` uniforms for one spawn: side, gold, lane. Every step draws them, spawn or
        not, so a step never depends on which sub-envs spawn (tests replace this method to
        feed the package's own draws)."""
        return torch.rand((n, 3), generator=self.generator, device=self.device)

    def _game_initial(self, n: int) -> torch.Tensor:
        start = torch.zeros(self.game_dim, device=self.device)  # the start is deterministic
        start[PLAYER_X] = start[PLAYER_Y] = 5.0
        start[SPAWN_SPEED] = start[SPAWN_TIMER] = INIT_SPAWN_SPEED
        start[MOVE_SPEED] = start[MOVE_TIMER] = INIT_MOVE_INTERVAL
        start[RAMP_TIMER] = RAMP_INTERVAL
        return start.expand(n, -1).clone()

    def _game_step(
        self, game: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scalars = game[:, :N_SCALARS].unbind(1)
        px, py, spawn_speed, spawn_timer, move_speed, move_timer, ramp_timer, ramp_index = scalars
        present = game[:, PRESENT] > 0.5
        obj_x, right, gold = game[:, OBJ_X], game[:, OBJ_RIGHT] > 0.5, game[:, OBJ_GOLD] > 0.5
        draws = self._spawn_draws(game.shape[0])

        # spawn when the timer is up: side and kind (1/3 gold) first, then a lane drawn
        # uniformly among the free ones (none free: nothing spawns, the timer still restarts)
        spawning = spawn_timer == 0
        free = ~present
        n_free = free.sum(1).float()
        pick = (draws[:, 2] * n_free).floor().clamp(max=(n_free - 1).clamp(min=0))
        lane = free & (free.cumsum(1) - 1 == pick.unsqueeze(1)) & spawning.unsqueeze(1)
        from_left = (draws[:, 0] < 0.5).unsqueeze(1)
        present = present | lane
        obj_x = torch.where(lane, torch.where(from_left, 0.0, 9.0), obj_x)
        right = torch.where(lane, from_left, right)
        gold = torch.where(lane, (draws[:, 1] < 1 / 3).unsqueeze(1), gold)
        spawn_timer = torch.where(spawning, spawn_speed, spawn_timer)

        # the player moves on rows 1..8
        px = (px + (action == 3).float() - (action == 1).float()).clamp(0, 9)
        py = (py + (action == 4).float() - (action == 2).float()).clamp(1, 8)
        in_row = self._rows == py.unsqueeze(1)

        # contact where the player stepped: gold is collected (and leaves), an enemy ends it
        touch = present & in_row & (obj_x == px.unsqueeze(1))
        collected = touch & gold
        killed = touch & ~gold
        present = present & ~collected

        # objects move together when the move timer is up; leaving the screen removes them,
        # and moving onto the player counts as contact again
        moving = (move_timer == 0).unsqueeze(1) & present
        move_timer = torch.where(move_timer == 0, move_speed, move_timer)
        obj_x = torch.where(moving, obj_x + torch.where(right, 1.0, -1.0), obj_x)
        present = present & (obj_x >= 0) & (obj_x <= 9)
        touch = moving & present & in_row & (obj_x == px.unsqueeze(1))
        collected = collected | (touch & gold)
        killed = killed | (touch & ~gold)
        present = present & ~(touch & gold)

        spawn_timer = spawn_timer - 1
        move_timer = move_timer - 1
        spawn_speed, move_speed, ramp_timer, ramp_index = self._ramp(
            spawn_speed, move_speed, ramp_timer, ramp_index
        )

        head = torch.stack(
            [px, py, spawn_speed, spawn_timer, move_speed, move_timer, ramp_timer, ramp_index], 1
        )
        lanes = torch.cat([present.float(), obj_x, right.float(), gold.float()], 1)
        return torch.cat([head, lanes], 1), collected.sum(1).float(), killed.any(1)

    def _ramp(
        self,
        spawn_speed: torch.Tensor,
        move_speed: torch.Tensor,
        timer: torch.Tensor,
        index: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The difficulty ramp: while either interval is above 1, the ramp timer counts down
        from 100 to -1; then the spawn interval shrinks by 1, the move interval too on every
        other ramp (odd index), and the timer restarts."""
        if not self.ramping:
            return spawn_speed, move_speed, timer, index
        active = (spawn_speed > 1) | (move_speed > 1)
        bump = active & (timer < 0)
        timer = torch.where(bump, float(RAMP_INTERVAL), torch.where(active, timer - 1, timer))
        odd = torch.remainder(index, 2) == 1
        move_speed = torch.where(bump & odd & (move_speed > 1), move_speed - 1, move_speed)
        spawn_speed = torch.where(bump & (spawn_speed > 1), spawn_speed - 1, spawn_speed)
        return spawn_speed, move_speed, timer, index + bump.float()

    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        n = game.shape[0]
        present = game[:, PRESENT] > 0.5
        obj_x = game[:, OBJ_X].long()
        row = self._rows.long() * 10
        back_x = obj_x - torch.where(game[:, OBJ_RIGHT] > 0.5, 1, -1)
        # flat indices into (channels * 100 + 1): absent objects and trails off the screen
        # go to the extra last cell, which is dropped
        dump = self.channels * 100
        player = game[:, PLAYER_Y].long() * 10 + game[:, PLAYER_X].long()
        kind = torch.where(game[:, OBJ_GOLD] > 0.5, 3, 1) * 100  # gold or enemy channel
        objects = torch.where(present, kind + row + obj_x, dump)
        on_screen = present & (back_x >= 0) & (back_x <= 9)
        trails = torch.where(on_screen, 200 + row + back_x, dump)
        cells = torch.cat([player.unsqueeze(1), objects, trails], 1)
        obs = torch.zeros((n, dump + 1), dtype=torch.bool, device=self.device)
        obs.scatter_(1, cells, True)
        return obs[:, :dump].reshape(n, self.channels, 10, 10)
