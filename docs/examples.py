"""The runnable examples of the documentation (README.md and docs/), as steps to run in order.

Which code blocks run, and how:
- a block with a title (```yaml title="search.yaml"```) is a file: it is written, under its
  title, into the page's folder for the examples after it;
- ```python blocks run, each in a fresh namespace, in the page's order, in one folder per page;
- ```bash blocks run their `xiaoyarl ...` commands (backslash continuations joined, comments
  dropped) through the CLI's `main`, in the same order and folder;
- both on a tiny budget: the budgets, sizes and episode counts of an example are rewritten
  (`max_steps=1_000_000` -> 2048, `--max-steps N` -> 1024, `--trials 20` -> 2, ...), so an
  example shows real budgets and still runs in seconds;
- not run: install and set-up lines (`make`, `pip`, `source`, `export`, `git`), which CI runs
  itself; `python examples/...` (tests/test_examples.py runs each example) and `python
  benchmarks/...` (benchmarks never run in the tests); snippets of files (`--8<--`), which are
  those examples; ```text output; and a block preceded by `<!-- not run: REASON -->` (a GPU,
  several machines, a server), which must give its reason;
- a command that needs an optional extra that is not installed is reported as skipped, with
  the extra's name; a command that needs a GPU is skipped where torch sees none.

Run as a script (`python docs/examples.py STEPS.json`) it executes the steps in the
current folder and prints one JSON line per step; tests/test_docs.py drives it. Not
pytest-markdown-docs: it runs Python blocks as written, and these need their budgets rewritten.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```",
    flags=re.S | re.M,
)
NOT_RUN = re.compile(r"<!-- not run: (?P<why>[^>]*?) -->\s*$")
SETUP = ("make ", "pip ", "source ", "export ", "git ", "cd ")
NOT_RUN_COMMANDS = {"python examples/": "tests/test_examples.py runs the examples",
                    "python benchmarks/": "benchmarks never run inside the tests",
                    "bash benchmarks/": "it runs on a GPU machine (the tests run gpu.py "
                                        "--dry-run)"}  # fmt: skip

# CLI flags -> the tiny value they get (flags of train, population, tune, eval)
TINY_FLAGS = {"--max-steps": "1024", "--trials": "2", "--members": "2",
              "--generation-steps": "512", "--pod-steps": "512", "--eval-every": "512",
              "--episodes": "2", "--num-envs": "16", "--timeout": "60"}  # fmt: skip
TRAINS = ("train", "population", "tune")


def pages() -> list[Path]:
    """README.md and every page of the site's source."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def commands(body: str) -> list[str]:
    """The command lines of a bash block: continuations joined, comments and blanks dropped."""
    joined = body.replace("\\\n", " ")
    lines = [line.split(" #")[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def tiny_argv(line: str) -> list[str]:
    """`xiaoyarl ...` as an argv for `main`, with a tiny budget."""
    argv = shlex.split(line)[1:]
    argv = [TINY_FLAGS.get(prev, arg) if prev in TINY_FLAGS else arg
            for prev, arg in zip(["", *argv[:-1]], argv, strict=True)]  # fmt: skip
    if argv and argv[0] in TRAINS and "--resume" not in argv[1:2]:
        for flag in ("--max-steps", "--eval-every"):
            if flag not in argv:
                argv += [flag, TINY_FLAGS[flag]]
        if "--eval-episodes" not in argv:
            argv += ["--eval-episodes", "2"]
    if argv and argv[0] == "train" and "--resume" in argv and "--max-steps" not in argv:
        argv += ["--max-steps", "2048"]
    return argv


def tiny_python(code: str) -> str:
    """A Python example with its budgets and sizes made tiny."""
    code = re.sub(r"max_steps=[\d_]+", "max_steps=2048", code)
    code = re.sub(r"num_envs=4096", "num_envs=64", code).replace("(4096,", "(64,")
    code = code.replace("torch.rand(4096,", "torch.rand(64,")
    return re.sub(r"episodes=\d+", "episodes=2", code)


def steps(path: Path, root: Path = ROOT) -> list[dict]:
    """The steps of one page, in order: {kind: python|cli|skip, what, where}."""
    text = path.read_text()
    found = []
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        where = f"{path.relative_to(root)}:{line}"
        lang, body = match.group("lang"), match.group("body")
        body = "\n".join(row[len(match.group("indent")) :] for row in body.splitlines())
        before = text[: match.start()].rstrip().splitlines()[-1:] or [""]
        marked = NOT_RUN.search(before[0])
        title = re.search(r'title="([^"]+)"', match.group("info"))
        if title and not marked:  # a file the page's examples use, e.g. search.yaml
            found.append({"kind": "file", "what": body + "\n", "where": where,
                          "name": title.group(1)})  # fmt: skip
            continue
        if lang not in ("python", "bash"):
            continue
        if marked:
            found.append({"kind": "skip", "what": marked.group("why"), "where": where})
        elif "--8<--" in body:
            continue  # a file of examples/, which tests/test_examples.py runs
        elif lang == "python":
            found.append({"kind": "python", "what": tiny_python(body), "where": where})
        else:
            for command in commands(body):
                found.append(_command_step(command, where))
    return found


def _command_step(command: str, where: str) -> dict:
    if command.startswith("xiaoyarl "):
        return {"kind": "cli", "what": tiny_argv(command), "where": where, "line": command}
    if command.startswith(SETUP):
        return {"kind": "skip", "what": f"install or make step: {command}", "where": where}
    for prefix, why in NOT_RUN_COMMANDS.items():
        if command.startswith(prefix):
            script = ROOT / command.split()[1]
            if not script.is_file():
                return {"kind": "missing", "what": f"{command}: no file {script}", "where": where}
            return {"kind": "skip", "what": f"{command}: {why}", "where": where}
    return {"kind": "unknown", "what": command, "where": where}


def _missing_extra(output: str) -> str | None:
    found = re.search(r"pip install -e '\.\[([\w-]+)\]'", output)
    return found.group(1) if found else None


def run_step(step: dict) -> dict:
    """Run one step here; its outcome: ok | failed | skipped, with what it printed."""
    import torch

    out = io.StringIO()
    status = "ok"
    if step["kind"] == "file":
        Path(step["name"]).write_text(step["what"])
        return {"status": "ok", "output": ""}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            if step["kind"] == "python":
                exec(compile(step["what"], step["where"], "exec"), {"__name__": "__docs__"})
            else:
                argv = step["what"]
                if any("cuda" in a for a in argv) and not torch.cuda.is_available():
                    return {"status": "skipped", "why": "needs a GPU", "output": ""}
                from xiaoyarl.cli import main

                status = "ok" if main(argv) == 0 else "failed"
    except SystemExit as stop:  # argparse's errors
        status = "ok" if stop.code in (0, None) else "failed"
    except Exception:
        traceback.print_exc(file=out)
        status = "failed"
    output = out.getvalue()
    extra = _missing_extra(output) if status == "failed" else None
    if extra:
        return {"status": "skipped", "why": f"the '{extra}' extra is not installed", "output": ""}
    return {"status": status, "output": output[-4000:]}


def main() -> None:
    for step in json.loads(Path(sys.argv[1]).read_text()):
        print(json.dumps({"where": step["where"], **run_step(step)}), flush=True)


if __name__ == "__main__":
    main()
