#!/usr/bin/env bash
# The GPU check on a lent GPU machine, in one call. Build the kit here first (`make gpu-kit`:
# benchmarks/gpu_kit.py), then run from the repository root there, carrying the kit:
#
#   bash benchmarks/gpu_lease.sh        (the device tool's carry: [".gpu-kit"], timeout 600 s)
#
# It installs the kit's wheels into the image's Python (pip --no-index keeps what is there), runs
# the graph backend's tests (the CUDA-only one compares recorded replays with the eager step),
# then benchmarks/gpu_check.py on the kit's data; the logs and the check's JSON and Markdown go to
# $OUT (the folder the device tool brings back), else benchmarks/results. Settable: KIT (default
# .gpu-kit), PY (default python3, the image's Python with torch), GPU_CHECK_ARGS (default
# "--device cuda --budget-s 520": the device tool ends a call at 600 s, and the install, the tests
# and a step's grace past its share come on top of the budget; "--device cpu --tiny" tries the
# whole call on a CPU).
set -uo pipefail
KIT=${KIT:-.gpu-kit}
PY=${PY:-python3}
DEST=${OUT:-benchmarks/results}
if [ ! -f "$KIT/requirements.txt" ] || [ ! -d "$KIT/data" ]; then
    echo "gpu_lease: no kit at '$KIT': build it with 'make gpu-kit' and carry it" >&2
    exit 2
fi
KIT=$(cd "$KIT" && pwd)
mkdir -p "$DEST"
echo "gpu_lease: installing $(wc -l < "$KIT/requirements.txt") requirements from $KIT/wheels"
if ! "$PY" -m pip install --quiet --no-index --find-links "$KIT/wheels" -r "$KIT/requirements.txt"; then
    echo "gpu_lease: the kit's wheels did not install into $PY (its Python: $("$PY" -V 2>&1));" \
        "the kit was built for $(grep -o '"python_version": "[^"]*"' "$KIT/kit.json")" >&2
    exit 3
fi
unset FLKIT_MIRROR
export FLKIT_DATA="$KIT/data" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$PY" -m pytest -q tests/test_graph_backend.py 2>&1 | tee "$DEST/gpu-tests.log"
tests=${PIPESTATUS[0]}
# shellcheck disable=SC2086  # GPU_CHECK_ARGS is a list of arguments
"$PY" benchmarks/gpu_check.py ${GPU_CHECK_ARGS:---device cuda --budget-s 520} --out "$DEST" 2>&1 \
    | tee "$DEST/gpu-check.log"
check=${PIPESTATUS[0]}
echo "gpu_lease: graph backend tests exit $tests, GPU check exit $check"
[ "$tests" -eq 0 ] && [ "$check" -eq 0 ]
