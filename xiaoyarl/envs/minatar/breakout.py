"""MinAtar Breakout as a batched torch simulator.

A paddle on the bottom row bounces a ball, which travels only along diagonals, into three rows
of bricks at the top of the screen; each brick broken gives +1, and a cleared wall is rebuilt
when the ball next comes down to the paddle. Hitting the paddle with its centre path reverses
the ball's vertical direction, catching it with the paddle's side also reverses the horizontal
one; the episode ends when the ball reaches the bottom row past the paddle. A trail channel
shows where the ball was a step ago. From MinAtar: Young and Tian, "MinAtar: An Atari-Inspired
Testbed for Thorough and Reproducible Reinforcement Learning Experiments", 2019 (the `minatar`
package's `breakout.py`, whose dynamics this reproduces step for step).
"""

from __future__ import annotations

import torch

from xiaoyarl.envs.minatar.base import MinAtarEnv

# game state columns (all small integers stored as float32)
BALL_X, BALL_Y, VEL_X, VEL_Y, PADDLE, LAST_X, LAST_Y, STRIKE = range(8)
BRICKS = slice(8, 38)  # rows 1..3 of the brick map, row-major (the only rows bricks live in)
N_SCALARS = 8


class BreakoutEnv(MinAtarEnv):
    """MinAtar Breakout (`minatar`'s `breakout`); minimal actions no-op, left, right.

    Game state `(n, 38)`: ball x, ball y, ball velocity x and y (each -1 or +1; the package's
    direction codes 0..3 are (-1,-1), (+1,-1), (+1,+1), (-1,+1)), paddle x, the ball's previous
    x and y (the trail), strike (1 while the ball sits on a brick it already hit, so that one
    brick is broken per contact), then the 30 cells of brick rows 1..3 (1 = brick). Channels:
    paddle, ball, trail, brick. The game has no difficulty ramp.
    """

    name = "MinAtar/Breakout-v1"
    channels = 4
    game_dim = N_SCALARS + 30
    minimal_actions = ("n", "l", "r")

    def _game_initial(self, n: int) -> torch.Tensor:
        game = torch.zeros((n, self.game_dim), device=self.device)
        # the ball starts on row 3 at the left wall moving down-right, or at the right wall
        # moving down-left, with even odds
        right = torch.rand(n, generator=self.generator, device=self.device) < 0.5
        game[:, BALL_X] = torch.where(right, 9.0, 0.0)
        game[:, VEL_X] = torch.where(right, -1.0, 1.0)
        game[:, BALL_Y] = 3.0
        game[:, VEL_Y] = 1.0
        game[:, PADDLE] = 4.0
        game[:, LAST_X] = game[:, BALL_X]
        game[:, LAST_Y] = 3.0
        game[:, BRICKS] = 1.0
        return game

    def _game_step(
        self, game: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, y, vx, vy, paddle, _, _, strike = game[:, :N_SCALARS].unbind(1)
        bricks = game[:, BRICKS]
        # the paddle moves first, so the bounce below sees its new position
        move = (action == 3).float() - (action == 1).float()
        paddle = (paddle + move).clamp(0, 9)

        nx, ny = x + vx, y + vy
        # a side wall reflects horizontally (the ball stays in the edge column this step)
        wall = (nx < 0) | (nx > 9)
        nx = nx.clamp(0, 9)
        vx = torch.where(wall, -vx, vx)
        # the ceiling reflects vertically; the package checks no brick on this step then
        top = ny < 0
        ny = ny.clamp(min=0)
        vy = torch.where(top, -vy, vy)

        # a brick in the target cell (rows 1..3 only)
        in_rows = (ny >= 1) & (ny <= 3)
        cell = ((ny - 1) * 10 + nx).long().clamp(0, 29)
        on_brick = in_rows & (bricks.gather(1, cell.unsqueeze(1)).squeeze(1) > 0.5)
        # only the first step of a contact breaks the brick and bounces back to the old row;
        # with strike already set the ball moves into the brick's cell and breaks nothing
        breaks = on_brick & (strike < 0.5)
        hit_cell = torch.arange(30, device=self.device) == cell.unsqueeze(1)
        bricks = bricks.masked_fill(hit_cell & breaks.unsqueeze(1), 0.0)
        ny = torch.where(breaks, y, ny)
        vy = torch.where(breaks, -vy, vy)

        # the bottom row: rebuild a cleared wall, then bounce off the paddle or end
        bottom = ny == 9
        refill = bottom & (bricks.sum(1) == 0)
        bricks = torch.where(refill.unsqueeze(1), torch.ones_like(bricks), bricks)
        centre = bottom & (x == paddle)  # the paddle is under where the ball came from
        side = bottom & ~centre & (nx == paddle)  # the paddle is where the ball is going
        caught = centre | side
        vy = torch.where(caught, -vy, vy)
        vx = torch.where(side, -vx, vx)
        ny = torch.where(caught, y, ny)
        terminated = bottom & ~caught

        scalars = torch.stack([nx, ny, vx, vy, paddle, x, y, on_brick.float()], 1)
        return torch.cat([scalars, bricks], 1), breaks.float(), terminated

    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        n = game.shape[0]
        cols = game[:, :N_SCALARS].long()
        obs = torch.zeros((n, self.channels, 100), dtype=torch.bool, device=self.device)
        # one cell each for paddle (row 9), ball and trail: channels 0, 1, 2
        cells = torch.stack(
            [
                90 + cols[:, PADDLE],
                cols[:, BALL_Y] * 10 + cols[:, BALL_X],
                cols[:, LAST_Y] * 10 + cols[:, LAST_X],
            ],
            1,
        )
        obs[:, :3].scatter_(2, cells.unsqueeze(2), True)
        obs[:, 3, 10:40] = game[:, BRICKS] > 0.5
        return obs.view(n, self.channels, 10, 10)
