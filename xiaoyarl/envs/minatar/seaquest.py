"""MinAtar Seaquest as a batched torch simulator.

The player steers a two-cell submarine through eight rows of sea and fires torpedoes sideways.
Enemy fish and enemy submarines cross the rows (the submarines shoot), and each one torpedoed
earns +1; divers swim across too, and touching one takes it aboard (six at most). Oxygen runs
down under water and is refilled by surfacing, which costs one diver (surfacing with none ends
the episode; with all six aboard it empties the sub and pays a bonus for the oxygen left), and
each surfacing makes enemies spawn and move faster (with difficulty ramping). The episode also
ends when the sub touches an enemy or an enemy bullet, or runs out of oxygen.

From MinAtar (Young and Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
Reinforcement Learning Experiments", 2019), reproducing the `minatar` package's
`environments/seaquest.py` rule by rule, in its order of updates, including its quirks: a
surfacing with six divers leaves the count at -1 (after which surfacing is free until a diver is
picked up) and a submarine removed in a step still fires if its shot timer is up.

The package keeps its objects in Python lists; here each list is a fixed number of slots with
an "alive" flag, sized so that it can never overflow under the package's rules (see the
capacities below).
"""

from __future__ import annotations

import torch

from xiaoyarl.envs.minatar.base import MinAtarEnv

MAX_OXYGEN = 200
INIT_SPAWN_SPEED = 20  # steps between enemy spawns at the start (ramped down to 1)
DIVER_SPAWN_SPEED = 30
INIT_MOVE_INTERVAL = 5  # an enemy moves every interval + 1 steps (ramped down to 2)
SHOT_COOL_DOWN = 5
ENEMY_SHOT_INTERVAL = 10  # an enemy sub fires every 11 steps
DIVER_MOVE_INTERVAL = 5
MAX_DIVERS = 6

# Capacities: the most objects of each list that can exist at once (mid-step, after the step's
# additions and before its removals) under the package's rules.
# - Player bullets: one shot per 5 steps at most, and a bullet leaves the grid at most 9 steps
#   after the step it was fired in, so at most 2 are alive when a step starts, 3 with the new one.
F_CAP = 3
# - Divers: one spawn every 30 steps; a diver spawned at step s moves at s+5, s+11, ... and
#   leaves at its 10th move, at step s+59, so at most 2 exist at once.
D_CAP = 2
# - Enemies (fish and subs together): at most one spawn per step; an enemy leaves the grid at
#   its 10th move, at most 5 + 9 * 6 = 59 steps after its spawn step. An enemy spawned while the
#   ramp level r is at most 5 sets the next spawn at least 20 - 5 = 15 steps later; one spawned
#   at r >= 6 (move interval 2 for good) leaves exactly 29 steps after its spawn step. So during
#   step T the enemies come from at most the 30 spawns of [T-29, T] plus the spawns with r <= 5
#   in [T-59, T-44] (spaced by 15 and at least 15 before the first later spawn): 30 + 2 = 32.
E_CAP = 32
# - Enemy bullets: one leaves the grid at most 9 steps after the step it was fired in (one fired
#   outside the grid, by a sub that just left it, is dropped at once here as in the package), so
#   those alive during step T were fired in [T-9, T], each by a different sub (a sub fires every
#   11 steps), first at 10 steps of age: subs spawned in [T-30, T-10] at r >= 6 (alive 29 steps:
#   they fire at ages 10 and 21) and, spaced by 15, those spawned at r <= 5 in [T-68, T-45]:
#   21 + 2 = 23.
B_CAP = 23

# game-state layout (see SeaquestEnv): 12 scalars, then the lists, each field-major
OXYGEN, DIVER_COUNT, SUB_X, SUB_Y, SUB_OR, SPAWN_SPEED = range(6)
SPAWN_TIMER, DIVER_TIMER, MOVE_SPEED, RAMP, SHOT_TIMER, SURFACE = range(6, 12)
N_SCALARS = 12
F_FIELDS = 4  # player bullets: alive, x, y, lr
D_FIELDS = 5  # divers: alive, x, y, lr, move timer
E_FIELDS = 6  # enemies: kind (0 none, 1 fish, 2 sub), x, y, lr, move timer, shot timer
B_FIELDS = 4  # enemy bullets: alive, x, y, lr
F_START = N_SCALARS
D_START = F_START + F_FIELDS * F_CAP
E_START = D_START + D_FIELDS * D_CAP
B_START = E_START + E_FIELDS * E_CAP
GAME_DIM = B_START + B_FIELDS * B_CAP
FISH, SUB = 1, 2

# observation channels (the package's order)
SUB_FRONT, SUB_BACK, FRIENDLY_BULLET, TRAIL, ENEMY_BULLET = range(5)
ENEMY_FISH, ENEMY_SUB, OXYGEN_GAUGE, DIVER_GAUGE, DIVER = range(5, 10)


def _first_free(alive: torch.Tensor) -> torch.Tensor:
    """`(n, cap)` bool: the first free slot of each row of `alive` (none where full)."""
    free = ~alive
    return free & (free.long().cumsum(1) == 1)


def _compact(alive: torch.Tensor, fields: torch.Tensor) -> torch.Tensor:
    """Move the alive slots of `fields` `(n, F, cap)` to the front, keeping their order.

    Keeping the lists in the package's order (insertion order) matters: a bullet kills the first
    fish of the list at its cell, and the newest enemy entering a bullet's cell takes it."""
    order = torch.sort((~alive).to(torch.uint8), dim=1, stable=True).indices
    return fields.gather(2, order.unsqueeze(1).expand_as(fields))


class SeaquestEnv(MinAtarEnv):
    """MinAtar Seaquest (`MinAtar/Seaquest-v1`): actions no-op, left, up, right, down, fire.

    Game state `(n, 318)` float32 (integers stored as floats):
    - columns 0..11, scalars: `OXYGEN`, `DIVER_COUNT`, `SUB_X`, `SUB_Y`, `SUB_OR` (1 facing
      right), `SPAWN_SPEED` (steps between enemy spawns), `SPAWN_TIMER`, `DIVER_TIMER`,
      `MOVE_SPEED` (enemies' move interval), `RAMP` (ramp level), `SHOT_TIMER`, `SURFACE` (1 if
      the sub has surfaced since it last dived): the package's attributes of the same meaning;
    - four object lists, each `fields x capacity` stored field-major (field f of slot k at
      `start + f * cap + k`); slot order is the package's list order (alive slots first):
      player bullets at `F_START` (12): alive, x, y, lr (1 moving right), 3 slots;
      divers at `D_START` (24): alive, x, y, lr, move timer, 2 slots;
      enemies at `E_START` (34): kind (0 none, 1 fish, 2 sub), x, y, lr, move timer, shot
      timer (subs only), 32 slots: the package's two lists `e_fish` and `e_subs` share the
      slots, each kind in its own list's order;
      enemy bullets at `B_START` (226): alive, x, y, lr, 23 slots (their order is never read).

    Observation channels (the package's order): sub_front, sub_back, friendly_bullet, trail,
    enemy_bullet, enemy_fish, enemy_sub, oxygen_gauge, diver_gauge, diver.
    """

    name = "MinAtar/Seaquest-v1"
    channels = 10
    game_dim = GAME_DIM
    minimal_actions = ("n", "l", "u", "r", "d", "f")

    def _constants(self, device: torch.device) -> None:
        self._cols = torch.arange(10, device=device)
        self._e_rank = torch.arange(1, E_CAP + 1, device=device)  # 1-based slot numbers

    # --- layout ---
    @staticmethod
    def _lists(game: torch.Tensor) -> list[torch.Tensor]:
        """The four object lists of game states `(n, game_dim)`, as `(n, fields, cap)` int64."""
        n = game.shape[0]
        blocks = [(F_START, F_FIELDS, F_CAP), (D_START, D_FIELDS, D_CAP)]
        blocks += [(E_START, E_FIELDS, E_CAP), (B_START, B_FIELDS, B_CAP)]
        return [game[:, s : s + f * c].long().view(n, f, c) for s, f, c in blocks]

    def _game_initial(self, n: int) -> torch.Tensor:
        game = torch.zeros((n, self.game_dim), device=self.device)
        game[:, OXYGEN] = MAX_OXYGEN
        game[:, SUB_X] = 5
        game[:, SPAWN_SPEED] = INIT_SPAWN_SPEED
        game[:, SPAWN_TIMER] = INIT_SPAWN_SPEED
        game[:, DIVER_TIMER] = DIVER_SPAWN_SPEED
        game[:, MOVE_SPEED] = INIT_MOVE_INTERVAL
        game[:, SURFACE] = 1
        return game  # no objects: every alive flag and kind is 0

    # --- dynamics ---
    def _game_step(
        self, game: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = game.shape[0]
        s = game[:, :N_SCALARS].long().unbind(1)
        oxygen, divers_aboard, facing = s[OXYGEN], s[DIVER_COUNT], s[SUB_OR]
        px, py = s[SUB_X], s[SUB_Y]
        spawn_speed, spawn_timer, diver_timer = s[SPAWN_SPEED], s[SPAWN_TIMER], s[DIVER_TIMER]
        move_speed, ramp, shot_timer, surface = s[MOVE_SPEED], s[RAMP], s[SHOT_TIMER], s[SURFACE]
        f_list, d_list, e_list, b_list = self._lists(game)
        f_alive, fx, fy, f_lr = f_list.unbind(1)
        d_alive, dx, dy, d_lr, d_timer = d_list.unbind(1)
        kind, ex, ey, e_lr, e_timer, e_shot = e_list.unbind(1)
        b_alive, bx, by, b_lr = b_list.unbind(1)
        f_alive, d_alive, b_alive = f_alive > 0, d_alive > 0, b_alive > 0
        px_, py_ = px.unsqueeze(1), py.unsqueeze(1)  # (n, 1), against (n, cap) lists
        # every random number of the step, drawn for all sub-envs (used where a spawn is due):
        # enemy direction, enemy is a sub, enemy row, diver direction, diver row
        u = torch.rand((n, 5), generator=self.generator, device=self.device)
        e_right, e_is_sub, d_right = u[:, 0] < 0.5, u[:, 1] < 1 / 3, u[:, 3] < 0.5
        e_row = (u[:, 2] * 8).long().clamp(max=7) + 1  # the package's randint(1, 9)
        d_row = (u[:, 4] * 8).long().clamp(max=7) + 1

        # an enemy spawns when its timer is up, at an edge of a random row, unless that row
        # holds an enemy heading the other way (the timer restarts either way)
        spawn = spawn_timer == 0
        row_taken = (kind > 0) & (ey == e_row.unsqueeze(1)) & (e_lr != e_right.long().unsqueeze(1))
        slot = _first_free(kind > 0) & (spawn & ~row_taken.any(1)).unsqueeze(1)
        kind = torch.where(slot, torch.where(e_is_sub, SUB, FISH).unsqueeze(1), kind)
        ex = torch.where(slot, torch.where(e_right, 0, 9).unsqueeze(1), ex)
        ey = torch.where(slot, e_row.unsqueeze(1), ey)
        e_lr = torch.where(slot, e_right.long().unsqueeze(1), e_lr)
        e_timer = torch.where(slot, move_speed.unsqueeze(1), e_timer)
        e_shot = torch.where(slot, ENEMY_SHOT_INTERVAL, e_shot)
        spawn_timer = torch.where(spawn, spawn_speed, spawn_timer)
        # a diver spawns every 30 steps, at an edge of a random row
        spawn = diver_timer == 0
        slot = _first_free(d_alive) & spawn.unsqueeze(1)
        d_alive = d_alive | slot
        dx = torch.where(slot, torch.where(d_right, 0, 9).unsqueeze(1), dx)
        dy = torch.where(slot, d_row.unsqueeze(1), dy)
        d_lr = torch.where(slot, d_right.long().unsqueeze(1), d_lr)
        d_timer = torch.where(slot, DIVER_MOVE_INTERVAL, d_timer)
        diver_timer = torch.where(spawn, DIVER_SPAWN_SPEED, diver_timer)

        # the player: fire from the sub's cell (when cooled down), or move; a blocked "fire"
        # does nothing; moving sideways turns the sub
        fire = (action == 5) & (shot_timer == 0)
        slot = _first_free(f_alive) & fire.unsqueeze(1)
        f_alive = f_alive | slot
        fx, fy = torch.where(slot, px_, fx), torch.where(slot, py_, fy)
        f_lr = torch.where(slot, facing.unsqueeze(1), f_lr)
        shot_timer = torch.where(fire, SHOT_COOL_DOWN, shot_timer)
        left, right = action == 1, action == 3
        px = (px - left.long() + right.long()).clamp(0, 9)
        py = (py - (action == 2).long() + (action == 4).long()).clamp(0, 8)
        facing = torch.where(left, 0, torch.where(right, 1, facing))
        px_, py_ = px.unsqueeze(1), py.unsqueeze(1)

        # player bullets move; one meeting enemies kills the first fish of the list there, else
        # the first sub. Bullets never share a cell (one heading left stays left of the sub, one
        # heading right stays right of it, and two heading the same way are fired 5 steps
        # apart and both move a cell a step), so they never compete for an enemy and the
        # package's bullet-by-bullet loop is done for all bullets at once here.
        fx = fx + f_alive.long() * (2 * f_lr - 1)
        f_alive = f_alive & (fx >= 0) & (fx <= 9)
        # cells as y * 10 + x (no object left outside the grid is compared)
        meets = (fy * 10 + fx).unsqueeze(2) == (ey * 10 + ex).unsqueeze(1)  # (n, bullet, enemy)
        reward = torch.zeros(n, dtype=torch.long, device=self.device)
        for k in (FISH, SUB):
            hits = meets & (kind == k).unsqueeze(1) & f_alive.unsqueeze(2)
            first = hits & (hits.long().cumsum(2) == 1)  # the first of the kind in list order
            kind = torch.where(first.any(1), 0, kind)
            hit = hits.any(2)
            f_alive = f_alive & ~hit
            reward = reward + hit.sum(1)

        # divers, newest first (the package walks its list backwards): picked up where the sub
        # is (before or after they move) while fewer than 6 are aboard. One at a time, since a
        # pick-up can fill the sub for the next diver.
        d_cols = [list(t.unbind(1)) for t in (d_alive, dx, dy, d_lr, d_timer)]
        for k in reversed(range(D_CAP)):
            alive, x, y, lr, timer = (c[k] for c in d_cols)
            pick = alive & (x == px) & (y == py) & (divers_aboard < MAX_DIVERS)
            divers_aboard = divers_aboard + pick.long()
            stays = alive & ~pick
            move = stays & (timer == 0)
            timer = torch.where(move, DIVER_MOVE_INTERVAL, timer - stays.long())
            x = x + move.long() * (2 * lr - 1)
            out = move & ((x < 0) | (x > 9))
            pick = move & ~out & (x == px) & (y == py) & (divers_aboard < MAX_DIVERS)
            divers_aboard = divers_aboard + pick.long()
            for col, value in zip(d_cols, (stays & ~out & ~pick, x, y, lr, timer), strict=True):
                col[k] = value
        d_alive, dx, dy, d_lr, d_timer = (torch.stack(c, 1) for c in d_cols)

        # enemy subs move (and may ram the player or run into a bullet), then fire
        is_sub = kind == SUB
        kind, ex, e_timer, f_alive, hits, terminated = self._move_enemies(
            is_sub, kind, ex, ey, e_lr, e_timer, move_speed, f_alive, fx, fy, px_, py_
        )
        reward = reward + hits
        # every sub of the list at the start of the loop fires when its timer is up, even one
        # that left the grid or was hit in this step (out of the grid, its bullet is gone at once)
        shoots = is_sub & (e_shot == 0)
        e_shot = torch.where(shoots, ENEMY_SHOT_INTERVAL, e_shot - is_sub.long())
        shoots = shoots & (ex >= 0) & (ex <= 9)
        # the k-th free bullet slot takes the k-th shooter (their order is never read)
        shooters = shoots.long().cumsum(1)  # (n, enemy) shooters up to each slot
        rank_free = (~b_alive).long().cumsum(1)  # (n, bullet) 1-based rank of each free slot
        shooter = torch.searchsorted(shooters, rank_free).clamp(max=E_CAP - 1)  # (n, bullet)
        new = ~b_alive & (rank_free <= shooters[:, -1:])
        b_alive = b_alive | new
        bx = torch.where(new, ex.gather(1, shooter), bx)
        by = torch.where(new, ey.gather(1, shooter), by)
        b_lr = torch.where(new, e_lr.gather(1, shooter), b_lr)

        # enemy bullets: hit the player before or after moving; leave at the edges
        terminated |= (b_alive & (bx == px_) & (by == py_)).any(1)
        bx = bx + b_alive.long() * (2 * b_lr - 1)
        b_alive = b_alive & (bx >= 0) & (bx <= 9)
        terminated |= (b_alive & (bx == px_) & (by == py_)).any(1)

        # enemy fish move (after the subs, so a bullet a sub took is gone)
        kind, ex, e_timer, f_alive, hits, rammed = self._move_enemies(
            kind == FISH, kind, ex, ey, e_lr, e_timer, move_speed, f_alive, fx, fy, px_, py_
        )
        reward = reward + hits
        terminated |= rammed

        # timers, oxygen, surfacing
        spawn_timer = spawn_timer - (spawn_timer > 0).long()
        diver_timer = diver_timer - (diver_timer > 0).long()
        shot_timer = shot_timer - (shot_timer > 0).long()
        terminated |= oxygen <= 0
        under = py > 0
        oxygen = oxygen - under.long()
        arrives = ~under & (surface == 0)  # reached the surface this step
        terminated |= arrives & (divers_aboard == 0)
        surfaces = arrives & (divers_aboard != 0)
        surface = torch.where(under, 0, torch.where(surfaces, 1, surface))
        # with all six aboard: empty the sub and pay for the oxygen left (the count still
        # drops by one after, to -1, as in the package)
        full = surfaces & (divers_aboard == MAX_DIVERS)
        reward = reward + torch.where(full, oxygen * 10 // MAX_OXYGEN, 0)
        divers_aboard = torch.where(full, 0, divers_aboard) - surfaces.long()
        oxygen = torch.where(surfaces, MAX_OXYGEN, oxygen)
        if self.ramping:
            harder = surfaces & ((spawn_speed > 1) | (move_speed > 2))
            move_speed = move_speed - (harder & (move_speed > 2) & (ramp % 2 == 1)).long()
            spawn_speed = spawn_speed - (harder & (spawn_speed > 1)).long()
            ramp = ramp + harder.long()

        # keep the order-sensitive lists in list order, alive slots first
        d_list = _compact(d_alive, torch.stack([d_alive.long(), dx, dy, d_lr, d_timer], 1))
        e_list = _compact(kind > 0, torch.stack([kind, ex, ey, e_lr, e_timer, e_shot], 1))
        f_list = torch.stack([f_alive.long(), fx, fy, f_lr], 1)
        b_list = torch.stack([b_alive.long(), bx, by, b_lr], 1)
        scalars = torch.stack(
            [oxygen, divers_aboard, px, py, facing, spawn_speed, spawn_timer, diver_timer]
            + [move_speed, ramp, shot_timer, surface],
            1,
        )
        parts = [scalars] + [t.flatten(1) for t in (f_list, d_list, e_list, b_list)]
        return torch.cat(parts, 1).float(), reward.float(), terminated

    def _move_enemies(
        self,
        movers: torch.Tensor,
        kind: torch.Tensor,
        ex: torch.Tensor,
        ey: torch.Tensor,
        e_lr: torch.Tensor,
        e_timer: torch.Tensor,
        move_speed: torch.Tensor,
        f_alive: torch.Tensor,
        fx: torch.Tensor,
        fy: torch.Tensor,
        px: torch.Tensor,
        py: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        """One pass of the package's loop over its fish (or subs) list, for the enemy slots
        `movers` `(n, cap)`: each hits the player where it stands; when its timer is up it moves
        a cell and leaves the grid, hits the player, or runs into a player bullet (which kills
        both, +1). Returns `(kind, ex, e_timer, f_alive, reward (n,), terminated (n,))`."""
        terminated = (movers & (ex == px) & (ey == py)).any(1)
        move = movers & (e_timer == 0)
        e_timer = torch.where(move, move_speed.unsqueeze(1), e_timer - movers.long())
        ex = ex + move.long() * (2 * e_lr - 1)
        out = move & ((ex < 0) | (ex > 9))
        rams = move & ~out & (ex == px) & (ey == py)
        terminated = terminated | rams.any(1)
        check = move & ~out & ~rams
        meets = (fy * 10 + fx).unsqueeze(2) == (ey * 10 + ex).unsqueeze(1)  # (n, bullet, enemy)
        meets = meets & check.unsqueeze(1) & f_alive.unsqueeze(2)
        # the package walks the list backwards: of the enemies entering a bullet's cell in this
        # step, the newest (last slot) takes the bullet and the others find it gone
        taker = torch.where(meets, self._e_rank, 0).amax(2)  # (n, bullet) 1-based slot, 0: none
        taken = taker > 0
        killed = (meets & (self._e_rank == taker.unsqueeze(2))).any(1)
        kind = torch.where(out | killed, 0, kind)
        return kind, ex, e_timer, f_alive & ~taken, taken.sum(1), terminated

    # --- observation ---
    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        n = game.shape[0]
        s = game[:, :N_SCALARS].long()
        px, py, facing = s[:, SUB_X : SUB_X + 1], s[:, SUB_Y : SUB_Y + 1], s[:, SUB_OR : SUB_OR + 1]
        f_list, d_list, e_list, b_list = self._lists(game)
        cells: list[torch.Tensor] = []  # (n, m) flat indices channel * 100 + y * 10 + x
        shown: list[torch.Tensor] = []  # (n, m) whether each is drawn

        def draw(channel: int, x: torch.Tensor, y: torch.Tensor, on: torch.Tensor) -> None:
            cells.append(channel * 100 + y * 10 + x)
            shown.append(on & (x >= 0) & (x <= 9))

        every = torch.ones_like(px, dtype=torch.bool)
        draw(SUB_FRONT, px, py, every)
        # the sub's back cell never leaves the grid (the sub faces right at x=9, left at x=0);
        # the wrap-around matches numpy's index -1 all the same
        draw(SUB_BACK, (px + 1 - 2 * facing) % 10, py, every)
        row9 = torch.full_like(self._cols, 9).expand(n, 10)
        cols = self._cols.expand(n, 10)
        oxygen_cells = s[:, OXYGEN : OXYGEN + 1].clamp(min=0) * 10 // MAX_OXYGEN
        draw(OXYGEN_GAUGE, cols, row9, cols < oxygen_cells)
        # the package's slice [9 - count : 9] (empty for a count of -1 or less)
        draw(
            DIVER_GAUGE, cols, row9, (cols >= 9 - s[:, DIVER_COUNT : DIVER_COUNT + 1]) & (cols < 9)
        )
        alive, x, y = f_list[:, 0] > 0, f_list[:, 1], f_list[:, 2]
        draw(FRIENDLY_BULLET, x, y, alive)
        alive, x, y = b_list[:, 0] > 0, b_list[:, 1], b_list[:, 2]
        draw(ENEMY_BULLET, x, y, alive)
        kind, x, y, lr = e_list[:, 0], e_list[:, 1], e_list[:, 2], e_list[:, 3]
        draw(ENEMY_FISH, x, y, kind == FISH)
        draw(ENEMY_SUB, x, y, kind == SUB)
        draw(TRAIL, x + 1 - 2 * lr, y, kind > 0)  # the cell each came from
        alive, x, y, lr = d_list[:, 0] > 0, d_list[:, 1], d_list[:, 2], d_list[:, 3]
        draw(DIVER, x, y, alive)
        draw(TRAIL, x + 1 - 2 * lr, y, alive)

        index = torch.cat(cells, 1)
        # hidden cells go to a spare column, cut off after the scatter
        index = torch.where(torch.cat(shown, 1), index, 1000)
        grid = torch.zeros((n, 1001), dtype=torch.bool, device=self.device)
        grid.scatter_(1, index, True)
        return grid[:, :1000].view(n, 10, 10, 10)
