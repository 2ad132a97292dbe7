#include "svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace qmoe::cli {

namespace {

constexpr double kWidth = 720, kHeight = 440;
constexpr double kLeft = 80, kRight = 180, kTop = 40, kBottom = 60;
constexpr std::array<const char*, 8> kColours{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                              "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// Decades covering [lo, hi] on a log10 axis.
struct LogAxis {
  double lo = 0, hi = 1;  // log10 of the ends
  LogAxis(double min_value, double max_value)
      : lo(std::floor(std::log10(min_value))), hi(std::ceil(std::log10(max_value))) {
    if (hi <= lo) hi = lo + 1;
  }
  double fraction(double v) const { return (std::log10(v) - lo) / (hi - lo); }
};

std::string tick_label(double v) {
  if (v >= 1 && v < 1e6) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}

}  // namespace

std::string log_log_chart_svg(const std::string& title, const std::string& x_label,
                              const std::string& y_label, const std::vector<Series>& series) {
  double x_min = INFINITY, x_max = 0, y_min = INFINITY, y_max = 0;
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!(s.x[i] > 0 && s.y[i] > 0)) continue;
      x_min = std::min(x_min, s.x[i]);
      x_max = std::max(x_max, s.x[i]);
      y_min = std::min(y_min, s.y[i]);
      y_max = std::max(y_max, s.y[i]);
    }
  }
  if (!(x_max > 0)) x_min = x_max = y_min = y_max = 1;
  const LogAxis ax(x_min, x_max), ay(y_min, y_max);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + ax.fraction(x) * plot_w; };
  auto py = [&](double y) { return kTop + (1 - ay.fraction(y)) * plot_h; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft + plot_w / 2, escape(title));
  for (double d = ax.lo; d <= ax.hi; ++d) {
    const double v = std::pow(10.0, d), x = px(v);
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x, kTop, kTop + plot_h, kTop + plot_h + 16, tick_label(v));
  }
  for (double d = ay.lo; d <= ay.hi; ++d) {
    const double v = std::pow(10.0, d), y = py(v);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, y, kLeft + plot_w, kLeft - 6, y + 4, tick_label(v));
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 18, escape(x_label),
      kTop + plot_h / 2, escape(y_label));
  for (size_t s = 0; s < series.size(); ++s) {
    const char* colour = kColours[s % kColours.size()];
    std::string points;
    std::string dots;
    for (size_t i = 0; i < series[s].x.size(); ++i) {
      const double x = series[s].x[i], y = series[s].y[i];
      if (!(x > 0 && y > 0)) continue;
      points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(x),
                          py(y), colour);
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       colour, points);
    svg += dots;
    const double ly = kTop + 10 + 20 * static_cast<double>(s);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"/>\n"
        "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
        kWidth - kRight + 15, ly, kWidth - kRight + 40, colour, kWidth - kRight + 46, ly + 4,
        escape(series[s].name));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace qmoe::cli
