"""The fixed parts of the ``onednn-graph`` export: ``main.cpp`` around the generated sections, ``run.sh``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._cpp_text import comment, renamed_comment
from ._plan import ExportPlan

if TYPE_CHECKING:
    from .onednn_graph import _Program

WHEELS = "onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0"
SEED = "oneDNN Graph, BatchNormTrainingBackward (https://oneapi-src.github.io/oneDNN/dev_guide_op_batchnormtrainingbackward.html)"
EXAMPLE = "oneDNN examples/graph/cpu_getting_started.cpp"

_HELPERS = r"""struct Buffer {  // host memory of one logical tensor (the CPU engine takes plain pointers)
    data_type dt;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

size_t itemsize(data_type dt) { return dt == data_type::f32 || dt == data_type::s32 ? 4 : 2; }

const char *npy_descr(data_type dt) { return dt == data_type::f16 ? "<f2" : dt == data_type::s32 ? "<i4" : "<f4"; }

Buffer zeros(data_type dt, std::vector<int64_t> shape) {
    return {dt, shape, std::vector<uint8_t>(size_t(npy::element_count(shape)) * itemsize(dt))};
}

Buffer constant(data_type dt, std::vector<int64_t> shape, const char *hex) {  // a Const's bytes, as TF holds them
    Buffer b = zeros(dt, shape);
    for (size_t i = 0; i < b.bytes.size(); ++i)
        b.bytes[i] = uint8_t(std::stoi(std::string(hex + 2 * i, 2), nullptr, 16));
    return b;
}

Buffer repeat(data_type dt, std::vector<int64_t> shape, const char *element_hex) {  // OnesLike, ZerosLike
    Buffer b = zeros(dt, shape);
    Buffer one = constant(dt, {}, element_hex);
    for (size_t i = 0; i < b.bytes.size(); ++i) b.bytes[i] = one.bytes[i % one.bytes.size()];
    return b;
}

Buffer transpose(const Buffer &x, std::vector<int64_t> perm) {  // TF Transpose: y.shape[i] = x.shape[perm[i]]
    std::vector<int64_t> shape(perm.size()), in_strides(perm.size(), 1), index(perm.size(), 0);
    for (size_t i = perm.size(); i-- > 1;) in_strides[i - 1] = in_strides[i] * x.shape[i];
    for (size_t i = 0; i < perm.size(); ++i) shape[i] = x.shape[perm[i]];
    Buffer y = zeros(x.dt, shape);
    const size_t size = itemsize(x.dt);
    for (int64_t k = 0; k < npy::element_count(shape); ++k) {  // walk y in order; read x at the permuted index
        int64_t offset = 0;
        for (size_t i = 0; i < perm.size(); ++i) offset += index[i] * in_strides[perm[i]];
        std::memcpy(&y.bytes[size_t(k) * size], &x.bytes[size_t(offset) * size], size);
        for (size_t i = perm.size(); i-- > 0 && ++index[i] == shape[i];) index[i] = 0;
    }
    return y;
}

Buffer input(const std::string &path, data_type dt, std::vector<int64_t> shape) {  // a feed, from inputs/
    npy::Array a = npy::load(path);
    if (a.descr != npy_descr(dt) || a.shape != shape)
        throw std::runtime_error(path + ": expected " + npy_descr(dt) + " data of the exported shape");
    if (dt != data_type::bf16) return {dt, shape, a.bytes};
    Buffer b = zeros(dt, shape);  // bfloat16 comes as float32: narrow it in memory
    const float *src = reinterpret_cast<const float *>(a.bytes.data());
    uint16_t *dst = reinterpret_cast<uint16_t *>(b.bytes.data());
    for (int64_t i = 0; i < npy::element_count(shape); ++i) dst[i] = npy::to_bfloat16(src[i]);
    return b;
}

void write_output(const std::string &path, const Buffer &b) {  // a fetch, to outputs/
    npy::Array a{npy_descr(b.dt), b.shape, b.bytes};
    if (b.dt == data_type::bf16) {  // widen bfloat16 to float32 (exact)
        a.bytes.resize(b.bytes.size() * 2);
        const uint16_t *src = reinterpret_cast<const uint16_t *>(b.bytes.data());
        float *dst = reinterpret_cast<float *>(a.bytes.data());
        for (int64_t i = 0; i < npy::element_count(b.shape); ++i) dst[i] = npy::from_bfloat16(src[i]);
    }
    npy::save(path, a);
}

Buffer bessel(const Buffer &variance, int64_t n) {  // TF: variance * (n / max(n - 1, 1)), in float32
    Buffer b = variance;
    const float adjust = float(n) / float(n > 1 ? n - 1 : 1);
    float *v = reinterpret_cast<float *>(b.bytes.data());
    for (int64_t i = 0; i < npy::element_count(b.shape); ++i) v[i] *= adjust;
    return b;
}"""

_RUN = r"""int main() try {
    std::map<size_t, Buffer> buffers;  // logical tensor id -> its host memory

    // 1. Logical tensors: id, data type, dims, strided layout [op page: Execution Arguments, Supported Data Types]
    //    (dims{3}, not {3}: a braced {3} alone would pick the (id, data_type, ndims, layout) overload)
@DECLS@

    // 2. Host data: the feeds (inputs/*.npy) and constants
@HOST@

    // 3. The ops, with their attributes, in a graph for the CPU engine [op page: Operation Attributes; example]
    dnnl::graph::graph g(dnnl::engine::kind::cpu);
@BUILD@
    g.finalize();

    // 4. Partitions in order: compile each for the engine, then execute it on a stream [example]
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    for (partition &p : g.get_partitions()) {
        if (!p.is_supported()) {
            std::fprintf(stderr, "oneDNN: partition %zu (%zu ops) is not supported on this CPU\n", p.get_id(),
                         p.get_ops_num());
            return 4;
        }
        std::vector<logical_tensor> ins = p.get_input_ports(), outs = p.get_output_ports();
        compiled_partition cp = [&] {
            try {
                return p.compile(ins, outs, eng);
            } catch (const dnnl::error &e) {  // no kernel for these data types on this CPU (e.g. bf16 without AVX-512)
                if (e.status != dnnl_unimplemented) throw;
                std::fprintf(stderr, "oneDNN: partition %zu has no implementation on this CPU: %s\n", p.get_id(),
                             e.what());
                std::exit(4);
            }
        }();
        std::vector<tensor> in_ts, out_ts;
        for (const logical_tensor &lt : ins) in_ts.emplace_back(lt, eng, buffers.at(lt.get_id()).bytes.data());
        for (logical_tensor &lt : outs) {
            lt = cp.query_logical_tensor(lt.get_id());  // the compiled shape and layout
            buffers[lt.get_id()] = zeros(lt.get_data_type(), lt.get_dims());
            out_ts.emplace_back(lt, eng, buffers[lt.get_id()].bytes.data());
        }
        cp.execute(strm, in_ts, out_ts);
    }
    strm.wait();

    // 5. TensorFlow outputs that oneDNN defines differently
@AFTER@

    // 6. The fetches, to outputs/
@WRITES@
    return 0;
} catch (const dnnl::error &e) {  // the library's status, as dnnl_status_t
    std::fprintf(stderr, "dnnl::error: status %d: %s\n", int(e.status), e.what());
    return 1;
} catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
}
"""


def _indent(lines: list[str]) -> str:
    return "\n".join("    " + line for text in lines for line in text.split("\n")) or "    // (none)"


def main_cpp(plan: ExportPlan, prog: _Program, writes: list[str]) -> str:
    header = [
        f"// Generated by fbnops export (target onednn-graph) from {comment(plan.source or 'an fbnops graph')}.",
        "// Build and run: ./run.sh (oneDNN 3.2, from the onednn-devel-cpu-gomp wheel).",
        f"// [op page] {SEED}",
        f"// [example] {EXAMPLE}",
        "// Reads inputs/*.npy and writes each fetch to outputs/<op>_<index>.npy (bfloat16 as float32).",
        "// oneDNN's batch variance is biased (population); TF's batch_variance output is Bessel-corrected,",
        "// so the program converts it (step 5); TF's reserve_space_2 is biased, as oneDNN's variance input.",
    ]
    header += renamed_comment(plan.renamed())
    body = (
        _RUN.replace("@DECLS@", _indent(prog.decls))
        .replace("@HOST@", _indent(prog.host))
        .replace("@BUILD@", _indent(prog.build))
        .replace("@AFTER@", _indent(prog.after))
        .replace("@WRITES@", _indent(writes))
    )
    includes = ["#include <cstdio>", "#include <cstdlib>", "#include <cstring>", "#include <map>", "#include <string>",
                "#include <vector>", "",
                '#include "oneapi/dnnl/dnnl_graph.hpp"', '#include "npy.h"', "",
                "using namespace dnnl::graph;", "using data_type = logical_tensor::data_type;",
                "using layout_type = logical_tensor::layout_type;", "using dims = logical_tensor::dims;"]  # fmt: skip
    return "\n".join([*header, "", *includes, "", "namespace {", "", _HELPERS, "", "}  // namespace", "", body])


def run_sh(plan: ExportPlan) -> str:
    return f"""#!/bin/sh
# Build main.cpp against oneDNN Graph (oneDNN 3.2: {WHEELS}),
# found in the Python environment this script runs in, or in the prefix ONEDNN_PREFIX names (e.g. one
# with the onednn/onednn-devel 2026.1.0 wheels: oneDNN 3.13), then run it. Exit 3: the library is missing;
# 4: a partition is not supported (or has no kernel) on this CPU; 1: a dnnl::error (its status is printed).
set -e
cd "$(dirname "$0")"
PYTHON="${{PYTHON:-python3}}"
PREFIX=$("$PYTHON" -c 'import os, sys, pathlib; p = pathlib.Path(os.environ.get("ONEDNN_PREFIX") or sys.prefix)
print(p if (p / "include/oneapi/dnnl/dnnl_graph.hpp").exists() and list((p / "lib").glob("libdnnl.so*")) else "")' \\
    2>/dev/null || true)
if [ -z "$PREFIX" ]; then
    echo "run.sh: oneDNN Graph (dnnl_graph.hpp, libdnnl) not found: pip install 'fbnops[export]' ({WHEELS})"
    exit 3
fi
if [ -e "$PREFIX/lib/libintelocl.so" ]; then  # the SYCL-runtime wheels (3.13): their libraries and OpenCL CPU driver
    export LD_LIBRARY_PATH="$PREFIX/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
    export OCL_ICD_FILENAMES="$PREFIX/lib/libintelocl.so"
fi
CXX="${{CXX:-g++}}"
if ! command -v "$CXX" >/dev/null 2>&1; then
    echo "run.sh: no C++ compiler ($CXX) to build main.cpp: install g++"
    exit 3
fi
mkdir -p build outputs
KEY=$(cat main.cpp npy.h | sha256sum | cut -c1-16)-$(echo "$PREFIX" | sha256sum | cut -c1-8)
CACHED="${{FBNOPS_EXPORT_CACHE:-build}}/onednn-graph-$KEY"
if [ ! -x "$CACHED" ]; then
    mkdir -p "$(dirname "$CACHED")"
    "$CXX" -std=c++17 -O1 -I"$PREFIX/include" main.cpp -L"$PREFIX/lib" -Wl,-rpath,"$PREFIX/lib" -ldnnl \\
        -o "$CACHED.tmp$$"
    mv "$CACHED.tmp$$" "$CACHED"
fi
exec "$CACHED"
"""
