"""The ``onednn`` peer: real oneDNN primitives, through a C++ harness built on first use.

The harness (``benchmarks/onednn_peer/harness.cpp``, in a source checkout) is compiled
with the system C++ compiler against the headers and ``libdnnl`` of an installed
oneDNN development wheel (``pip install 'fbnops[bench-onednn]'``, i.e.
``onednn-devel-cpu-gomp``, or ``onednn-devel``), and cached under
``$XDG_CACHE_HOME/fbnops`` (default ``~/.cache/fbnops``) by a hash of the source and the
library.  oneDNN times only what fbnops does in float32 (it has no bfloat16 batch norm
on AVX2, and no float16 on CPU): other dtypes are left out.  The primitives run on the case's own
inputs (``case.data``: the arrays every peer is timed on), copied into oneDNN's memory when the
primitive is created (reordered for the blocked layout); creation is not timed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

import numpy as np

from .cases import EPS, Case

SOURCE = Path(__file__).resolve().parents[3] / "benchmarks" / "onednn_peer" / "harness.cpp"
WHEELS = ("onednn-devel-cpu-gomp", "onednn-devel", "onednn-devel-cpu-iomp", "onednn-devel-cpu-tbb")
# 5-D tensors are the 4-D ones with H split in two: the same memory, so the same primitive
LAYOUTS = {"NCHW": 0, "NHWC": 1, "NCDHW": 0, "NDHWC": 1}
BLOCKED = 2  # nChw8c


@cache
def _locate() -> tuple[Path, Path] | str:
    """(include dir, lib dir) of an installed oneDNN development wheel (the library may come
    from the runtime wheel it depends on), or why not."""
    header = lib = None
    for dist in metadata.distributions():
        if not (dist.metadata["Name"] or "").lower().startswith("onednn"):
            continue
        for f in dist.files or []:
            if header is None and str(f).endswith("oneapi/dnnl/dnnl.hpp"):
                header = Path(f.locate()).resolve()
            if lib is None and f.name == "libdnnl.so":
                lib = Path(f.locate()).resolve()
    if header and lib:
        return header.parents[2], lib.parent
    return f"no oneDNN development wheel is installed (pip install 'fbnops[bench-onednn]', i.e. {WHEELS[0]})"


def missing() -> str | None:
    if not SOURCE.exists():
        return f"the harness source {SOURCE.relative_to(SOURCE.parents[2])} needs a source checkout of fbnops"
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        return "no C++ compiler (g++, or $CXX) to build the oneDNN harness"
    found = _locate()
    return found if isinstance(found, str) else None


@cache
def _library() -> ctypes.CDLL:
    include, lib = _locate()
    built_against = (lib / "libdnnl.so").stat()
    digest = hashlib.sha256(SOURCE.read_bytes() + f"{lib}{built_against.st_size}{built_against.st_mtime}".encode())
    cache_dir = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fbnops"
    target = cache_dir / f"onednn_peer-{digest.hexdigest()[:16]}.so"
    if not target.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        cmd = [os.environ.get("CXX", "g++"), "-O2", "-std=c++17", "-shared", "-fPIC", "-fopenmp", str(SOURCE),
               f"-I{include}", f"-L{lib}", "-ldnnl", f"-Wl,-rpath,{lib}", "-o", str(tmp)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"building the oneDNN harness failed:\n{done.stderr[-2000:]}")
        os.replace(tmp, target)
    so = ctypes.CDLL(str(target))
    so.fbnops_onednn_version.restype = ctypes.c_char_p
    so.fbnops_onednn_create.restype = ctypes.c_void_p
    floats = ctypes.POINTER(ctypes.c_float)
    so.fbnops_onednn_create.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_int, ctypes.c_int]
    so.fbnops_onednn_create.argtypes += [floats] * 6 + [ctypes.c_char_p, ctypes.c_int]
    so.fbnops_onednn_run.argtypes = [ctypes.c_void_p]
    so.fbnops_onednn_read.argtypes = [ctypes.c_void_p, ctypes.c_int, floats]
    so.fbnops_onednn_destroy.argtypes = [ctypes.c_void_p]
    return so


def version() -> str:
    return _library().fbnops_onednn_version().decode()


class _Primitive:
    """A created primitive with its memory (the case's inputs, copied in); calling it runs it once (and waits)."""

    def __init__(self, so: ctypes.CDLL, handle: int, case: Case):
        self.so, self.handle, self.case = so, handle, case
        self.run = lambda: so.fbnops_onednn_run(handle)

    def __call__(self) -> None:
        self.run()

    def results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """After a run: (dst or diff_src in the case's layout, batch mean or diff_scale, batch variance
        (biased) or diff_shift)."""
        c = self.case.shape[3]
        out = (np.empty(self.case.dims, np.float32), np.empty(c, np.float32), np.empty(c, np.float32))
        for which, array in enumerate(out):
            self.so.fbnops_onednn_read(self.handle, which, _pointer(array))
        return out

    def __del__(self) -> None:
        self.so.fbnops_onednn_destroy(self.handle)


def _pointer(array: np.ndarray):
    assert array.dtype == np.float32 and array.flags.c_contiguous
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def onednn_call(case: Case, blocked: bool, threads: int | None = None):
    """The primitive for ``case``, on the case's own inputs (``case.data``, as every peer is timed)."""
    if case.dtype != "float32":
        return None
    from fbnops.framework.threads import get_num_threads

    so = _library()
    n, h, w, c = case.shape
    err = ctypes.create_string_buffer(512)
    layout = BLOCKED if blocked else LAYOUTS[case.layout]
    op = 0 if case.op == "grad" else 1
    d = {k: np.ascontiguousarray(case.data[k], np.float32) for k in ("x", "dy", "scale", "offset", "mean", "var")}
    data = [_pointer(d[k]) for k in ("x", "dy", "scale", "offset", "mean", "var")]
    threads = threads or get_num_threads()
    handle = so.fbnops_onednn_create(op, n, c, h, w, layout, EPS, threads, LAYOUTS[case.layout], *data, err, 512)
    if not handle:
        raise RuntimeError(f"oneDNN refused {case.label}: {err.value.decode()}")
    return _Primitive(so, handle, case)
