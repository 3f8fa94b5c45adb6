#!/bin/sh
# run.sh - build main.cc against TensorFlow C++ (the tensorflow-cpu wheel) and run it.
# Exported by fbnops (target tf-cc). Reads inputs/*.npy, writes outputs/*.npy.
#
# The wheel ships the headers and libtensorflow_cc.so.2 / libtensorflow_framework.so.2 next to
# tensorflow/__init__.py. Its library does not export ClientSession, so client_session_shim.cc
# defines it; the shim object is compiled once per (shim, TensorFlow version, flags) into
# ${FBNOPS_EXPORT_CACHE:-$HOME/.cache/fbnops/export}/tf-cc-<key>/shim.o and reused.
# Environment: PYTHON (default python3) finds TensorFlow, CXX (default g++) compiles.
# ./run.sh --shim-only builds the shim and stops (python -m fbnops.tools.export.tf_cc does that).
set -eu
cd "$(dirname "$0")"

PYTHON="${PYTHON:-python3}"
CXX="${CXX:-g++}"
found=$("$PYTHON" -c '
import importlib.metadata as md, importlib.util, os
spec = importlib.util.find_spec("tensorflow")
dists = md.packages_distributions().get("tensorflow", [])
print(os.path.dirname(spec.origin))
print(md.version(dists[0]) if dists else "unknown")
' 2>/dev/null) || found=""
TF=$(echo "$found" | sed -n 1p)
TF_VERSION=$(echo "$found" | sed -n 2p)
if [ -z "$TF" ] || [ ! -f "$TF/libtensorflow_cc.so.2" ] || [ ! -f "$TF/include/tensorflow/cc/client/client_session.h" ]; then
  echo "run.sh: TensorFlow C++ not found (no tensorflow-cpu wheel for $PYTHON): pip install 'fbnops[export]'" >&2
  exit 3
fi
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "run.sh: C++ compiler '$CXX' not found: apt-get install g++ (or set CXX)" >&2
  exit 3
fi

# The ABI and Eigen defines must be those of the wheel (tf.sysconfig.get_compile_flags()). main.cc
# only calls into the library, so it is built without optimization: -O0 compiles a large program
# about five times faster than -O1 (18 s instead of 98 s of CPU for 3600 lines), and runs as fast.
CXXFLAGS="-w --std=c++17 -I$TF/include -D_GLIBCXX_USE_CXX11_ABI=1 -DEIGEN_MAX_ALIGN_BYTES=64"
LIBS="-L$TF -l:libtensorflow_framework.so.2 -l:libtensorflow_cc.so.2 -Wl,-rpath,$TF"

key=$( { cat client_session_shim.cc; echo "$TF_VERSION $CXX -O1 $CXXFLAGS"; } | sha256sum | cut -c1-16)
cache="${FBNOPS_EXPORT_CACHE:-$HOME/.cache/fbnops/export}/tf-cc-$key"
if [ ! -f "$cache/shim.o" ]; then
  echo "run.sh: compiling the ClientSession shim into $cache (once per TensorFlow version)" >&2
  mkdir -p "$cache"
  $CXX -O1 $CXXFLAGS -c client_session_shim.cc -o "$cache/shim.o.$$"
  mv -f "$cache/shim.o.$$" "$cache/shim.o"  # atomic: another run.sh may be compiling it too
fi
[ "${1:-}" = "--shim-only" ] && exit 0  # CI: build the shared shim once, before any program

mkdir -p build outputs
if [ ! -x build/main ] || [ main.cc -nt build/main ] || [ tensor_npy.h -nt build/main ]; then
  echo "run.sh: compiling main.cc against TensorFlow $TF_VERSION" >&2
  $CXX -O0 $CXXFLAGS -c main.cc -o build/main.o
  $CXX build/main.o "$cache/shim.o" -o build/main $LIBS
fi
exec ./build/main
