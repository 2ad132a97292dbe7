#pragma once
// A small line chart as an SVG document: logarithmic x and y axes, one coloured line with dots per
// series, a legend. Enough for "time per forward against M, per backend".
#include <string>
#include <vector>

namespace qmoe::cli {

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; non-positive points are skipped
};

std::string log_log_chart_svg(const std::string& title, const std::string& x_label,
                              const std::string& y_label, const std::vector<Series>& series);

}  // namespace qmoe::cli
