// check_model_file / check_tensor_values: see file_checks.h.
#include "model/load/file_checks.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "common/threadpool.h"
#include "kernels/quants.h"

namespace specula {

namespace {

// The layer of a `blk.N.` tensor, or -1 for any other name.
int64_t layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    size_t i = 4;
    int64_t n = 0;
    for (; i < name.size() && i < 14 && name[i] >= '0' && name[i] <= '9'; ++i)
        n = n * 10 + (name[i] - '0');
    return i > 4 && i < name.size() && name[i] == '.' ? n : -1;
}

// "layers 3, 4 and 5" for messages.
std::string list(const std::set<int64_t>& s) {
    std::string out;
    size_t k = 0;
    for (int64_t v : s) {
        if (k++ > 0) out += k == s.size() ? " and " : ", ";
        out += std::to_string(v);
    }
    return out;
}

void check_layers(const GGUFFile& f, const HParams& hp) {
    const std::string bc_key = hp.arch + ".block_count";
    const std::string nn_key = hp.arch + ".nextn_predict_layers";
    const int64_t blocks = f.get_int_or(bc_key, hp.n_layer + hp.n_nextn);
    const int64_t nextn = f.get_int_or(nn_key, 0);
    std::set<int64_t> with_tensors, with_nextn;
    for (const GGUFTensor& t : f.tensors()) {
        const int64_t il = layer_of(t.name);
        if (il < 0) continue;
        if (il >= blocks)
            fail(f.path(), ": tensor '", t.name, "' belongs to layer ", il, ", but key '", bc_key,
                 "' = ", blocks, " (layers 0..", blocks - 1,
                 "): the block count is wrong or the file has a layer too many");
        with_tensors.insert(il);
        if (t.name.find(".nextn.") != std::string::npos) with_nextn.insert(il);
    }
    for (int64_t il = 0; il < blocks; ++il) {
        if (!with_tensors.count(il))
            fail(f.path(), ": layer ", il, " has no tensors (no 'blk.", il, ".*'), but key '",
                 bc_key, "' = ", blocks, " says it exists: the block count is wrong or the ",
                 "layer's tensors are missing");
    }
    std::set<int64_t> expected;
    for (int64_t il = blocks - nextn; il < blocks; ++il) expected.insert(il);
    if (nextn < 0 || nextn > blocks || with_nextn != expected) {
        std::string has = "no layer has nextn tensors";
        if (!with_nextn.empty()) {
            has = with_nextn.size() > 1 ? "nextn tensors are in layers "
                                        : "nextn tensors are in layer ";
            has += list(with_nextn);
        }
        fail(f.path(), ": key '", nn_key, "' = ", nextn, " (", f.has(nn_key) ? "" : "absent, ",
             "the MTP layers would be the last ", nextn, " of ", bc_key, " = ", blocks, "), but ",
             has, " ('blk.N.nextn.*'): the count does not match the file's MTP layers");
    }
}

bool positive_key(const std::string& suffix) {
    static const char* const kPositive[] = {
        "rope.freq_base", "rope.freq_base_swa", "rope.scaling.attn_factor",
        "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"};
    for (const char* k : kPositive)
        if (suffix == k) return true;
    return false;
}

// A non-finite value in a rope-factor tensor, or one <= 0, refused naming it.
void check_rope_tensor(const GGUFFile& f, const GGUFTensor& t) {
    const int64_t n = t.n_elements();
    const int64_t bs = type_traits(t.type).block_size;
    if (!type_traits(t.type).supported || bs <= 0 || n % bs != 0 || n > (int64_t(1) << 24))
        fail(f.path(), ": tensor '", t.name, "' (", type_name(t.type), ", ", n,
             " values) is not a rope-factor vector this engine reads");
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, v.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        if (std::isfinite(v[size_t(i)]) && v[size_t(i)] > 0) continue;
        fail(f.path(), ": tensor '", t.name, "' value ", i, " = ", v[size_t(i)],
             ": rope factors must be finite and > 0");
    }
}

void check_rope(const GGUFFile& f, const HParams& hp) {
    const std::string p = hp.arch + ".";
    const std::string type = f.get_string_or(p + "rope.scaling.type", "");
    const bool scaled = type == "linear" || type == "yarn";
    for (const auto& [key, value] : f.metadata()) {
        if (key.rfind(p + "rope.", 0) != 0 || value.type == GGUFType::ARRAY || !value.is_number())
            continue;
        const double v = value.as_float(key);
        const std::string suffix = key.substr(p.size());
        const bool factor = suffix == "rope.scaling.factor" || suffix == "rope.scale_linear";
        if (!std::isfinite(v)) fail(f.path(), ": key '", key, "' = ", v, " is not a finite number");
        if ((positive_key(suffix) || (factor && scaled)) && v <= 0)
            fail(f.path(), ": key '", key, "' = ", v, " must be > 0",
                 factor ? " (rope.scaling.type is " + type + ")" : std::string());
        if (factor && v < 0) fail(f.path(), ": key '", key, "' = ", v, " must be >= 0 (0: none)");
    }
    for (const GGUFTensor& t : f.tensors()) {
        if (t.name.find("rope_freqs") != std::string::npos ||
            t.name.find("rope_factors") != std::string::npos)
            check_rope_tensor(f, t);
    }
}

// One unit of the --check-tensors scan: rows [r0, r1) of one tensor.
struct ScanUnit {
    const GGUFTensor* t;
    int64_t r0, r1;
};

struct ScanResult {
    std::mutex mu;
    std::string error;  // the first non-finite value found, or a dequantization error
};

void scan_unit(const GGUFFile& f, const ScanUnit& u, std::vector<float>& row, ScanResult& out) {
    const GGUFTensor& t = *u.t;
    const int64_t n = t.ne.empty() ? 0 : t.ne[0];
    const size_t rb = row_size(t.type, n);
    row.resize(size_t(n));
    for (int64_t r = u.r0; r < u.r1; ++r) {
        dequantize_row(t.type, t.data + size_t(r) * rb, row.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            if (std::isfinite(row[size_t(i)])) continue;
            std::lock_guard lk(out.mu);
            if (out.error.empty())
                out.error =
                    f.path() + ": tensor '" + t.name + "' (" + std::string(type_name(t.type)) +
                    ") holds " + (std::isnan(row[size_t(i)]) ? "NaN" : "an infinity") + " at row " +
                    std::to_string(r) + ", column " + std::to_string(i) + " (--check-tensors)";
            return;
        }
    }
}

}  // namespace

uint64_t check_tensor_values(const GGUFFile& f, int n_threads) {
    std::vector<ScanUnit> units;
    uint64_t bytes = 0;
    for (const GGUFTensor& t : f.tensors()) {
        const TypeTraits& tr = type_traits(t.type);
        if (!tr.supported || t.ne.empty() || t.ne[0] % tr.block_size != 0) continue;
        const size_t rb = row_size(t.type, t.ne[0]);
        const int64_t rows = t.n_rows();
        if (rb == 0 || rows <= 0) continue;
        const int64_t per = std::max<int64_t>(1, int64_t((size_t(1) << 20) / rb));  // ~1 MiB each
        for (int64_t r = 0; r < rows; r += per) units.push_back({&t, r, std::min(rows, r + per)});
        bytes += t.nbytes;
    }
    ScanResult out;
    std::atomic<size_t> next{0};
    ThreadPool pool(default_threads(n_threads));
    pool.run([&](int, int) {
        std::vector<float> row;
        for (size_t k; (k = next.fetch_add(1)) < units.size();) {
            try {
                scan_unit(f, units[k], row, out);
            } catch (const std::exception& e) {
                std::lock_guard lk(out.mu);
                if (out.error.empty()) out.error = e.what();
            }
            std::lock_guard lk(out.mu);
            if (!out.error.empty()) return;
        }
    });
    if (!out.error.empty()) fail(out.error);
    return bytes;
}

void check_model_file(const GGUFFile& f, const HParams& hp, const FileCheckOptions& opts) {
    check_layers(f, hp);
    check_rope(f, hp);
    if (opts.check_values) {
        const auto t0 = clock_type::now();
        const uint64_t bytes = check_tensor_values(f, opts.n_threads);
        std::fprintf(stderr,
                     "--check-tensors: %s: %.1f MiB of tensor data scanned in %.2f s, "
                     "all finite\n",
                     f.path().c_str(), double(bytes) / (1 << 20), ms_since(t0) / 1e3);
    }
}

}  // namespace specula
