"""Build what `benchmarks/gpu.py` and `pytest -m cuda` need on a bare GPU machine, and print the
one command that runs both there.

A GPU machine that is lent for minutes has Python, PyTorch, NumPy, SciPy, Matplotlib, PyYAML and
pytest (with pytest-timeout and pytest-xdist) but none of xiaoyarl's other dependencies, and
often no network: the wheels travel with the working tree. This downloads them into `.whl/` (git
ignores it), for the machine's Python and platform, and checks that they and the tracked files
fit what a call carries (64 MiB by default):

    python benchmarks/gpu_wheels.py                    # gymnasium (+ its one missing need), MinAtar
    python benchmarks/gpu_wheels.py --python 3.12 --limit-mib 64

Then, on the GPU machine, from the repository's root (docs/guides/devices.md says more):

    bash benchmarks/gpu_run.sh OUT_DIR

EnvPool (the Atari row) is left out: its wheel alone is 64 MB with the assets it needs beside it,
more than a call carries; `gpu.py` says that it skipped the row and why.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what a bare GPU image lacks: xiaoyarl's gymnasium (and Farama's notice package it imports), and
# the MinAtar package that the torch-native games' `cuda` tests compare against, pure Python all
WHEELS = ["gymnasium>=1.1,<2", "farama-notifications", "MinAtar>=1.0.15"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def tracked_bytes() -> int:
    """Bytes of the files git tracks: what travels besides the wheels."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.split(b"\0")  # fmt: skip
    return sum(
        (ROOT / f.decode()).stat().st_size for f in files if f and (ROOT / f.decode()).is_file()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python (3.12)")
    parser.add_argument("--out", default=str(ROOT / ".whl"), help="the wheels' folder (.whl)")
    parser.add_argument(
        "--limit-mib",
        type=float,
        default=64,
        help="what one call carries, wheels and tracked files together (64)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    platforms = [flag for p in PLATFORMS for flag in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "--python-version", args.python, "--implementation",
                    "cp", *platforms, "-d", str(out), *WHEELS], check=True)  # fmt: skip
    wheels = sorted(out.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels) + tracked_bytes()
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:8.2f} MiB  {wheel.name}")
    print(f"with the tracked files: {size / 2**20:.1f} MiB of {args.limit_mib:g}")
    if size > args.limit_mib * 2**20:
        print(
            f"too large to travel: remove wheels from {out} that the machine has", file=sys.stderr
        )
        return 1
    print("on the GPU machine, from the repository's root:  bash benchmarks/gpu_run.sh OUT_DIR")
    return 0


if __name__ == "__main__":
    sys.exit(main())
