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

On a CPU a step works only on the enemy and enemy-bullet slots that some sub-env uses (a few in
most games; on an accelerator on all of them, as knowing which would sync with the host), and
on int8 tensors of one shape where it can: comparing those costs a fraction of comparing int64
or float32 tensors, or a tensor with a broadcast column.
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
BULLET_NONE = 126  # the cell of no player bullet (cells are 0..99; -1 & 127 is 127)

# observation channels (the package's order)
SUB_FRONT, SUB_BACK, FRIENDLY_BULLET, TRAIL, ENEMY_BULLET = range(5)
ENEMY_FISH, ENEMY_SUB, OXYGEN_GAUGE, DIVER_GAUGE, DIVER = range(5, 10)


# --- rows of slots, `(n, width)` ---
def _spread(x: torch.Tensor, width: int) -> torch.Tensor:
    """`(n,)` small integers -> `(n, width)` int8, each row its value `width` times.

    Comparing two tensors of one shape is several times faster on a CPU than comparing a
    tensor with a broadcast column, so a per-sub-env value is spread once and compared often."""
    return x.to(torch.int8).unsqueeze(1).expand(-1, width).contiguous()


def _any(mask: torch.Tensor) -> torch.Tensor:
    """`(n, width)` bool -> `(n,)`: whether a row has a True slot (faster than `.any(1)`)."""
    return mask.sum(1) > 0


def _inside(x: torch.Tensor) -> torch.Tensor:
    """Whether each column `x` (int8) is on the grid, 0..9 (faster than two comparisons)."""
    return x == x.clamp(0, 9)


def _cells(x: torch.Tensor, y: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
    """int8 cells `y * 10 + x` of the alive slots, -1 for the others (x, y on the grid)."""
    return (y * 10 + x + 1) * alive - 1


def _pick(
    bullet: torch.Tensor, order: torch.Tensor, reduce: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each player bullet, the enemy slot that takes it: of the slots in its cell (`bullet`
    `(n, width)` int8, see `SeaquestEnv._bullet_at`), the one of least (`reduce` "amin") or
    greatest ("amax") `order` (int8, distinct within a row). Returns `(taken (n, width) bool,
    hit (n, F_CAP) bool)`."""
    none = 127 if reduce == "amin" else -1
    table = torch.full((bullet.shape[0], 1 + F_CAP), none, dtype=torch.int8, device=order.device)
    index = bullet.long()
    table.scatter_reduce_(1, index, order, reduce)  # column 0 gathers the slots of no bullet
    taken = (bullet > 0) & (order == table.gather(1, index))
    return taken, table[:, 1:] != none


# --- enemy bullets: one int8 code each ---
# 0 for none, else (x + 1) + 16 * (y - 1) - 128 * lr: x + 1 (1..10) in the low 4 bits, y - 1
# (0..7) in the next 3, the direction in the sign. A move adds +1 or -1 to the low 4 bits only
# (x + 1 becomes 0 or 11 when the bullet leaves the grid), the low 7 bits are the cell, and a
# list of codes is compacted with one scatter.
def _bullet_codes(x: torch.Tensor, y: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
    """The codes (int8) of bullets at `x`, `y` moving right where `lr` (int8 tensors)."""
    return (x + 1) + 16 * (y - 1) + lr * -128


def _bullet_fields(codes: torch.Tensor) -> torch.Tensor:
    """Codes `(n, m)` -> the enemy-bullet fields alive, x, y, lr `(n, B_FIELDS, m)` int8 (all 0
    for a free slot)."""
    alive = codes.bool()
    x = ((codes & 15) - 1) * alive
    y = (((codes >> 4) & 7) + 1) * alive
    return torch.stack([alive.to(torch.int8), x, y, (codes >> 7) & 1], 1)


def _compact(fields: torch.Tensor, cap: int, alive: torch.Tensor) -> torch.Tensor:
    """A list's slots `(fields, n, width)` with alive slots `alive` `(n, width)` -> `(fields,
    n, cap)`: the alive ones at the front, in their order (at most `cap`), the others all 0."""
    slot = torch.where(alive, alive.cumsum(1) - 1, cap).clamp(max=cap)  # cap: a spare slot
    spare = fields.new_zeros((fields.shape[0], fields.shape[1], cap + 1))
    return spare.scatter_(2, slot.expand_as(fields), fields)[:, :, :cap]


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
        self._slot = torch.arange(E_CAP + 1, dtype=torch.int8, device=device)  # slot numbers
        self._bullet_ids = torch.arange(1, F_CAP + 1, dtype=torch.int8, device=device)
        self._cols = torch.arange(10, dtype=torch.float32, device=device)
        self._left9 = self._cols < 9  # the diver gauge's cells
        self._oxygen_cell = (self._cols + 1) * (MAX_OXYGEN // 10)  # the oxygen lighting each cell
        self._column_cache: dict[int, torch.Tensor] = {}
        self._channel_cache: dict[
            tuple[int, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]
        ] = {}

    def _in_use(self, alive: torch.Tensor) -> int:
        """The slots of a list `(n, cap)` (alive flags or kinds, >= 0) up to the last one in use
        in any sub-env: on a CPU a step works on these only (most slots are empty in most
        games); on an accelerator on all, as knowing which would sync with the host."""
        if self.device.type != "cpu":
            return alive.shape[1]
        used = alive.sum(0).tolist()  # (a column sum: faster than any reduction of flags)
        return max((k + 1 for k, v in enumerate(used) if v), default=0)

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
        # the step itself is `_game_step_into`, which writes the next states in place
        next_game = torch.empty((game.shape[0], GAME_DIM), device=self.device)
        reward, terminated = self._game_step_into(game, action, next_game)
        return next_game, reward, terminated

    def _game_step_into(
        self, game: torch.Tensor, action: torch.Tensor, next_game: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = game.shape[0]
        # the scalars, player bullets and divers as int16; the enemy and enemy-bullet lists read
        # on the slots in use only
        head = game[:, :E_START].to(torch.int16)
        s = head[:, :N_SCALARS].unbind(1)
        oxygen, divers_aboard, facing = s[OXYGEN], s[DIVER_COUNT], s[SUB_OR]
        px, py = s[SUB_X], s[SUB_Y]
        spawn_speed, spawn_timer, diver_timer = s[SPAWN_SPEED], s[SPAWN_TIMER], s[DIVER_TIMER]
        move_speed, ramp, shot_timer, surface = s[MOVE_SPEED], s[RAMP], s[SHOT_TIMER], s[SURFACE]
        f_alive, fx, fy, f_lr = head[:, F_START:D_START].view(n, F_FIELDS, F_CAP).unbind(1)
        d_alive, dx, dy, d_lr, d_timer = head[:, D_START:].view(n, D_FIELDS, D_CAP).unbind(1)
        f_alive, d_alive = f_alive > 0, d_alive > 0
        # the enemies as int8 (field, n, slot) on the slots in use, one more for a spawn and a
        # spare one (the spawn slot of the sub-envs with no spawn)
        e_list = game[:, E_START:B_START].view(n, E_FIELDS, E_CAP)
        in_use = self._in_use(e_list[:, 0])
        width = in_use + 1
        enemies = torch.zeros((E_FIELDS, n, width), dtype=torch.int8, device=self.device)
        enemies[:, :, :in_use] = e_list[:, :, :in_use].transpose(0, 1)
        kind, ex, ey, e_lr, e_timer, e_shot = enemies.unbind(0)  # views: updated in place
        # the enemy bullets as codes, on the slots in use
        b_in_use = self._in_use(game[:, B_START : B_START + B_CAP])
        b_list = game.gather(1, self._bullet_columns(b_in_use).expand(n, -1)).to(torch.int8)
        b_alive, bx, by, b_lr = b_list.view(n, B_FIELDS, b_in_use).unbind(1)
        bullets = _bullet_codes(bx, by, b_lr) * b_alive
        # every random number of the step, drawn for all sub-envs (used where a spawn is due):
        # enemy direction, enemy is a sub, enemy row, diver direction, diver row
        u = torch.rand((n, 5), generator=self.generator, device=self.device)
        e_right, d_right = (u[:, ::3] < 0.5).unbind(1)
        e_is_sub = u[:, 1] < 1 / 3
        e_row, d_row = ((u[:, 2::2] * 8).long().clamp(max=7) + 1).unbind(1)  # randint(1, 9)

        # an enemy spawns when its timer is up, at an edge of a random row, unless that row
        # holds an enemy heading the other way (the timer restarts either way); it joins the
        # end of the list (alive slots first)
        alive = kind.bool()
        lane = ey * 2 + e_lr  # row and direction
        blocked = _any(alive & (lane == _spread(e_row * 2 + 1 - e_right.long(), width)))
        count = alive.sum(1)
        spawn = (spawn_timer == 0) & ~blocked & (count < E_CAP)  # (never full: see E_CAP)
        new = [torch.where(e_is_sub, SUB, FISH), torch.where(e_right, 0, 9), e_row, e_right]
        new += [move_speed, torch.full_like(move_speed, ENEMY_SHOT_INTERVAL)]
        new_enemy = torch.stack(new).to(torch.int8) * spawn  # (field, n); all 0: no spawn
        at = torch.where(spawn, count, width - 1).view(1, n, 1).expand(E_FIELDS, n, 1)
        enemies.scatter_(2, at, new_enemy.unsqueeze(2))
        spawn_timer = torch.where(spawn_timer == 0, spawn_speed, spawn_timer)
        # a diver spawns every 30 steps, at an edge of a random row
        spawn = diver_timer == 0
        free = ~d_alive
        first = free & (free.cumsum(1) == 1) & spawn.unsqueeze(1)  # the first free slot
        d_alive = d_alive | first
        dx = torch.where(first, torch.where(d_right, 0, 9).unsqueeze(1), dx)
        dy = torch.where(first, d_row.unsqueeze(1), dy)
        d_lr = torch.where(first, d_right.long().unsqueeze(1), d_lr)
        d_timer = torch.where(first, DIVER_MOVE_INTERVAL, d_timer)
        diver_timer = torch.where(spawn, DIVER_SPAWN_SPEED, diver_timer)

        # the player: fire from the sub's cell (when cooled down), or move; a blocked "fire"
        # does nothing; moving sideways turns the sub
        fire = (action == 5) & (shot_timer == 0)
        free = ~f_alive
        first = free & (free.cumsum(1) == 1) & fire.unsqueeze(1)
        f_alive = f_alive | first
        fx = torch.where(first, px.unsqueeze(1), fx)
        fy = torch.where(first, py.unsqueeze(1), fy)
        f_lr = torch.where(first, facing.unsqueeze(1), f_lr)
        shot_timer = torch.where(fire, SHOT_COOL_DOWN, shot_timer)
        left, right = action == 1, action == 3
        px = (px - left.long() + right.long()).clamp(0, 9)
        py = (py - (action == 2).long() + (action == 4).long()).clamp(0, 8)
        facing = torch.where(left, 0, torch.where(right, 1, facing))
        player = (py * 10 + px).unsqueeze(1)  # (n, 1) the sub's cell

        # player bullets move; one meeting enemies kills the first fish of the list there, else
        # the first sub. Bullets never share a cell (one heading left stays left of the sub, one
        # heading right stays right of it, and two heading the same way are fired 5 steps
        # apart and both move a cell a step), so they never compete for an enemy and the
        # package's bullet-by-bullet loop is done for all bullets at once here.
        fx = fx + f_alive.long() * (2 * f_lr - 1)
        f_alive = f_alive & (fx >= 0) & (fx <= 9)
        targets = torch.where(f_alive, fy * 10 + fx, BULLET_NONE)  # (n, F_CAP) cells
        is_sub = kind == torch.full_like(kind, SUB)
        order = is_sub.to(torch.int8) * E_CAP + self._slot[:width]  # fish before subs, in order
        bullet = self._bullet_at(_cells(ex, ey, kind.bool()), targets)
        killed, hit = _pick(bullet, order, "amin")
        kind.mul_(~killed)
        f_alive = f_alive & ~hit
        targets = torch.where(hit, BULLET_NONE, targets)
        reward = hit.sum(1)

        # divers, newest first (the package walks its list backwards): one at the sub's cell
        # boards while fewer than 6 are aboard, else it moves (when its timer is up) and boards
        # if that takes it onto the sub. Both divers move at once here: one that boards before
        # moving is removed, and one that cannot board moves off the sub's cell, so only the
        # boarding waits for the newer diver's.
        at_sub = (dy * 10 + dx) == player
        move = d_alive & (d_timer == 0)
        d_timer = torch.where(move, DIVER_MOVE_INTERVAL, d_timer - d_alive.long())
        dx = dx + move.long() * (2 * d_lr - 1)
        gone = move & ((dx < 0) | (dx > 9))
        reaches = d_alive & (at_sub | (move & ~gone & ((dy * 10 + dx) == player)))
        boards = []
        for k in reversed(range(D_CAP)):
            boards.append(reaches[:, k] & (divers_aboard < MAX_DIVERS))
            divers_aboard = divers_aboard + boards[-1].long()
        d_alive = d_alive & ~gone & ~torch.stack(boards[::-1], 1)

        # enemies move: the package's loop over its subs, then (after the enemy bullets, which
        # meet no enemy) its loop over its fish. Each enemy hits the player where it stands;
        # when its timer is up it moves a cell and leaves the grid, hits the player, or runs
        # into a player bullet (which kills both, +1). Both loops walk their list backwards: of
        # the subs entering a bullet's cell, the newest takes the bullet; the fish find the
        # bullets the subs took gone, and of the fish entering a cell, the newest takes it.
        alive = kind.bool()
        is_sub = is_sub & alive
        player = _spread(player.squeeze(1), width)
        cells = _cells(ex, ey, alive)
        touch = cells == player
        move = alive & ~e_timer.bool()
        e_timer.add_(move * _spread(move_speed + 1, width) - alive.to(torch.int8))
        step = move * (2 * e_lr - 1)
        ex.add_(step)
        cells = cells + step
        gone = move & ~_inside(ex)
        moved = move & ~gone
        rams = moved & (cells == player)
        bullet = self._bullet_at(cells, targets) * (moved & ~rams)
        killed, hit = _pick(bullet, order, "amax")  # subs before fish, newest first
        f_alive = f_alive & ~hit
        reward = reward + hit.sum(1)
        terminated = _any(touch | rams)

        # every sub of the list at the start of its loop fires when its timer is up, even one
        # that left the grid or was hit in this step (out of the grid, its bullet is gone at once)
        shoots = is_sub & ~e_shot.bool()
        e_shot.add_(shoots * (ENEMY_SHOT_INTERVAL + 1) - is_sub.to(torch.int8))
        shots = _bullet_codes(ex, ey, e_lr) * (shoots & _inside(ex))
        kind.mul_(~(gone | killed))

        # enemy bullets (the old ones, then the new ones: their order is never read): hit the
        # player before or after moving; leave at the edges
        bullets = torch.cat([bullets, shots], 1)
        player = _spread((px + 1) + 16 * (py - 1), bullets.shape[1])  # codes' low 7 bits
        touch = (bullets & 127) == player  # (a sub at the surface, y = 0, meets no code)
        bullets = bullets - (2 * (bullets >> 7) + 1) * bullets.bool()  # +1 right, -1 left
        column = bullets & 15  # x + 1, 0 or 11 off the grid
        bullets = bullets * (column == column.clamp(1, 10))
        touch |= (bullets & 127) == player
        terminated |= _any(touch)

        # timers, oxygen, surfacing
        spawn_timer = (spawn_timer - 1).clamp(min=0)
        diver_timer = (diver_timer - 1).clamp(min=0)
        shot_timer = (shot_timer - 1).clamp(min=0)
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

        # the next state, every list in list order with its alive slots first (the free enemy
        # and enemy-bullet slots all 0)
        out = next_game
        scalars = [oxygen, divers_aboard, px, py, facing, spawn_speed, spawn_timer, diver_timer]
        out[:, :N_SCALARS] = torch.stack(scalars + [move_speed, ramp, shot_timer, surface], 1)
        out[:, F_START:D_START] = torch.stack([f_alive.long(), fx, fy, f_lr], 1).flatten(1)
        d_list = torch.stack([d_alive.long(), dx, dy, d_lr, d_timer], 1)
        swap = (~d_alive[:, :1]).long()  # the second diver first if the first slot is free
        d_list = d_list.gather(2, torch.cat([swap, 1 - swap], 1).unsqueeze(1).expand_as(d_list))
        out[:, D_START:E_START] = d_list.flatten(1)
        out[:, E_START:].zero_()  # the enemy and enemy-bullet lists: then their slots in use
        e_list = out[:, E_START:B_START].view(n, E_FIELDS, E_CAP)
        e_width = min(width, E_CAP)
        e_list[:, :, :e_width] = _compact(enemies, e_width, kind.bool()).transpose(0, 1)
        b_list = out[:, B_START:].view(n, B_FIELDS, B_CAP)
        b_width = min(bullets.shape[1], B_CAP)
        b_list[:, :, :b_width] = _bullet_fields(_compact(bullets[None], b_width, bullets.bool())[0])
        return reward.float(), terminated

    def _bullet_columns(self, width: int) -> torch.Tensor:
        """The game-state columns `(1, B_FIELDS * width)` int64 of the first `width` enemy-bullet
        slots, field-major (one gather of them costs a third of copying the strided slice)."""
        if width not in self._column_cache:
            columns = [B_START + f * B_CAP + k for f in range(B_FIELDS) for k in range(width)]
            self._column_cache[width] = torch.tensor(columns, device=self.device).unsqueeze(0)
        return self._column_cache[width]

    def _bullet_at(self, cells: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """int8 cells `(n, width)` (-1 for none) and the player bullets' cells `(n, F_CAP)`
        (`BULLET_NONE` for none) -> `(n, width)` int8: 1 + the index of the bullet in each slot's
        cell, 0 for none (bullets never share a cell)."""
        table = torch.zeros((cells.shape[0], 128), dtype=torch.int8, device=self.device)
        table.scatter_(1, targets.long(), self._bullet_ids.expand(cells.shape[0], -1))
        return table.gather(1, (cells & 127).long())  # -1 reads column 127, never a bullet's

    # --- observation ---
    def _object_channels(
        self, e_width: int, b_width: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per object `(1, m)`, objects in the order player bullets, enemy bullets (the first
        `b_width` slots), enemies (the first `e_width`), divers: the game-state columns of its
        first field (alive flag or kind), x, y and lr `(1, 4 * m)` int64, field-major; the
        channel of its body * 100 (float); and the channel's increase per unit of its first
        field (float: 100 for enemies, whose kinds 1 and 2 are drawn on channels of their own;
        0 for the others, whose first field is an alive flag)."""
        key = (e_width, b_width)
        if key not in self._channel_cache:
            # (start, capacity, width, channel, per kind) of each list
            lists = [(F_START, F_CAP, F_CAP, FRIENDLY_BULLET, 0)]
            lists += [(B_START, B_CAP, b_width, ENEMY_BULLET, 0)]
            lists += [
                (E_START, E_CAP, e_width, ENEMY_FISH - FISH, 1),
                (D_START, D_CAP, D_CAP, DIVER, 0),
            ]
            columns = [
                start + f * cap + k
                for f in range(4)
                for start, cap, m, *_ in lists
                for k in range(m)
            ]
            base = [100.0 * channel for _, _, m, channel, _ in lists for _ in range(m)]
            per_kind = [100.0 * k for _, _, m, _, k in lists for _ in range(m)]
            columns_t, base_t, per_kind_t = (
                torch.tensor(v, device=self.device).unsqueeze(0) for v in (columns, base, per_kind)
            )
            self._channel_cache[key] = (columns_t, base_t, per_kind_t)
        return self._channel_cache[key]

    def _game_observe(self, game: torch.Tensor) -> torch.Tensor:
        n = game.shape[0]
        # every object's kind (or alive flag), x, y and lr `(n, m)`, on the slots in use, read
        # with one gather
        e_list = game[:, E_START:B_START].view(n, E_FIELDS, E_CAP)
        b_list = game[:, B_START:].view(n, B_FIELDS, B_CAP)
        e_width, b_width = self._in_use(e_list[:, 0]), self._in_use(b_list[:, 0])
        columns, base, per_kind = self._object_channels(e_width, b_width)
        kind, x, y, lr = game.gather(1, columns.expand(n, -1)).view(n, 4, -1).unbind(1)
        alive = kind.clamp(max=1)
        # the sub's back cell never leaves the grid (the sub faces right at x=9, left at x=0);
        # the wrap-around matches numpy's index -1 all the same
        px, py, facing = game[:, SUB_X : SUB_OR + 1].split(1, 1)  # (n, 1) each
        front = py * 10 + px
        rear = py * 10 + (px + 1 - 2 * facing) % 10 + SUB_BACK * 100
        # flat indices channel * 100 + y * 10 + x; hidden objects go to the sub's front cell,
        # lit anyway (so the grid needs no spare column)
        bodies = (base + kind * per_kind + y * 10 + x - front).mul_(alive).add_(front)
        # trails of the enemies and divers (the last objects): the cells they came from
        movers = slice(F_CAP + b_width, None)
        back = x[:, movers] + 1 - 2 * lr[:, movers]
        shown = alive[:, movers] * (back == back.clamp(0, 9))
        trails = (y[:, movers] * 10 + back + TRAIL * 100 - front).mul_(shown).add_(front)
        index = torch.cat([front, rear, bodies, trails], 1).long()
        grid = torch.empty((n, 1000), dtype=torch.bool, device=self.device)
        grid.view(torch.uint8).zero_()  # (faster than filling a bool tensor)
        grid.scatter_(1, index, True)
        # the gauges' bottom rows: the oxygen left (10 cells when full); the divers aboard, the
        # package's slice [9 - count : 9] (empty for a count of -1 or less)
        oxygen = game[:, OXYGEN : OXYGEN + 1]
        grid[:, OXYGEN_GAUGE * 100 + 90 : OXYGEN_GAUGE * 100 + 100] = self._oxygen_cell <= oxygen
        aboard = (self._cols >= 9 - game[:, DIVER_COUNT : DIVER_COUNT + 1]) & self._left9
        grid[:, DIVER_GAUGE * 100 + 90 : DIVER_GAUGE * 100 + 100] = aboard
        return grid.view(n, 10, 10, 10)
