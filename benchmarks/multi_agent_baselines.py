"""Reference team returns of cooperative navigation (`SpreadDiscrete-v0`, `SpreadContinuous-v0`,
and mpe2's original `mpe2:simple_spread_v3` through the PettingZoo adapter, both action kinds).

The spread envs have no "solved" threshold (`spec.target_return` is None); a learner is judged
against two reference policies, measured here as the mean team return (the sum over agents of
their rewards, summed over the 25-step episode) over `--episodes` episodes:

- R_random: every agent acts uniformly at random (discrete: one of the 5 moves; continuous: 5
  numbers uniform in [-1, 1]).
- R_heur: a hand-written centralized policy. Each step, agents are assigned to landmarks by the
  assignment that minimises the total agent-landmark distance (all N! permutations), and each
  agent steers straight at its landmark, ignoring the others (collisions may happen). Discrete:
  the move whose predicted position is nearest to the landmark, where "predicted" is two steps
  ahead (an action changes the velocity, which moves the agent one step later) with no
  further force and no contacts; the no-op wins when the agent is on its landmark and still.
  Continuous: the force per axis, clipped to the action bounds, that would put the predicted
  position exactly on the landmark, written as mpe2's 5-number action.

Both policies read the global state (agent positions, velocities, landmarks): the built-in
env's `info["state"]`; for mpe2, rebuilt from the agents' observations (each holds its own
velocity and position, then the landmarks relative to it), with the built-in twin's physics
constants (the same as mpe2's: dt 0.1, damping 0.25, sensitivity 5).

An env is named by its id, with `+continuous` for mpe2's continuous-action variant
(`env_kwargs={continuous_actions: true}`):

    python benchmarks/multi_agent_baselines.py --episodes 1000 --seed 0 --json baselines.json
    python benchmarks/multi_agent_baselines.py --envs mpe2:simple_spread_v3 \
        mpe2:simple_spread_v3+continuous
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from typing import cast

import torch

from xiaoyarl.envs.multi import MultiAgentVecEnv, SpreadEnv, make_multi_agent_env, team_reward

ENV_IDS = ("SpreadDiscrete-v0", "SpreadContinuous-v0")
MPE2_IDS = ("mpe2:simple_spread_v3", "mpe2.simple_spread_v3:parallel_env")
CONTINUOUS = "+continuous"  # suffix of an mpe2 id: its continuous-action variant


def env_arguments(name: str) -> tuple[str, dict | None]:
    """The env id and env kwargs of a benchmark env name (`id` or `id+continuous`)."""
    if name.endswith(CONTINUOUS):
        return name.removesuffix(CONTINUOUS), {"continuous_actions": True}
    return name, None


def twin(name: str) -> SpreadEnv:
    """The built-in env of the same task and action kind: its constants and action layout."""
    env_id, kwargs = env_arguments(name)
    if env_id in ENV_IDS:
        return cast(SpreadEnv, make_multi_agent_env(env_id, 1))
    if env_id not in MPE2_IDS:
        raise SystemExit(f"{name}: not cooperative navigation; choose from {ENV_IDS + MPE2_IDS}")
    return cast(SpreadEnv, make_multi_agent_env(ENV_IDS[1] if kwargs else ENV_IDS[0], 1))


def global_state(env: MultiAgentVecEnv, info: dict) -> torch.Tensor:
    """`(n, 6N)` agent positions, velocities and landmark positions (the built-in layout)."""
    if isinstance(env, SpreadEnv):
        return info["state"]
    obs = info["state"].unflatten(1, (env.spec.num_agents, -1))  # mpe2: the observations
    n, num_agents = obs.shape[:2]
    vel, pos = obs[:, :, 0:2], obs[:, :, 2:4]
    landmarks = pos[:, :1] + obs[:, 0, 4 : 4 + 2 * num_agents].unflatten(1, (num_agents, 2))
    return torch.cat([pos.flatten(1), vel.flatten(1), landmarks.flatten(1)], dim=1)


def _split_state(env: SpreadEnv, state: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Agent positions, velocities and landmark positions, each `(n, N, 2)`, of a global state."""
    return state.unflatten(1, (3, env.num_agents, 2)).unbind(1)


def assigned_landmarks(pos: torch.Tensor, landmarks: torch.Tensor) -> torch.Tensor:
    """`(n, N, 2)`: each agent's landmark under the assignment of least total distance."""
    num_agents = pos.shape[1]
    perms = torch.tensor(list(itertools.permutations(range(num_agents))), device=pos.device)
    dist = torch.cdist(pos, landmarks)  # (n, agent, landmark)
    agent_index = torch.arange(num_agents, device=pos.device)
    cost = dist[:, agent_index, perms].sum(-1)  # (n, P): dist[:, i, perm[i]] summed over i
    best = perms[cost.argmin(dim=1)]  # (n, N): landmark of each agent
    return landmarks.gather(1, best.unsqueeze(-1).expand(-1, -1, 2))


def _predicted(env: SpreadEnv, pos: torch.Tensor, vel: torch.Tensor, force: torch.Tensor):
    """Position two steps ahead under `force` now and none later (mpe2's integration)."""
    dt = env.dt
    return pos + vel * dt + (vel * (1.0 - env.damping) + force * dt) * dt


def heuristic_actions(env: SpreadEnv, state: torch.Tensor) -> torch.Tensor:
    """The heuristic's actions for global states `(n, 6N)`: `(n, N)` int64 or `(n, N, 5)`."""
    pos, vel, landmarks = _split_state(env, state)
    target = assigned_landmarks(pos, landmarks)
    if env.spec.if_discrete:
        moves = env._moves  # (5, 2): mpe2's moves times the sensitivity
        predicted = _predicted(env, pos.unsqueeze(2), vel.unsqueeze(2), moves)  # (n, N, 5, 2)
        miss = (predicted - target.unsqueeze(2)).norm(dim=-1)  # (n, N, 5)
        return miss.argmin(dim=-1)  # first minimum: the no-op on a tie
    dt = env.dt
    coast = _predicted(env, pos, vel, torch.zeros_like(vel))
    force = ((target - coast) / (dt * dt)).clamp(-env.sensitivity, env.sensitivity)
    x = force / env.sensitivity  # (n, N, 2) in [-1, 1]: a01[2] - a01[1] and a01[4] - a01[3]
    a01 = torch.zeros(*x.shape[:2], 5, device=x.device)
    a01[..., 2], a01[..., 1] = x[..., 0].clamp(min=0), (-x[..., 0]).clamp(min=0)
    a01[..., 4], a01[..., 3] = x[..., 1].clamp(min=0), (-x[..., 1]).clamp(min=0)
    return a01 * 2.0 - 1.0  # mpe2's [0, 1] -> xiaoyarl's [-1, 1]


def random_actions(env: MultiAgentVecEnv, gen: torch.Generator) -> torch.Tensor:
    spec = env.spec
    if spec.if_discrete:
        return torch.randint(0, 5, (spec.num_envs, spec.num_agents), generator=gen)
    return torch.rand((spec.num_envs, spec.num_agents, 5), generator=gen) * 2.0 - 1.0


def mean_team_return(name: str, policy: str, episodes: int, seed: int) -> tuple[float, float]:
    """Mean and standard error of the team return over `episodes` episodes (one per sub-env)
    of the env `name` (`env_arguments`)."""
    env_id, kwargs = env_arguments(name)
    env = make_multi_agent_env(env_id, episodes, seed=seed, env_kwargs=kwargs)
    physics = twin(name)
    gen = torch.Generator().manual_seed(seed + 1)
    _, info = env.reset(seed=seed)
    returns = torch.zeros(episodes)
    for _ in range(env.spec.max_step):  # every sub-env plays exactly one episode
        if policy == "random":
            actions = random_actions(env, gen)
        else:
            actions = heuristic_actions(physics, global_state(env, info))
        _, rewards, _, truncated, info = env.step(actions)
        returns += team_reward(env.spec, rewards)
    assert truncated.all()
    return returns.mean().item(), (returns.std() / episodes**0.5).item()


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the results to this file")
    parser.add_argument(
        "--envs",
        nargs="*",
        default=list(ENV_IDS),
        help=f"env ids; an mpe2 id with '{CONTINUOUS}': continuous actions",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    results = []
    start = time.perf_counter()
    for env_id in args.envs:
        for policy in ("random", "heuristic"):
            mean, sem = mean_team_return(env_id, policy, args.episodes, args.seed)
            results.append({"env": env_id, "policy": policy, "mean": mean, "sem": sem})
    print(f"N = 3 agents, {args.episodes} episodes each, seed {args.seed} "
          f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    print()
    print("| env | R_random | R_heur |")
    print("|---|---:|---:|")
    for env_id in args.envs:
        r = {x["policy"]: x for x in results if x["env"] == env_id}
        rand, heur = r["random"], r["heuristic"]
        print(
            f"| {env_id} | {rand['mean']:.2f} ± {rand['sem']:.2f} "
            f"| {heur['mean']:.2f} ± {heur['sem']:.2f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"episodes": args.episodes, "seed": args.seed, "results": results}, f,
                      indent=2)  # fmt: skip
    return results


if __name__ == "__main__":
    main()
