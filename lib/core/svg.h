// A small SVG line/area chart writer for the pictures the commands draw (memory timelines, the budget/overhead
// frontier): axes with round ticks, stacked areas, lines, markers, a legend. Plain SVG 1.1, no scripts, no fonts
// beyond the generic sans-serif.
#pragma once

#include <string>
#include <vector>

namespace monet {

class SvgChart {
 public:
  SvgChart(std::string title, std::string x_label, std::string y_label);

  // The data range of each axis (widened to round ticks when drawn). Throws monet::Error on an empty range.
  void x_range(double lo, double hi);
  void y_range(double lo, double hi);

  // Filled area between `lower` and `upper` over xs (same lengths).
  void area(const std::vector<double>& xs, const std::vector<double>& lower, const std::vector<double>& upper,
            const std::string& color, const std::string& label);
  void line(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& color,
            const std::string& label, bool dashed = false);
  void markers(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& color,
               const std::string& label);
  void hline(double y, const std::string& color, const std::string& label, bool dashed = true);
  void vline(double x, const std::string& color, const std::string& label, bool dashed = true);

  std::string render() const;

 private:
  struct Series {
    enum class Kind { area, line, markers, hline, vline } kind;
    std::vector<double> xs, lower, ys;
    std::string color, label;
    bool dashed = false;
  };
  std::string title_, x_label_, y_label_;
  double x_lo_ = 0, x_hi_ = 1, y_lo_ = 0, y_hi_ = 1;
  std::vector<Series> series_;
};

// Ticks at 1, 2 or 5 times a power of ten covering [lo, hi] with about `count` intervals.
std::vector<double> nice_ticks(double lo, double hi, int count = 6);

// Escapes &, <, >, " for SVG text and attributes.
std::string svg_escape(const std::string& s);

}  // namespace monet
