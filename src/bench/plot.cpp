// write_bench_svg: see plot.h.
#include "bench/plot.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/error.h"

namespace specula {

void write_bench_svg(const BenchResult& r, const std::string& path) {
    std::ofstream f(path);
    if (!f) fail("cannot write plot file ", path);
    const double W = 640, H = 420, L = 60, R = 20, T = 40, B = 50;
    int nmax = 1;
    double ymax = 1.2;
    for (const BenchRow& row : r.rows)
        if (row.n_draft > 0) {
            nmax = std::max(nmax, row.n_draft);
            ymax = std::max({ymax, row.speedup * 1.1, r.model_speedup(row.n_draft) * 1.1});
        }
    auto X = [&](double n) { return L + (W - L - R) * (n - 1) / std::max(1, nmax - 1); };
    auto Y = [&](double s) { return H - B - (H - T - B) * s / ymax; };
    char buf[256];
    f << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n";
    std::snprintf(buf, sizeof buf, "speedup vs draft length%s (a=%.2f, c=%.3f)",
                  r.params.synthetic_accept >= 0 ? " [SYNTHETIC acceptance]" : "", r.a, r.c);
    f << "<text x=\"" << L << "\" y=\"20\" font-size=\"14\">" << buf << "</text>\n";
    f << "<line x1=\"" << L << "\" y1=\"" << Y(0) << "\" x2=\"" << W - R << "\" y2=\"" << Y(0)
      << "\" stroke=\"black\"/>\n<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L
      << "\" y2=\"" << Y(0) << "\" stroke=\"black\"/>\n";
    for (int n = 1; n <= nmax; ++n)
        f << "<text x=\"" << X(n) - 4 << "\" y=\"" << H - B + 18 << "\">" << n << "</text>\n";
    for (double s = 0; s <= ymax; s += 0.5) {
        std::snprintf(buf, sizeof buf, "%.1fx", s);
        f << "<text x=\"" << 20 << "\" y=\"" << Y(s) + 4 << "\">" << buf << "</text>\n";
    }
    f << "<line x1=\"" << L << "\" y1=\"" << Y(1) << "\" x2=\"" << W - R << "\" y2=\"" << Y(1)
      << "\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n";
    f << "<text x=\"" << (W / 2 - 30) << "\" y=\"" << H - 12 << "\">draft length N</text>\n";
    std::string measured, model;
    for (const BenchRow& row : r.rows) {
        if (row.n_draft <= 0) continue;
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(row.n_draft), Y(row.speedup));
        measured += buf;
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(row.n_draft),
                      Y(r.model_speedup(row.n_draft)));
        model += buf;
        f << "<circle cx=\"" << X(row.n_draft) << "\" cy=\"" << Y(row.speedup)
          << "\" r=\"3\" fill=\"#1f77b4\"/>\n";
    }
    f << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"" << measured
      << "\"/>\n<polyline fill=\"none\" stroke=\"#d62728\" stroke-dasharray=\"6 3\" "
         "stroke-width=\"2\" points=\""
      << model << "\"/>\n";
    if (const BenchRow* a = r.row("auto")) {
        f << "<line x1=\"" << L << "\" y1=\"" << Y(a->speedup) << "\" x2=\"" << W - R << "\" y2=\""
          << Y(a->speedup) << "\" stroke=\"#2ca02c\" stroke-dasharray=\"2 2\"/>\n";
    }
    f << "<text x=\"" << W - 250 << "\" y=\"" << T + 10
      << "\" fill=\"#1f77b4\">measured speedup (median tok/s)</text>\n"
      << "<text x=\"" << W - 250 << "\" y=\"" << T + 26
      << "\" fill=\"#d62728\">model (1-a^(N+1))/((1-a)(Nc+tau(N+1)))</text>\n"
      << "<text x=\"" << W - 250 << "\" y=\"" << T + 42 << "\" fill=\"#2ca02c\">auto</text>\n"
      << "</svg>\n";
}

}  // namespace specula
