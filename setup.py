"""Build the Cython kernels, with OpenMP when the compiler has it.

Environment switches:
  FBNOPS_NO_OPENMP=1        build without OpenMP (kernels run single-threaded)
  FBNOPS_DEBUG_CYTHON=1     bounds checks on in the kernels (slow; for debugging)

Flags: -O3 lets GCC vectorize the lane loops (GCC 12's -O2 cost model does not);
-fno-trapping-math lets it if-convert the float16 rounding; -falign-loops=64 starts
every loop on a 64-byte fetch block (a short hot loop straddling two ran 1.37x slower
on AMD).  Never -ffast-math: it would link crtfastmath.o and flush subnormals
process-wide, and the float16 conversions depend on subnormals.  No -march=native:
the wheel must run anywhere.
"""

import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

OPENMP_FLAG = "/openmp" if sys.platform == "win32" else "-fopenmp"
V3_FLAG = "-march=x86-64-v3"
V4_BF16_FLAGS = ["-march=x86-64-v4", "-mavx512bf16", "-mprefer-vector-width=256"]  # batch_norm_avx512 (see below)
OPT_FLAGS = [] if sys.platform == "win32" else ["-O3", "-fno-trapping-math", "-fno-math-errno", "-falign-loops=64"]


def compiler_has_openmp() -> bool:
    """Compile and link a tiny OpenMP program; False if anything fails."""
    if os.environ.get("FBNOPS_NO_OPENMP", "") not in ("", "0"):
        return False
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    if not shutil.which(cc[0]):
        return False
    src = "#include <omp.h>\nint main(void){int n=0;\n#pragma omp parallel reduction(+:n)\nn+=1;\nreturn n>0?0:1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file = os.path.join(tmp, "probe.c")
        with open(c_file, "w") as f:
            f.write(src)
        try:
            subprocess.run(
                [*cc, OPENMP_FLAG, c_file, "-o", os.path.join(tmp, "probe")],
                check=True,
                capture_output=True,
            )
        except (OSError, subprocess.CalledProcessError):
            return False
    return True


def compiler_accepts(flag: str) -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    with tempfile.TemporaryDirectory() as tmp:
        c_file = os.path.join(tmp, "probe.c")
        with open(c_file, "w") as f:
            f.write("int main(void){return 0;}\n")
        try:
            subprocess.run(
                [*cc, flag, "-c", c_file, "-o", os.path.join(tmp, "probe.o")], check=True, capture_output=True
            )
        except (OSError, subprocess.CalledProcessError):
            return False
    return True


class BuildExt(build_ext):
    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:  # the two kernel builds take most of the time: compile side by side
            self.parallel = os.cpu_count() or 1

    def build_extensions(self):
        openmp = compiler_has_openmp()
        if not openmp:
            print("fbnops: building WITHOUT OpenMP; kernels will run single-threaded", file=sys.stderr)
        keep = []
        for ext in self.extensions:
            simd = {"_avx2": [V3_FLAG], "_avx512": V4_BF16_FLAGS}.get(ext.name[ext.name.rfind("_") :])
            if simd:  # an optional x86-64-v3 or -v4 build, chosen at import where the CPU runs it
                x86 = platform.machine().lower() in ("x86_64", "amd64")
                if not x86 or not all(compiler_accepts(flag) for flag in simd):
                    print(f"fbnops: skipping {ext.name} (no {' '.join(simd)} here)", file=sys.stderr)
                    continue
                ext.extra_compile_args += simd
            ext.extra_compile_args += OPT_FLAGS + ([OPENMP_FLAG] if openmp else [])
            ext.extra_link_args += [OPENMP_FLAG] if openmp else []
            keep.append(ext)
        self.extensions = keep
        super().build_extensions()


debug = os.environ.get("FBNOPS_DEBUG_CYTHON", "") not in ("", "0")
KERNEL_DIR = "fbnops/kernels/_cython"
KERNEL_INCLUDES = ("_batch_norm_impl.pxi", "_loops.pxi", "_turned_rows.pxi", "_entry_points.pxi", "_dispatch.pxi",
                   "_plan.pxd", "_contract.h", "_fp.h", "_rows16.h", "_wide512.h", "_stream.h", "_fp.pxd",
                   "_openmp.pxd")  # fmt: skip
extensions = [
    Extension(
        f"fbnops.kernels._cython.{name}",
        [f"{KERNEL_DIR}/{name}.pyx"],
        include_dirs=[np.get_include(), KERNEL_DIR],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")],
        depends=[f"{KERNEL_DIR}/{f}" for f in KERNEL_INCLUDES],
    )
    # the portable build, the same source for x86-64-v3 (AVX2, FMA, F16C) and for x86-64-v4 with
    # AVX512-BF16, and the tools beside the kernels (the benchmarks' streaming floor, the tests'
    # hooks), the output pool, the reproducible tree's block sums over one-row samples (portable
    # and x86-64-v3)
    for name in (
        "batch_norm",
        "batch_norm_avx2",
        "batch_norm_avx512",
        "_tools",
        "_outputs",
        "_tree_sums",
        "_tree_sums_avx2",
    )
]

# the ops layer's one compiled helper: the call signature of the fast path (fbnops/ops/execute.py)
extensions.append(
    Extension(
        "fbnops.ops._signature",
        ["fbnops/ops/_signature.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")],
    )
)

setup(
    ext_modules=cythonize(
        extensions,
        nthreads=os.cpu_count() or 1,
        compiler_directives={
            "language_level": 3,
            "boundscheck": debug,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": debug,
        },
    ),
    cmdclass={"build_ext": BuildExt},
)
