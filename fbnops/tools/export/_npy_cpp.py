"""``npy.h``: the tiny, self-contained ``.npy`` reader/writer the exported C++ programs include.

Enough of NumPy's format 1.0/2.0 for the exported programs: little-endian float32 (``<f4``),
float16 (``<f2``), int32 (``<i4``), int64 (``<i8``) and bool (``|b1``), C order. bfloat16 crosses
the files as float32 (``_plan.py``): :func:`npy::to_bfloat16` narrows (round to nearest even, as
``ml_dtypes`` and TensorFlow do) and :func:`npy::from_bfloat16` widens (exact).
"""

from __future__ import annotations

NPY_H = r"""// npy.h - read and write NumPy .npy files (format 1.0/2.0), written by fbnops export.
// Supports little-endian <f4, <f2, <i4, <i8 and |b1 arrays in C order; that is all the program needs.
// bfloat16 crosses the files as float32 (.npy has no bfloat16): to_bfloat16 / from_bfloat16.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace npy {

struct Array {
    std::string descr;           // "<f4", "<f2", "<i4", "<i8" or "|b1"
    std::vector<int64_t> shape;  // C order
    std::vector<uint8_t> bytes;  // the elements, little-endian
};

inline size_t itemsize(const std::string &descr) {
    if (descr == "<f4" || descr == "<i4") return 4;
    if (descr == "<f2") return 2;
    if (descr == "<i8") return 8;
    if (descr == "|b1") return 1;
    throw std::runtime_error("npy: unsupported dtype '" + descr + "'");
}

inline int64_t element_count(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

inline Array load(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("npy: cannot open " + path);
    char magic[8];
    f.read(magic, 8);
    if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error("npy: not a .npy file: " + path);
    uint8_t len[4] = {0, 0, 0, 0};
    f.read(reinterpret_cast<char *>(len), magic[6] == 1 ? 2 : 4);
    uint32_t header_len = len[0] | len[1] << 8 | len[2] << 16 | uint32_t(len[3]) << 24;
    std::string header(header_len, ' ');
    f.read(&header[0], header_len);
    Array a;
    size_t p = header.find("'descr':");
    size_t q = header.find('\'', header.find('\'', p + 8) + 1);
    if (p == std::string::npos || q == std::string::npos) throw std::runtime_error("npy: bad header in " + path);
    a.descr = header.substr(header.find('\'', p + 8) + 1, q - header.find('\'', p + 8) - 1);
    if (header.find("'fortran_order': False") == std::string::npos)
        throw std::runtime_error("npy: " + path + " is not in C order");
    p = header.find('(', header.find("'shape':"));
    q = header.find(')', p);
    for (size_t i = p + 1; i < q;) {
        size_t end = header.find_first_of(",)", i);
        std::string dim = header.substr(i, end - i);
        if (dim.find_first_not_of(' ') != std::string::npos) a.shape.push_back(std::stoll(dim));
        i = end + 1;
    }
    a.bytes.resize(size_t(element_count(a.shape)) * itemsize(a.descr));
    f.read(reinterpret_cast<char *>(a.bytes.data()), std::streamsize(a.bytes.size()));
    if (!f) throw std::runtime_error("npy: " + path + " is shorter than its header says");
    return a;
}

inline void save(const std::string &path, const Array &a) {
    std::string shape = "(";
    for (size_t i = 0; i < a.shape.size(); ++i)
        shape += std::to_string(a.shape[i]) + (a.shape.size() == 1 ? "," : i + 1 < a.shape.size() ? ", " : "");
    shape += ")";
    std::string header = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("npy: cannot write " + path);
    const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              uint8_t(header.size() & 0xff), uint8_t(header.size() >> 8)};
    f.write(reinterpret_cast<const char *>(head), 10);
    f.write(header.data(), std::streamsize(header.size()));
    f.write(reinterpret_cast<const char *>(a.bytes.data()), std::streamsize(a.bytes.size()));
    if (!f) throw std::runtime_error("npy: writing " + path + " failed");
}

inline uint16_t to_bfloat16(float value) {  // round to nearest even; NaN stays NaN
    uint32_t u;
    std::memcpy(&u, &value, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

inline float from_bfloat16(uint16_t bits) {
    uint32_t u = uint32_t(bits) << 16;
    float value;
    std::memcpy(&value, &u, 4);
    return value;
}

}  // namespace npy
"""
