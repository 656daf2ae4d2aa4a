"""MkDocs hooks: the pages that are generated from the code, so they cannot drift from it.

- `reference/config.md`: every `Config` field from the config's own metadata, with the
  algorithms that read it and what a null default becomes (`xiaoyarl.cli.config_field_rows`,
  the same rows as `xiaoyarl list --fields`);
- `reference/cli.md`: every command and flag from the parser (`xiaoyarl.cli.build_parser`);
- `guides/algorithms.md`: each algorithm's main defaults, as the agents resolve them;
- `guides/matrix.md`: what works with what, from the agents themselves (`agents/matrix.py`);
- `guides/tuning.md`: the table of task presets, from `xiaoyarl/presets.py` and the files;
- `design.md`: the picture of the layers, from the contract the tests check;
- `benchmarks.md`: BENCHMARKS.md itself, with the plots it shows copied into the site and its
  links to the repository's files shown as file names;
- `getting-started.md`: the demo run's output and its `learning_curve.png`, from the run itself,
  trained while the site builds (`make demo`'s command, seconds on a CPU).

A page asks for a generated part with a marker line such as `<!-- generated: config-fields -->`.
"""

from __future__ import annotations

import argparse
import functools
import html
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "BENCHMARKS.md"
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", flags=re.M)
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _cell(text: object) -> str:
    """Text for a Markdown table cell: pipes escaped, HTML special characters kept as text."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def _show(value: object) -> str:
    if value is None:
        return "null (automatic)"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


def config_fields() -> str:
    """The Config reference: one row per field, anchored by its name (`#field-NAME`)."""
    from xiaoyarl.cli import config_field_rows

    rows = [
        "| field | default | allowed values | read by | what it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in config_field_rows():
        allowed = ", ".join(f"`{c}`" for c in row.choices) if row.choices else ""
        readers = ", ".join(row.readers) if row.readers else "every algorithm"
        what = _cell(row.help)
        if row.automatic:
            what += "<br>**null gives:** " + "<br>".join(_cell(line) for line in row.automatic)
        name = f'<span id="field-{row.name}"></span>`{row.name}`'
        rows.append(f"| {name} | `{_cell(_show(row.default))}` | {allowed} | {readers} | {what} |")
    return "\n".join(rows)


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| flag | what it does | default | allowed values |", "| --- | --- | --- | --- |"]
    for action in parser._actions:  # argparse keeps its options here; it has no public list
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        flag = ", ".join(action.option_strings) or action.dest
        if action.option_strings and action.nargs != 0 and action.metavar:
            flag += f" {action.metavar}"
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else default
        choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
        text = (action.help or "").replace("%(default)s", str(default))
        rows.append(f"| `{_cell(flag)}` | {_cell(text)} | {_cell(shown)} | {choices} |")
    return rows


def cli_commands() -> str:
    """The CLI reference: each command's usage, description and flags, from the parser."""
    from xiaoyarl.cli import build_parser

    parser = build_parser()
    parser.prog = "xiaoyarl"
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = ["```text", parser.format_usage().strip(), "```"]
    for name, command in commands.choices.items():
        parts += [f"## `xiaoyarl {name}`", "", command.description or "", ""]
        parts += ["```text", command.format_usage().strip(), "```", ""]
        parts += _flag_rows(command) + [""]
    return "\n".join(parts)


def _benchmark_link(match: re.Match) -> str:
    """BENCHMARKS.md's links: plots stay images (copied by `on_files`), anchors stay; a link to
    a file of the repository becomes the file's name in code font (the site has no copy)."""
    image, text, target = match.groups()
    if image or target.startswith(("#", "http://", "https://")):
        return match.group(0)
    if target.endswith(".md") or ".md#" in target:
        page = {"README.md": "index.md"}.get(target.split("#")[0])
        if page:
            return f"[{text}]({page})"
    return f"{text} (`{target}`)" if text.strip("`") != target else f"`{target}`"


def benchmarks() -> str:
    """BENCHMARKS.md without its title (the page has its own)."""
    text = BENCHMARKS.read_text()
    text = re.sub(r"\A# .*\n", "", text)
    return LINK.sub(_benchmark_link, text)


def algorithm_defaults() -> str:
    """Each algorithm's main defaults on a torch-native env on a CPU, as the agents resolve them
    (`resolve_config`), so the table is what a run gets."""
    from xiaoyarl.agents import ALGORITHMS
    from xiaoyarl.agents.settings import resolve_config
    from xiaoyarl.config import Config

    fields = ("num_envs", "horizon_len", "batch_size", "repeat_times", "replay_ratio",
              "learning_rate", "gamma", "net_dims")  # fmt: skip
    rows = ["| algorithm | " + " | ".join(f"`{f}`" for f in fields) + " |",
            "| --- " * (len(fields) + 1) + "|"]  # fmt: skip
    for algo in ALGORITHMS:
        config = resolve_config(Config(algo=algo), True, "cpu")
        values = ("-" if getattr(config, f) is None else f"{getattr(config, f)}" for f in fields)
        rows.append(f"| `{algo}` | " + " | ".join(values) + " |")
    return "\n".join(rows)


def presets_table() -> str:
    """Every task preset: the pair, the ids it applies to, its file and the first line of the
    file's provenance comment (`xiaoyarl/presets.py`, the table `xiaoyarl list` prints)."""
    from xiaoyarl.presets import ALGO_PRESETS, CONFIG_DIR, ID_PRESETS, PRESETS, preset_ids

    def provenance(name: str) -> str:
        first = (CONFIG_DIR / name).read_text().splitlines()[0]
        return _cell(first.lstrip("# "))

    rows = ["| algorithm | task | env ids | file | provenance (first line) |",
            "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for (algo, task), name in PRESETS.items():
        ids = ", ".join(f"`{i}`" for i in preset_ids(task))
        rows.append(f"| `{algo}` | {task} | {ids} | `{name}` | {provenance(name)} |")
    for (algo, env_id, task), name in ID_PRESETS.items():
        rows.append(f"| `{algo}` | {task} | `{env_id}` | `{name}` | {provenance(name)} |")
    for algo, name in ALGO_PRESETS.items():
        rows.append(f"| `{algo}` | every other task | | `{name}` | {provenance(name)} |")
    return "\n".join(rows)


def layers_svg() -> str:
    """The layers as an SVG picture, lowest at the bottom, read from the contract the test suite
    checks (`LAYERS` in tests/test_layers.py), so the picture is the rule CI enforces."""
    import ast

    tree = ast.parse((ROOT / "tests" / "test_layers.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "LAYERS")  # fmt: skip
    layers = ast.literal_eval(node.value)
    width, row, gap, left = 640, 34, 8, 150
    height = len(layers) * (row + gap) + gap
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
             f'width="{width}" role="img" aria-label="the layers of xiaoyarl, lowest at the '
             f'bottom; a module imports only from layers below it">']  # fmt: skip
    for i, modules in enumerate(reversed(layers)):
        y = gap + i * (row + gap)
        level = len(layers) - 1 - i
        names = ", ".join(m.removeprefix("xiaoyarl.") for m in modules)
        parts.append(f'<rect x="{left}" y="{y}" width="{width - left - 4}" height="{row}" rx="6" '
                     f'fill="#e8eaf6" stroke="#3f51b5"/>')  # fmt: skip
        parts.append(f'<text x="{left + 12}" y="{y + row / 2 + 5}" font-family="monospace" '
                     f'font-size="14" fill="#1a237e">{html.escape(names)}</text>')  # fmt: skip
        parts.append(
            f'<text x="{left - 12}" y="{y + row / 2 + 5}" text-anchor="end" '
            f'font-family="sans-serif" font-size="13" fill="#555">layer {level}</text>'
        )
    parts.append(f'<line x1="40" y1="{gap + 4}" x2="40" y2="{height - gap - 4}" '
                 f'stroke="#3f51b5" stroke-width="3" marker-end="url(#down)"/>')  # fmt: skip
    parts.append('<defs><marker id="down" markerWidth="10" markerHeight="10" refX="9" refY="5" '
                 'orient="auto" markerUnits="strokeWidth"><path d="M0,0 L9,5 L0,10 z" '
                 'fill="#3f51b5"/></marker></defs>')  # fmt: skip
    parts.append(f'<text x="26" y="{height / 2}" transform="rotate(-90 26 {height / 2})" '
                 f'text-anchor="middle" font-family="sans-serif" font-size="13" '
                 f'fill="#3f51b5">imports go down</text>')  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts)


def layers_picture() -> str:
    """The picture of the layers (`assets/layers.svg`, written by `on_files`)."""
    return ("![The layers of xiaoyarl, lowest at the bottom: a module imports only from the "
            "layers below it](assets/layers.svg)")  # fmt: skip


DEMO = ("train", "ppo", "CartPole-v1", "--seed", "0")  # `make demo`'s command, its folder aside
DEMO_FOLDER = "runs/demo_ppo_cartpole"


@functools.cache
def demo_run() -> tuple[str, Path]:
    """`make demo`'s run, trained now: its output as the console shows it (the evaluation
    lines, without the progress lines a terminal redraws in place) and its run folder."""
    import contextlib
    import io
    import tempfile

    from xiaoyarl.cli import main

    folder = Path(tempfile.mkdtemp(prefix="xiaoyarl-docs-demo-")) / DEMO_FOLDER
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*DEMO, "--cwd", str(folder)])
    if code != 0 or not (folder / "learning_curve.png").is_file():
        raise RuntimeError(f"the demo run failed (exit {code}):\n{out.getvalue()}")
    lines = [line.replace(str(folder), DEMO_FOLDER) for line in out.getvalue().splitlines()
             if not line.startswith("[")]  # fmt: skip
    return "\n".join(lines), folder


def demo_transcript() -> str:
    """What `make demo` printed when this site was built."""
    return "```text\n" + demo_run()[0] + "\n```"


def support_matrix() -> str:
    """What works with what (`xiaoyarl.agents.matrix`): a table per dimension, an algorithm a
    row, "yes" or the refusal's reason (the sentence that names it) in each cell."""
    import torch

    from xiaoyarl.agents.matrix import columns, refusal, single_agent_algorithms

    torch.set_num_threads(1)
    algos = single_agent_algorithms()
    titles = {"actions": "Actions (vector observations)",
              "observations": "Observations (the algorithm's own kind of action)",
              "masks": "Action masks (Discrete actions)",
              "memory": "Memory (vector observations)"}  # fmt: skip
    parts = []
    for table, title in titles.items():
        rows = {}
        for algo in algos:
            rows[f"`{algo}`"] = [_shown(algo, refusal(algo, cell))
                                 for cell in columns(algo)[table].values()]  # fmt: skip
        parts += _table(title, "algorithm", list(columns(algos[0])[table]), rows)
    return "\n".join(parts + multi_agent_table() + scale_table() + tools_table())


def _table(title: str, first: str, heads: list[str], rows: dict[str, list[str]]) -> list[str]:
    """A Markdown table under a heading: `first` names the rows' column, then `heads`."""
    lines = [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows.items()]
    return [f"### {title}", "", f"| {first} | " + " | ".join(heads) + " |",
            "| --- |" + " --- |" * len(heads), *lines, ""]  # fmt: skip


def _shown(algo: str, why: str | None) -> str:
    """A cell of an agents' table: "yes", or "no: " and the refusal's first sentence without
    the algorithm's name."""
    if why is None:
        return "yes"
    return f"no: {_cell(why.split('. ')[0].split(repr(algo) + ' ')[-1])}"


def multi_agent_table() -> list[str]:
    """The multi-agent algorithms' table of `xiaoyarl.agents.matrix`."""
    from xiaoyarl.agents.matrix import (
        MULTI_AGENT_COLUMNS,
        multi_agent_algorithms,
        multi_agent_refusal,
    )

    rows = {}
    for algo in multi_agent_algorithms():
        rows[f"`{algo}`"] = [_shown(algo, multi_agent_refusal(algo, cell))
                             for cell in MULTI_AGENT_COLUMNS.values()]  # fmt: skip
    return _table("Multi-agent algorithms (each agent's vector observations)", "algorithm",
                  list(MULTI_AGENT_COLUMNS), rows)  # fmt: skip


def scale_table() -> list[str]:
    """The scale table of `xiaoyarl.support`: an algorithm a row, "yes" or the reason."""
    from xiaoyarl.support import SCALE, scale_cells, scale_refusal

    rows: dict[str, list[str]] = {}
    for algo, column in scale_cells():
        why = scale_refusal(algo, column)
        reason = None if why is None else why.split("; ")[-1].split(". ")[0]
        label = "runs eagerly" if column == "CUDA graphs" else "no"  # graphs: not a refusal
        shown = "yes" if why is None else f"{label}: {_cell(reason)}"
        rows.setdefault(f"`{algo}`", []).append(shown)
    return _table("Scale (the algorithm's own kind of task)", "algorithm", list(SCALE), rows)


def tools_table() -> list[str]:
    """The kinds of run and the tools of `xiaoyarl.support` that the matrix's test runs."""
    from xiaoyarl.agents.matrix import RUN_KINDS
    from xiaoyarl.support import TOOLS

    rows = {}
    for kind, (algo, env_id, fields) in RUN_KINDS.items():
        memory = f", {fields['recurrent']}" if "recurrent" in fields else ""
        rows[f"{kind}: `{algo}` {env_id}{memory}"] = ["yes" for _ in TOOLS]
    return _table("Tools on every kind of run", "run", list(TOOLS), rows)


GENERATED = {"config-fields": config_fields, "cli-commands": cli_commands,
             "benchmarks": benchmarks, "algorithm-defaults": algorithm_defaults,
             "support-matrix": support_matrix,
             "layers-picture": layers_picture, "presets-table": presets_table,
             "demo-transcript": demo_transcript}  # fmt: skip


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace each marker line with its generated Markdown."""

    def generate(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATED:
            raise ValueError(f"{page.file.src_uri}: unknown generated part '{name}'; known: "
                             f"{', '.join(GENERATED)}")  # fmt: skip
        return GENERATED[name]()

    return MARKER.sub(generate, markdown)


def on_files(files: Files, config) -> Files:
    """Copy the plots BENCHMARKS.md shows into the site, at the paths its links name; draw the
    picture of the layers; the demo run's learning curve."""
    files.append(File.generated(config, "assets/layers.svg", content=layers_svg()))
    curve = demo_run()[1] / "learning_curve.png"  # the demo run's, trained for this build
    files.append(File.generated(config, "assets/learning_curve.png", abs_src_path=str(curve)))
    for image in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", BENCHMARKS.read_text()):
        source = ROOT / image
        if not source.is_file():
            raise FileNotFoundError(f"BENCHMARKS.md shows {image}, which does not exist")
        files.append(File.generated(config, image, abs_src_path=str(source)))
    return files
