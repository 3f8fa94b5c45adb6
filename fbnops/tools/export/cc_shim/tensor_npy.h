// tensor_npy.h: tensorflow::Tensor from and to .npy files, over npy.h (fbnops' tf-cc export).
//
// LoadTensor gives a tensor of the dtype the graph wants: a float32 file for DT_BFLOAT16 is
// narrowed in memory (.npy has no bfloat16; the values fbnops writes are bfloat16 values, so this
// is exact). SaveTensor widens DT_BFLOAT16 to float32. Errors throw std::runtime_error.
#pragma once
#include <cstring>
#include <stdexcept>
#include <string>

#include "npy.h"
#include "tensorflow/core/framework/tensor.h"

namespace npy {

// The .npy descr of a file holding a tensor of `dtype`.
inline std::string descr_of(tensorflow::DataType dtype) {
    switch (dtype) {
        case tensorflow::DT_FLOAT:
        case tensorflow::DT_BFLOAT16: return "<f4";
        case tensorflow::DT_HALF: return "<f2";
        case tensorflow::DT_INT32: return "<i4";
        case tensorflow::DT_INT64: return "<i8";
        case tensorflow::DT_BOOL: return "|b1";
        default: throw std::runtime_error("npy: no .npy type for " + tensorflow::DataTypeString(dtype));
    }
}

inline tensorflow::Tensor LoadTensor(const std::string &path, tensorflow::DataType dtype) {
    const Array a = load(path);
    if (a.descr != descr_of(dtype))
        throw std::runtime_error("npy: " + path + " holds " + a.descr + ", expected " + descr_of(dtype) + " for " +
                                 tensorflow::DataTypeString(dtype));
    tensorflow::TensorShape shape;
    for (int64_t d : a.shape) shape.AddDim(d);
    tensorflow::Tensor t(dtype, shape);
    if (dtype == tensorflow::DT_BFLOAT16) {
        auto to = t.flat<tensorflow::bfloat16>();
        for (int64_t i = 0; i < to.size(); ++i) {
            float value;
            std::memcpy(&value, a.bytes.data() + 4 * i, 4);
            const uint16_t bits = to_bfloat16(value);
            std::memcpy(&to(i), &bits, 2);
        }
    } else {
        std::memcpy(const_cast<char *>(t.tensor_data().data()), a.bytes.data(), a.bytes.size());
    }
    return t;
}

inline void SaveTensor(const std::string &path, const tensorflow::Tensor &t) {
    Array a;
    a.descr = descr_of(t.dtype());
    for (int i = 0; i < t.dims(); ++i) a.shape.push_back(t.dim_size(i));
    if (t.dtype() == tensorflow::DT_BFLOAT16) {
        auto from = t.flat<tensorflow::bfloat16>();
        a.bytes.resize(4 * from.size());
        for (int64_t i = 0; i < from.size(); ++i) {
            uint16_t bits;
            std::memcpy(&bits, &from(i), 2);
            const float value = from_bfloat16(bits);
            std::memcpy(a.bytes.data() + 4 * i, &value, 4);
        }
    } else {
        const auto raw = t.tensor_data();
        a.bytes.assign(raw.data(), raw.data() + raw.size());
    }
    save(path, a);
}

}  // namespace npy
