"""Policy ensembles (`PolicyEnsemble`, `load_ensemble`, `evaluate` and `xiaoyarl eval` with
several runs): averaged continuous actions, majority votes for discrete ones, each against a
slow reference; clear refusals."""

from __future__ import annotations

import copy
import shutil
from collections import Counter

import pytest
import torch

from xiaoyarl import ConfigError, PolicyEnsemble, evaluate, load_ensemble, load_policy
from xiaoyarl.cli import main
from xiaoyarl.config_io import load_config, save_config


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_run):
    return {name: tiny_run(name) for name in ("ppo-CartPole", "td3-Pendulum")}


def perturbed(policy, seed: int, scale: float = 0.5):
    """A copy of `policy` with noise on every weight: a differently trained member."""
    generator = torch.Generator().manual_seed(seed)
    member = copy.deepcopy(policy)
    with torch.no_grad():
        for p in member.actor.parameters():
            p.add_(scale * torch.randn(p.shape, generator=generator))
    return member


def states(policy, batch: int = 256) -> torch.Tensor:
    return 2.0 * torch.randn(batch, policy.state_dim, generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("name", ["ppo-CartPole", "td3-Pendulum"])
def test_an_ensemble_of_copies_acts_like_the_policy(runs, name):
    policy = load_policy(runs[name])
    ensemble = load_ensemble([runs[name]] * 3)
    obs = states(policy).numpy()
    assert (ensemble.predict(obs) == policy.predict(obs)).all()


def test_continuous_actions_are_the_members_mean(runs):
    base = load_policy(runs["td3-Pendulum"])
    members = [perturbed(base, seed) for seed in range(4)]
    ensemble = PolicyEnsemble(members)
    x = states(base)
    expected = sum(m.act_normalized(x) for m in members) / len(members)
    assert torch.allclose(ensemble.act_normalized(x), expected, atol=1e-6)
    assert not torch.allclose(members[0].act_normalized(x), expected)  # the members differ
    env_units = ensemble.predict(x)  # in the env's bounds, like a member's
    assert (env_units >= base.low).all() and (env_units <= base.high).all()


def test_discrete_actions_are_the_members_vote(runs):
    base = load_policy(runs["ppo-CartPole"])
    members = [perturbed(base, seed, scale=1.0) for seed in range(4)]
    ensemble = PolicyEnsemble(members)
    x = states(base)
    picks = torch.stack([m.act_normalized(x) for m in members]).T.tolist()  # (batch, members)
    expected = []
    for row in picks:  # slow reference: most votes; a tie goes to the first member's choice
        counts = Counter(row)
        best = max(counts.values())
        tied = sorted(a for a, c in counts.items() if c == best)
        expected.append(row[0] if row[0] in tied else tied[0])
    assert sum(len(set(row)) > 1 for row in picks) > 20  # the members disagree often
    assert sum(Counter(row).most_common(2)[-1][1] == 2 for row in picks) > 5  # 2-2 ties occur
    assert ensemble.act_normalized(x).tolist() == expected


def test_sampling_asks_one_member_per_observation(runs):
    base = load_policy(runs["td3-Pendulum"])
    members = [perturbed(base, seed) for seed in range(3)]
    for m in members:
        m.meta = {**m.meta, "explore_noise_std": 0.0}  # sampling = the member's own action
    ensemble = PolicyEnsemble(members)
    x = states(base)
    torch.manual_seed(0)
    sampled = ensemble.sample_normalized(x)
    own = torch.stack([m.act_normalized(x) for m in members])  # (members, batch, 1)
    which = (own == sampled).all(-1).float().argmax(0)
    assert torch.equal(own[which, torch.arange(len(x))], sampled)
    assert set(which.tolist()) == {0, 1, 2}


def test_evaluating_several_runs_scores_their_ensemble(runs, tmp_path, capsys):
    run = runs["td3-Pendulum"]
    alone = evaluate(run, episodes=3, seed=5)
    together = evaluate([run, run], episodes=3, seed=5)
    assert together["returns"] == alone["returns"]
    assert main(["eval", str(run), str(run), "--episodes", "3", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "ensemble of 2 runs over 3 episodes" in out
    assert out.count("alone:") == 2


def test_ensembles_refuse_what_they_cannot_average(runs, tmp_path):
    with pytest.raises(ConfigError, match="different envs"):
        load_ensemble([runs["td3-Pendulum"], runs["ppo-CartPole"]])
    with pytest.raises(ConfigError, match="at least one"):
        PolicyEnsemble([])
    with pytest.raises(ConfigError, match="list of run folders"):
        load_ensemble(runs["td3-Pendulum"])
    heavier = tmp_path / "heavier"  # the same policy, its config on another gravity
    shutil.copytree(runs["td3-Pendulum"], heavier)
    config = load_config(heavier / "config.yaml")
    config.env_kwargs = {"g": 12.0}
    save_config(config, heavier / "config.yaml")
    with pytest.raises(ConfigError, match="an ensemble is evaluated on one env"):
        evaluate([runs["td3-Pendulum"], heavier])
