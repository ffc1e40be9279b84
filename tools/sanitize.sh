#!/usr/bin/env bash
# Build the native core and extension with AddressSanitizer + UndefinedBehaviorSanitizer, then
# run the native tests, the golden programs, the hostile corpus and the fuzz target against it.
#
#   tools/sanitize.sh              full: native + golden tests, hostile corpus, 5000 fuzz inputs
#   tools/sanitize.sh --short      CI form (a few minutes once the build dir is warm): native
#                                  tests, the hostile corpus, 2000 fuzz inputs
#   tools/sanitize.sh --fuzz MIN   the fuzz target alone for MIN minutes (seed: $NDVM_FUZZ_SEED)
#
# The fuzz target runs with NDVM_BLOCK_ROWS=2 and NDVM_CHAIN_LANES=1: each input's batch of 3
# rows runs in lane blocks, and its second, replayed evaluation in fused chains.
#
# The sanitized extension is built in build/sanitize and loaded from a private overlay of the
# package (the editable install's finder is bypassed), with libasan preloaded into Python.
# Python itself is not instrumented, so leak detection is off; ASan still catches every
# out-of-bounds access, use-after-free and double free in the core, and UBSan aborts on the
# first undefined behaviour.
set -euo pipefail

MODE="${1:-}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
BUILD="$ROOT/build/sanitize"
JOBS="${NDVM_JOBS:-2}"
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"

NB_DIR="$("$PY" -m nanobind --cmake_dir)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython_EXECUTABLE="$PY" -Dnanobind_DIR="$NB_DIR" -DSKBUILD=ON \
  -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$BUILD" -j "$JOBS"

OVERLAY="$BUILD/overlay"
rm -rf "$OVERLAY"
mkdir -p "$OVERLAY"
cp -r "$ROOT/src/ndvm" "$OVERLAY/ndvm"
find "$OVERLAY/ndvm" -name '_core*.so' -delete
cp "$BUILD"/_core*.so "$OVERLAY/ndvm/"

ASAN_LIB="$(${CXX:-g++} -print-file-name=libasan.so)"
UBSAN_LIB="$(${CXX:-g++} -print-file-name=libubsan.so)"
export LD_PRELOAD="$ASAN_LIB $UBSAN_LIB"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export NDVM_REQUIRE_NATIVE=1
export NDVM_SANITIZE_OVERLAY="$OVERLAY"

# Runs Python with the overlay package first and the editable finder removed.
run_py() {
  "$PY" - "$@" <<'PYEOF'
import os, runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
for name in [m for m in sys.modules if m == "ndvm" or m.startswith("ndvm.")]:
    del sys.modules[name]
sys.path.insert(0, os.environ["NDVM_SANITIZE_OVERLAY"])
import ndvm, ndvm._core
assert ndvm.__file__.startswith(os.environ["NDVM_SANITIZE_OVERLAY"]), ndvm.__file__
args = sys.argv[1:]
if args[0] == "-m":
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
PYEOF
}

cd "$ROOT"
if [ "$MODE" = "--short" ]; then
  run_py -m pytest -q -p no:cacheprovider tests/native tests/lang tests/hostile \
    tests/calibrate/test_lm.py
  NDVM_CHAIN_LANES=1 NDVM_BLOCK_ROWS=2 run_py tools/fuzz/fuzz_source.py --iterations 2000 --seed 1
elif [ "$MODE" = "--fuzz" ]; then
  NDVM_CHAIN_LANES=1 NDVM_BLOCK_ROWS=2 run_py tools/fuzz/fuzz_source.py --minutes "${2:?--fuzz needs minutes}" \
    --seed "${NDVM_FUZZ_SEED:-0}"
else
  run_py -m pytest -q -p no:cacheprovider tests/native tests/lang tests/golden tests/hostile \
    tests/calibrate/test_lm.py
  NDVM_CHAIN_LANES=1 NDVM_BLOCK_ROWS=2 run_py tools/fuzz/fuzz_source.py --iterations 5000 --seed 2
fi
echo "sanitize: OK"
