// Runs ONE oneDNN Graph case read from stdin and prints what the real library did, stage by stage.
//
// Used by tests/test_onednn_real.py as the oracle for bindings_mirror.onednn_graph (one process per
// case: bad inputs may abort the real library).  Input: whitespace-separated records
//
//   op <kind> <name>                      op::kind as its C value
//   attr f32|s64|bool|str <attr> <value>  op::attr as its C value
//   lt in|out <tid> <dtype> <form ...>    a logical tensor added to the op; forms:
//       bare <layout>                     logical_tensor(tid, dt, layout)
//       ndims <n> <layout>                logical_tensor(tid, dt, n, layout)
//       dims <n> d... <layout>            logical_tensor(tid, dt, dims, layout)
//       strides <n> d... s...             logical_tensor(tid, dt, dims, strides)
//   clt in|out <tid> <dtype> <form ...>   a logical tensor given to compile (default: the op's)
//   policy <p>                            get_partitions(policy)
//   exec in|out <n> <index...>            which compile ports execute receives, in order
//   data <tid> <nbytes> <hex>             input bytes
//   end
//
// Output: one line per stage, "<stage> <status>" (status as its C value), then "out <tid> <hex>".
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "oneapi/dnnl/dnnl_graph.hpp"

using namespace dnnl::graph;
using dims = logical_tensor::dims;

static logical_tensor read_lt(std::istream &in) {
    size_t tid;
    int dt;
    std::string form;
    in >> tid >> dt >> form;
    auto dtype = static_cast<logical_tensor::data_type>(dt);
    if (form == "bare") {
        int layout;
        in >> layout;
        return logical_tensor(tid, dtype, static_cast<logical_tensor::layout_type>(layout));
    }
    int n;
    in >> n;
    if (form == "ndims") {
        int layout;
        in >> layout;
        return logical_tensor(tid, dtype, n, static_cast<logical_tensor::layout_type>(layout));
    }
    dims d(n);
    for (auto &v : d) in >> v;
    if (form == "dims") {
        int layout;
        in >> layout;
        return logical_tensor(tid, dtype, d, static_cast<logical_tensor::layout_type>(layout));
    }
    dims s(n);
    for (auto &v : s) in >> v;
    return logical_tensor(tid, dtype, d, s);
}

static std::vector<uint8_t> unhex(const std::string &h) {
    std::vector<uint8_t> out(h.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::stoi(h.substr(2 * i, 2), nullptr, 16);
    return out;
}

static void print_hex(const uint8_t *p, size_t n) {
    static const char *digits = "0123456789abcdef";
    std::string s(2 * n, '0');
    for (size_t i = 0; i < n; ++i) {
        s[2 * i] = digits[p[i] >> 4];
        s[2 * i + 1] = digits[p[i] & 15];
    }
    std::printf("%s", s.c_str());
}

// A library-allocated byte buffer (plain malloc pointers are refused by SYCL-runtime builds).
static dnnl::memory bytes(const dnnl::engine &eng, size_t n) {
    dnnl::memory::desc md({static_cast<dnnl::memory::dim>(n ? n : 1)}, dnnl::memory::data_type::u8,
                          dnnl::memory::format_tag::x);
    return dnnl::memory(md, eng);
}

int main() {
    std::setvbuf(stdout, nullptr, _IONBF, 0);  // every stage line survives a crash
    std::string stage = "parse";
    try {
        std::string rec, name;
        int kind = 0, policy = 1;
        std::vector<logical_tensor> ins, outs, cins, couts;
        bool have_cin = false, have_cout = false;
        std::vector<int> exec_in, exec_out;
        bool have_exec_in = false, have_exec_out = false;
        std::map<size_t, std::vector<uint8_t>> data;
        struct Attr {
            std::string type;
            int id;
            std::string value;
        };
        std::vector<Attr> attrs;
        stage = "logical_tensor";
        while (std::cin >> rec && rec != "end") {
            if (rec == "op") {
                std::cin >> kind >> name;
            } else if (rec == "attr") {
                Attr a;
                std::cin >> a.type >> a.id >> a.value;
                attrs.push_back(a);
            } else if (rec == "lt" || rec == "clt") {
                std::string dir;
                std::cin >> dir;
                logical_tensor lt = read_lt(std::cin);
                if (rec == "lt") (dir == "in" ? ins : outs).push_back(lt);
                else {
                    (dir == "in" ? cins : couts).push_back(lt);
                    (dir == "in" ? have_cin : have_cout) = true;
                }
            } else if (rec == "policy") {
                std::cin >> policy;
            } else if (rec == "exec") {
                std::string dir;
                int n;
                std::cin >> dir >> n;
                auto &v = dir == "in" ? exec_in : exec_out;
                (dir == "in" ? have_exec_in : have_exec_out) = true;
                v.resize(n);
                for (auto &i : v) std::cin >> i;
            } else if (rec == "data") {
                size_t tid, n;
                std::string h;
                std::cin >> tid >> n >> h;
                data[tid] = unhex(h);
            }
        }
        std::printf("logical_tensor 0\n");
        stage = "op";
        op o(0, static_cast<op::kind>(kind), name);
        for (auto &a : attrs) {
            auto id = static_cast<op::attr>(a.id);
            if (a.type == "f32") o.set_attr<float>(id, std::stof(a.value));
            else if (a.type == "s64") o.set_attr<int64_t>(id, std::stoll(a.value));
            else if (a.type == "bool") o.set_attr<bool>(id, a.value == "1");
            else o.set_attr<std::string>(id, a.value);
        }
        o.add_inputs(ins);
        o.add_outputs(outs);
        std::printf("op 0\n");
        stage = "add_op";
        dnnl::graph::graph g(dnnl::engine::kind::cpu);
        auto st = g.add_op(o, false);
        std::printf("add_op %d\n", static_cast<int>(st));
        if (st != status::success) return 0;
        stage = "finalize";
        g.finalize();
        std::printf("finalize 0\n");
        stage = "get_partitions";
        auto parts = g.get_partitions(static_cast<partition::policy>(policy));
        std::printf("partitions %zu supported %d\n", parts.size(), parts.empty() ? 0 : (int)parts[0].is_supported());
        if (parts.size() != 1 || !parts[0].is_supported()) return 0;
        stage = "compile";
        dnnl::engine eng(dnnl::engine::kind::cpu, 0);
        dnnl::stream strm(eng);
        if (!have_cin) cins = ins;
        if (!have_cout) couts = outs;
        auto cp = parts[0].compile(cins, couts, eng);
        std::printf("compile 0\n");
        stage = "query";
        std::vector<logical_tensor> qouts;
        for (auto &lt : couts) {
            auto q = cp.query_logical_tensor(lt.get_id());
            qouts.push_back(q);
            auto d = q.get_dims();
            std::printf("outlt %zu %zu", q.get_id(), d.size());
            for (auto v : d) std::printf(" %lld", (long long)v);
            std::printf("\n");
        }
        stage = "execute";
        if (!have_exec_in)
            for (size_t i = 0; i < cins.size(); ++i) exec_in.push_back(i);
        if (!have_exec_out)
            for (size_t i = 0; i < qouts.size(); ++i) exec_out.push_back(i);
        std::vector<dnnl::memory> keep;
        std::vector<tensor> tin, tout;
        for (int i : exec_in) {
            auto &lt = cins.at(i);
            size_t n = lt.get_mem_size();
            auto m = bytes(eng, n);
            auto &src = data[lt.get_id()];
            std::memset(m.get_data_handle(), 0, n);
            std::memcpy(m.get_data_handle(), src.data(), std::min(n, src.size()));
            tin.emplace_back(lt, eng, m.get_data_handle());
            keep.push_back(m);
        }
        std::vector<std::pair<size_t, size_t>> out_sizes;
        for (int i : exec_out) {
            auto &lt = qouts.at(i);
            size_t n = lt.get_mem_size();
            auto m = bytes(eng, n);
            std::memset(m.get_data_handle(), 0xff, n);  // NaN in every float type: unwritten shows
            tout.emplace_back(lt, eng, m.get_data_handle());
            keep.push_back(m);
            out_sizes.emplace_back(lt.get_id(), n);
        }
        cp.execute(strm, tin, tout);
        strm.wait();
        std::printf("execute 0\n");
        for (size_t i = 0; i < tout.size(); ++i) {
            std::printf("out %zu ", out_sizes[i].first);
            print_hex(static_cast<const uint8_t *>(tout[i].get_data_handle()), out_sizes[i].second);
            std::printf("\n");
        }
    } catch (dnnl::error &e) {
        std::printf("%s %d\n", stage.c_str(), static_cast<int>(e.status));
        std::fprintf(stderr, "%s\n", e.what());
    } catch (std::exception &e) {
        std::printf("%s exception\n", stage.c_str());
        std::fprintf(stderr, "%s\n", e.what());
    }
    std::fflush(stdout);
    return 0;
}
