#include "report_html.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include <fmt/format.h>

#include "autotune/tuning_view.hpp"

namespace ktune::cli::report {
namespace {

// ---- escaping -------------------------------------------------------------------------------------------

std::string num(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

// A JSON array/object under construction; values are inserted verbatim (strings through script_json_string).
class J {
 public:
  J& raw(const std::string& key, const std::string& v) {
    body_ += (body_.empty() ? "" : ",") + script_json_string(key) + ":" + v;
    return *this;
  }
  J& str(const std::string& key, const std::string& v) { return raw(key, script_json_string(v)); }
  J& real(const std::string& key, double v) { return raw(key, num(v)); }
  J& integer(const std::string& key, int64_t v) { return raw(key, std::to_string(v)); }
  J& boolean(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  std::string obj() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

std::string array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]";
}

// ---- ordering: digits compare as numbers, so b2.l512 sorts before b16.l512 --------------------------------

bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size()));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i2, j = j2;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i, ++j;
  }
  return a.size() - i < b.size() - j;
}

std::string candidate_status(const autotune::TuningView& v, size_t i) {
  const auto& c = v.candidates[i];
  if (!c.ok) return c.error.find("pruned:") != std::string::npos ? "pruned" : "failed";
  return i == v.winner ? "winner" : "ok";
}

// A host target id lists every CPU feature ("x86_64-.../znver5/+64bit,+adx,...;llvm 19.1.7;cores=2"): shown as
// "<N features>" with the full text in a tooltip.
// " · measured on device 1 · NVRTC 13.0.88": the multi-device warmup's worker that measured the row and the
// NVRTC that compiled its candidates, as far as the row records them ("" for neither).
std::string measured_by(const autotune::TuningView& v) {
  std::string s;
  if (v.device_index >= 0) s += fmt::format(" &middot; measured on device {}", v.device_index);
  if (!v.compiler_version.empty()) s += " &middot; NVRTC " + html_escape(v.compiler_version);
  return s;
}

std::string short_fingerprint(const std::string& fp) {
  const size_t a = fp.find("/+");
  if (a == std::string::npos) return fp;
  const size_t b = std::min(fp.find(';', a), fp.size());
  const std::string feats = fp.substr(a + 1, b - a - 1);
  const size_t n = static_cast<size_t>(std::count(feats.begin(), feats.end(), ',')) + 1;
  return fp.substr(0, a + 1) + fmt::format("<{} features>", n) + fp.substr(b);
}

std::string abbreviated(const std::string& fp) {  // escaped, with the full text as a title when shortened
  const std::string s = short_fingerprint(fp);
  if (s == fp) return html_escape(fp);
  return fmt::format("<span title=\"{}\">{}</span>", html_escape(fp), html_escape(s));
}

std::string utc(int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return std::to_string(unix_s);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

std::string human_bytes(int64_t b) {
  if (b >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", b / 1048576.0);
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

// ---- the page ---------------------------------------------------------------------------------------------

const char* kStyle = R"CSS(
:root { --fg:#1d232a; --muted:#5d6670; --line:#d5dae0; --win:#1f8a4c; --ok:#4f7fbf; --fail:#b8323a; --prune:#c07a12; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0; background: #f6f7f9; }
header { background: #1d232a; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 2px 0; color: #c9d1d9; }
main { padding: 8px 28px 40px; max-width: 1180px; }
h2 { margin: 28px 0 8px; font-size: 18px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { margin: 20px 0 6px; font-size: 16px; }
table { border-collapse: collapse; background: #fff; margin: 6px 0 12px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; overflow-wrap: anywhere; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 10px 0; }
.card h4 { margin: 0 0 4px; font-size: 14px; font-family: ui-monospace, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.meta { color: var(--muted); font-size: 12.5px; margin: 2px 0; overflow-wrap: anywhere; }
.roof { font-size: 13px; margin: 4px 0 2px; }
.bad { color: var(--fail); }
.legend span { display: inline-block; margin-right: 14px; font-size: 12.5px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; border-radius: 2px; }
svg text { font: 12px system-ui, sans-serif; fill: var(--fg); }
svg text.mono { font: 11.5px ui-monospace, Menlo, Consolas, monospace; }
svg .axis { stroke: #9aa3ad; stroke-width: 1; }
svg .grid { stroke: #e6e9ed; stroke-width: 1; }
svg .bar-winner { fill: var(--win); }
svg .bar-ok { fill: var(--ok); }
svg .bar-failed { fill: #f6d9db; stroke: var(--fail); stroke-dasharray: 4 3; }
svg .bar-pruned { fill: #fbe9cc; stroke: var(--prune); stroke-dasharray: 4 3; }
svg .whisker { stroke: #27313b; stroke-width: 1.2; }
svg .roofline { stroke: #b8323a; stroke-width: 2; fill: none; }
svg .roofpt { fill: var(--win); stroke: #fff; stroke-width: 1; }
nav a { margin-right: 12px; }
)CSS";

// Draws every chart from the embedded JSON. Text from the data is only ever set with textContent (or as an
// attribute value through setAttribute), never parsed as markup.
const char* kScript = R"JS(
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var data = JSON.parse(document.getElementById('ktune-data').textContent);
  function svg(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function html(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function tip(node, text) { node.appendChild(svg('title', {}, text)); return node; }
  function sig(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }
  function fmtTime(ms) {
    if (ms >= 1000) return sig(ms / 1000) + ' s';
    if (ms >= 1) return sig(ms) + ' ms';
    return sig(ms * 1000) + ' \u00b5s';
  }
  function fmtRate(v, unit) {
    var p = [[1e15, 'P'], [1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < p.length; i++) if (v >= p[i][0]) return sig(v / p[i][0]) + ' ' + p[i][1] + unit;
    return sig(v) + ' ' + unit;
  }
  function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + '\u2026' : s; }
  var bars = 0, points = 0, charts = 0;

  // One horizontal bar per candidate: median time (whisker: fastest..slowest sample); failed and pruned
  // candidates get a dashed placeholder bar with the reason.
  function candidateChart(k) {
    var rowH = 22, top = 8, labelW = 170, barW = 430, W = labelW + barW + 230;
    var H = top + k.candidates.length * rowH + 26;
    var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'class': 'chart'});
    var max = 0;
    k.candidates.forEach(function (c) { if (c.ok) max = Math.max(max, c.max_ms, c.median_ms); });
    if (!(max > 0)) max = 1;
    var best = k.candidates[k.winner_index] ? k.candidates[k.winner_index].median_ms : 0;
    for (var g = 0; g <= 4; g++) {
      var gx = labelW + barW * g / 4;
      s.appendChild(svg('line', {x1: gx, x2: gx, y1: top - 4, y2: H - 22, 'class': g ? 'grid' : 'axis'}));
      s.appendChild(svg('text', {x: gx, y: H - 8, 'text-anchor': 'middle'}, fmtTime(max * g / 4)));
    }
    k.candidates.forEach(function (c, i) {
      var y = top + i * rowH;
      s.appendChild(tip(svg('text', {x: labelW - 8, y: y + 15, 'text-anchor': 'end', 'class': 'mono'}, clip(c.config, 24)), c.config));
      var r;
      if (c.ok) {
        var w = Math.max(1, barW * c.median_ms / max);
        r = svg('rect', {x: labelW, y: y + 3, width: w, height: rowH - 7, rx: 2, 'class': 'bar bar-' + c.status,
                         'data-config': c.config});
        tip(r, c.config + ': median ' + fmtTime(c.median_ms) + ', spread ' + (c.spread * 100).toFixed(1) + '%, ' +
            c.samples + ' samples in ' + c.rounds + ' round(s)' + (c.stable ? '' : ' (not stable)'));
        s.appendChild(r);
        var end = w;
        if (c.max_ms > c.min_ms) {
          var ym = y + rowH / 2 - 1;
          s.appendChild(svg('line', {x1: labelW + barW * c.min_ms / max, x2: labelW + barW * c.max_ms / max, y1: ym, y2: ym, 'class': 'whisker'}));
          end = Math.max(end, barW * c.max_ms / max);
        }
        var note = fmtTime(c.median_ms);
        if (c.status === 'winner') note += '  \u2605 winner';
        else if (best > 0) note += '  \u00d7' + (c.median_ms / best).toFixed(2);
        s.appendChild(svg('text', {x: labelW + end + 6, y: y + 15}, note));
      } else {
        r = svg('rect', {x: labelW, y: y + 3, width: barW, height: rowH - 7, rx: 2, 'class': 'bar bar-' + c.status,
                         'data-config': c.config});
        tip(r, c.config + ': ' + c.status + ': ' + c.error);
        s.appendChild(r);
        s.appendChild(tip(svg('text', {x: labelW + 8, y: y + 15}, c.status + ': ' + clip(c.error, 70)), c.error));
      }
      bars++;
    });
    charts++;
    return s;
  }

  function rooflineText(k) {
    var p = html('p', 'roof');
    var win = k.candidates[k.winner_index];
    if (!(k.bytes_per_call > 0) || !win || !(win.median_ms > 0)) {
      p.textContent = 'roofline: not recorded (bytes/FLOPs per call are stored by newer builds)';
      return p;
    }
    var sec = win.median_ms / 1000, bw = k.bytes_per_call / sec, parts = [];
    var t = 'winner ' + fmtTime(win.median_ms) + ': ' + fmtRate(bw, 'B/s');
    if (k.peak_bw > 0) t += ' = ' + (100 * bw / k.peak_bw).toFixed(1) + '% of ' + fmtRate(k.peak_bw, 'B/s');
    parts.push(t);
    if (k.flops_per_call > 0) {
      var fl = k.flops_per_call / sec, f = fmtRate(fl, 'FLOP/s');
      if (k.peak_flops > 0) f += ' = ' + (100 * fl / k.peak_flops).toFixed(2) + '% of ' + fmtRate(k.peak_flops, 'FLOP/s');
      parts.push(f);
      parts.push((k.flops_per_call / k.bytes_per_call).toFixed(2) + ' FLOP/B');
    }
    p.textContent = parts.join(' \u00b7 ');
    return p;
  }

  // Log-log roofline of one device: x = FLOP per byte, y = FLOP/s; the roof is min(peak FLOP/s, x * peak B/s)
  // (either part drawn only when known); one point per key with bytes and FLOPs per call.
  function rooflineChart(dev, keys) {
    var pts = [];
    keys.forEach(function (k) {
      var win = k.candidates[k.winner_index];
      if (k.bytes_per_call > 0 && k.flops_per_call > 0 && win && win.median_ms > 0) {
        var sec = win.median_ms / 1000;
        pts.push({k: k, ai: k.flops_per_call / k.bytes_per_call, f: k.flops_per_call / sec, bw: k.bytes_per_call / sec});
      }
    });
    if (!pts.length) return null;
    var xs = pts.map(function (p) { return p.ai; }), ys = pts.map(function (p) { return p.f; });
    if (dev.peak_bw > 0 && dev.peak_flops > 0) xs.push(dev.peak_flops / dev.peak_bw);
    if (dev.peak_flops > 0) ys.push(dev.peak_flops);
    var x0 = Math.floor(Math.log10(Math.min.apply(null, xs))), x1 = Math.ceil(Math.log10(Math.max.apply(null, xs)) + 0.01);
    if (x1 - x0 < 2) x1 = x0 + 2;
    function roof(x) {  // the roof at intensity x (Infinity where neither ceiling is known)
      var r = Infinity;
      if (dev.peak_bw > 0) r = Math.min(r, x * dev.peak_bw);
      if (dev.peak_flops > 0) r = Math.min(r, dev.peak_flops);
      return r;
    }
    [Math.pow(10, x0), Math.pow(10, x1)].forEach(function (x) { if (isFinite(roof(x))) ys.push(roof(x)); });
    var y0 = Math.floor(Math.log10(Math.min.apply(null, ys))), y1 = Math.ceil(Math.log10(Math.max.apply(null, ys)) + 0.01);
    if (y1 - y0 < 2) y0 = y1 - 2;
    var L = 100, T = 14, PW = 560, PH = 300, W = L + PW + 30, H = T + PH + 44;
    function X(v) { return L + PW * (Math.log10(v) - x0) / (x1 - x0); }
    function Y(v) { return T + PH - PH * (Math.log10(v) - y0) / (y1 - y0); }
    var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'class': 'chart roofline-chart'});
    for (var e = x0; e <= x1; e++) {
      s.appendChild(svg('line', {x1: X(Math.pow(10, e)), x2: X(Math.pow(10, e)), y1: T, y2: T + PH, 'class': 'grid'}));
      s.appendChild(svg('text', {x: X(Math.pow(10, e)), y: T + PH + 16, 'text-anchor': 'middle'}, String(Math.pow(10, e))));
    }
    for (e = y0; e <= y1; e++) {
      s.appendChild(svg('line', {x1: L, x2: L + PW, y1: Y(Math.pow(10, e)), y2: Y(Math.pow(10, e)), 'class': 'grid'}));
      s.appendChild(svg('text', {x: L - 6, y: Y(Math.pow(10, e)) + 4, 'text-anchor': 'end'}, fmtRate(Math.pow(10, e), 'FLOP/s')));
    }
    s.appendChild(svg('line', {x1: L, x2: L, y1: T, y2: T + PH, 'class': 'axis'}));
    s.appendChild(svg('line', {x1: L, x2: L + PW, y1: T + PH, y2: T + PH, 'class': 'axis'}));
    s.appendChild(svg('text', {x: L + PW / 2, y: H - 6, 'text-anchor': 'middle'}, 'arithmetic intensity (FLOP per byte moved)'));
    var xa = Math.pow(10, x0), xb = Math.pow(10, x1), line = [];
    if (isFinite(roof(xa))) {  // the y range holds the roof at both ends, so no point needs clipping
      line = [xa, xb];
      if (dev.peak_bw > 0 && dev.peak_flops > 0) {
        var ridge = dev.peak_flops / dev.peak_bw;
        if (ridge > xa && ridge < xb) line = [xa, ridge, xb];
      }
    }
    if (line.length) {
      var pts2 = line.map(function (x) { return X(x).toFixed(1) + ',' + Y(roof(x)).toFixed(1); }).join(' ');
      s.appendChild(tip(svg('polyline', {points: pts2, 'class': 'roofline'}), 'roof: ' +
        (dev.peak_bw > 0 ? fmtRate(dev.peak_bw, 'B/s') : '') + (dev.peak_bw > 0 && dev.peak_flops > 0 ? ', ' : '') +
        (dev.peak_flops > 0 ? fmtRate(dev.peak_flops, 'FLOP/s') : '')));
    }
    pts.forEach(function (p) {
      var c = svg('circle', {cx: X(p.ai), cy: Y(p.f), r: 5, 'class': 'roofpt'});
      tip(c, p.k.family + ' ' + p.k.key + ': ' + fmtRate(p.bw, 'B/s') +
          (dev.peak_bw > 0 ? ' (' + (100 * p.bw / dev.peak_bw).toFixed(1) + '% of peak)' : '') + ', ' + fmtRate(p.f, 'FLOP/s'));
      s.appendChild(c);
      points++;
    });
    charts++;
    return s;
  }

  data.keys.forEach(function (k) {
    var card = document.getElementById('key-' + k.id);
    if (!card) return;
    if (!k.readable) return;
    var slot = card.querySelector('.chart-slot');
    slot.appendChild(candidateChart(k));
    slot.appendChild(rooflineText(k));
  });
  var rootR = document.getElementById('rooflines');
  data.devices.forEach(function (d) {
    var keys = data.keys.filter(function (k) { return k.readable && k.device === d.fingerprint; });
    var chart = rooflineChart(d, keys);
    if (!chart) return;
    var box = html('div', 'card');
    var head = html('h4', null, d.short);
    head.title = d.fingerprint;
    box.appendChild(head);
    box.appendChild(html('p', 'meta', (d.peak_bw > 0 || d.peak_flops > 0) ? 'ceilings: ' + d.source :
        'no ceilings stored for this device: points only'));
    box.appendChild(chart);
    rootR.appendChild(box);
  });
  if (!rootR.children.length) rootR.appendChild(html('p', 'meta', 'No tuning row records bytes and FLOPs per call yet.'));
  document.body.setAttribute('data-rendered', 'ok');
  document.body.setAttribute('data-bars', String(bars));
  document.body.setAttribute('data-roofline-points', String(points));
  document.body.setAttribute('data-charts', String(charts));
})();
)JS";

}  // namespace

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) ok = false;
      else cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
               (cp >= 0xd800 && cp <= 0xdfff)))
      ok = false;
    if (!ok) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out.append(s, i, len);
    i += len;
  }
  return out;
}

std::string html_escape(const std::string& raw) {
  std::string out;
  for (char c : valid_utf8(raw)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_json_string(const std::string& raw) {
  const std::string s = valid_utf8(raw);
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;  // "</script>" and "<!--" cannot appear inside the data block
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04x}", c);
        } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                   (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
          out += static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
          i += 2;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string render_html(const Input& in, const std::string& nonce, Summary* summary_out) {
  Summary sum;
  sum.binaries = static_cast<int64_t>(in.binaries.size());

  // Tuning rows, read and ordered: family, device, then key with numbers compared as numbers.
  std::vector<autotune::TuningView> views;
  for (const auto& t : in.tuning) views.push_back(autotune::read_tuning_entry(t));
  std::stable_sort(views.begin(), views.end(), [](const autotune::TuningView& a, const autotune::TuningView& b) {
    if (a.entry.family != b.entry.family) return a.entry.family < b.entry.family;
    if (a.entry.device_fingerprint != b.entry.device_fingerprint)
      return a.entry.device_fingerprint < b.entry.device_fingerprint;
    return natural_less(a.entry.problem_key, b.entry.problem_key);
  });

  // Devices: ceilings from the newest row that records them.
  struct Dev {
    DeviceCeilings ceilings;
    int64_t newest = -1;
    int keys = 0;
  };
  std::map<std::string, Dev> devices;
  for (const auto& v : views) {
    Dev& d = devices[v.entry.device_fingerprint];
    d.keys++;
    if (v.readable && (v.ceilings.peak_bytes_per_s > 0 || v.ceilings.peak_flops > 0) && v.entry.tuned_at > d.newest) {
      d.ceilings = v.ceilings;
      d.newest = v.entry.tuned_at;
    }
  }
  sum.devices = static_cast<int64_t>(devices.size());

  std::vector<std::string> key_json;
  for (size_t id = 0; id < views.size(); ++id) {
    const auto& v = views[id];
    sum.keys++;
    const std::string& key = v.entry.problem_key;
    const size_t bar = key.find('|');
    J k;
    k.integer("id", static_cast<int64_t>(id)).str("family", v.entry.family).str("key", key)
        .str("problem", key.substr(0, bar)).str("buckets", bar == std::string::npos ? "" : key.substr(bar + 1))
        .str("device", v.entry.device_fingerprint).str("layer", v.entry.layer).str("winner", v.entry.winner_config)
        .integer("tuned_at", v.entry.tuned_at).boolean("readable", v.readable);
    if (!v.readable) {
      sum.unreadable++;
      k.str("error", v.error);
      key_json.push_back(k.obj());
      continue;
    }
    const Dev& d = devices[v.entry.device_fingerprint];
    // A row's own ceilings when it has them, else its device's newest.
    const DeviceCeilings& c = (v.ceilings.peak_bytes_per_s > 0 || v.ceilings.peak_flops > 0) ? v.ceilings : d.ceilings;
    k.integer("winner_index", static_cast<int64_t>(v.winner)).real("noise_fraction", v.noise_fraction)
        .real("bytes_per_call", v.bytes_per_call).real("flops_per_call", v.flops_per_call)
        .real("peak_bw", c.peak_bytes_per_s).real("peak_flops", c.peak_flops);
    std::vector<std::string> cands;
    for (size_t i = 0; i < v.candidates.size(); ++i) {
      const auto& cr = v.candidates[i];
      J cj;
      cj.str("config", cr.config).str("status", candidate_status(v, i)).boolean("ok", cr.ok);
      if (cr.ok) {
        double lo = cr.m.median_ms, hi = cr.m.median_ms;
        for (double s : cr.m.samples_ms) lo = std::min(lo, s), hi = std::max(hi, s);
        cj.real("median_ms", cr.m.median_ms).real("spread", cr.m.spread).integer("rounds", cr.m.rounds)
            .boolean("stable", cr.m.stable).integer("samples", static_cast<int64_t>(cr.m.samples_ms.size()))
            .real("min_ms", lo).real("max_ms", hi);
      } else {
        cj.str("error", cr.error);
      }
      cands.push_back(cj.obj());
      sum.candidates++;
    }
    k.raw("candidates", array(cands));
    const auto& w = v.candidates[v.winner];
    if (v.bytes_per_call > 0 && v.flops_per_call > 0 && w.ok && w.m.median_ms > 0) sum.roofline_points++;
    key_json.push_back(k.obj());
  }
  std::vector<std::string> dev_json;
  for (const auto& [fp, d] : devices)
    dev_json.push_back(J().str("fingerprint", fp).str("short", short_fingerprint(fp)).real("peak_bw", d.ceilings.peak_bytes_per_s)
                           .real("peak_flops", d.ceilings.peak_flops).str("source", d.ceilings.source)
                           .integer("keys", d.keys).obj());
  const std::string data = J().str("search_path", in.search_path).str("generated_at", in.generated_at)
                               .raw("keys", array(key_json)).raw("devices", array(dev_json)).obj();

  // ---- server-side HTML (escaped) ----
  std::string h;
  h.reserve(data.size() * 2 + 65536);
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
       "img-src data:; script-src 'nonce-" + html_escape(nonce) + "'\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>ktune tuning report</title>\n<style>" + std::string(kStyle) + "</style></head>\n<body>\n";
  h += "<header><h1>ktune tuning report</h1>";
  h += fmt::format("<p>cache <code>{}</code></p><p>generated {} by ktune {} &middot; {} tuning keys on {} device(s), "
                   "{} candidates &middot; {} binaries</p></header>\n",
                   html_escape(in.search_path), html_escape(in.generated_at), html_escape(in.ktune_version), sum.keys,
                   sum.devices, sum.candidates, sum.binaries);
  h += "<main>\n<noscript><p class=\"bad\">The charts are drawn by this page's inline script; the tables below "
       "need none.</p></noscript>\n";
  h += "<nav><a href=\"#cache\">cache contents</a><a href=\"#rooflines-h\">rooflines</a><a href=\"#keys\">tuning keys</a></nav>\n";

  // Cache contents.
  h += "<h2 id=\"cache\">Cache contents</h2>\n<table><tr><th>layer</th><th>file</th><th>schema</th><th>binaries</th>"
       "<th>tuning rows</th><th>blob bytes</th></tr>\n";
  for (const auto& l : in.layers) {
    if (!l.present) {
      h += fmt::format("<tr><td><code>{}</code></td><td colspan=\"5\">absent{}{}</td></tr>\n", html_escape(l.path),
                       l.note.empty() ? "" : ": ", html_escape(l.note));
      continue;
    }
    h += fmt::format("<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                     "<td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                     html_escape(l.path), l.writable ? "writable" : "read-only", l.schema_version, l.binaries,
                     l.tuning, html_escape(human_bytes(l.blob_bytes)));
  }
  h += "</table>\n";
  struct Group {
    int64_t count = 0, bytes = 0;
    double compile_ms = 0;
    std::set<std::string> compilers, ktune_versions;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const auto& b : in.binaries) {
    Group& g = groups[{b.family, b.arch}];
    g.count++;
    g.bytes += b.blob_size;
    g.compile_ms += b.compile_ms;
    g.compilers.insert(b.compiler + " " + b.compiler_version);
    g.ktune_versions.insert(b.ktune_version);
  }
  h += "<h3>Binaries by family and arch</h3>\n";
  if (groups.empty()) {
    h += "<p class=\"meta\">No binaries.</p>\n";
  } else {
    h += "<table class=\"groups\"><tr><th>family</th><th>arch</th><th>binaries</th><th>total size</th><th>mean size</th>"
         "<th>compile time (sum)</th><th>compiler versions</th><th>ktune</th></tr>\n";
    for (const auto& [fa, g] : groups) {
      std::string comps;
      for (const auto& c : g.compilers) comps += (comps.empty() ? "" : "<br>") + abbreviated(c);
      std::string kv;
      for (const auto& c : g.ktune_versions) kv += (kv.empty() ? "" : ", ") + html_escape(c);
      h += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                       "<td class=\"n\">{:.1f} s</td><td class=\"mono\">{}</td><td>{}</td></tr>\n",
                       html_escape(fa.first), html_escape(fa.second), g.count, html_escape(human_bytes(g.bytes)),
                       html_escape(human_bytes(g.count ? g.bytes / g.count : 0)), g.compile_ms / 1000, comps, kv);
    }
    h += "</table>\n";
  }
  std::map<std::pair<std::string, std::string>, int> tuning_groups;
  for (const auto& v : views) tuning_groups[{v.entry.family, v.entry.device_fingerprint}]++;
  h += "<h3>Tuning rows by family and device</h3>\n";
  if (tuning_groups.empty()) {
    h += "<p class=\"meta\">No tuning rows.</p>\n";
  } else {
    h += "<table><tr><th>family</th><th>device fingerprint</th><th>tuning keys</th></tr>\n";
    for (const auto& [fd, n] : tuning_groups)
      h += fmt::format("<tr><td>{}</td><td class=\"mono\">{}</td><td class=\"n\">{}</td></tr>\n",
                       html_escape(fd.first), abbreviated(fd.second), n);
    h += "</table>\n";
  }

  h += "<h2 id=\"rooflines-h\">Rooflines</h2>\n<p class=\"meta\">Each point is one tuning key's winner: FLOPs per call "
       "/ bytes per call (x) against achieved FLOP/s (y); the red line is the device's roof (peak bandwidth x "
       "intensity, capped by peak FLOP/s), where stored.</p>\n<div id=\"rooflines\"></div>\n";

  h += "<h2 id=\"keys\">Tuning keys</h2>\n<p class=\"legend\"><span><i style=\"background:#1f8a4c\"></i>winner</span>"
       "<span><i style=\"background:#4f7fbf\"></i>other candidate (median; whisker: fastest..slowest sample)</span>"
       "<span><i style=\"background:#f6d9db;border:1px dashed #b8323a\"></i>failed</span>"
       "<span><i style=\"background:#fbe9cc;border:1px dashed #c07a12\"></i>pruned</span></p>\n";
  if (views.empty()) h += "<p class=\"meta\">No tuning rows in this cache.</p>\n";
  std::string last_family, last_device;
  for (size_t id = 0; id < views.size(); ++id) {
    const auto& v = views[id];
    if (v.entry.family != last_family) {
      h += fmt::format("<h3>{}</h3>\n", html_escape(v.entry.family));
      last_family = v.entry.family;
      last_device.clear();
    }
    if (v.entry.device_fingerprint != last_device) {
      h += fmt::format("<p class=\"meta\">device <code>{}</code></p>\n", abbreviated(v.entry.device_fingerprint));
      last_device = v.entry.device_fingerprint;
    }
    h += fmt::format("<div class=\"card\" id=\"key-{}\"><h4>{}</h4>\n", id, html_escape(v.entry.problem_key));
    h += fmt::format("<p class=\"meta\">winner <code>{}</code> &middot; tuned {} &middot; ktune {} &middot; layer "
                     "<code>{}</code>{}</p>\n",
                     html_escape(v.entry.winner_config), utc(v.entry.tuned_at), html_escape(v.entry.ktune_version),
                     html_escape(v.entry.layer),
                     v.readable ? fmt::format(" &middot; {} candidates, ties within {:.0f}%{}", v.candidates.size(),
                                              v.noise_fraction * 100, measured_by(v))
                                : std::string());
    if (!v.readable) h += fmt::format("<p class=\"bad\">unreadable row: {}</p>\n", html_escape(v.error));
    h += "<div class=\"chart-slot\"></div></div>\n";
  }
  h += "</main>\n";
  h += "<script type=\"application/json\" id=\"ktune-data\">" + data + "</script>\n";
  h += "<script nonce=\"" + html_escape(nonce) + "\">" + std::string(kScript) + "</script>\n</body></html>\n";
  if (summary_out) *summary_out = sum;
  return h;
}

}  // namespace ktune::cli::report
