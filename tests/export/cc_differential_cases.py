"""The cases of ``test_cc_differential.py``: each a builder program in C++ and through the mirror.

``CASES`` pairs a C++ function body (one function of the harness, :func:`harness_source`) with
the same calls on ``bindings_mirror.cc``. Both end in ``Finish(r, scope, feeds, fetches)`` /
``finish(scope, feeds, fetches)``, which record the scope's status, run the fetches (unless one
is an empty Output, which would crash TF: C7) and record the Run status and the outputs. Inputs
come from :func:`pattern` (C++ ``Pattern``), exact in float32, half and bfloat16.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from bindings_mirror import cc
from bindings_mirror.cc import ops


def pattern(dims, dtype=np.float32) -> np.ndarray:
    """Element i is ((37 i) mod 101) / 8 - 6: exact in float32, half and bfloat16 (C++ ``Pattern``)."""
    i = np.arange(int(np.prod(dims)), dtype=np.int64)
    return (((37 * i) % 101) / 8.0 - 6.0).astype(dtype).reshape(dims)


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    cpp: str  # body of a C++ function with `Report& r` (Finish(r, scope, feeds, fetches) ends it)
    mirror: Callable  # the same program through bindings_mirror.cc: mirror(finish)


def _x(scope, dims=(2, 2, 2, 3), dtype=cc.DT_FLOAT, name="x"):
    return ops.Placeholder(scope.WithOpName(name), dtype, ops.Placeholder.Shape(list(dims)))


S3 = "{1.f, 0.5f, 2.f}"
O3 = "{0.f, 1.f, -1.f}"
SCALE, OFFSET = [1.0, 0.5, 2.0], [0.0, 1.0, -1.0]


def _train_v3(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [], ops.FusedBatchNormV3.Epsilon(0.001))
    dy = _x(s, name="dy")
    g = ops.FusedBatchNormGradV3(s.WithOpName("grad"), dy, x, SCALE, bn.reserve_space_1, bn.reserve_space_2,
                                 bn.reserve_space_3, ops.FusedBatchNormGradV3.Epsilon(0.001))  # fmt: skip
    finish(s, {x: pattern((2, 2, 2, 3)), dy: pattern((2, 2, 2, 3)) / 4},
           [bn.y, bn.batch_mean, bn.batch_variance, g.x_backprop, g.scale_backprop, g.offset_backprop])  # fmt: skip


def _frozen_grad_nchw(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s, (2, 3, 2, 2))
    dy = _x(s, (2, 3, 2, 2), name="dy")
    a = ops.FusedBatchNormGradV3.DataFormat("NCHW").IsTraining(False)
    g = ops.FusedBatchNormGradV3(s.WithOpName("grad"), dy, x, SCALE, [5.0, 4.0, 3.0], [2.0, 3.0, 4.0], [], a)
    feeds = {x: pattern((2, 3, 2, 2)), dy: pattern((2, 3, 2, 2)) / 2}
    finish(s, feeds, [g.x_backprop, g.scale_backprop, g.offset_backprop])


def _v2_half(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s, dtype=cc.DT_HALF)
    bn = ops.FusedBatchNormV2(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    finish(s, {x: pattern((2, 2, 2, 3), np.float16)}, [bn.y, bn.batch_mean, bn.batch_variance])


def _v1_nchw(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s, (2, 3, 2, 2))
    bn = ops.FusedBatchNorm(s.WithOpName("bn"), x, SCALE, OFFSET, [], [], ops.FusedBatchNorm.DataFormat("NCHW"))
    finish(s, {x: pattern((2, 3, 2, 2))}, [bn.y, bn.batch_mean, bn.batch_variance])


def _v3_ndhwc_bf16(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s, (2, 2, 2, 2, 3), cc.DT_BFLOAT16)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [], ops.FusedBatchNormV3.DataFormat("NDHWC"))
    finish(s, {x: pattern((2, 2, 2, 2, 3), ml_dtypes.bfloat16)}, [bn.y, bn.batch_mean, bn.reserve_space_2])


def _frozen_fetch_mean(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [5.0, 4.0, 3.0], [2.0, 3.0, 4.0],
                              ops.FusedBatchNormV3.IsTraining(False))  # fmt: skip
    finish(s, {x: pattern((2, 2, 2, 3))}, [bn.y, bn.batch_mean])


def _scale_mismatch(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    g = ops.FusedBatchNormGradV3(s.WithOpName("grad"), x, x, [1.0], SCALE, SCALE, SCALE)
    finish(s, {x: pattern((2, 2, 2, 3))}, [g.x_backprop])


def _dtype_mismatch(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s, dtype=cc.DT_HALF)
    dy = _x(s, name="dy")
    g = ops.FusedBatchNormGradV3(s.WithOpName("grad"), dy, x, SCALE, SCALE, SCALE, SCALE)
    finish(s, {x: pattern((2, 2, 2, 3), np.float16), dy: pattern((2, 2, 2, 3))}, [g.x_backprop])


def _missing_feed(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    finish(s, {}, [bn.y])


def _feed_wrong_dtype(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    finish(s, {x: pattern((2, 2, 2, 3), np.float16)}, [bn.y])


def _feed_wrong_shape(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    finish(s, {x: pattern((2, 2, 2, 2))}, [bn.y])


def _bad_data_format(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [], ops.FusedBatchNormV3.DataFormat("XYZW"))
    finish(s, {x: pattern((2, 2, 2, 3))}, [bn.y])


def _layout_of_wrong_rank(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [], ops.FusedBatchNormV3.DataFormat("NCDHW"))
    finish(s, {x: pattern((2, 2, 2, 3))}, [bn.y])


def _training_grad_empty_reserve(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    g = ops.FusedBatchNormGradV3(s.WithOpName("grad"), x, x, SCALE, [], [], [])
    finish(s, {x: pattern((2, 2, 2, 3))}, [g.x_backprop])


def _frozen_empty_statistics(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [], ops.FusedBatchNormV3.IsTraining(False))
    finish(s, {x: pattern((2, 2, 2, 3))}, [bn.y])


def _rank_3_input(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s, (2, 2, 3))
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    finish(s, {x: pattern((2, 2, 3))}, [bn.y])


def _bad_output_index(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    finish(s, {x: pattern((2, 2, 2, 3))}, [cc.Output(bn.operation, 7)])


def _fed_and_fetched(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    finish(s, {x: pattern((2, 2, 2, 3))}, [bn.y, x])


def _run_after_error(finish):
    s = cc.Scope.NewRootScope()
    x = _x(s)
    bn = ops.FusedBatchNormV3(s.WithOpName("bn"), x, SCALE, OFFSET, [], [])
    ops.FusedBatchNormV3(s.WithOpName("bad"), x, [1.0], OFFSET, [], [])
    finish(s, {x: pattern((2, 2, 2, 3))}, [bn.batch_mean])


_FEED_X = "{{x, Pattern(DT_FLOAT, {2, 2, 2, 3})}}"
X = 'auto x = ops::Placeholder(scope.WithOpName("x"), DT_FLOAT, ops::Placeholder::Shape({2, 2, 2, 3}));'
BN = f'auto bn = ops::FusedBatchNormV3(scope.WithOpName("bn"), x, {S3}, {O3}, {{}}, {{}}'
CASES = [
    Case(
        "train_v3_nhwc",
        "V3 forward + grad op, training, NHWC float",
        f"""{X}
  {BN}, ops::FusedBatchNormV3::Epsilon(0.001f));
  auto dy = ops::Placeholder(scope.WithOpName("dy"), DT_FLOAT, ops::Placeholder::Shape({{2, 2, 2, 3}}));
  auto grad = ops::FusedBatchNormGradV3(scope.WithOpName("grad"), dy, x, {S3}, bn.reserve_space_1,
      bn.reserve_space_2, bn.reserve_space_3, ops::FusedBatchNormGradV3::Epsilon(0.001f));
  Finish(r, scope, {{{{x, Pattern(DT_FLOAT, {{2, 2, 2, 3}})}}, {{dy, Pattern(DT_FLOAT, {{2, 2, 2, 3}}, 4)}}}},
         {{bn.y, bn.batch_mean, bn.batch_variance, grad.x_backprop, grad.scale_backprop, grad.offset_backprop}});""",
        _train_v3,
    ),
    Case(
        "frozen_grad_v3_nchw",
        "V3 grad op, frozen, NCHW, statistics as initializer lists",
        f"""
  auto x = ops::Placeholder(scope.WithOpName("x"), DT_FLOAT, ops::Placeholder::Shape({{2, 3, 2, 2}}));
  auto dy = ops::Placeholder(scope.WithOpName("dy"), DT_FLOAT, ops::Placeholder::Shape({{2, 3, 2, 2}}));
  auto grad = ops::FusedBatchNormGradV3(scope.WithOpName("grad"), dy, x, {S3},
      {{5.f, 4.f, 3.f}}, {{2.f, 3.f, 4.f}}, {{}},
      ops::FusedBatchNormGradV3::DataFormat("NCHW").IsTraining(false));
  Finish(r, scope, {{{{x, Pattern(DT_FLOAT, {{2, 3, 2, 2}})}}, {{dy, Pattern(DT_FLOAT, {{2, 3, 2, 2}}, 2)}}}},
         {{grad.x_backprop, grad.scale_backprop, grad.offset_backprop}});""",
        _frozen_grad_nchw,
    ),
    Case(
        "v2_half_nhwc",
        "V2 forward, training, half",
        f"""
  auto x = ops::Placeholder(scope.WithOpName("x"), DT_HALF, ops::Placeholder::Shape({{2, 2, 2, 3}}));
  auto bn = ops::FusedBatchNormV2(scope.WithOpName("bn"), x, {S3}, {O3}, {{}}, {{}});
  Finish(r, scope, {{{{x, Pattern(DT_HALF, {{2, 2, 2, 3}})}}}}, {{bn.y, bn.batch_mean, bn.batch_variance}});""",
        _v2_half,
    ),
    Case(
        "v1_nchw",
        "V1 forward, training, NCHW",
        f"""
  auto x = ops::Placeholder(scope.WithOpName("x"), DT_FLOAT, ops::Placeholder::Shape({{2, 3, 2, 2}}));
  auto bn = ops::FusedBatchNorm(scope.WithOpName("bn"), x, {S3}, {O3}, {{}}, {{}},
      ops::FusedBatchNorm::DataFormat("NCHW"));
  Finish(r, scope, {{{{x, Pattern(DT_FLOAT, {{2, 3, 2, 2}})}}}}, {{bn.y, bn.batch_mean, bn.batch_variance}});""",
        _v1_nchw,
    ),
    Case(
        "v3_ndhwc_bfloat16",
        "V3 forward, training, 5-D NDHWC, bfloat16",
        f"""
  auto x = ops::Placeholder(scope.WithOpName("x"), DT_BFLOAT16, ops::Placeholder::Shape({{2, 2, 2, 2, 3}}));
  {BN}, ops::FusedBatchNormV3::DataFormat("NDHWC"));
  Finish(r, scope, {{{{x, Pattern(DT_BFLOAT16, {{2, 2, 2, 2, 3}})}}}}, {{bn.y, bn.batch_mean, bn.reserve_space_2}});""",
        _v3_ndhwc_bf16,
    ),
    Case(
        "frozen_forward_fetches_batch_mean",
        "V3 forward, frozen, fetching batch_mean",
        f"""{X}
  auto bn = ops::FusedBatchNormV3(scope.WithOpName("bn"), x, {S3}, {O3}, {{5.f, 4.f, 3.f}}, {{2.f, 3.f, 4.f}},
      ops::FusedBatchNormV3::IsTraining(false));
  Finish(r, scope, {_FEED_X}, {{bn.y, bn.batch_mean}});""",
        _frozen_fetch_mean,
    ),
    Case(
        "scale_shape_mismatch",
        "grad op: scale of 1 element for 3 channels",
        f"""{X}
  auto grad = ops::FusedBatchNormGradV3(scope.WithOpName("grad"), x, x, {{1.f}}, {S3}, {S3}, {S3});
  Finish(r, scope, {_FEED_X}, {{grad.x_backprop}});""",
        _scale_mismatch,
    ),
    Case(
        "dtype_mismatch",
        "grad op: half x, float y_backprop",
        f"""
  auto x = ops::Placeholder(scope.WithOpName("x"), DT_HALF, ops::Placeholder::Shape({{2, 2, 2, 3}}));
  auto dy = ops::Placeholder(scope.WithOpName("dy"), DT_FLOAT, ops::Placeholder::Shape({{2, 2, 2, 3}}));
  auto grad = ops::FusedBatchNormGradV3(scope.WithOpName("grad"), dy, x, {S3}, {S3}, {S3}, {S3});
  Finish(r, scope, {{{{x, Pattern(DT_HALF, {{2, 2, 2, 3}})}}, {{dy, Pattern(DT_FLOAT, {{2, 2, 2, 3}})}}}},
         {{grad.x_backprop}});""",
        _dtype_mismatch,
    ),
    Case(
        "missing_feed",
        "Run without feeding the placeholder",
        f"""{X}
  {BN});
  Finish(r, scope, {{}}, {{bn.y}});""",
        _missing_feed,
    ),
    Case(
        "feed_of_wrong_dtype",
        "a half tensor fed to a float placeholder",
        f"""{X}
  {BN});
  Finish(r, scope, {{{{x, Pattern(DT_HALF, {{2, 2, 2, 3}})}}}}, {{bn.y}});""",
        _feed_wrong_dtype,
    ),
    Case(
        "feed_of_wrong_shape",
        "2 channels fed where the placeholder has 3",
        f"""{X}
  {BN});
  Finish(r, scope, {{{{x, Pattern(DT_FLOAT, {{2, 2, 2, 2}})}}}}, {{bn.y}});""",
        _feed_wrong_shape,
    ),
    Case(
        "bad_data_format",
        'DataFormat("XYZW")',
        f"""{X}
  {BN}, ops::FusedBatchNormV3::DataFormat("XYZW"));
  Finish(r, scope, {_FEED_X}, {{bn.y}});""",
        _bad_data_format,
    ),
    Case(
        "layout_of_wrong_rank",
        'DataFormat("NCDHW") on a 4-D x',
        f"""{X}
  {BN}, ops::FusedBatchNormV3::DataFormat("NCDHW"));
  Finish(r, scope, {_FEED_X}, {{bn.y}});""",
        _layout_of_wrong_rank,
    ),
    Case(
        "training_grad_empty_reserve_spaces",
        "grad op, is_training, empty reserve spaces",
        f"""{X}
  auto grad = ops::FusedBatchNormGradV3(scope.WithOpName("grad"), x, x, {S3}, {{}}, {{}}, {{}});
  Finish(r, scope, {_FEED_X}, {{grad.x_backprop}});""",
        _training_grad_empty_reserve,
    ),
    Case(
        "frozen_forward_empty_statistics",
        "forward, frozen, empty mean/variance",
        f"""{X}
  {BN}, ops::FusedBatchNormV3::IsTraining(false));
  Finish(r, scope, {_FEED_X}, {{bn.y}});""",
        _frozen_empty_statistics,
    ),
    Case(
        "rank_3_input",
        "a 3-D x",
        f"""
  auto x = ops::Placeholder(scope.WithOpName("x"), DT_FLOAT, ops::Placeholder::Shape({{2, 2, 3}}));
  {BN});
  Finish(r, scope, {{{{x, Pattern(DT_FLOAT, {{2, 2, 3}})}}}}, {{bn.y}});""",
        _rank_3_input,
    ),
    Case(
        "bad_output_index",
        "fetching Output(bn.operation, 7)",
        f"""{X}
  {BN});
  Finish(r, scope, {_FEED_X}, {{Output(bn.operation, 7)}});""",
        _bad_output_index,
    ),
    Case(
        "fed_and_fetched",
        "fetching the placeholder that is fed",
        f"""{X}
  {BN});
  Finish(r, scope, {_FEED_X}, {{bn.y, x}});""",
        _fed_and_fetched,
    ),
    Case(
        "run_after_a_construction_error",
        "Run, fetching a good op, after another op failed",
        f"""{X}
  {BN});
  auto bad = ops::FusedBatchNormV3(scope.WithOpName("bad"), x, {{1.f}}, {O3}, {{}}, {{}});
  Finish(r, scope, {_FEED_X}, {{bn.batch_mean}});""",
        _run_after_error,
    ),
]

HARNESS = r"""// The C++ half of tests/export/test_cc_differential.py: every case in one program.
// Each case builds its own Scope; one JSON line per case: statuses, number of outputs
// (written as outputs/<case>_<i>.npy).
#include <cmath>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "tensor_npy.h"
#include "tensorflow/cc/client/client_session.h"
#include "tensorflow/cc/ops/array_ops.h"
#include "tensorflow/cc/ops/const_op.h"
#include "tensorflow/cc/ops/nn_ops.h"

using namespace tensorflow;

struct Report {
  Status scope_status, run_status;
  bool ran = false;
  std::vector<Tensor> outputs;
};

// Element i is ((37 i) mod 101) / 8 - 6, divided by `divisor` (Python: pattern()).
Tensor Pattern(DataType dtype, std::initializer_list<int64_t> dims, float divisor = 1.f) {
  Tensor f(DT_FLOAT, TensorShape(dims));
  auto v = f.flat<float>();
  for (int64_t i = 0; i < v.size(); ++i) v(i) = (float((37 * i) % 101) / 8.f - 6.f) / divisor;
  if (dtype == DT_FLOAT) return f;
  Tensor t(dtype, f.shape());
  for (int64_t i = 0; i < v.size(); ++i) {
    if (dtype == DT_HALF) t.flat<Eigen::half>()(i) = Eigen::half(v(i));
    else t.flat<bfloat16>()(i) = bfloat16(v(i));
  }
  return t;
}

void Finish(Report& r, const Scope& scope, const ClientSession::FeedType& feeds, std::vector<Output> fetches) {
  r.scope_status = scope.status();
  for (const Output& f : fetches)
    if (f.node() == nullptr) return;  // an empty Output: TF would crash in Run
  ClientSession session(scope);
  r.ran = true;
  r.run_status = session.Run(feeds, fetches, &r.outputs);
}

std::string Json(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += std::string("\\") + char(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20) { char buf[8]; snprintf(buf, sizeof buf, "\\u%04x", c); out += buf; }
    else out += char(c);
  }
  return out + "\"";
}

std::string StatusJson(const Status& s) {
  return "[" + std::to_string(int(s.code())) + ", " + Json(std::string(s.message())) + "]";
}

@FUNCTIONS@

int main() {
  const std::vector<std::pair<std::string, std::function<void(Report&)>>> cases = {@TABLE@};
  for (const auto& [name, run] : cases) {
    Report r;
    run(r);
    for (size_t i = 0; i < r.outputs.size(); ++i)
      npy::SaveTensor("outputs/" + name + "_" + std::to_string(i) + ".npy", r.outputs[i]);
    std::cout << "{\"case\": " << Json(name) << ", \"scope\": " << StatusJson(r.scope_status)
              << ", \"run\": " << (r.ran ? StatusJson(r.run_status) : "null")
              << ", \"outputs\": " << r.outputs.size() << "}" << std::endl;
  }
  return 0;
}
"""


def harness_source() -> str:
    head = "Scope scope = Scope::NewRootScope();"
    functions = "\n\n".join(f"void Case_{c.name}(Report& r) {{\n  {head}\n  {c.cpp.strip()}\n}}" for c in CASES)
    table = ", ".join(f'{{"{c.name}", Case_{c.name}}}' for c in CASES)
    return HARNESS.replace("@FUNCTIONS@", functions).replace("@TABLE@", table)
