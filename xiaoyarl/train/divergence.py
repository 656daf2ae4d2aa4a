"""Noticing a run that diverges: losses or values that are not finite, or that outgrow what the
rewards seen so far allow (`on_divergence`).

A value estimate can be no larger than the largest return the rewards allow,
`R = max |reward| / (1 - gamma)` (the largest reward seen so far; with gamma 1, times the time
limit). A soft (entropy-regularised) value carries a bonus on top of each reward,
`alpha * entropy` per step (SAC and its kin, which log `alpha` and `entropy`): up to
`alpha * log |A|` with discrete actions, of either sign with continuous ones. Where an update
logs both, the largest `|alpha * entropy|` seen so far joins the largest reward in R. A bonus
beyond `SLACK ** 2` times the larger of that reward and the first bonus seen (the starting
temperature's) is itself flagged as "alpha * entropy": a temperature that runs away (as at a
learning rate of 0.9, to 1e5) is divergence, and does not lift the bound with it. (So is one
chasing an entropy no policy of the task reaches: discrete SAC's former target on CartPole
drove its bonus from 0.7 to 101 in 22k steps; with a reachable target it stays below 1.)

The guard flags a logged Q or value estimate (a key with "q_value" or "value" in its name)
beyond `SLACK * R`, and a loss (a key with "loss") beyond `(SLACK * R)^2`, the squared
error of such a value; either when it is not finite; any other logged scalar when it is
infinite (NaN there means "not computed yet", as the H-term's while its buffer fills). A
healthy run stays far inside (its values are at most R); a diverging one (a Q-value of 1e11
where the returns are -150) crosses long before it overflows. The checks are tensor operations
on the logs the update already returns; the flag is read back from the device every
`check_every` updates.

The rewards are those the loop sees: a multi-agent run's team reward (the sum of the agents'
where they are not shared). In a task whose agents' rewards cancel in that sum (zero-sum,
competitive), an agent's own value can exceed the bound it gives: use `on_divergence: warn`
there.
"""

from __future__ import annotations

import math

import torch

SLACK = 10.0
BONUS = "alpha * entropy"  # the name a soft value's per-step bonus is flagged under

ADVICE = ("What usually helps: a lower learning_rate, reward normalisation (reward_norm, "
          "where the algorithm has it), gradient clipping (a lower clip_grad_norm), a lower "
          "gamma.")  # fmt: skip


class DivergenceGuard:
    """Watches each update's logged scalars against the rewards seen so far."""

    def __init__(self, gamma: float, max_step: int, device: torch.device) -> None:
        self.gamma = gamma
        self.horizon = 1 / (1 - gamma) if gamma < 1 else float(max_step)
        self.check_every = 1 if device.type == "cpu" else 50  # a read back syncs an accelerator
        self.largest_reward = torch.ones((), device=device)  # at least 1: no bound below SLACK
        self.largest_bonus = torch.zeros((), device=device)  # |alpha * entropy|, soft values'
        self.first_bonus: torch.Tensor | None = None  # ... at the starting temperature
        self.flagged: dict[str, torch.Tensor] = {}  # per scalar: was it ever beyond its bound
        self.values: dict[str, torch.Tensor] = {}  # ... and its value the first time it was
        self.calls = 0

    def bonus_bound(self) -> torch.Tensor:
        """The largest `|alpha * entropy|` allowed `()`: `SLACK ** 2` times the larger of the
        largest reward and the first bonus."""
        first = self.first_bonus if self.first_bonus is not None else self.largest_bonus
        return SLACK**2 * torch.maximum(self.largest_reward, first)

    def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(the largest value allowed, the largest loss allowed) `()` each, from the rewards."""
        bonus = torch.minimum(self.largest_bonus, self.bonus_bound())
        value = SLACK * self.horizon * (self.largest_reward + bonus)
        return value, value.square()

    @staticmethod
    def beyond(name: str, x: torch.Tensor, value: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
        """Whether the logged scalar `name` is not finite or beyond its bound (`value` for a
        value estimate, `loss` for a loss), `()` bool."""
        if "loss" in name:
            return ~torch.isfinite(x) | (x.abs() > loss)
        if "value" in name:  # q_value, value
            return ~torch.isfinite(x) | (x.abs() > value)
        return torch.isinf(x)  # NaN: a quantity not computed yet (the H-term's, as it fills)

    def observe(self, logs: dict[str, torch.Tensor], rewards: torch.Tensor) -> str | None:
        """Take in one update's logs and its rollout's rewards; when the run has diverged (read
        back every `check_every` calls), a message naming the first quantity that did."""
        self.largest_reward = torch.maximum(self.largest_reward, rewards.detach().abs().max())
        checked = dict(logs)
        if "alpha" in logs and "entropy" in logs:  # a soft value's per-step bonus
            bonus = (logs["alpha"].detach() * logs["entropy"].detach()).abs().float()
            if self.first_bonus is None:
                self.first_bonus = torch.nan_to_num(bonus, nan=0.0, posinf=0.0)
            checked[BONUS] = bonus
            self.largest_bonus = torch.maximum(
                self.largest_bonus, torch.nan_to_num(bonus, nan=0.0, posinf=0.0)
            )
        value, loss = self.bounds()
        for name, x in checked.items():
            x = x.detach().float()
            if name == BONUS:
                bad = ~torch.isfinite(x) | (x > self.bonus_bound())
            else:
                bad = self.beyond(name, x, value, loss)
            before = self.flagged.get(name, torch.zeros_like(bad))
            self.values[name] = torch.where(before, self.values.get(name, x), x)
            self.flagged[name] = before | bad
        self.calls += 1
        if self.calls % self.check_every or not self.flagged:
            return None
        if not bool(torch.stack(list(self.flagged.values())).any()):  # one read back
            return None
        name = next(name for name, flag in self.flagged.items() if bool(flag))
        first = float(self.values[name])
        if not math.isfinite(first):
            return f"{name} = {first} is not finite"
        if name == BONUS:
            return (f"{BONUS} = {first:.3g}, beyond {float(self.bonus_bound()):.3g}: the "
                    f"entropy bonus of soft values should stay within {SLACK**2:g} times the "
                    f"larger of the largest reward (|r| <= {float(self.largest_reward):.3g}) "
                    f"and its first value; the temperature ran away")  # fmt: skip
        bound = float(loss if "loss" in name else value)
        what = "the squared error of a value" if "loss" in name else "a value"
        largest_bonus = float(self.largest_bonus)
        soft = f", entropy bonus alpha * H <= {largest_bonus:.3g}" if largest_bonus else ""
        return (f"{name} = {first:.3g}, beyond {bound:.3g}: {what} should stay within {SLACK:g} "
                f"times the largest return the rewards seen so far allow (|r| <= "
                f"{float(self.largest_reward):.3g}{soft}, gamma {self.gamma:g})")  # fmt: skip
