// Real oneDNN batch-normalization primitives, callable from Python (ctypes) so the
// fbnops benchmark can time them interleaved with the other peers, on the same shapes
// and threads.  Built by fbnops/tools/bench/onednn.py against the onednn-devel wheel.
//
// One handle = one primitive with its memory, created once (creation is not timed):
//   op      0 backward (prop_kind::backward: diff_src, diff_scale, diff_shift)
//           1 forward training (dst, batch mean, batch variance)
//   layout  0 nchw, 1 nhwc, 2 nChw8c (oneDNN's blocked layout, its best on AVX2)
//   data    the case's own inputs, the same arrays every peer is timed on: x and dy in the case's
//           layout (nchw when channels-first, nhwc when channels-last), scale, shift, mean, variance [C];
//           copied into oneDNN's memory (reordered to nChw8c for the blocked layout) at creation
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
    int op = 0;
    memory::desc plain;  // the caller's layout of x/dy/dst (for reading results back)
};

// oneDNN memory for `md` holding `data`, given in the plain layout `plain` (a reorder when they differ)
memory from_user(const memory::desc &md, const memory::desc &plain, const float *data, const engine &eng,
                 stream &strm) {
    memory user(plain, eng, const_cast<float *>(data));
    memory m(md, eng);
    reorder(user, m).execute(strm, user, m);
    strm.wait();
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

void *fbnops_onednn_create(int op, int n, int c, int h, int w, int layout, float eps, int threads, int user_layout,
                           const float *x, const float *dy, const float *scale, const float *shift,
                           const float *mean, const float *variance, char *err, int errlen) {
    try {
        auto *hd = new Handle();
        hd->threads = threads;
        hd->op = op;
        omp_set_num_threads(threads);
        memory::format_tag tags[] = {memory::format_tag::nchw, memory::format_tag::nhwc, memory::format_tag::nChw8c};
        memory::desc md({n, c, h, w}, memory::data_type::f32, tags[layout]);
        memory::desc plain({n, c, h, w}, memory::data_type::f32, tags[user_layout]);
        hd->plain = plain;
        auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
        auto fwd_pd =
            batch_normalization_forward::primitive_desc(hd->eng, prop_kind::forward_training, md, md, eps, flags);
        const memory::desc &vec = fwd_pd.weights_desc();  // [C]: scale, shift, mean and variance alike
        memory src = from_user(md, plain, x, hd->eng, hd->strm);
        memory scale_m = from_user(vec, vec, scale, hd->eng, hd->strm);
        if (op == 1) {  // forward training computes the batch mean and variance (outputs)
            hd->prim = batch_normalization_forward(fwd_pd);
            hd->args = {{DNNL_ARG_SRC, src},
                        {DNNL_ARG_DST, memory(md, hd->eng)},
                        {DNNL_ARG_SCALE, scale_m},
                        {DNNL_ARG_SHIFT, from_user(vec, vec, shift, hd->eng, hd->strm)},
                        {DNNL_ARG_MEAN, memory(fwd_pd.mean_desc(), hd->eng)},
                        {DNNL_ARG_VARIANCE, memory(fwd_pd.variance_desc(), hd->eng)}};
        } else {
            auto bwd_pd = batch_normalization_backward::primitive_desc(hd->eng, prop_kind::backward, md, md, md, eps,
                                                                       flags, fwd_pd);
            hd->prim = batch_normalization_backward(bwd_pd);
            hd->args = {{DNNL_ARG_SRC, src},
                        {DNNL_ARG_DIFF_DST, from_user(md, plain, dy, hd->eng, hd->strm)},
                        {DNNL_ARG_MEAN, from_user(fwd_pd.mean_desc(), vec, mean, hd->eng, hd->strm)},
                        {DNNL_ARG_VARIANCE, from_user(fwd_pd.variance_desc(), vec, variance, hd->eng, hd->strm)},
                        {DNNL_ARG_SCALE, scale_m},
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

// A result after a run, into `out` (the caller's layout): which 0 = dst / diff_src, 1 = batch mean /
// diff_scale, 2 = batch variance (biased) / diff_shift.  For tests: the peer computes on the case's inputs.
int fbnops_onednn_read(void *handle, int which, float *out) {
    auto *hd = static_cast<Handle *>(handle);
    static const int fwd[] = {DNNL_ARG_DST, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    static const int bwd[] = {DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT};
    if (which < 0 || which > 2) return 1;
    memory &m = hd->args.at(hd->op == 1 ? fwd[which] : bwd[which]);
    memory user(which == 0 ? hd->plain : m.get_desc(), hd->eng, out);
    reorder(m, user).execute(hd->strm, m, user);
    hd->strm.wait();
    return 0;
}

void fbnops_onednn_destroy(void *handle) { delete static_cast<Handle *>(handle); }
}
