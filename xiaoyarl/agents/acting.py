"""A trained actor's exploring action, from the actor alone: one definition of what
"sampled" means, shared by the evaluator (`eval_deterministic: false`), `Policy.predict(...,
deterministic=False)`, `xiaoyarl eval` and `xiaoyarl record`, so that a policy is scored, kept
as the best and later replayed alike.

The actor classes of core/ explore in different ways: a sample of a stochastic policy (PPO, A2C,
SAC, discrete SAC, the Gumbel-softmax actors of MADDPG and MATD3), epsilon-greedy for
Q-networks, Gaussian noise on a deterministic actor (DDPG, TD3). The final exploration of
training is used (`explore_rate`, `explore_noise_std`), not a schedule's value at some step.
Action masks (agents/masked.py, the multi-agent agents) are honoured by both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from xiaoyarl.core.off_policy_nets import QNet

if TYPE_CHECKING:
    from xiaoyarl.config import Config


def allowed_or_all(mask: torch.Tensor) -> torch.Tensor:
    """`mask` `(B, A)`, with every action allowed in rows that allow none (a terminal state's
    mask, which no target reads, or a padding row): a max over no action is undefined."""
    return mask | ~mask.any(-1, keepdim=True)


def masked_greedy(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The best allowed action `(B,)` of Q-values `(B, A)`."""
    return q.masked_fill(~allowed_or_all(mask), -torch.inf).argmax(-1)


def random_allowed(mask: torch.Tensor) -> torch.Tensor:
    """A uniformly random allowed action `(B,)` per row of `mask` `(B, A)`."""
    return torch.multinomial(allowed_or_all(mask).float(), 1).squeeze(1)


@torch.no_grad()
def sampled_action(actor: nn.Module, state: torch.Tensor, avail: torch.Tensor | None = None, *,
                   explore_rate: float, noise_std: float) -> torch.Tensor:  # fmt: skip
    """An action per row of `state` (as `actor` reads it) as the agent explores, among the
    allowed actions `avail` `(B, A)` bool where given; continuous actions in [-1, 1]."""
    net: Any = actor  # the actor classes differ in their methods: found here, in one place
    if isinstance(actor, QNet):  # epsilon-greedy among the allowed actions
        q = actor.q_values(state)
        if avail is None:
            greedy, random = q.argmax(-1), torch.randint(q.shape[-1], q.shape[:-1], device=q.device)
        else:
            greedy, random = masked_greedy(q, avail), random_allowed(avail)
        explore = torch.rand(greedy.shape, device=greedy.device) < explore_rate
        return torch.where(explore, random, greedy)
    if hasattr(net, "sample"):  # discrete SAC: a sample of the categorical policy
        return net.sample(state) if avail is None else net.sample(state, allowed_or_all(avail))
    if hasattr(net, "logits"):  # Gumbel-softmax actors: a sample of the softmax
        logits = net.logits(state)
        if avail is not None:
            logits = logits.masked_fill(~avail, -torch.inf)
        return torch.multinomial(logits.softmax(-1), 1).squeeze(1)
    if hasattr(net, "get_action"):  # PPO, A2C: a sample, clipped as the env receives it
        action = net.get_action(state)[0] if avail is None else net.get_action(state, avail)[0]
        return net.convert_action_for_env(action)
    if hasattr(net, "get_action_logprob"):  # SAC: a squashed Gaussian sample
        return net.get_action_logprob(state)[0]
    action = net(state)  # DDPG, TD3: Gaussian noise
    return (action + torch.randn_like(action) * noise_std).clamp(-1.0, 1.0)


def sampling_policy(actor: nn.Module, config: Config) -> Callable[..., torch.Tensor]:
    """`(state[, avail]) -> action`: `actor`'s exploring action with the config's final
    exploration, the policy the evaluator runs where `eval_deterministic` is false."""
    return functools.partial(sampled_action, actor, explore_rate=config.explore_rate,
                             noise_std=config.explore_noise_std)  # fmt: skip
