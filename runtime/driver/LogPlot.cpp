//===- LogPlot.cpp - strata-inspect --log: a run's curves as SVG ----------===//
//
// Reads strata-run's JSON-lines logs (one object per step, an --eval record
// last) and draws loss, learning rate, gradient norm and throughput over the
// steps, one panel each, every log a colour, overlaid. Plain SVG written by
// hand: no dependency beyond the standard library.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Inspect.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace strata::runtime {
namespace {

/// The top-level number fields of one JSON object (null as NaN); nested
/// values and strings are skipped, but their syntax is checked.
class FlatJson {
public:
  explicit FlatJson(const std::string &text) : s_(text) {}

  bool parse(std::map<std::string, double> &numbers,
             std::map<std::string, std::string> &strings) {
    space();
    if (!eat('{'))
      return false;
    space();
    if (eat('}'))
      return end();
    while (true) {
      std::string key;
      space();
      if (!string(key))
        return false;
      space();
      if (!eat(':'))
        return false;
      space();
      char c = peek();
      if (c == '"') {
        std::string value;
        if (!string(value))
          return false;
        strings[key] = value;
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (!number(numbers[key]))
          return false;
      } else if (s_.compare(at_, 4, "null") == 0) {
        at_ += 4;
        numbers[key] = std::numeric_limits<double>::quiet_NaN();
      } else if (!skipValue()) {
        return false;
      }
      space();
      if (eat('}'))
        return end();
      if (!eat(','))
        return false;
    }
  }

private:
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  bool eat(char c) {
    if (peek() != c)
      return false;
    ++at_;
    return true;
  }
  void space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_])))
      ++at_;
  }
  bool end() {
    space();
    return at_ == s_.size();
  }
  bool string(std::string &out) {
    if (!eat('"'))
      return false;
    while (at_ < s_.size() && s_[at_] != '"') {
      if (s_[at_] == '\\' && ++at_ >= s_.size())
        return false;
      out += s_[at_++];
    }
    return eat('"');
  }
  bool number(double &out) {
    const char *begin = s_.c_str() + at_;
    char *stop = nullptr;
    out = std::strtod(begin, &stop);
    if (stop == begin)
      return false;
    at_ += size_t(stop - begin);
    return true;
  }
  bool skipValue() {
    space();
    char c = peek();
    if (c == '"') {
      std::string ignored;
      return string(ignored);
    }
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++at_;
      space();
      if (eat(close))
        return true;
      while (true) {
        if (c == '{') {
          std::string key;
          space();
          if (!string(key))
            return false;
          space();
          if (!eat(':'))
            return false;
        }
        if (!skipValue())
          return false;
        space();
        if (eat(close))
          return true;
        if (!eat(','))
          return false;
      }
    }
    for (const char *word : {"true", "false", "null"})
      if (s_.compare(at_, std::strlen(word), word) == 0) {
        at_ += std::strlen(word);
        return true;
      }
    double ignored;
    return number(ignored);
  }

  const std::string &s_;
  size_t at_ = 0;
};

/// One log: its step records' columns, and its eval records.
struct RunLog {
  std::string name;
  std::vector<double> step, loss, lr, norm, throughput;
  std::string throughputUnit; // "tokens_per_s" or "samples_per_s"
  std::vector<std::pair<double, double>> evalLoss; // (after_step, loss)
};

bool readLog(const std::string &path, RunLog &log, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read the log '" + path + "'";
    return false;
  }
  log.name = path.substr(path.find_last_of('/') + 1);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    std::map<std::string, double> numbers;
    std::map<std::string, std::string> strings;
    if (!FlatJson(line).parse(numbers, strings)) {
      error = "'" + path + "' line " + std::to_string(number) +
              " is not one JSON object (a strata-run --log file?)";
      return false;
    }
    if (strings.count("eval")) {
      if (numbers.count("after_step") && numbers.count("loss"))
        log.evalLoss.push_back({numbers["after_step"], numbers["loss"]});
      continue;
    }
    if (!numbers.count("step") || !numbers.count("loss")) {
      error = "'" + path + "' line " + std::to_string(number) +
              " has no \"step\" and \"loss\" (a strata-run --log file?)";
      return false;
    }
    auto field = [&](const char *key) {
      auto it = numbers.find(key);
      return it == numbers.end() ? std::numeric_limits<double>::quiet_NaN()
                                 : it->second;
    };
    const char *unit =
        numbers.count("tokens_per_s") ? "tokens_per_s" : "samples_per_s";
    if (log.throughputUnit.empty())
      log.throughputUnit = unit;
    log.step.push_back(field("step"));
    log.loss.push_back(field("loss"));
    log.lr.push_back(field("lr"));
    log.norm.push_back(field("grad_norm"));
    log.throughput.push_back(field(unit));
  }
  if (log.step.empty()) {
    error = "the log '" + path + "' has no step records";
    return false;
  }
  return true;
}

/// "0.00123", "2.5e+04": short tick labels.
std::string tick(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", v);
  return text;
}

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

const char *kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/// One panel: every log's column `column` over its steps.
void drawPanel(std::ostream &out, const std::vector<RunLog> &logs,
               std::vector<double> RunLog::*column, const std::string &title,
               double x0, double y0, double w, double h, bool withEval) {
  double minX = INFINITY, maxX = -INFINITY, minY = INFINITY, maxY = -INFINITY;
  for (const RunLog &log : logs) {
    for (size_t i = 0; i < log.step.size(); ++i) {
      double v = (log.*column)[i];
      minX = std::min(minX, log.step[i]);
      maxX = std::max(maxX, log.step[i]);
      if (std::isfinite(v)) {
        minY = std::min(minY, v);
        maxY = std::max(maxY, v);
      }
    }
    if (withEval)
      for (auto [step, loss] : log.evalLoss)
        if (std::isfinite(loss)) {
          minY = std::min(minY, loss);
          maxY = std::max(maxY, loss);
        }
  }
  if (!std::isfinite(minY)) // no finite value at all
    minY = 0, maxY = 1;
  if (maxY == minY)
    maxY = minY + (minY == 0 ? 1 : std::fabs(minY) * 0.1);
  if (maxX == minX)
    maxX = minX + 1;
  // A margin, but no negative ticks under values that are never negative.
  double pad = (maxY - minY) * 0.05;
  minY = minY >= 0 ? std::max(0.0, minY - pad) : minY - pad;
  maxY += pad;
  const double left = 70, top = 28, right = 12, bottom = 34;
  double pw = w - left - right, ph = h - top - bottom;
  auto px = [&](double step) {
    return x0 + left + pw * (step - minX) / (maxX - minX);
  };
  auto py = [&](double v) {
    return y0 + top + ph * (1 - (v - minY) / (maxY - minY));
  };
  out << "<g class=\"panel\" data-panel=\"" << escape(title) << "\">\n"
      << "<text x=\"" << x0 + left << "\" y=\"" << y0 + 18
      << "\" font-size=\"14\">" << escape(title) << "</text>\n"
      << "<rect x=\"" << x0 + left << "\" y=\"" << y0 + top << "\" width=\""
      << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    double v = minY + (maxY - minY) * i / 4, s = minX + (maxX - minX) * i / 4;
    out << "<text x=\"" << x0 + left - 6 << "\" y=\"" << py(v) + 4
        << "\" text-anchor=\"end\" font-size=\"10\">" << tick(v)
        << "</text>\n<text x=\"" << px(s) << "\" y=\"" << y0 + top + ph + 14
        << "\" text-anchor=\"middle\" font-size=\"10\">" << tick(std::round(s))
        << "</text>\n";
  }
  out << "<text x=\"" << x0 + left + pw / 2 << "\" y=\"" << y0 + h - 4
      << "\" text-anchor=\"middle\" font-size=\"11\">step</text>\n";
  for (size_t l = 0; l < logs.size(); ++l) {
    const RunLog &log = logs[l];
    const char *color = kColors[l % std::size(kColors)];
    // A non-finite value (a diverged step) breaks the line.
    std::ostringstream points;
    auto flush = [&] {
      if (points.tellp() > 0)
        out << "<polyline fill=\"none\" stroke=\"" << color
            << "\" stroke-width=\"1.5\" data-log=\"" << escape(log.name)
            << "\" points=\"" << points.str() << "\"><title>"
            << escape(log.name) << ": " << escape(title)
            << "</title></polyline>\n";
      points.str("");
    };
    for (size_t i = 0; i < log.step.size(); ++i) {
      double v = (log.*column)[i];
      if (!std::isfinite(v)) {
        flush();
        continue;
      }
      char xy[64];
      std::snprintf(xy, sizeof(xy), "%s%.2f,%.2f",
                    points.tellp() > 0 ? " " : "", px(log.step[i]), py(v));
      points << xy;
    }
    flush();
    if (withEval)
      for (auto [step, loss] : log.evalLoss)
        out << "<circle cx=\"" << px(step) << "\" cy=\"" << py(loss)
            << "\" r=\"4\" fill=\"" << color << "\"><title>"
            << escape(log.name) << ": eval loss " << tick(loss)
            << "</title></circle>\n";
  }
  out << "</g>\n";
}

} // namespace

int plotLogs(const std::vector<std::string> &paths, const std::string &out,
             std::string &error) {
  std::vector<RunLog> logs(paths.size());
  for (size_t i = 0; i < paths.size(); ++i)
    if (!readLog(paths[i], logs[i], error))
      return 1;
  std::string unit = logs.front().throughputUnit;
  for (const RunLog &log : logs)
    if (log.throughputUnit != unit)
      unit = "items_per_s";
  const double panelW = 480, panelH = 300, legendH = 24.0 * logs.size() + 16;
  const double w = 2 * panelW, h = 2 * panelH + legendH + 36;
  std::ofstream svg(out);
  if (!svg) {
    error = "cannot write '" + out + "'";
    return 1;
  }
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w
      << "\" height=\"" << h
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"16\" y=\"24\" font-size=\"16\">Training runs over "
         "steps</text>\n";
  double y0 = 36;
  drawPanel(svg, logs, &RunLog::loss, "loss (dots: --eval)", 0, y0, panelW,
            panelH, true);
  drawPanel(svg, logs, &RunLog::lr, "learning rate", panelW, y0, panelW,
            panelH, false);
  drawPanel(svg, logs, &RunLog::norm, "gradient norm (before clipping)", 0,
            y0 + panelH, panelW, panelH, false);
  drawPanel(svg, logs, &RunLog::throughput,
            unit == "tokens_per_s"    ? "tokens/s"
            : unit == "samples_per_s" ? "samples/s"
                                      : "tokens or samples/s",
            panelW, y0 + panelH, panelW, panelH, false);
  double ly = y0 + 2 * panelH + 20;
  for (size_t l = 0; l < logs.size(); ++l, ly += 24)
    svg << "<rect x=\"70\" y=\"" << ly - 10 << "\" width=\"14\" height=\"4\" "
        << "fill=\"" << kColors[l % std::size(kColors)] << "\"/><text x=\"92\" "
        << "y=\"" << ly - 4 << "\">" << escape(paths[l]) << " ("
        << logs[l].step.size() << " steps)</text>\n";
  svg << "</svg>\n";
  if (!svg) {
    error = "cannot write '" + out + "'";
    return 1;
  }
  return 0;
}

} // namespace strata::runtime
