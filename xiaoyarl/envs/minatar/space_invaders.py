"""MinAtar SpaceInvaders as a batched torch simulator.

A cannon on the bottom row moves left and right and shoots upward at a 4x6 block of aliens.
The block marches sideways, and each time it touches a wall it steps down one row and turns
around; it marches faster as it thins out, and the alien nearest the cannon shoots back every
ten steps. Each alien shot earns +1; a cleared wave is replaced by a new one that marches a
little faster (with difficulty ramping). The episode ends when an alien or an alien's bullet
reaches the cannon, or when the block reaches the bottom row.

From MinAtar (Young and Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
Reinforcement Learning Experiments", 2019), reproducing the `minatar` package's
`environments/space_invaders.py` rule by rule, in its order of updates; no step of this game
draws a random number.
"""

from __future__ import annotations

import torch

from xiaoyarl.envs.minatar.base import MinAtarEnv

SHOT_COOL_DOWN = 5  # steps between two cannon shots
ENEMY_MOVE_INTERVAL = 12  # steps between two marches of a full wave (at the start)
ENEMY_SHOT_INTERVAL = 10  # steps between two alien shots
MIN_MOVE_INTERVAL = 6  # ramping stops once the interval is down to this

# game-state columns (see SpaceInvadersEnv): scalars, then three 10x10 maps (row-major)
POS = 0  # cannon column, 0..9
ALIEN_DIR = 1  # -1 marching left, +1 right
MOVE_INTERVAL = 2  # the wave's march interval (ramped down from 12 to 6)
MOVE_TIMER = 3  # steps until the next march
ALIEN_SHOT_TIMER = 4  # steps until the next alien shot
SHOT_TIMER = 5  # cannon cool-down
RAMP = 6  # the package's ramp_index (difficulty level; not read by the dynamics)
N_SCALARS = 7
ALIENS = slice(N_SCALARS, N_SCALARS + 100)
F_BULLETS = slice(N_SCALARS + 100, N_SCALARS + 200)  # the cannon's bullets
E_BULLETS = slice(N_SCALARS + 200, N_SCALARS + 300)  # the aliens' bullets


class SpaceInvadersEnv(MinAtarEnv):
    """MinAtar SpaceInvaders (`MinAtar/SpaceInvaders-v1`): actions no-op, left, right, fire.

    Game state `(n, 307)` float32: columns 0..6 the scalars `POS`, `ALIEN_DIR`,
    `MOVE_INTERVAL`, `MOVE_TIMER`, `ALIEN_SHOT_TIMER`, `SHOT_TIMER`, `RAMP` (the package's
    `pos`, `alien_dir`, `enemy_move_interval`, `alien_move_timer`, `alien_shot_timer`,
    `shot_timer`, `ramp_index`), then three 10x10 0/1 maps, row-major (row 0 at the top):
    `ALIENS` (7..106), `F_BULLETS` (107..206, the cannon's) and `E_BULLETS` (207..306, the
    aliens'). Observation channels: cannon, alien, alien_left, alien_right, friendly_bullet,
    enemy_bullet (the package's order).
    """

    name = "MinAtar/SpaceInvaders-v1"
    channels = 6
    game_dim = N_SCALARS + 300
    minimal_actions = ("n", "l", "r", "f")

    def _constants(self, device: torch.device) -> None:
        self._cols = torch.arange(10, device=device)
        # a fresh wave: rows 0..3, columns 2..7
        wave = torch.zeros(10, 10, dtype=torch.bool, device=device)
        wave[0:4, 2:8] = True
        self._wave = wave

    def _game_initial(self, n: int) -> torch.Tensor:
        game = torch.zeros((n, self.game_dim), device=self.device)
        game[:, POS] = 5
        game[:, ALIEN_DIR] = -1
        game[:, MOVE_INTERVAL] = ENEMY_MOVE_INTERVAL
        game[:, MOVE_TIMER] = ENEMY_MOVE_INTERVAL
        game[:, ALIEN_SHOT_TIMER] = ENEMY_SHOT_INTERVAL
        game[:, ALIENS] = self._wave.flatten().float()
        return game

    def _game_step(
        self, game: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = game.shape[0]
        scalars = game[:, :N_SCALARS].long()
        pos, alien_dir, interval, move_timer, alien_shot_timer, shot_timer, ramp = scalars.unbind(1)
        aliens = game[:, ALIENS].view(n, 10, 10) > 0.5
        f_bullets = game[:, F_BULLETS].view(n, 10, 10) > 0.5
        e_bullets = game[:, E_BULLETS].view(n, 10, 10) > 0.5
        no_row = torch.zeros((n, 1, 10), dtype=torch.bool, device=self.device)

        # the cannon: fire (when cooled down) or move; a blocked "fire" does nothing
        fire = (action == 5) & (shot_timer == 0)
        at_cannon = self._cols == pos.unsqueeze(1)  # (n, 10) the cannon's column
        f_bullets[:, 9] |= at_cannon & fire.unsqueeze(1)
        shot_timer = torch.where(fire, SHOT_COOL_DOWN, shot_timer)
        pos = pos - (action == 1).long() + (action == 3).long()
        pos = pos.clamp(0, 9)
        at_cannon = self._cols == pos.unsqueeze(1)

        # bullets move one row (the cannon's up, the aliens' down); those leaving the grid vanish
        f_bullets = torch.cat([f_bullets[:, 1:], no_row], 1)
        e_bullets = torch.cat([no_row, e_bullets[:, :-1]], 1)
        terminated = (e_bullets[:, 9] & at_cannon).any(1)

        # the wave marches when its timer is up: down and turning at a wall, else sideways
        terminated |= (aliens[:, 9] & at_cannon).any(1)
        march = move_timer == 0
        count = aliens.sum((1, 2))
        move_timer = torch.where(march, torch.minimum(count, interval), move_timer)
        at_wall = (aliens[:, :, 0].any(1) & (alien_dir < 0)) | (
            aliens[:, :, 9].any(1) & (alien_dir > 0)
        )
        down = march & at_wall
        sideways = march & ~at_wall
        terminated |= down & aliens[:, 9].any(1)
        # np.roll wraps around: a wave stepping down from the bottom row reappears at the top
        # (the episode has ended by then, but the last observation shows it)
        stepped = torch.roll(aliens, 1, 1)
        shifted = torch.where(
            (alien_dir < 0).view(n, 1, 1), torch.roll(aliens, -1, 2), torch.roll(aliens, 1, 2)
        )
        aliens = torch.where(down.view(n, 1, 1), stepped, aliens)
        aliens = torch.where(sideways.view(n, 1, 1), shifted, aliens)
        alien_dir = torch.where(down, -alien_dir, alien_dir)
        terminated |= march & (aliens[:, 9] & at_cannon).any(1)

        # the alien nearest the cannon shoots: the nearest occupied column (ties to the left,
        # as the package's stable sort by distance), its lowest alien
        shoot = alien_shot_timer == 0
        alien_shot_timer = torch.where(shoot, ENEMY_SHOT_INTERVAL, alien_shot_timer)
        occupied = aliens.any(1)  # (n, 10) columns holding an alien
        key = 2 * (self._cols - pos.unsqueeze(1)).abs() + (self._cols > pos.unsqueeze(1)).long()
        column = torch.where(occupied, key, 100).argmin(1)  # (n,)
        in_column = aliens.gather(2, column.view(n, 1, 1).expand(n, 10, 1)).squeeze(2)
        row = torch.where(in_column, self._cols, -1).amax(1)  # the lowest alien of the column
        shooter = (self._cols.view(1, 10, 1) == row.view(n, 1, 1)) & (
            self._cols.view(1, 1, 10) == column.view(n, 1, 1)
        )
        e_bullets |= shooter & (shoot & occupied.any(1)).view(n, 1, 1)

        # the cannon's bullets kill the aliens they meet, +1 each
        kills = aliens & f_bullets
        reward = kills.sum((1, 2)).float()
        aliens = aliens & ~kills
        f_bullets = f_bullets & ~kills

        shot_timer = shot_timer - (shot_timer > 0).long()
        move_timer = move_timer - 1
        alien_shot_timer = alien_shot_timer - 1
        # a cleared wave comes back, marching one step faster (down to 6) with ramping
        cleared = ~aliens.flatten(1).any(1)
        if self.ramping:
            faster = cleared & (interval > MIN_MOVE_INTERVAL)
            interval = interval - faster.long()
            ramp = ramp + faster.long()
        aliens = aliens | (self._wave & cleared.view(n, 1, 1))

        scalars = torch.stack(
            [pos, alien_dir, interval, move_timer, alien_shot_timer, shot_timer, ramp], 1
        )
        maps = torch.cat([aliens.flatten(1), f_bullets.flatten(1), e_bullets.flatten(1)], 1)
        return torch.cat([scalars.float(), maps.float()], 1), reward, terminated

    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        n = game.shape[0]
        pos = game[:, POS].long()
        left = (game[:, ALIEN_DIR] < 0).view(n, 1, 1)
        aliens = game[:, ALIENS].view(n, 10, 10) > 0.5
        cannon = torch.zeros((n, 10, 10), dtype=torch.bool, device=self.device)
        cannon[:, 9] = self._cols == pos.unsqueeze(1)
        channels = [
            cannon,
            aliens,
            aliens & left,
            aliens & ~left,
            game[:, F_BULLETS].view(n, 10, 10) > 0.5,
            game[:, E_BULLETS].view(n, 10, 10) > 0.5,
        ]
        return torch.stack(channels, 1)
