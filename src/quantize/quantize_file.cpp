// The file pass of `specula quantize` (quantize/quantize_file.h): plan every tensor's type, write
// the header, then each tensor's data, converting slabs of rows on the thread pool.
#include "quantize/quantize_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/threadpool.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "kernels/quants.h"
#include "quantize/row_quantizer.h"

namespace specula::quant {

namespace {

constexpr uint32_t kQuantizationVersion = 2;     // ggml's GGML_QNT_VERSION
constexpr size_t kSlabBytes = size_t{64} << 20;  // f32 rows converted per step, at most

// llama-quantize's tensor order: by the layer number of "blk.N." (others first), then by name.
int layer_of(const std::string& name) {
    int layer = -1;
    std::sscanf(name.c_str(), "blk.%d.", &layer);
    return layer;
}

std::vector<const GGUFTensor*> visit_order(const GGUFFile& f) {
    std::vector<const GGUFTensor*> order;
    for (const GGUFTensor& t : f.tensors()) order.push_back(&t);
    std::stable_sort(order.begin(), order.end(), [](const GGUFTensor* a, const GGUFTensor* b) {
        const int la = layer_of(a->name), lb = layer_of(b->name);
        return la != lb ? la < lb : a->name < b->name;
    });
    return order;
}

// An integer key, or the first element of a per-layer array; `def` when absent.
int64_t int_key(const GGUFFile& f, const std::string& key, int64_t def) {
    const GGUFValue* v = f.find(key);
    if (!v) return def;
    if (v->type == GGUFType::ARRAY) return v->arr.empty() ? def : v->arr[0].as_int(key);
    return v->as_int(key);
}

MixModel mix_model(const GGUFFile& f) {
    MixModel m;
    m.arch = f.get_string_or("general.architecture", "");
    const std::string a = m.arch + ".";
    m.n_layer = static_cast<int>(int_key(f, a + "block_count", 0));
    const int64_t heads = int_key(f, a + "attention.head_count", 1);
    const int64_t kv = int_key(f, a + "attention.head_count_kv", heads);
    m.n_gqa = kv > 0 ? static_cast<int>(heads / kv) : 1;
    m.n_expert = static_cast<int>(int_key(f, a + "expert_count", 0));
    for (const GGUFTensor& t : f.tensors()) {
        if (t.name.find("attn_v.weight") != std::string::npos ||
            t.name.find("attn_qkv.weight") != std::string::npos ||
            t.name.find("attn_kv_b.weight") != std::string::npos) {
            ++m.n_attention_wv;
        } else if (t.name == "output.weight") {
            m.has_output = true;
        }
    }
    return m;
}

struct Planned {
    const GGUFTensor* src;
    GGMLType type;  // the output type; == src->type: copied
};

void check_convertible(const GGUFFile& f, const GGUFTensor& t, GGMLType to, bool requantize) {
    const bool float_in =
        t.type == GGMLType::F32 || t.type == GGMLType::F16 || t.type == GGMLType::BF16;
    if (!float_in && !requantize) {
        fail(f.path(), ": tensor ", t.name, " is ", type_name(t.type),
             ": requantizing is disabled (pass --allow-requantize to dequantize it first)");
    }
    if (!float_in && !type_traits(t.type).supported) {
        fail(f.path(), ": tensor ", t.name, ": cannot convert from type ", type_name(t.type));
    }
    if (!row_quantizer(to)) {
        fail(f.path(), ": tensor ", t.name, ": cannot write type ", type_name(to));
    }
}

std::vector<Planned> plan(const GGUFFile& f, const QuantizeOptions& opt, int* n_fallback) {
    const MixModel m = mix_model(f);
    MixState st;
    std::vector<Planned> out;
    for (const GGUFTensor* t : visit_order(f)) {
        GGMLType to = t->type;
        if (is_quantizable(t->name, static_cast<int>(t->ne.size()), opt.mix)) {
            to = tensor_type(opt.type, m, st, t->name, t->ne[0], opt.mix, n_fallback);
        }
        if (to != t->type) check_convertible(f, *t, to, opt.allow_requantize);
        out.push_back({t, to});
    }
    return out;
}

GGUFWriter header_for(const GGUFFile& f, const std::vector<Planned>& tensors,
                      const FileType& type) {
    GGUFWriter w(3);
    for (const auto& [k, v] : f.metadata()) {
        if (k == "general.quantization_version" || k == "general.file_type" || k == "split.no" ||
            k == "split.count" || k == "split.tensors.count") {
            continue;
        }
        w.set(k, v);
    }
    w.set_u32("general.quantization_version", kQuantizationVersion);
    w.set_u32("general.file_type", type.ftype);
    for (const Planned& p : tensors) w.add_tensor_info(p.src->name, p.src->ne, p.type);
    return w;
}

class Output {
  public:
    explicit Output(std::string path) : path_(std::move(path)), part_(path_ + ".part") {
        file_ = std::fopen(part_.c_str(), "wb");
        if (!file_) fail(path_, ": cannot open ", part_, " for writing");
    }
    ~Output() {
        if (file_) std::fclose(file_);
        if (!done_) std::remove(part_.c_str());
    }
    void write(const void* p, size_t n) {
        if (n && std::fwrite(p, 1, n, file_) != n) fail(path_, ": write failed (disk full?)");
        written_ += n;
    }
    void pad(uint64_t align) {
        static const uint8_t zeros[64] = {};
        while (written_ % align) write(zeros, std::min<uint64_t>(64, align - written_ % align));
    }
    void finish() {
        const int rc = std::fclose(file_);
        file_ = nullptr;
        if (rc != 0) fail(path_, ": write failed (disk full?)");
        std::error_code ec;
        std::filesystem::rename(part_, path_, ec);
        if (ec) fail(path_, ": cannot rename ", part_, ": ", ec.message());
        done_ = true;
    }

  private:
    std::string path_, part_;
    std::FILE* file_ = nullptr;
    uint64_t written_ = 0;
    bool done_ = false;
};

// Converts one tensor slab by slab: rows to f32 (in place for F32), then into the output type.
void convert(const GGUFTensor& t, GGMLType to, ThreadPool& pool, Output& out) {
    const int64_t ne0 = t.ne[0], rows = t.n_rows();
    const size_t in_row = row_size(t.type, ne0), out_row = row_size(to, ne0);
    const RowQuantizer q = row_quantizer(to);
    const int64_t slab = std::max<int64_t>(1, static_cast<int64_t>(kSlabBytes / (4 * ne0)));
    std::vector<uint8_t> buf(static_cast<size_t>(std::min(slab, rows)) * out_row);
    std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
    for (int64_t r0 = 0; r0 < rows; r0 += slab) {
        const int64_t n = std::min(slab, rows - r0);
        pool.run([&](int ith, int nth) {
            std::vector<float>& f = scratch[static_cast<size_t>(ith)];
            if (t.type != GGMLType::F32) f.resize(static_cast<size_t>(ne0));
            for (int64_t r = ith; r < n; r += nth) {
                const uint8_t* src = t.data + static_cast<size_t>(r0 + r) * in_row;
                const float* x = reinterpret_cast<const float*>(src);
                if (t.type != GGMLType::F32) {
                    dequantize_row(t.type, src, f.data(), ne0);
                    x = f.data();
                }
                q(x, buf.data() + static_cast<size_t>(r) * out_row, ne0);
            }
        });
        out.write(buf.data(), static_cast<size_t>(n) * out_row);
    }
}

std::string shape_text(const GGUFTensor& t) {
    std::ostringstream s;
    for (size_t i = 0; i < t.ne.size(); ++i) s << (i ? ", " : "") << t.ne[i];
    return s.str();
}

void log_tensor(const QuantizeOptions& opt, size_t i, size_t n, const Planned& p, uint64_t out) {
    if (!opt.log) return;
    char line[512];
    const double mib_in = static_cast<double>(p.src->nbytes) / (1 << 20);
    std::snprintf(line, sizeof line, "[%4zu/%4zu] %36s - [%s], type = %6s, ", i + 1, n,
                  p.src->name.c_str(), shape_text(*p.src).c_str(),
                  std::string(type_name(p.src->type)).c_str());
    std::string s = line;
    if (p.type == p.src->type) {
        std::snprintf(line, sizeof line, "size = %8.3f MB", mib_in);
    } else {
        std::snprintf(line, sizeof line, "converting to %s .. size = %8.2f MiB -> %8.2f MiB",
                      std::string(type_name(p.type)).c_str(), mib_in,
                      static_cast<double>(out) / (1 << 20));
    }
    opt.log(s + line);
}

}  // namespace

QuantizeResult quantize_file(const QuantizeOptions& opt) {
    std::error_code ec;
    if (std::filesystem::equivalent(opt.input, opt.output, ec)) {
        fail(opt.output, ": is the input file; give another output path");
    }
    const std::unique_ptr<GGUFFile> f = GGUFFile::open(opt.input);
    QuantizeResult res;
    const std::vector<Planned> tensors = plan(*f, opt, &res.n_fallback);
    const GGUFWriter w = header_for(*f, tensors, opt.type);
    const uint64_t align = w.alignment();
    Output out(opt.output);
    const std::vector<uint8_t> header = w.header_bytes();
    out.write(header.data(), header.size());
    ThreadPool pool(default_threads(opt.n_threads));
    for (size_t i = 0; i < tensors.size(); ++i) {
        const Planned& p = tensors[i];
        const uint64_t n_out =
            row_size(p.type, p.src->ne[0]) * static_cast<uint64_t>(p.src->n_rows());
        if (p.type == p.src->type) {
            out.write(p.src->data, p.src->nbytes);
        } else {
            convert(*p.src, p.type, pool, out);
            ++res.n_quantized;
        }
        out.pad(align);
        log_tensor(opt, i, tensors.size(), p, n_out);
        res.bytes_in += p.src->nbytes;
        res.bytes_out += n_out;
    }
    out.finish();
    res.n_tensors = static_cast<int>(tensors.size());
    return res;
}

}  // namespace specula::quant
