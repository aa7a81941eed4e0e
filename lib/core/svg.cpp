#include "core/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace monet {
namespace {

constexpr double kWidth = 960, kHeight = 480;
constexpr double kLeft = 72, kRight = 24, kTop = 56, kBottom = 64;  // plot margins in pixels

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick_label(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::abs(v) < step * 1e-9 ? 0.0 : v);
  return buf;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(count, 1);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double frac = raw / mag;
  const double step = (frac <= 1 ? 1 : frac <= 2 ? 2 : frac <= 5 ? 5 : 10) * mag;
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  if (ticks.back() < hi) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string svg_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

SvgChart::SvgChart(std::string title, std::string x_label, std::string y_label)
    : title_(std::move(title)), x_label_(std::move(x_label)), y_label_(std::move(y_label)) {}

void SvgChart::x_range(double lo, double hi) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) fail("chart '", title_, "': empty x range");
  x_lo_ = lo, x_hi_ = hi;
}

void SvgChart::y_range(double lo, double hi) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) fail("chart '", title_, "': empty y range");
  y_lo_ = lo, y_hi_ = hi;
}

void SvgChart::area(const std::vector<double>& xs, const std::vector<double>& lower, const std::vector<double>& upper,
                    const std::string& color, const std::string& label) {
  if (xs.size() != lower.size() || xs.size() != upper.size()) fail("chart '", title_, "': area lengths differ");
  series_.push_back({Series::Kind::area, xs, lower, upper, color, label});
}

void SvgChart::line(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& color,
                    const std::string& label, bool dashed) {
  if (xs.size() != ys.size()) fail("chart '", title_, "': line lengths differ");
  series_.push_back({Series::Kind::line, xs, {}, ys, color, label, dashed});
}

void SvgChart::markers(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& color,
                       const std::string& label) {
  if (xs.size() != ys.size()) fail("chart '", title_, "': marker lengths differ");
  series_.push_back({Series::Kind::markers, xs, {}, ys, color, label});
}

void SvgChart::hline(double y, const std::string& color, const std::string& label, bool dashed) {
  series_.push_back({Series::Kind::hline, {}, {}, {y}, color, label, dashed});
}

void SvgChart::vline(double x, const std::string& color, const std::string& label, bool dashed) {
  series_.push_back({Series::Kind::vline, {x}, {}, {}, color, label, dashed});
}

std::string SvgChart::render() const {
  const std::vector<double> xt = nice_ticks(x_lo_, x_hi_), yt = nice_ticks(y_lo_, y_hi_);
  const double x0 = xt.front(), x1 = xt.back(), y0 = yt.front(), y1 = yt.back();
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (std::clamp(x, x0, x1) - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + ph - (std::clamp(y, y0, y1) - y0) / (y1 - y0) * ph; };
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" +
                  num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<title>" + svg_escape(title_) + "</title>\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(kWidth / 2) + "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" + svg_escape(title_) +
       "</text>\n";
  // Grid and tick labels.
  for (double t : yt)
    s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(py(t)) + "\" x2=\"" + num(kLeft + pw) + "\" y2=\"" +
         num(py(t)) + "\" stroke=\"#e0e0e0\"/><text x=\"" + num(kLeft - 6) + "\" y=\"" + num(py(t) + 4) +
         "\" text-anchor=\"end\">" + tick_label(t, ystep) + "</text>\n";
  for (double t : xt)
    s += "<line x1=\"" + num(px(t)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(px(t)) + "\" y2=\"" +
         num(kTop + ph) + "\" stroke=\"#e0e0e0\"/><text x=\"" + num(px(t)) + "\" y=\"" + num(kTop + ph + 16) +
         "\" text-anchor=\"middle\">" + tick_label(t, xstep) + "</text>\n";
  s += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kHeight - 24) + "\" text-anchor=\"middle\">" +
       svg_escape(x_label_) + "</text>\n";
  s += "<text transform=\"translate(18," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       svg_escape(y_label_) + "</text>\n";

  auto points = [&](const std::vector<double>& xs, const std::vector<double>& ys) {
    std::string p;
    for (size_t i = 0; i < xs.size(); ++i) p += (i ? " " : "") + num(px(xs[i])) + "," + num(py(ys[i]));
    return p;
  };
  const std::string dash = " stroke-dasharray=\"6,4\"";
  for (const Series& d : series_) {
    switch (d.kind) {
      case Series::Kind::area: {
        std::vector<double> rx(d.xs.rbegin(), d.xs.rend()), ry(d.lower.rbegin(), d.lower.rend());
        s += "<polygon class=\"area\" fill=\"" + d.color + "\" stroke=\"none\" points=\"" + points(d.xs, d.ys) + " " +
             points(rx, ry) + "\"><title>" + svg_escape(d.label) + "</title></polygon>\n";
        break;
      }
      case Series::Kind::line:
        s += "<polyline class=\"line\" fill=\"none\" stroke=\"" + d.color + "\" stroke-width=\"1.5\"" +
             (d.dashed ? dash : "") + " points=\"" + points(d.xs, d.ys) + "\"><title>" + svg_escape(d.label) +
             "</title></polyline>\n";
        break;
      case Series::Kind::markers:
        for (size_t i = 0; i < d.xs.size(); ++i)
          s += "<circle class=\"marker\" cx=\"" + num(px(d.xs[i])) + "\" cy=\"" + num(py(d.ys[i])) + "\" r=\"3.5\" fill=\"" +
               d.color + "\"/>\n";
        break;
      case Series::Kind::hline:
        s += "<line class=\"hline\" x1=\"" + num(kLeft) + "\" y1=\"" + num(py(d.ys[0])) + "\" x2=\"" + num(kLeft + pw) +
             "\" y2=\"" + num(py(d.ys[0])) + "\" stroke=\"" + d.color + "\" stroke-width=\"1.5\"" +
             (d.dashed ? dash : "") + "><title>" + svg_escape(d.label) + "</title></line>\n";
        break;
      case Series::Kind::vline:
        s += "<line class=\"vline\" x1=\"" + num(px(d.xs[0])) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(px(d.xs[0])) +
             "\" y2=\"" + num(kTop + ph) + "\" stroke=\"" + d.color + "\" stroke-width=\"1\"" + (d.dashed ? dash : "") +
             "><title>" + svg_escape(d.label) + "</title></line>\n";
        break;
    }
  }
  s += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
       "\" fill=\"none\" stroke=\"#404040\"/>\n";
  // Legend: one row above the plot, in the order the series were added.
  double lx = kLeft;
  for (const Series& d : series_) {
    if (d.label.empty()) continue;
    const bool filled = d.kind == Series::Kind::area || d.kind == Series::Kind::markers;
    s += filled ? "<rect class=\"legend\" x=\"" + num(lx) + "\" y=\"32\" width=\"12\" height=\"12\" fill=\"" + d.color +
                      "\"/>"
                : "<line class=\"legend\" x1=\"" + num(lx) + "\" y1=\"38\" x2=\"" + num(lx + 12) +
                      "\" y2=\"38\" stroke=\"" + d.color + "\" stroke-width=\"2\"" + (d.dashed ? " stroke-dasharray=\"4,2\"" : "") +
                      "/>";
    s += "<text x=\"" + num(lx + 16) + "\" y=\"43\">" + svg_escape(d.label) + "</text>\n";
    lx += 28 + 6.5 * static_cast<double>(d.label.size());
  }
  s += "</svg>\n";
  return s;
}

}  // namespace monet
