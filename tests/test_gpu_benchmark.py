"""`benchmarks/gpu.py --dry-run`: every row of the GPU measurement runs at tiny sizes on the CPU,
so that the one prepared command cannot rot between GPU loans (how fast is BENCHMARKS.md's)."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def gpu():
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("gpu")
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.timeout(300)
def test_dry_run_measures_every_row(gpu, tmp_path, capsys):
    assert gpu.main(["--dry-run", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "gpu.json").read_text())
    rows = report["rows"]
    assert not [r for r in rows if r["error"]], [r["error"] for r in rows if r["error"]]
    ran = {r["group"] for r in rows} | {s.split(" / ")[0] for s in report["skipped"]}
    assert ran == set(gpu.GROUPS), ran  # every group ran or says why not
    assert all(":" in s for s in report["skipped"]), report["skipped"]  # each with its reason
    for row in rows:
        numbers = row["numbers"]
        rate = numbers.get("steady_sps") or numbers.get("end_to_end_sps") or numbers.get("seconds")
        assert rate and math.isfinite(rate) and rate > 0, row
        assert row["command"].startswith("xiaoyarl "), row
    by_name = {r["name"]: r["numbers"] for r in rows}
    assert by_name["vmap 4 members"]["ratio"] > 0  # against the one member's `train` row
    assert sum(r["group"] == "minatar" for r in rows) == len(gpu.MINATAR_GAMES) + 1
    assert {r["met"] for r in rows} == {None}  # a dry run holds no row against a GPU goal
    table = (tmp_path / "gpu.md").read_text()
    assert table.count("\n| cartpole |") == 4
    assert table.split("\n\n", 1)[1].strip() in capsys.readouterr().out  # printed last as well


def test_without_a_gpu_it_says_to_pass_dry_run(gpu, capsys):
    if gpu.torch.cuda.is_available():
        pytest.skip("torch sees a CUDA device")
    with pytest.raises(SystemExit):
        gpu.main(["--device", "cuda"])
    assert "--dry-run" in capsys.readouterr().err
