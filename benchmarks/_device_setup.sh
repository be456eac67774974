# Sourced by the GPU jobs of benchmarks/device_run.sh on the lent GPU machine: install the
# carried wheels (.whl/, carry it) and build the package in place.
# Sets OUT (the tool's output folder, or a temporary one) and PYTHONPATH.
# The device's Python lacks cffi/pycparser (the shared wheels) and platformdirs (auto's cost
# table cache; without it auto's tests and bench_auto.py fail there). Before the first call, here:
#   cp ../shared/wheels/*.whl .whl/ && python3 -m pip download --no-deps --only-binary=:all: -d .whl platformdirs
set -uo pipefail
OUT=${OUT:-$(mktemp -d)}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 1
python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1 \
    || { echo "pip -e failed, building in place"; python3 setup.py build_ext --inplace >>"$OUT/build.log" 2>&1; } \
    || { tail -30 "$OUT/build.log"; exit 1; }
