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
capacities below), and a step works on all the slots of a list at once. Where the package's
order of updates decides an outcome, masks of the slots keep it: a bullet meeting enemies kills
the first fish of the list in its cell, else the first sub; of the enemies moving into a
bullet's cell the newest takes it, subs before fish (the package walks its lists backwards,
subs first); the divers board one at a time, newest first; new enemies and enemy bullets join
the ends of their lists.

How it is fast on a CPU (a step is some 300 small tensor operations, so their count and kind
decide its cost): the simulator state is int16 and stored column by column (each column of
`sim_state (n, sim_dim)` contiguous), so a step reads every field as one contiguous row `(n,)`
and keeps its lists as `(slots, n)`, where a per-sub-env value `(n,)` broadcasts over the slots
as a row (several times cheaper than a value broadcast as a column); the enemy and
enemy-bullet lists hold their counts, and on a CPU a step works only on the slots up to the
longest list (a few in most games; on an accelerator on all of them, as finding the longest
would make the device wait); enemies are worked on as int8; an enemy bullet is stored as one
int8 code.
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

# game-state layout (see SeaquestEnv): 14 scalars, then the lists
OXYGEN, DIVER_COUNT, SUB_X, SUB_Y, SUB_OR, SPAWN_SPEED = range(6)
SPAWN_TIMER, DIVER_TIMER, MOVE_SPEED, RAMP, SHOT_TIMER, SURFACE = range(6, 12)
ENEMY_COUNT, BULLET_COUNT = 12, 13  # the lengths of the enemy and enemy-bullet lists
N_SCALARS = 14
F_FIELDS = 4  # player bullets: alive, x, y, lr
D_FIELDS = 5  # divers: alive, x, y, lr, move timer
E_FIELDS = 6  # enemies: kind (0 none, 1 fish, 2 sub), x, y, lr, move timer, shot timer
F_START = N_SCALARS
D_START = F_START + F_FIELDS * F_CAP
E_START = D_START + D_FIELDS * D_CAP
B_START = E_START + E_FIELDS * E_CAP  # enemy bullets: one code each (see `_bullet_codes`)
GAME_DIM = B_START + B_CAP
FISH, SUB = 1, 2
BULLET_NONE = 126  # the cell of no player bullet (cells are 0..99)

# observation channels (the package's order)
SUB_FRONT, SUB_BACK, FRIENDLY_BULLET, TRAIL, ENEMY_BULLET = range(5)
ENEMY_FISH, ENEMY_SUB, OXYGEN_GAUGE, DIVER_GAUGE, DIVER = range(5, 10)


# --- lists of slots, `(slots, n)`: a column per sub-env ---
def _first(mask: torch.Tensor) -> torch.Tensor:
    """`(slots, n)` bool -> the first True slot of each column only."""
    return mask & (mask.cumsum(0) == 1)


def _inside(x: torch.Tensor) -> torch.Tensor:
    """Whether each `x` (integers) is on the grid, 0..9 (faster than two comparisons)."""
    return x == x.clamp(0, 9)


def _cells(x: torch.Tensor, y: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
    """int8 cells `y * 10 + x` of the alive slots, -1 for the others (x, y on the grid)."""
    return (y * 10 + x + 1) * alive - 1


def _bullet_at(cells: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """int8 cells `(slots, n)` (-1 for none) and the player bullets' cells `(F_CAP, n)` int8
    (`BULLET_NONE` for none) -> `(slots, n)` int8: 1 + the index of the bullet in each slot's
    cell, 0 for none (bullets never share a cell, so at most one term is not 0)."""
    bullet = (cells == targets[0]).to(torch.int8)
    for k in range(1, F_CAP):
        bullet = torch.where(cells == targets[k], k + 1, bullet)
    return bullet


def _pick(
    bullet: torch.Tensor, order: torch.Tensor, reduce: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each player bullet, the enemy slot that takes it: of the slots in its cell (`bullet`
    `(slots, n)` int8, see `_bullet_at`), the one of least (`reduce` "amin") or greatest
    ("amax") `order` (int8, distinct within a column). Returns `(taken (slots, n) bool, hit
    (F_CAP, n) bool)`."""
    none = 127 if reduce == "amin" else -1
    table = torch.full((1 + F_CAP, bullet.shape[1]), none, dtype=torch.int8, device=order.device)
    index = bullet.long()
    table.scatter_reduce_(0, index, order, reduce)  # row 0 gathers the slots of no bullet
    taken = (bullet > 0) & (order == table.gather(0, index))
    return taken, table[1:] != none


# --- enemy bullets: one int8 code each ---
# 0 for none, else (x + 1) + 16 * (y - 1) - 128 * lr: x + 1 (1..10) in the low 4 bits, y - 1
# (0..7) in the next 3, the direction in the sign. A move adds +1 or -1 to the low 4 bits only
# (x + 1 becomes 0 or 11 when the bullet leaves the grid), and the low 7 bits are the cell.
def _bullet_codes(x: torch.Tensor, y: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
    """The codes (int8) of bullets at `x`, `y` moving right where `lr` (int8 tensors)."""
    return (x + 1) + 16 * (y - 1) + lr * -128


def _compact(values: torch.Tensor, alive: torch.Tensor, cap: int) -> torch.Tensor:
    """A list's slots `(..., slots, n)` with alive slots `alive` `(slots, n)` -> `(..., cap,
    n)`: the alive ones first, in their order (at most `cap`), the others all 0."""
    slot = torch.where(alive, alive.cumsum(0) - 1, cap).clamp(max=cap)  # cap: a spare slot
    shape = (*values.shape[:-2], cap + 1, values.shape[-1])
    spare = values.new_zeros(shape)
    return spare.scatter_(-2, slot.expand_as(values), values)[..., :cap, :]


class SeaquestEnv(MinAtarEnv):
    """MinAtar Seaquest (`MinAtar/Seaquest-v1`): actions no-op, left, up, right, down, fire.

    Game state `(n, 251)` int16, stored column-major (see the module docstring):
    - columns 0..13, scalars: `OXYGEN`, `DIVER_COUNT`, `SUB_X`, `SUB_Y`, `SUB_OR` (1 facing
      right), `SPAWN_SPEED` (steps between enemy spawns), `SPAWN_TIMER`, `DIVER_TIMER`,
      `MOVE_SPEED` (enemies' move interval), `RAMP` (ramp level), `SHOT_TIMER`, `SURFACE` (1 if
      the sub has surfaced since it last dived): the package's attributes of the same meaning;
      `ENEMY_COUNT` and `BULLET_COUNT`, the lengths of the enemy and enemy-bullet lists;
    - four object lists; slot order is the package's list order (alive slots first), and a
      list of fields stores them field-major (field f of slot k at `start + f * cap + k`):
      player bullets at `F_START` (14): alive, x, y, lr (1 moving right), 3 slots;
      divers at `D_START` (26): alive, x, y, lr, move timer, 2 slots;
      enemies at `E_START` (36): kind (0 none, 1 fish, 2 sub), x, y, lr, move timer, shot
      timer (subs only), 32 slots: the package's two lists `e_fish` and `e_subs` share the
      slots, each kind in its own list's order (the free slots all 0);
      enemy bullets at `B_START` (228): one code each (x, y and direction, see
      `_bullet_codes`; 0 for a free slot), 23 slots (their order is never read).

    Observation channels (the package's order): sub_front, sub_back, friendly_bullet, trail,
    enemy_bullet, enemy_fish, enemy_sub, oxygen_gauge, diver_gauge, diver.
    """

    name = "MinAtar/Seaquest-v1"
    channels = 10
    game_dim = GAME_DIM
    sim_dtype = torch.int16
    minimal_actions = ("n", "l", "u", "r", "d", "f")

    def _constants(self, device: torch.device) -> None:
        self._slots: dict[int, torch.Tensor] = {}  # see `_slot_rows`
        self._start: torch.Tensor | None = None  # the observation of the start
        # the gauges' bottom rows `(11 * 8, 2, 10)` bool, for oxygen // 20 (0..10) * 8 + the
        # divers aboard (0..7)
        cols = torch.arange(10, device=device)
        oxygen = cols < torch.arange(11, device=device).unsqueeze(1)  # (11, 10)
        divers = (cols >= 9 - torch.arange(8, device=device).unsqueeze(1)) & (cols < 9)  # (8, 10)
        pairs = torch.stack([oxygen.unsqueeze(1).expand(-1, 8, -1), divers.expand(11, -1, -1)], 2)
        self._gauges = pairs.reshape(11 * 8, 2, 10)

    def _slot_rows(self, n: int) -> torch.Tensor:
        """The slot numbers of the enemy list `(E_CAP + 1, n)` int8, a column per sub-env
        (stored spread: a column `(E_CAP + 1, 1)` broadcast over the sub-envs is several times
        slower to compute with)."""
        if n not in self._slots:
            slot = torch.arange(E_CAP + 1, dtype=torch.int8, device=self.device)
            self._slots[n] = slot.unsqueeze(1).expand(-1, n).contiguous()
        return self._slots[n]

    def _new_states(self, n: int) -> torch.Tensor:
        # differs: column-major, each column of the state one contiguous row of the storage
        return torch.empty((self.sim_dim, n), dtype=self.sim_dtype, device=self.device).t()

    def _in_use(self, count: torch.Tensor, cap: int) -> int:
        """The slots of a list up to its longest (`count` `(n,)` the lengths): on a CPU a step
        works on these only (most slots are empty in most games); on an accelerator on all, as
        knowing which would sync with the host."""
        if self.device.type != "cpu" or not count.numel():
            return cap
        return int(count.max())

    def _game_initial(self, n: int) -> torch.Tensor:
        game = torch.zeros((n, self.game_dim), dtype=self.sim_dtype, device=self.device)
        game[:, OXYGEN] = MAX_OXYGEN
        game[:, SUB_X] = 5
        game[:, SPAWN_SPEED] = INIT_SPAWN_SPEED
        game[:, SPAWN_TIMER] = INIT_SPAWN_SPEED
        game[:, DIVER_TIMER] = DIVER_SPAWN_SPEED
        game[:, MOVE_SPEED] = INIT_MOVE_INTERVAL
        game[:, SURFACE] = 1
        return game  # no objects: every alive flag, kind, code and count is 0

    # --- dynamics ---
    def _game_step(
        self, game: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # the step itself is `_game_step_into`, which writes the next states in place
        next_game = self._new_states(game.shape[0])[:, 1:]
        reward, terminated = self._game_step_into(game, action, next_game)
        return next_game, reward, terminated

    def _game_step_into(
        self, game: torch.Tensor, action: torch.Tensor, next_game: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = game.shape[0]
        g, out = game.t(), next_game.t()  # (GAME_DIM, n): a row per column of the state
        int8, int16 = torch.int8, torch.int16
        oxygen, divers_aboard, px, py, facing, spawn_speed = g[:SPAWN_TIMER]
        spawn_timer, diver_timer, move_speed, ramp, shot_timer, surface = g[SPAWN_TIMER:ENEMY_COUNT]
        e_count, b_count = g[ENEMY_COUNT], g[BULLET_COUNT]
        f_alive, fx, fy, f_lr = g[F_START:D_START].view(F_FIELDS, F_CAP, n)
        d_alive, dx, dy, d_lr, d_timer = g[D_START:E_START].view(D_FIELDS, D_CAP, n)
        f_alive, d_alive = f_alive.bool(), d_alive.bool()
        action = action.to(int8)
        # the enemies as int8 (field, slot, n) on the slots in use and one more, free in every
        # sub-env (a spawn's slot, or where the sub-envs with no spawn write nothing)
        in_use = self._in_use(e_count, E_CAP)
        enemies = torch.empty((E_FIELDS, in_use + 1, n), dtype=int8, device=self.device)
        enemies[:, :in_use] = g[E_START:B_START].view(E_FIELDS, E_CAP, n)[:, :in_use]
        enemies[:, in_use] = 0
        kind, ex, ey, e_lr, e_timer, e_shot = enemies  # views: updated in place
        bullets = g[B_START : B_START + self._in_use(b_count, B_CAP)].to(int8)  # codes
        # every random number of the step, drawn for all sub-envs (used where a spawn is due):
        # enemy direction, enemy is a sub, enemy row, diver direction, diver row
        u = torch.rand((n, 5), generator=self.generator, device=self.device).t()
        e_right, d_right = u[0] < 0.5, u[3] < 0.5
        e_is_sub = u[1] < 1 / 3
        e_row, d_row = (u[2::2] * 8).to(int8).clamp(max=7) + 1  # randint(1, 9)

        # an enemy spawns when its timer is up, at an edge of a random row, unless that row
        # holds an enemy heading the other way (the timer restarts either way); it joins the
        # end of the list (alive slots first)
        lane = ey * 2 + e_lr  # row and direction
        blocked = (kind.bool() & (lane == e_row * 2 + 1 - e_right.to(int8))).any(0)
        spawn = (spawn_timer == 0) & ~blocked & (e_count < E_CAP)  # (never full: see E_CAP)
        new = torch.empty((E_FIELDS, 1, n), dtype=int8, device=self.device)
        new[0, 0] = e_is_sub.to(int8) + FISH  # FISH or SUB
        new[1, 0] = (~e_right).to(int8) * 9
        new[2, 0], new[3, 0], new[4, 0] = e_row, e_right, move_speed
        new[5, 0] = ENEMY_SHOT_INTERVAL
        new *= spawn  # all 0: no spawn
        at = torch.where(spawn, e_count, in_use).long().expand(E_FIELDS, 1, n)
        enemies.scatter_(1, at, new)
        spawn_timer = torch.where(spawn_timer == 0, spawn_speed, spawn_timer)
        # a diver spawns every 30 steps, at an edge of a random row
        spawn = diver_timer == 0
        first = _first(~d_alive) & spawn  # the first free slot
        d_alive = d_alive | first
        dx = torch.where(first, (~d_right).to(int16) * 9, dx)
        dy = torch.where(first, d_row.to(int16), dy)
        d_lr = torch.where(first, d_right.to(int16), d_lr)
        d_timer = torch.where(first, DIVER_MOVE_INTERVAL, d_timer)
        diver_timer = torch.where(spawn, DIVER_SPAWN_SPEED, diver_timer)

        # the player: fire from the sub's cell (when cooled down), or move; a blocked "fire"
        # does nothing; moving sideways turns the sub
        fire = (action == 5) & (shot_timer == 0)
        first = _first(~f_alive) & fire
        f_alive = f_alive | first
        fx, fy = torch.where(first, px, fx), torch.where(first, py, fy)
        f_lr = torch.where(first, facing, f_lr)
        shot_timer = torch.where(fire, SHOT_COOL_DOWN, shot_timer)
        left, right = action == 1, action == 3
        px = (px - left.to(int16) + right).clamp(0, 9)
        py = (py - (action == 2).to(int16) + (action == 4)).clamp(0, 8)
        facing = torch.where(left, 0, torch.where(right, 1, facing)).to(int16)
        player = (py * 10 + px).to(int8)  # the sub's cell

        # player bullets move; one meeting enemies kills the first fish of the list there, else
        # the first sub. Bullets never share a cell (one heading left stays left of the sub, one
        # heading right stays right of it, and two heading the same way are fired 5 steps
        # apart and both move a cell a step), so they never compete for an enemy and the
        # package's bullet-by-bullet loop is done for all bullets at once here.
        fx = fx + f_alive * (2 * f_lr - 1)
        f_alive = f_alive & _inside(fx)
        targets = torch.where(f_alive, fy * 10 + fx, BULLET_NONE).to(int8)  # (F_CAP, n) cells
        alive = kind.bool()
        is_sub = kind == SUB
        slot = self._slot_rows(n)[: in_use + 1]
        order = is_sub.to(int8) * E_CAP + slot  # fish before subs, each in list order
        killed, hit = _pick(_bullet_at(_cells(ex, ey, alive), targets), order, "amin")
        kind.mul_(~killed)
        f_alive = f_alive & ~hit
        targets = torch.where(hit, BULLET_NONE, targets)
        reward = hit.sum(0)

        # divers, newest first (the package walks its list backwards): one at the sub's cell
        # boards while fewer than 6 are aboard, else it moves (when its timer is up) and boards
        # if that takes it onto the sub. Both divers move at once here: one that boards before
        # moving is removed, and one that cannot board moves off the sub's cell, so only the
        # boarding waits for the newer diver's.
        at_sub = (dy * 10 + dx) == player
        move = d_alive & (d_timer == 0)
        d_timer = torch.where(move, DIVER_MOVE_INTERVAL, d_timer - d_alive.to(int16))
        dx = dx + move * (2 * d_lr - 1)
        gone = move & ~_inside(dx)
        reaches = d_alive & (at_sub | (move & ~gone & ((dy * 10 + dx) == player)))
        boards = []
        for k in reversed(range(D_CAP)):
            boards.append(reaches[k] & (divers_aboard < MAX_DIVERS))
            divers_aboard = divers_aboard + boards[-1]
        d_alive = d_alive & ~gone & ~torch.stack(boards[::-1])

        # enemies move: the package's loop over its subs, then (after the enemy bullets, which
        # meet no enemy) its loop over its fish. Each enemy hits the player where it stands;
        # when its timer is up it moves a cell and leaves the grid, hits the player, or runs
        # into a player bullet (which kills both, +1). Both loops walk their list backwards: of
        # the subs entering a bullet's cell, the newest takes the bullet; the fish find the
        # bullets the subs took gone, and of the fish entering a cell, the newest takes it.
        alive = kind.bool()
        is_sub = is_sub & alive
        cells = _cells(ex, ey, alive)
        touch = cells == player
        move = alive & (e_timer == 0)
        e_timer.add_(move * (move_speed.to(int8) + 1) - alive.to(int8))
        step = move * (2 * e_lr - 1)
        ex.add_(step)
        cells = cells + step
        gone = move & ~_inside(ex)
        moved = move & ~gone
        rams = moved & (cells == player)
        bullet = _bullet_at(cells, targets) * (moved & ~rams)
        killed, hit = _pick(bullet, order, "amax")  # subs before fish, newest first
        f_alive = f_alive & ~hit
        reward = reward + hit.sum(0)
        terminated = (touch | rams).any(0)

        # every sub of the list at the start of its loop fires when its timer is up, even one
        # that left the grid or was hit in this step (out of the grid, its bullet is gone at once)
        shoots = is_sub & (e_shot == 0)
        e_shot.add_(shoots.to(int8) * (ENEMY_SHOT_INTERVAL + 1) - is_sub.to(int8))
        shots = _bullet_codes(ex, ey, e_lr) * (shoots & _inside(ex))
        kind.mul_(~(gone | killed))

        # enemy bullets (the old ones, then the new ones: their order is never read): hit the
        # player before or after moving; leave at the edges
        bullets = torch.cat([bullets, shots])
        code = ((px + 1) + 16 * (py - 1)).to(int8)  # the sub's cell as codes' low 7 bits
        touch = (bullets & 127) == code  # (a sub at the surface, y = 0, meets no code)
        bullets = bullets - (2 * (bullets >> 7) + 1) * bullets.bool()  # +1 right, -1 left
        column = bullets & 15  # x + 1, 0 or 11 off the grid
        bullets = bullets * (column == column.clamp(1, 10))
        touch |= (bullets & 127) == code
        terminated |= touch.any(0)

        # timers, oxygen, surfacing
        spawn_timer = (spawn_timer - 1).clamp(min=0)
        diver_timer = (diver_timer - 1).clamp(min=0)
        shot_timer = (shot_timer - 1).clamp(min=0)
        terminated |= oxygen <= 0
        under = py > 0
        oxygen = oxygen - under.to(int16)
        arrives = ~under & (surface == 0)  # reached the surface this step
        terminated |= arrives & (divers_aboard == 0)
        surfaces = arrives & (divers_aboard != 0)
        surface = torch.where(under, 0, torch.where(surfaces, 1, surface))
        # with all six aboard: empty the sub and pay for the oxygen left (the count still
        # drops by one after, to -1, as in the package)
        full = surfaces & (divers_aboard == MAX_DIVERS)
        reward = reward + torch.where(full, oxygen * 10 // MAX_OXYGEN, 0)
        divers_aboard = torch.where(full, 0, divers_aboard) - surfaces.to(int16)
        oxygen = torch.where(surfaces, MAX_OXYGEN, oxygen)
        if self.ramping:
            harder = surfaces & ((spawn_speed > 1) | (move_speed > 2))
            move_speed = move_speed - (harder & (move_speed > 2) & (ramp % 2 == 1)).to(int16)
            spawn_speed = spawn_speed - (harder & (spawn_speed > 1)).to(int16)
            ramp = ramp + harder.to(int16)

        # the next state, every list in list order with its alive slots first (the free enemy
        # and enemy-bullet slots all 0)
        alive, b_alive = kind.bool(), bullets.bool()
        scalars = [oxygen, divers_aboard, px, py, facing, spawn_speed, spawn_timer, diver_timer]
        scalars += [move_speed, ramp, shot_timer, surface, alive.sum(0), b_alive.sum(0)]
        out[:N_SCALARS] = torch.stack([s.to(int16) for s in scalars])
        out[F_START:D_START] = torch.stack([f_alive.to(int16), fx, fy, f_lr]).view(-1, n)
        d_list = torch.stack([d_alive.to(int16), dx, dy, d_lr, d_timer])
        # the second diver first where the first slot is free
        out[D_START:E_START] = torch.where(d_alive[0], d_list, d_list.flip(1)).view(-1, n)
        e_list = out[E_START:B_START].view(E_FIELDS, E_CAP, n)
        width = min(in_use + 1, E_CAP)
        e_list[:, :width] = _compact(enemies, alive, width)
        e_list[:, width:] = 0
        width = min(bullets.shape[0], B_CAP)
        out[B_START : B_START + width] = _compact(bullets, b_alive, width)
        out[B_START + width :] = 0
        return reward.float(), terminated

    # --- observation ---
    def _fresh_observations(self, rows: torch.Tensor) -> torch.Tensor:
        # differs: every game starts from the same state, observed once
        if self._start is None:
            self._start = self._observe(self._sample_initial(1))
        return self._start

    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        n = game.shape[0]
        g = game.t()  # (GAME_DIM, n): a row per column of the state
        # the cells lit, channel * 100 + y * 10 + x, as rows `(k, n)`; hidden objects go to
        # the sub's front cell, lit anyway (so the grid needs no spare column)
        px, py, facing = g[SUB_X], g[SUB_Y], g[SUB_OR]
        front = py * 10 + px
        # the sub's back cell never leaves the grid (the sub faces right at x=9, left at x=0);
        # the wrap-around matches numpy's index -1 all the same
        rear = py * 10 + (px + 1 - 2 * facing) % 10 + SUB_BACK * 100
        f_alive, fx, fy, _ = g[F_START:D_START].view(F_FIELDS, F_CAP, n)
        codes = g[B_START : B_START + self._in_use(g[BULLET_COUNT], B_CAP)]
        kind, ex, ey, e_lr = g[E_START:B_START].view(E_FIELDS, E_CAP, n)[:4]
        e_width = self._in_use(g[ENEMY_COUNT], E_CAP)
        d_alive, dx, dy, d_lr, _ = g[D_START:E_START].view(D_FIELDS, D_CAP, n)
        # enemies and divers, with their trails: the cells they came from
        shown = torch.cat([kind[:e_width], d_alive]).bool()
        x, y = torch.cat([ex[:e_width], dx]), torch.cat([ey[:e_width], dy])
        body = y * 10 + x
        back = x + 1 - 2 * torch.cat([e_lr[:e_width], d_lr])
        trail = (body - x + back + TRAIL * 100).where(shown & _inside(back), front)
        channel = (kind[:e_width] + (ENEMY_FISH - FISH)) * 100
        body[:e_width] += channel
        body[e_width:] += DIVER * 100
        cells = [front.unsqueeze(0), rear.unsqueeze(0), body.where(shown, front), trail]
        cells.append((fy * 10 + fx + FRIENDLY_BULLET * 100).where(f_alive.bool(), front))
        bullet = ((codes >> 4) & 7) * 10 + (codes & 15) + (ENEMY_BULLET * 100 + 9)
        cells.append(bullet.where(codes != 0, front))
        index = torch.cat(cells).long().t()  # (n, cells)
        grid = torch.empty((n, 10, 10, 10), dtype=torch.bool, device=self.device)
        grid.view(torch.uint8).zero_()  # (faster than filling a bool tensor)
        grid.view(n, 1000).scatter_(1, index, True)
        # the gauges' bottom rows, read from a table of every pair: the oxygen left (a cell
        # per 20, 10 cells when full); the divers aboard, the package's slice [9 - count : 9]
        # (empty for a count of -1 or less)
        oxygen = (g[OXYGEN] // (MAX_OXYGEN // 10)).clamp(0, 10)
        gauges = self._gauges.index_select(0, (oxygen * 8 + g[DIVER_COUNT].clamp(0, 7)).int())
        grid[:, OXYGEN_GAUGE : DIVER_GAUGE + 1, 9] = gauges
        return grid
