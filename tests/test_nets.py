"""The hand-written sampling and log-probabilities in `nets.py` and `off_policy_nets.py` against
torch.distributions."""

import math

import torch
from torch.distributions import Categorical, Normal
from torch.nn import functional as F

from xiaoyarl.core.nets import ActorDiscretePPO, ActorPPO, RunningNorm, sample_categorical
from xiaoyarl.core.off_policy_nets import ActorSAC


def test_sample_categorical_follows_the_probabilities():
    torch.manual_seed(0)
    probs = torch.tensor([0.2, 0.0, 0.5, 0.3])
    logprobs = probs.log().expand(200_000, 4)
    actions = sample_categorical(logprobs)
    assert actions.dtype == torch.int64 and actions.shape == (200_000,)
    freq = torch.bincount(actions, minlength=4).float() / actions.numel()
    assert freq[1] == 0  # a zero-probability action is never drawn
    assert torch.allclose(freq, probs, atol=0.005), freq


def test_sample_categorical_never_takes_a_masked_action_at_the_extreme_draws(monkeypatch):
    """Masked rows whose allowed probabilities sum, after rounding, below the largest uniform
    draw (1 - 2^-24), or a draw of exactly 0 with a masked first action: the walk must land on
    an allowed action, not on the last (masked) one or the first."""
    from xiaoyarl.core.nets import MASKED_LOGIT

    torch.manual_seed(3)
    logits = torch.randn(20_000, 7)
    mask = torch.rand(20_000, 7) < 0.6
    mask[:, -1] = False  # the last action masked in every row
    mask[:, 0] = False  # and the first
    mask[torch.arange(20_000), torch.randint(1, 6, (20_000,))] = True  # one allowed at least
    logprobs = logits.masked_fill(~mask, MASKED_LOGIT).log_softmax(-1)
    exposed = logprobs.exp().cumsum(-1)[:, -1] < 1 - 2**-24
    assert exposed.any()  # rows the old walk sent to the masked last action
    for draw in (1 - 2**-24, 0.0):
        monkeypatch.setattr(
            torch,
            "rand",
            lambda *shape, device=None, d=draw: torch.full(
                shape[0] if len(shape) == 1 else shape, d, device=device
            ),
        )
        actions = sample_categorical(logprobs)
        assert mask.gather(1, actions[:, None]).all(), draw


def test_discrete_actor_matches_categorical():
    torch.manual_seed(0)
    actor = ActorDiscretePPO(3, 4, [16, 16], RunningNorm(3))
    states, actions = torch.randn(64, 3), torch.randint(4, (64,))
    dist = Categorical(logits=actor.net(states))
    logprob, entropy = actor.get_logprob_entropy(states, actions)
    assert torch.allclose(logprob, dist.log_prob(actions), atol=1e-6)
    assert torch.allclose(entropy, dist.entropy(), atol=1e-6)
    sampled, sampled_logprob = actor.get_action(states)
    assert torch.allclose(sampled_logprob, dist.log_prob(sampled), atol=1e-6)


def test_gaussian_actor_matches_normal():
    torch.manual_seed(0)
    actor = ActorPPO(3, 2, [16, 16], RunningNorm(3))
    states, actions = torch.randn(64, 3), torch.randn(64, 2)
    dist = Normal(actor.net(states), actor.action_std_log.exp())
    logprob, entropy = actor.get_logprob_entropy(states, actions)
    assert torch.allclose(logprob, dist.log_prob(actions).sum(-1), atol=1e-5)
    assert torch.allclose(entropy, dist.entropy().sum(-1), atol=1e-6)
    sampled, sampled_logprob = actor.get_action(states)
    assert torch.allclose(sampled_logprob, dist.log_prob(sampled).sum(-1), atol=1e-5)


def test_squashed_gaussian_logprob_and_its_gradient_match_normal():
    actor = ActorSAC(3, 2, [16, 16], RunningNorm(3))
    states = torch.randn(64, 3)
    torch.manual_seed(1)
    action, logprob = actor.get_action_logprob(states)
    grads = torch.autograd.grad(logprob.sum(), list(actor.net.parameters()))

    torch.manual_seed(1)
    mean, log_std = actor.net(states).chunk(2, -1)
    std = log_std.clamp(-20, 2).exp()
    u = mean + std * torch.randn_like(mean)
    squash = 2 * (math.log(2) - u - F.softplus(-2 * u))
    reference = (Normal(mean, std).log_prob(u) - squash).sum(-1)
    reference_grads = torch.autograd.grad(reference.sum(), list(actor.net.parameters()))
    assert torch.allclose(action, u.tanh(), atol=1e-6)
    assert torch.allclose(logprob, reference, atol=1e-5)
    for g, r in zip(grads, reference_grads, strict=True):
        assert torch.allclose(g, r, atol=1e-4)
