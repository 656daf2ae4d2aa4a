"""Fixtures shared by the test files (a test file never imports another).

The tiers (README, "Development"): `make test` runs the fast tier, every test without a marker
of the full tier (learning, docs, bench, distributed, slow); `make test-all` runs every test.
The markers are registered, and the fast tier selected, in pyproject.toml.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import signal
import subprocess
import sys
import tokenize
import traceback
import warnings
from pathlib import Path

import pytest
import torch

import xiaoyarl

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# the tests' own env modules (action_envs, pixel_envs, ...) are named by `module:Id` env ids
sys.path.insert(0, str(TESTS))
torch.set_num_threads(1)

PACKAGE_DIR = Path(xiaoyarl.__file__).parent  # as tracebacks print it (not resolved)
# the markers of the full tier (pyproject.toml's addopts leaves them out of the fast tier)
FULL_TIER = ("learning", "docs", "bench", "distributed", "slow", "seeds")

# A tiny but complete PPO run on the torch-native CartPole: 16 envs x 16 steps per rollout.
TINY = ("--num-envs", "16", "--set", "horizon_len=16", "--threads", "1", "--eval-episodes", "2")


def pytest_collection_modifyitems(config, items):
    """The learning tests first (the longest: started first, they leave the short ones to
    fill the cores at the end), in their files' order otherwise; a test of the full tier has
    15 minutes unless it sets its own timeout (the fast tier's default is pyproject.toml's);
    a `cuda` test is skipped, saying why, where torch sees no CUDA device."""
    items.sort(key=lambda item: item.get_closest_marker("learning") is None)  # stable
    for item in items:  # the full tier's runs: 15 minutes each unless a test says otherwise
        if not item.get_closest_marker("timeout") and any(
            item.get_closest_marker(name) for name in FULL_TIER
        ):
            item.add_marker(pytest.mark.timeout(900))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (run `pytest -m cuda` on a GPU machine)")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)


# ---------------------------------------------------------------------------------------------
# the command line in a fresh process


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """`xiaoyarl ARGS` run to its end: its exit code and text output as a CompletedProcess.

    In this process, through the CLI's `main` (what `python -m xiaoyarl` runs), with its
    output, working folder, warnings, signal handlers and torch's settings its own and restored
    after: a new Python spends seconds importing torch before it does anything, which hundreds
    of calls would pay. With `env` (variables the command must see from its start), or with
    torchrun's learner ranks (`--learners`, whose output is their own processes'), it runs in a
    new process, as a user's shell would start it; `timeout` bounds that process (in this one,
    the test's own timeout does).
    """
    if env or "--learners" in args:  # torchrun's ranks print from processes of their own
        return subprocess.run(
            [sys.executable, "-m", "xiaoyarl", *map(str, args)], capture_output=True,
            text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout,
        )  # fmt: skip
    from xiaoyarl.cli import main

    argv = [str(arg) for arg in args]
    out, err = io.StringIO(), io.StringIO()
    folder, threads, dtype = os.getcwd(), torch.get_num_threads(), torch.get_default_dtype()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            with warnings.catch_warnings():  # shown on stderr each time, as in a new process
                warnings.simplefilter("always")
                warnings.showwarning = _show_on_stderr
                try:
                    code = main(argv)
                except SystemExit as e:  # argparse's usage errors, --help, --version
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                except Exception:  # as Python reports an uncaught exception: traceback, 1
                    traceback.print_exc()
                    code = 1
    finally:
        os.chdir(folder)
        torch.set_num_threads(threads)
        torch.set_default_dtype(dtype)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return subprocess.CompletedProcess(["xiaoyarl", *argv], code, out.getvalue(), err.getvalue())


def _show_on_stderr(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def start_cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    """Start `python -m xiaoyarl ARGS` (text pipes for its output); the caller ends it."""
    return subprocess.Popen(
        [sys.executable, "-m", "xiaoyarl", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.fixture
def cli():
    """`cli(*args, cwd=None, env=None, timeout=120)`: `xiaoyarl ARGS` run to its end (a
    CompletedProcess with text output); see `run_cli`."""
    return run_cli


@pytest.fixture
def popen():
    """`popen(*args, env=None)`: `python -m xiaoyarl ARGS` started (a Popen with text pipes)."""
    return start_cli


@pytest.fixture
def tiny() -> list[str]:
    """The command-line options of a tiny but complete PPO run on the torch-native CartPole."""
    return list(TINY)


def frames_of_library(text: str) -> list[str]:
    """The lines of `text` that are Python traceback frames in the library's own files.

    Matched by the package's full path, so a clone whose path contains 'xiaoyarl/' (and a torch
    C++ trace that prints the path of the venv inside it) is not taken for one.
    """
    return [line for line in text.splitlines() if f'File "{PACKAGE_DIR}{os.sep}' in line]


@pytest.fixture
def library_frames():
    """`library_frames(text)`: the traceback frames of `text` in the library's own files."""
    return frames_of_library


@pytest.fixture
def package_dir() -> Path:
    """The package's folder as tracebacks print it (not resolved)."""
    return PACKAGE_DIR


# ---------------------------------------------------------------------------------------------
# tiny trained runs, each trained once per test process

_TINY_COMMON = {"threads": 1, "eval_episodes": 2, "seed": 0}
# name -> Config fields; the same tiny settings as TINY / OFF_POLICY in the CLI tests
TINY_RUNS = {
    "ppo-CartPole": {"algo": "ppo", "env_id": "CartPole-v1", "num_envs": 16, "horizon_len": 16,
                     "max_steps": 512, "eval_every": 256},
    "ppo-Pendulum": {"algo": "ppo", "env_id": "Pendulum-v1", "num_envs": 16, "horizon_len": 16,
                     "max_steps": 512, "eval_every": 256},
    "td3-Pendulum": {"algo": "td3", "env_id": "Pendulum-v1", "num_envs": 4, "max_steps": 256,
                     "eval_every": 256, "learning_starts": 128, "batch_size": 32,
                     "net_dims": [32]},
    "ppo-gru-CartPoleNoVelocity": {"algo": "ppo", "env_id": "CartPoleNoVelocity-v1",
                                   "recurrent": "gru", "recurrent_dim": 8, "num_envs": 16,
                                   "horizon_len": 16, "max_steps": 512, "eval_every": 256},
    "sac-gru-PendulumNoVelocity": {"algo": "sac", "env_id": "PendulumNoVelocity-v1",
                                   "recurrent": "gru", "recurrent_dim": 8, "num_envs": 4,
                                   "max_steps": 256, "eval_every": 256, "learning_starts": 128,
                                   "batch_size": 32, "net_dims": [32]},
    "mappo-SpreadDiscrete": {"algo": "mappo", "env_id": "SpreadDiscrete-v0", "num_envs": 8,
                             "horizon_len": 32, "max_steps": 512, "eval_every": 256},
    "mappo-mpe2-spread": {"algo": "mappo", "env_id": "mpe2:simple_spread_v3", "num_envs": 4,
                          "horizon_len": 25, "max_steps": 200, "eval_every": 100},
    "ppo-MinAtar-Breakout": {"algo": "ppo", "env_id": "MinAtar/Breakout-v1", "num_envs": 8,
                             "horizon_len": 64, "max_steps": 1024, "eval_every": 1024},
}  # fmt: skip


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """`tiny_run(name)`: the run folder of `TINY_RUNS[name]`, trained on first use.

    Trained in this process through `train_agent` (the same path as `xiaoyarl train`), which
    saves a process start per run: the runs only need a saved best policy, not a good one.
    Treat the folder as read-only (copy it to change it).
    """
    from xiaoyarl import train_agent
    from xiaoyarl.config_io import config_from_dict

    root = tmp_path_factory.mktemp("tiny_runs")
    trained: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in trained:
            run_dir = root / name
            config = config_from_dict({**_TINY_COMMON, **TINY_RUNS[name], "cwd": str(run_dir)})
            threads = torch.get_num_threads()
            train_agent(config, log=None)
            torch.set_num_threads(threads)
            assert (run_dir / "actor.pt").is_file()
            trained[name] = run_dir
        return trained[name]

    return get


# ---------------------------------------------------------------------------------------------
# off-policy agents built small, and the batches and values their targets are checked with


def _off_policy_algos() -> dict:
    from xiaoyarl import agents

    return {agents.AgentDQN: "dqn", agents.AgentDoubleDQN: "double_dqn",
            agents.AgentD3QN: "d3qn", agents.AgentDDPG: "ddpg", agents.AgentTD3: "td3",
            agents.AgentSAC: "sac", agents.AgentModSAC: "modsac",
            agents.AgentSACDiscrete: "sac_discrete", agents.AgentREDQ: "redq"}  # fmt: skip


OFF_POLICY_ALGOS = _off_policy_algos()


@pytest.fixture(params=list(OFF_POLICY_ALGOS), ids=list(OFF_POLICY_ALGOS.values()))
def off_policy_cls(request):
    """Each single-agent off-policy agent class (one test per class)."""
    return request.param


def build_off_policy_agent(cls, num_envs=4, **overrides):
    """A small `cls` agent on CartPole-v1 (discrete) or Pendulum-v1, and its env, reset."""
    from xiaoyarl import Config, make_env
    from xiaoyarl.agents.settings import resolve_config

    env_id = "CartPole-v1" if cls.if_discrete else "Pendulum-v1"
    values = {"net_dims": [32, 32], "buffer_size": 4096, "learning_starts": 16, "batch_size": 8}
    config = Config(algo=OFF_POLICY_ALGOS[cls], env_id=env_id, num_envs=num_envs,
                    **{**values, **overrides})  # fmt: skip
    config = resolve_config(config, batched=True)
    env = make_env(env_id, num_envs, seed=0)
    torch.manual_seed(0)
    agent = cls(env.spec, config, torch.device("cpu"))
    agent.last_state, _ = env.reset(seed=0)
    return agent, env


@pytest.fixture
def make_agent():
    """`make_agent(cls, num_envs=4, **config_fields)`: a small off-policy agent and its env."""
    return build_off_policy_agent


def off_policy_batch(agent, size=6):
    """A fixed random replay batch of `size` transitions in `agent`'s spaces."""
    from xiaoyarl.core.buffer import Batch

    g = torch.Generator().manual_seed(1)
    s = agent.spec
    if s.if_discrete:
        actions = torch.randint(s.action_dim, (size,), generator=g)
    else:
        actions = torch.rand(size, s.action_dim, generator=g) * 2 - 1
    return Batch(
        states=torch.randn(size, s.state_dim, generator=g), actions=actions,
        rewards=torch.randn(size, generator=g), terminals=torch.tensor([True, False] * (size // 2)),
        next_states=torch.randn(size, s.state_dim, generator=g),
        indices=torch.arange(size), weights=torch.ones(size),
        discounts=torch.full((size,), agent.config.gamma),
    )  # fmt: skip


@pytest.fixture
def batch_for():
    """`batch_for(agent, size=6)`: a fixed random replay batch in the agent's spaces."""
    return off_policy_batch


def target_next_value(agent, batch):
    """V'(s') of the agent's TD target for `batch`: its target with no reward, no terminal and
    a discount of 1."""
    plain = batch._replace(rewards=torch.zeros_like(batch.rewards),
                           terminals=torch.zeros_like(batch.terminals),
                           discounts=torch.ones_like(batch.discounts))  # fmt: skip
    return agent.td_target(plain)


@pytest.fixture
def next_value():
    """`next_value(agent, batch)`: V'(s') inside the agent's TD target for `batch`."""
    return target_next_value


# ---------------------------------------------------------------------------------------------
# references written the slow, obvious way


def textbook_lambda_returns(rewards, next_values, terminals, truncates, gamma, lam):
    """The textbook recursion, one sub-env and one step at a time, in Python floats."""
    steps, envs = rewards.shape
    out = [[0.0] * envs for _ in range(steps)]
    for n in range(envs):
        later = None  # G_{t+1}; none past the rollout's last step
        for t in reversed(range(steps)):
            r, v = float(rewards[t, n]), float(next_values[t, n])
            if terminals[t, n]:
                g = r
            elif truncates[t, n] or later is None:
                g = r + gamma * v
            else:
                g = r + gamma * ((1 - lam) * v + lam * later)
            out[t][n] = later = g
    return torch.tensor(out)


@pytest.fixture
def slow_lambda_returns():
    """`slow_lambda_returns(rewards, next_values, terminals, truncates, gamma, lam)`: lambda-
    returns by the textbook recursion (time-major `(steps, envs)` inputs)."""
    return textbook_lambda_returns


def count_code_lines(path: str) -> int:
    """Lines of code in a Python file: without blank lines, comments and docstrings."""
    source = Path(path).read_text()
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    skipped = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
               tokenize.ENDMARKER}  # fmt: skip
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skipped:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - docstrings)


@pytest.fixture
def code_lines():
    """`code_lines(path)`: lines of code of a Python file, without blanks, comments, docstrings."""
    return count_code_lines


def _graphed_replays_equal_eager(graphed, eager, steps: int = 8) -> None:
    """`steps` gradient steps of two agents alike but for CUDA graphs (3 eager warm-up steps, a
    capture, then replays) on the same replayed batches and device draws: the same logs, and
    the same weights after (the model-based agents' `model`)."""
    for i in range(steps):
        torch.manual_seed(100 + i)
        batch = graphed.sample_batch()
        torch.cuda.manual_seed(i)
        logs_graphed = graphed.gradient_step(batch)
        torch.cuda.manual_seed(i)
        logs_eager = eager.gradient_step(batch)
        for name in logs_eager:
            assert torch.allclose(logs_graphed[name], logs_eager[name], rtol=1e-4, atol=1e-5), name
    assert graphed.update_runner.step.graphs
    for a, b in zip(graphed.model.parameters(), eager.model.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.fixture
def graphed_replays_equal_eager():
    """`check(graphed, eager)`: two agents alike but for CUDA graphs take the same steps (the
    model-based agents' cuda tests)."""
    return _graphed_replays_equal_eager
