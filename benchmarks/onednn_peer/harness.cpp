// Real oneDNN batch-normalization primitives, callable from Python (ctypes) so the
// fbnops benchmark can time them interleaved with the other peers, on the same shapes
// and threads.  Built by fbnops/tools/bench/onednn.py against the onednn-devel wheel.
//
// One handle = one primitive with its memory, created once (creation is not timed):
//   op      0 backward (prop_kind::backward: diff_src, diff_scale, diff_shift)
//           1 forward training (dst, batch mean, batch variance)
//   layout  0 nchw, 1 nhwc, 2 nChw8c (oneDNN's blocked layout, its best on AVX2)
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

using namespace dnnl;

namespace {

struct Handle {
    engine eng{engine::kind::cpu, 0};
    stream strm{eng};
    primitive prim;
    std::unordered_map<int, memory> args;
    int threads = 1;
};

memory filled(const memory::desc &md, const engine &eng, float base, unsigned seed) {
    memory m(md, eng);
    auto *p = static_cast<float *>(m.get_data_handle());
    size_t n = md.get_size() / sizeof(float);
    unsigned state = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; ++i) {  // a cheap LCG: values in [base - 1, base + 1)
        state = state * 1664525u + 1013904223u;
        p[i] = base + static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
    }
    return m;
}

}  // namespace

extern "C" {

const char *fbnops_onednn_version() {
    static char text[64];
    const dnnl_version_t *v = dnnl_version();
    std::snprintf(text, sizeof text, "%d.%d.%d", v->major, v->minor, v->patch);
    return text;
}

void *fbnops_onednn_create(int op, int n, int c, int h, int w, int layout, float eps, int threads, char *err,
                           int errlen) {
    try {
        auto *hd = new Handle();
        hd->threads = threads;
        omp_set_num_threads(threads);
        memory::format_tag tags[] = {memory::format_tag::nchw, memory::format_tag::nhwc, memory::format_tag::nChw8c};
        memory::desc md({n, c, h, w}, memory::data_type::f32, tags[layout]);
        auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
        auto fwd_pd =
            batch_normalization_forward::primitive_desc(hd->eng, prop_kind::forward_training, md, md, eps, flags);
        memory mean = filled(fwd_pd.mean_desc(), hd->eng, 0.0f, 3);
        memory var = filled(fwd_pd.variance_desc(), hd->eng, 2.0f, 4);
        memory scale = filled(fwd_pd.weights_desc(), hd->eng, 1.0f, 5);
        memory src = filled(md, hd->eng, 0.0f, 1);
        if (op == 1) {
            hd->prim = batch_normalization_forward(fwd_pd);
            hd->args = {{DNNL_ARG_SRC, src},
                        {DNNL_ARG_DST, memory(md, hd->eng)},
                        {DNNL_ARG_SCALE, scale},
                        {DNNL_ARG_SHIFT, filled(fwd_pd.weights_desc(), hd->eng, 0.0f, 6)},
                        {DNNL_ARG_MEAN, mean},
                        {DNNL_ARG_VARIANCE, var}};
        } else {
            auto bwd_pd = batch_normalization_backward::primitive_desc(hd->eng, prop_kind::backward, md, md, md, eps,
                                                                       flags, fwd_pd);
            hd->prim = batch_normalization_backward(bwd_pd);
            hd->args = {{DNNL_ARG_SRC, src},
                        {DNNL_ARG_DIFF_DST, filled(md, hd->eng, 0.0f, 2)},
                        {DNNL_ARG_MEAN, mean},
                        {DNNL_ARG_VARIANCE, var},
                        {DNNL_ARG_SCALE, scale},
                        {DNNL_ARG_DIFF_SRC, memory(md, hd->eng)},
                        {DNNL_ARG_DIFF_SCALE, memory(bwd_pd.diff_weights_desc(), hd->eng)},
                        {DNNL_ARG_DIFF_SHIFT, memory(bwd_pd.diff_weights_desc(), hd->eng)}};
        }
        return hd;
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "%s", e.what());
        return nullptr;
    }
}

int fbnops_onednn_run(void *handle) {
    auto *hd = static_cast<Handle *>(handle);
    omp_set_num_threads(hd->threads);
    hd->prim.execute(hd->strm, hd->args);
    hd->strm.wait();
    return 0;
}

void fbnops_onednn_destroy(void *handle) { delete static_cast<Handle *>(handle); }
}
