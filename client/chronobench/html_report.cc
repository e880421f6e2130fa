#include "client/chronobench/html_report.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/chronobench/json_report.h"

namespace chronoserve::client::bench {

// Defined in the generated chartjs_embedded.cc (empty when the build host lacked libjs-chart.js).
extern const char* const kEmbeddedChartJs;

namespace {

constexpr const char* kStyle = R"css(
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.warn { color: #a40; font-size: 12px; } .meta { font-size: 12px; color: #555; }
canvas { border: 1px solid #eee; }
)css";

// Builds the table and the charts from the inlined report JSON.
constexpr const char* kAppJs = R"js(
(function () {
  const body = document.body;
  try {
    const report = JSON.parse(document.getElementById('report').textContent);
    const runs = report.runs;
    const batchSweep = report.sweep.batch_sweep;
    const name = r => (r.mode === 'concurrency' ? 'c=' + r.concurrency : r.mode === 'rate' ? r.rate + '/s'
                       : 'gap ' + r.idle_gap_ms + ' ms') + (batchSweep || r.batch_size > 1 ? ' b=' + r.batch_size : '');
    const lat = (r, k, q) => (r.latency_us[k] && r.latency_us[k][q] != null ? r.latency_us[k][q] : null);
    const esc = s => String(s).replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
    const us = v => (v == null ? '-' : v.toFixed(0));  // a key a report without it lacks: '-', not a throw
    const palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7',
                     '#9c755f', '#bab0ac'];
    const color = i => palette[i % palette.length];
    const common = { responsive: false, animation: false };
    const charts = [];
    const ctx = id => document.getElementById(id).getContext('2d');

    document.getElementById('meta').textContent = 'model ' + report.model.name + ' on ' + report.server.url +
        ' (' + report.server.name + ' ' + report.server.version + '), sweep: ' + report.sweep.mode +
        (batchSweep ? ' x batch size' : '') + (report.saturation ? ', saturation at batch ' +
        report.saturation.batch_size : '');
    const table = document.getElementById('points');
    const cols = ['e2e', 'transport', 'queue', 'h2d', 'compute', 'd2h', 'server_total'];
    let html = '<tr><th>point</th><th>req/s</th><th>items/s</th><th>errors</th>' +
        cols.map(c => '<th>' + c + ' p50/p99 µs</th>').join('') + '<th>stable</th></tr>';
    for (const r of runs) {
      html += '<tr><td>' + name(r) + '</td><td>' + r.throughput_rps.toFixed(1) + '</td><td>' +
          r.throughput_items_per_s.toFixed(1) + '</td><td>' + r.errors + '</td>' +
          cols.map(c => '<td>' + (r.latency_us[c] ? us(lat(r, c, 'p50')) + ' / ' + us(lat(r, c, 'p99')) : '-') +
                        '</td>').join('') +
          '<td>' + (r.stable ? 'yes' : 'NO') + '</td></tr>';
      for (const w of r.warnings) html += '<tr><td class="warn" colspan="12">' + name(r) + ': ' + esc(w) + '</td></tr>';
    }
    if (report.failed_point) {
      // The runner's messages begin with the point's label already.
      const fp = report.failed_point;
      const text = fp.message.startsWith(fp.label + ': ') ? fp.message : fp.label + ': ' + fp.message;
      html += '<tr><td class="warn" colspan="12">FAILED: ' + esc(text) +
          (text.includes('the sweep stops here') ? '' : ' (the sweep stopped here)') + '</td></tr>';
    }
    table.innerHTML = html;

    // admit, device_gap and handback split what the stages leave of server_total (servers that report
    // them); "server other" is what is still unnamed: nearly 0 then, all of it from older servers.
    const stages = ['admit', 'queue', 'input_stage', 'h2d', 'compute', 'd2h', 'device_gap', 'output_stage', 'handback'];
    const mean = (r, k) => lat(r, k, 'mean') || 0;
    const sets = stages.map((s, i) => ({ label: s, data: runs.map(r => mean(r, s)), backgroundColor: color(i) }));
    sets.push({ label: 'server other', backgroundColor: '#000000',
                data: runs.map(r => Math.max(0, mean(r, 'server_total') - stages.reduce((a, s) => a + mean(r, s), 0))) });
    sets.push({ label: 'transport', data: runs.map(r => mean(r, 'transport')), backgroundColor: color(9) });
    // Open loop: e2e counts from the intended send, so the send's lag behind its schedule completes
    // the stack (the segments above add up to e2e from the actual send, for a point whose responses
    // were all OK and timed: the segments are means over timed responses, e2e over all of them).
    if (runs.some(r => r.schedule_lag_us)) {
      sets.push({ label: 'schedule lag', backgroundColor: '#7f7f7f',
                  data: runs.map(r => (r.schedule_lag_us && r.schedule_lag_us.mean) || 0) });
    }
    body.dataset.breakdown = sets.map(s => s.label).join(',');
    charts.push(new Chart(ctx('breakdown'), { type: 'bar', data: { labels: runs.map(name), datasets: sets },
        options: Object.assign({}, common, { scales: { x: { stacked: true },
            y: { stacked: true, title: { display: true, text: 'mean µs per request' } } } }) }));

    charts.push(new Chart(ctx('cdf'), { type: 'scatter', data: { datasets: runs.map((r, i) => ({
        label: name(r), data: r.e2e_cdf.map(p => ({ x: p[0], y: p[1] })), showLine: true, pointRadius: 0,
        borderColor: color(i), backgroundColor: color(i) })) },
        options: Object.assign({}, common, { scales: {
            x: { type: 'logarithmic', title: { display: true, text: 'end-to-end µs' } },
            y: { min: 0, max: 1, title: { display: true, text: 'fraction of requests' } } } }) }));

    const line = (label, data, i, axis) => ({ label: label, data: data, borderColor: color(i),
                                              backgroundColor: color(i), yAxisID: axis });
    charts.push(new Chart(ctx('throughput'), { type: 'line', data: { labels: runs.map(name), datasets: [
        line('throughput (items/s)', runs.map(r => r.throughput_items_per_s), 0, 'y'),
        line('e2e p50 µs', runs.map(r => lat(r, 'e2e', 'p50')), 1, 'y1'),
        line('e2e p99 µs', runs.map(r => lat(r, 'e2e', 'p99')), 2, 'y1')] },
        options: Object.assign({}, common, { scales: { y: { position: 'left', title: { display: true, text: 'items/s' } },
            y1: { position: 'right', grid: { drawOnChartArea: false }, title: { display: true, text: 'µs' } } } }) }));

    if (report.sweep.mode === 'idle_gap') {
      const gaps = runs.map(r => r.idle_gap_ms + ' ms');
      charts.push(new Chart(ctx('idle'), { type: 'line', data: { labels: gaps, datasets: [
          line('e2e p50 µs', runs.map(r => lat(r, 'e2e', 'p50')), 0, 'y'),
          line('e2e p99 µs', runs.map(r => lat(r, 'e2e', 'p99')), 1, 'y'),
          line('compute p50 µs', runs.map(r => lat(r, 'compute', 'p50')), 2, 'y'),
          line('launch p50 µs', runs.map(r => lat(r, 'launch', 'p50')), 3, 'y')] },
          options: Object.assign({}, common, { scales: { x: { title: { display: true, text: 'idle gap before each request' } },
              y: { title: { display: true, text: 'µs' } } } }) }));
    } else {
      const note = document.createElement('p');
      note.className = 'meta';
      note.textContent = 'No idle-gap sweep in this run (use --idle-gap-range 0:1000:200).';
      document.getElementById('idle').replaceWith(note);
    }
    let painted = 0;
    document.querySelectorAll('canvas').forEach(c => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let i = 3; i < d.length; i += 4) { if (d[i] !== 0) { painted++; break; } }
    });
    body.dataset.charts = String(charts.length);
    body.dataset.painted = String(painted);
  } catch (e) {
    body.dataset.error = String(e);
    const pre = document.createElement('pre');
    pre.textContent = 'report failed to render: ' + e;
    body.appendChild(pre);
  }
})();
)js";

// Keeps inlined JSON from changing how the HTML parser reads its <script> element: with no "<" in
// it, neither "</script" (closing it early) nor "<!--" followed by "<script" (the double-escaped
// state, in which the page's own "</script>" no longer closes it) can occur. JSON has "<" and ">"
// only inside strings, where \u003c and \u003e read back as them.
std::string JsonScriptSafe(const std::string& json) {
  return absl::StrReplaceAll(json, {{"<", "\\u003c"}, {">", "\\u003e"}});
}
std::string JsScriptSafe(const std::string& js) {
  return absl::StrReplaceAll(js, {{"</script", "<\\/script"}, {"</SCRIPT", "<\\/SCRIPT"}});
}

std::string HtmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

}  // namespace

absl::StatusOr<std::string> LoadChartJs() {
  if (kEmbeddedChartJs[0] != '\0') return std::string(kEmbeddedChartJs);
  const char* env = std::getenv("CHRONOBENCH_CHARTJS");
  const std::string path = env != nullptr ? env : "/usr/share/javascript/chart.js/chart.min.js";
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("--html needs Chart.js: ", path,
                                            " not found (apt-get install libjs-chart.js, or set CHRONOBENCH_CHARTJS)"));
  }
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string RenderHtml(const nlohmann::json& report_json, const std::string& chart_js) {
  const std::string model = report_json.contains("model") && report_json["model"].contains("name")
                                ? report_json["model"]["name"].get<std::string>() : "model";
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>chronobench: ", HtmlEscape(model),
      "</title>\n<style>", kStyle, "</style>\n<script>", JsScriptSafe(chart_js), "</script>\n</head><body>\n",
      "<h1>chronobench report: ", HtmlEscape(model), "</h1>\n<p class=\"meta\" id=\"meta\"></p>\n",
      "<table id=\"points\"></table>\n",
      "<h2>Where the time went: mean per request, stacked (transport = end-to-end from the actual send minus "
      "server_total; open loop adds the schedule lag, actual minus intended send, so the stack is e2e)</h2>\n",
      "<canvas id=\"breakdown\" width=\"1000\" height=\"380\"></canvas>\n",
      "<h2>End-to-end latency CDF</h2>\n<canvas id=\"cdf\" width=\"1000\" height=\"380\"></canvas>\n",
      "<h2>Throughput and latency per sweep point</h2>\n<canvas id=\"throughput\" width=\"1000\" height=\"380\"></canvas>\n",
      "<h2>Latency vs idle gap</h2>\n<canvas id=\"idle\" width=\"1000\" height=\"380\"></canvas>\n",
      "<script type=\"application/json\" id=\"report\">", JsonScriptSafe(DumpJson(report_json, -1)), "</script>\n",
      "<script>", kAppJs, "</script>\n</body></html>\n");
}

}  // namespace chronoserve::client::bench
