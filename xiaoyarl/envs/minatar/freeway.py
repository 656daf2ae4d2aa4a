"""MinAtar Freeway as a batched torch simulator.

A chicken crosses a road from the bottom row to the top; it moves only up or down, and at most
once every three steps. Each of the eight lanes in between carries one car moving left or right
at its own speed (one cell every 1 to 5 steps) and wrapping round the screen's edge; a car
that touches the chicken sends it back to the bottom. Reaching the top gives +1, puts the
chicken back at the bottom and draws new car speeds and directions. The episode ends after its
own time limit of 2500 steps (the package ends it on step 2501). Trail channels, one per speed,
show each car's direction and speed. From MinAtar: Young and Tian, "MinAtar: An Atari-Inspired
Testbed for Thorough and Reproducible Reinforcement Learning Experiments", 2019 (the `minatar`
package's `freeway.py`, whose dynamics this reproduces step for step).
"""

from __future__ import annotations

import torch

from xiaoyarl.envs.minatar.base import MinAtarEnv

PLAYER_SPEED = 3  # steps between two moves of the chicken
TIME_LIMIT = 2500

# game state columns (all small integers stored as float32); car i drives in row i + 1
POS, MOVE_TIMER, TIME_LEFT = range(3)
CAR_X = slice(3, 11)
CAR_TIMER = slice(11, 19)  # steps until the car next moves
CAR_SPEED = slice(19, 27)  # signed: + moves right, - left; |speed| steps between moves
N_CARS = 8


class FreewayEnv(MinAtarEnv):
    """MinAtar Freeway (`minatar`'s `freeway`); minimal actions no-op, up, down.

    Game state `(n, 27)`: chicken row, move timer (steps until it may move again), time left
    (the package's `terminate_timer`), then for the 8 cars (car i in row i + 1) their x, their
    timers and their signed speeds. Channels: chicken, car, then the trail of a car of speed
    1..5 in channels 2..6. The game has no difficulty ramp.
    """

    name = "MinAtar/Freeway-v1"
    channels = 7
    game_dim = 3 + 3 * N_CARS
    minimal_actions = ("n", "u", "d")

    def _constants(self, device: torch.device) -> None:
        self._rows = torch.arange(1, N_CARS + 1, device=device, dtype=torch.float32)

    def _car_draws(self, n: int) -> torch.Tensor:
        """`(n, 16)` uniforms for one redraw of the cars: 8 for the speeds, 8 for directions.
        Every step draws them, so a step never depends on how many sub-envs scored (tests
        replace this method to feed the package's own draws)."""
        return torch.rand((n, 2 * N_CARS), generator=self.generator, device=self.device)

    @staticmethod
    def _speeds(draws: torch.Tensor) -> torch.Tensor:
        """Signed speeds `(n, 8)` of uniforms `(n, 16)`: |speed| uniform in 1..5, each
        direction with even odds (the package's randint(1, 6) and sign(rand - 0.5))."""
        magnitude = (draws[:, :N_CARS] * 5).floor().clamp(max=4) + 1
        return torch.where(draws[:, N_CARS:] < 0.5, -magnitude, magnitude)

    def _game_initial(self, n: int) -> torch.Tensor:
        game = torch.zeros((n, self.game_dim), device=self.device)
        speed = self._speeds(
            torch.rand((n, 2 * N_CARS), generator=self.generator, device=self.device)
        )
        game[:, POS] = 9.0
        game[:, MOVE_TIMER] = PLAYER_SPEED
        game[:, TIME_LEFT] = TIME_LIMIT
        game[:, CAR_TIMER] = speed.abs()  # every car starts at x = 0
        game[:, CAR_SPEED] = speed
        return game

    def _game_step(
        self, game: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pos, move_timer, time_left = game[:, POS], game[:, MOVE_TIMER], game[:, TIME_LEFT]
        car_x, car_timer, speed = game[:, CAR_X], game[:, CAR_TIMER], game[:, CAR_SPEED]
        draws = self._car_draws(game.shape[0])

        # up (2) or down (4), only when the move timer has run out
        ready = move_timer == 0
        up, down = ready & (action == 2), ready & (action == 4)
        pos = (pos - up.float() + down.float()).clamp(0, 9)
        move_timer = torch.where(up | down, float(PLAYER_SPEED), move_timer)

        # reaching the top scores, restarts the chicken and redraws the cars' speeds (not
        # their positions); a redrawn timer is >= 1, so those cars do not move this step
        scored = pos == 0
        pos = torch.where(scored, 9.0, pos)
        new_speed = self._speeds(draws)
        speed = torch.where(scored.unsqueeze(1), new_speed, speed)
        car_timer = torch.where(scored.unsqueeze(1), new_speed.abs(), car_timer)

        # cars move when their timer is 0 (and wrap round); a car in the chicken's row on its
        # column, before or after moving, sends the chicken back. The package does this car
        # by car, but only the car in the chicken's row can touch it, and once sent back to
        # row 9 (no car there) no later car can, so all cars at once give the same result.
        moves = car_timer == 0
        new_x = torch.where(moves, torch.remainder(car_x + speed.sign(), 10), car_x)
        car_timer = torch.where(moves, speed.abs(), car_timer - 1)
        in_row = self._rows == pos.unsqueeze(1)
        hit = (in_row & ((car_x == 4) | (moves & (new_x == 4)))).any(1)
        pos = torch.where(hit, 9.0, pos)

        move_timer = (move_timer - 1).clamp(min=0)
        time_left = time_left - 1
        terminated = time_left < 0
        scalars = torch.stack([pos, move_timer, time_left], 1)
        return torch.cat([scalars, new_x, car_timer, speed], 1), scored.float(), terminated

    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        n = game.shape[0]
        row = self._rows.long() * 10  # (8,) first cell of each lane
        car_x = game[:, CAR_X].long()
        speed = game[:, CAR_SPEED].long()
        back_x = torch.remainder(car_x - speed.sign(), 10)  # the cell the car came from
        # flat indices into (channels * 100): chicken in column 4, cars, speed trails
        chicken = game[:, POS].long() * 10 + 4
        cars = 100 + row + car_x
        trails = (1 + speed.abs()) * 100 + row + back_x
        cells = torch.cat([chicken.unsqueeze(1), cars, trails], 1)
        obs = torch.zeros((n, self.channels * 100), dtype=torch.bool, device=self.device)
        obs.scatter_(1, cells, True)
        return obs.view(n, self.channels, 10, 10)
