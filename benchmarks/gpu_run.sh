#!/usr/bin/env bash
# On a GPU machine, from the repository's root: install the wheels of .whl/ (made here by
# benchmarks/gpu_wheels.py) into a folder of their own, run the GPU measurement, then the tests
# marked `cuda`. Results and logs go into OUT_DIR (default gpu-results/):
#     bash benchmarks/gpu_run.sh OUT_DIR [gpu.py's options]
set -uo pipefail
out=${1:-gpu-results}
shift || true
mkdir -p "$out"
python=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/xiaoyarl-site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/xiaoyarl-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
"$python" benchmarks/gpu.py --out "$out" "$@" 2>&1 | tee "$out/gpu.log"
bench=${PIPESTATUS[0]}
# the files that hold `cuda` tests only: the others may import packages the machine lacks
"$python" -m pytest -m cuda -p no:cacheprovider -q --timeout 120 \
    $(grep -l "mark.cuda" tests/test_*.py) 2>&1 | tee "$out/pytest_cuda.log"
tests=${PIPESTATUS[0]}
echo "gpu.py exit $bench, pytest -m cuda exit $tests"
exit $(( bench || tests ))
