"""Package `__init__` files load lazily (PEP 562): every public name still resolves, importing
one module loads only what it uses, and every module imports when it is the first one loaded
(an import circle hidden by the eager order would show there)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = [
    "xiaoyarl",
    "xiaoyarl.agents",
    "xiaoyarl.agents.multi",
    "xiaoyarl.envs",
    "xiaoyarl.envs.multi",
    "xiaoyarl.finance",
]
PACKAGE_DIR = Path(__file__).resolve().parent.parent / "xiaoyarl"
# `xiaoyarl/__main__.py` runs the command line when imported
MODULES = sorted(
    ".".join(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts).removesuffix(".__init__")
    for path in PACKAGE_DIR.rglob("*.py")
    if path.name != "__main__.py"
)
# what `import xiaoyarl` loads to register the torch-native envs with gymnasium (README): no
# simulator (`envs/gym_registration.py`)
GYMNASIUM_REGISTRATION = {
    "xiaoyarl",
    "xiaoyarl.envs",
    "xiaoyarl.envs.gym_registration",
    "xiaoyarl.lazy",
}

# Imports `name` as the first xiaoyarl module of a process and prints what that loaded as JSON.
# `fork` mode imports torch, numpy and gymnasium once (none of xiaoyarl), then forks a child
# per module, so each child starts without xiaoyarl, as a fresh interpreter would, in a
# fraction of the time.
PROBE = r"""
import importlib, json, os, sys, traceback

def probe(name):
    try:
        importlib.import_module(name)
        status, detail = "ok", ""
    except ModuleNotFoundError as e:  # an optional dependency is missing: skip; ours: fail
        optional = bool(e.name) and e.name.split(".")[0] != "xiaoyarl"
        status, detail = ("skip" if optional else "fail"), traceback.format_exc()
    except BaseException:
        status, detail = "fail", traceback.format_exc()
    files = {n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())
             if n == "xiaoyarl" or n.startswith("xiaoyarl.")}
    return {"name": name, "status": status, "detail": detail, "modules": files,
            "pandas": "pandas" in sys.modules, "matplotlib": "matplotlib" in sys.modules}

if sys.argv[1] == "one":
    print(json.dumps(probe(sys.argv[2])))
else:
    import gymnasium, numpy, torch  # noqa: F401
    results = []
    for name in sys.argv[2:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            with os.fdopen(write, "w") as out:
                out.write(json.dumps(probe(name)))
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as inp:
            text = inp.read()
        os.waitpid(pid, 0)
        results.append(json.loads(text) if text else {"name": name, "status": "fail",
                                                        "detail": "the child died", "modules": {}})
    print(json.dumps(results))
"""


def first_imports(names: list[str]) -> dict[str, dict]:
    """For each module name, what importing it first in a fresh process loaded."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if hasattr(os, "fork"):
        run = subprocess.run([sys.executable, "-c", PROBE, "fork", *names], capture_output=True,
                             text=True, env=env, timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stderr
        results = json.loads(run.stdout.splitlines()[-1])
    else:
        results = []
        for name in names:
            run = subprocess.run([sys.executable, "-c", PROBE, "one", name], capture_output=True,
                                 text=True, env=env, timeout=120)  # fmt: skip
            assert run.returncode == 0, run.stderr
            results.append(json.loads(run.stdout.splitlines()[-1]))
    return {r["name"]: r for r in results}


def loaded_lines(result: dict, code_lines) -> int:
    return sum(code_lines(f) for f in result["modules"].values() if f)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_listed(package):
    module = importlib.import_module(package)
    # the names the package gives are those its type stub declares (xiaoyarl/lazy.py)
    stub = ast.parse(Path(module.__file__).with_suffix(".pyi").read_text())
    declared = next(
        ast.literal_eval(node.value)
        for node in stub.body
        if isinstance(node, ast.Assign) and ast.unparse(node).startswith("__all__")
    )
    assert sorted(declared) == module.__all__
    for name in module.__all__:
        assert getattr(module, name) is not None, (package, name)
        exec(f"from {package} import {name}", {})
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def test_lazy_names_are_the_defining_modules_objects():
    import xiaoyarl
    from xiaoyarl import agents, envs, run
    from xiaoyarl.envs import classic, multi

    assert xiaoyarl.train_agent is run.train_agent
    assert envs.CLASSIC_ENVS is classic.TORCH_ENVS
    # the registries are built once: one dict that make_env / agent_class read
    assert agents.ALGORITHMS is agents.ALGORITHMS and envs.TORCH_ENVS is envs.TORCH_ENVS
    assert set(envs.TORCH_ENVS) >= set(classic.TORCH_ENVS) | {"StockTrading-v0", "Chase-v0"}
    assert set(multi.MULTI_AGENT_ENVS) == {"SpreadDiscrete-v0", "SpreadContinuous-v0",
                                           "TwoStepGame-v0"}  # fmt: skip
    assert agents.agent_class("ppo", envs.make_env("CartPole-v1").spec) is agents.AgentDiscretePPO


def test_importing_one_module_loads_only_what_it_uses(code_lines):
    targets = ["xiaoyarl", "xiaoyarl.core.nets", "xiaoyarl.envs.classic", "xiaoyarl.agents.ppo"]
    results = first_imports(targets)
    for name in targets:
        result = results[name]
        assert result["status"] == "ok", result["detail"]
        print(f"\nimport {name}: {len(result['modules'])} xiaoyarl modules, "
              f"{loaded_lines(result, code_lines)} lines of code")  # fmt: skip
        assert not result["pandas"] and not result["matplotlib"], name
    # the package itself only registers the torch-native envs with gymnasium
    assert set(results["xiaoyarl"]["modules"]) == GYMNASIUM_REGISTRATION
    classic = {"xiaoyarl.envs.base", "xiaoyarl.envs.cartpole", "xiaoyarl.envs.classic",
               "xiaoyarl.envs.targets", "xiaoyarl.errors"}  # fmt: skip
    assert set(results["xiaoyarl.envs.classic"]["modules"]) == GYMNASIUM_REGISTRATION | classic
    core = {"xiaoyarl.core", "xiaoyarl.core.nets"}
    assert set(results["xiaoyarl.core.nets"]["modules"]) == GYMNASIUM_REGISTRATION | core
    # PPO: its base, config, the core blocks it uses; no other agent, no add-on (the H-term),
    # no off-policy networks, replay buffer or CUDA graphs, no runner, no finance.
    ppo = set(results["xiaoyarl.agents.ppo"]["modules"])
    assert {m for m in ppo if m.startswith("xiaoyarl.agents.")} == {
        "xiaoyarl.agents.base",
        "xiaoyarl.agents.ppo",
    }
    unused = {"xiaoyarl.core.off_policy_nets", "xiaoyarl.core.buffer", "xiaoyarl.core.graphs"}
    assert not ppo & unused
    higher = ("xiaoyarl.train", "xiaoyarl.scale", "xiaoyarl.population", "xiaoyarl.finance",
              "xiaoyarl.envs.multi")  # fmt: skip
    assert not {m for m in ppo if m.startswith(higher)}
    assert not ppo & {"xiaoyarl.cli", "xiaoyarl.policy", "xiaoyarl.finance.env"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_module_imports_first_in_a_fresh_interpreter():
    results = first_imports(MODULES)
    failed = {n: r["detail"] for n, r in results.items() if r["status"] == "fail"}
    assert not failed, "\n".join(f"{n}:\n{d}" for n, d in failed.items())
    skipped = sorted(n for n, r in results.items() if r["status"] == "skip")
    print(f"\n{len(MODULES) - len(skipped)} modules import first; skipped (optional "
          f"dependency missing): {skipped or 'none'}")  # fmt: skip
