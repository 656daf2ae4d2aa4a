"""Hello world: PPO learns CartPole-v1 on xiaoyarl's core path, Net -> Agent -> Env -> Run.

What it uses is the library itself, not a copy: the networks and return functions of
`xiaoyarl/core/`, the VecEnv contract and the torch-native CartPole of `xiaoyarl/envs/`, and
the PPO agent of `xiaoyarl/agents/ppo.py` with its own defaults. The loop below is all that
`xiaoyarl train` adds around them in one process, without its run folder, checkpoints, logs and
plots (`xiaoyarl/train/loop.py`). docs/hello-world.md walks through it.

Run: make hello   (or: python examples/hello_world.py [--seed N] [--max-steps N])
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from xiaoyarl.agents.ppo import AgentDiscretePPO
from xiaoyarl.config import Config
from xiaoyarl.envs.base import VecEnv
from xiaoyarl.envs.cartpole import CartPoleEnv


# --8<-- [start:evaluate]
@torch.no_grad()
def evaluate(agent: AgentDiscretePPO, env: VecEnv) -> float:
    """Mean return of one episode per sub-env of `env`, acting greedily (`agent.act`)."""
    state, _ = env.reset()
    returns = torch.zeros(env.spec.num_envs)
    running = torch.ones(env.spec.num_envs, dtype=torch.bool)  # still in its first episode
    while running.any():
        state, reward, terminated, truncated, _ = env.step(agent.act(state))
        returns += reward * running
        running &= ~(terminated | truncated)
    return returns.mean().item()
    # --8<-- [end:evaluate]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=500_000)
    args = parser.parse_args()
    torch.set_num_threads(1)  # small networks: one thread is the fastest on a CPU
    torch.manual_seed(args.seed)  # the networks' initial weights and the agent's sampling

    # --8<-- [start:env]
    # Env: 16 CartPoles stepped together as one batch of tensors (the VecEnv contract:
    # `reset() -> (state, info)`, `step(action) -> (state, reward, terminated, truncated,
    # info)`, each of shape (num_envs, ...), with auto-reset).
    env = CartPoleEnv(num_envs=16, seed=args.seed)
    eval_env = CartPoleEnv(num_envs=100, seed=args.seed + 1)  # 100 episodes per evaluation
    # --8<-- [end:env]

    # --8<-- [start:config]
    # Config: every hyper-parameter has a default; the fields left at None (sizes, rates,
    # normalisation) are PPO's own choices for a batched env on a CPU (`AgentPPO.defaults`).
    config = Config(algo="ppo", env_id="CartPole-v1", seed=args.seed, num_envs=16)
    config = dataclasses.replace(config, **AgentDiscretePPO.defaults(config, True, "cpu"))
    # --8<-- [end:config]

    # --8<-- [start:agent]
    # Net and Agent: the agent builds its actor (a categorical policy), its critic V(s), their
    # Adam optimizers and its observation and reward normalisers (`xiaoyarl/core/nets.py`).
    agent = AgentDiscretePPO(env.spec, config, torch.device("cpu"))
    print(f"actor: {agent.actor.net}\ncritic: {agent.critic.net}")
    # --8<-- [end:agent]

    # --8<-- [start:run]
    # Run: explore for `horizon_len` steps of every sub-env, learn from that rollout (GAE,
    # then epochs of clipped-surrogate mini-batch steps), evaluate now and then.
    state, info = env.reset(seed=args.seed)
    agent.last_state = agent.observe(state, info)
    start, steps, next_eval = time.perf_counter(), 0, 0
    while steps < args.max_steps:
        rollout = agent.explore_env(env, config.horizon_len)
        losses = agent.update_net(rollout)
        steps += rollout.rewards.numel()
        if steps >= next_eval:
            next_eval += config.eval_every
            score = evaluate(agent, eval_env)
            print(f"step {steps:>7,}  {time.perf_counter() - start:5.1f} s  eval return "
                  f"{score:6.1f}  critic loss {losses['critic_loss']:.3f}")  # fmt: skip
            if score >= env.spec.target_return:
                print(f"solved: mean return {score:.1f} >= {env.spec.target_return} over "
                      f"100 episodes after {steps:,} env steps")  # fmt: skip
                return
    print(f"not solved in {args.max_steps:,} env steps")
    # --8<-- [end:run]


if __name__ == "__main__":
    main()
