/* History charts from the rollup tables: every <section class="history" data-url=...> on the
 * page fetches its series (portal/pipeline/views.py history_data: columns "t", "depth_min",
 * ...) for the range chosen with its buttons and draws three uPlot charts: depth
 * (min / avg / max), message rates (in / out) and memory (or, for a destination, the bytes
 * it held).  Drag across a chart to zoom all three to that time span; "Reset zoom" (or a
 * double click) shows the whole range again.
 *
 * For tests and scripts the section carries what is drawn: data-range, data-granularity,
 * data-points (buckets in the series) and data-zoom ("" or "from-to" in Unix seconds). */
(function () {
  "use strict";

  var COLORS = {
    depth: "#1f4e79",
    band: "rgba(47, 125, 209, 0.16)",
    edge: "rgba(47, 125, 209, 0.55)",
    in: "#2f7dd1",
    out: "#e07b00",
    memory: "#6a3fb5",
    state: "#b3261e"
  };
  var STATES = ["green", "yellow", "orange", "red"];

  function fmtCount(v) {
    if (v === null || v === undefined) return "–";
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    return Math.round(v * 100) / 100 + "";
  }

  function fmtBytes(v) {
    if (v === null || v === undefined) return "–";
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : Math.round(v)) + " " + units[i];
  }

  function fmtState(v) {
    if (v === null || v === undefined) return "–";
    return STATES[Math.round(v)] || String(v);
  }

  function axisValues(fmt) {
    return function (u, splits) { return splits.map(fmt); };
  }

  function line(label, color, extra) {
    var s = { label: label, stroke: color, width: 2, points: { show: false } };
    for (var k in extra || {}) s[k] = extra[k];
    return s;
  }

  /* The three charts' definitions: title, series (after x), columns, value format. */
  function chartSpecs(isDestination) {
    var specs = [
      {
        key: "depth",
        title: "Depth (messages held): min / avg / max",
        columns: ["depth_min", "depth_avg", "depth_max"],
        series: [
          line("min", COLORS.edge, { width: 1 }),
          line("avg", COLORS.depth),
          line("max", COLORS.edge, { width: 1 })
        ],
        bands: [{ series: [3, 1], fill: COLORS.band }],
        fmt: fmtCount
      },
      {
        key: "rates",
        title: "Messages per second: in / out (average over each bucket)",
        columns: ["rate_in_avg", "rate_out_avg"],
        series: [line("in", COLORS.in), line("out", COLORS.out)],
        fmt: fmtCount
      }
    ];
    if (isDestination) {
      specs.push({
        key: "bytes",
        title: "Bytes held (max)",
        columns: ["bytes_max"],
        series: [line("bytes", COLORS.memory)],
        fmt: fmtBytes
      });
    } else {
      specs.push({
        key: "memory",
        title: "Memory: message bytes (max) and memory state (peak)",
        columns: ["memory_bytes_max", "memory_state_peak"],
        series: [
          line("bytes", COLORS.memory),
          line("state", COLORS.state, { scale: "state", width: 1.5, paths: uPlot.paths.stepped({ align: 1 }) })
        ],
        fmt: fmtBytes,
        stateAxis: true
      });
    }
    return specs;
  }

  function History(section) {
    this.section = section;
    this.url = section.getAttribute("data-url");
    this.params = {
      broker: section.getAttribute("data-broker") || "",
      destination: section.getAttribute("data-destination") || "",
      type: section.getAttribute("data-type") || ""
    };
    this.range = section.getAttribute("data-range") || "hour";
    this.plots = [];
    this.syncing = false;
    this.specs = chartSpecs(!!this.params.destination);
    this.status = section.querySelector(".history-status");
    this.holder = section.querySelector(".history-charts");
    this.bind();
    this.load(this.range);
  }

  History.prototype.bind = function () {
    var self = this;
    Array.prototype.forEach.call(this.section.querySelectorAll("button[data-range]"), function (b) {
      b.addEventListener("click", function () { self.load(b.getAttribute("data-range")); });
    });
    var reset = this.section.querySelector("button.history-reset");
    if (reset) reset.addEventListener("click", function () { self.resetZoom(); });
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        self.plots.forEach(function (p) { p.setSize({ width: self.width(), height: 220 }); });
      }, 150);
    });
  };

  History.prototype.width = function () {
    return Math.max(320, this.holder.clientWidth - 4);
  };

  History.prototype.setStatus = function (text, busy) {
    this.status.textContent = text;
    this.section.setAttribute("aria-busy", busy ? "true" : "false");
  };

  History.prototype.load = function (range) {
    var self = this;
    this.range = range;
    Array.prototype.forEach.call(this.section.querySelectorAll("button[data-range]"), function (b) {
      b.setAttribute("aria-pressed", b.getAttribute("data-range") === range ? "true" : "false");
    });
    var q = new URLSearchParams(this.params);
    q.set("range", range);
    this.setStatus("loading…", true);
    fetch(this.url + "?" + q.toString(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("the server answered " + r.status);
        return r.json();
      })
      .then(function (data) {
        if (data.range !== self.range) return; // a later click won
        self.draw(data);
      })
      .catch(function (err) { self.setStatus("cannot load the history: " + err.message, false); });
  };

  History.prototype.draw = function (data) {
    var self = this;
    this.plots.forEach(function (p) { p.destroy(); });
    this.plots = [];
    this.holder.textContent = "";
    var n = data.t.length;
    this.data = data;
    this.section.setAttribute("data-range", data.range);
    this.section.setAttribute("data-granularity", data.granularity);
    this.section.setAttribute("data-points", String(n));
    this.section.setAttribute("data-zoom", "");
    if (!n) {
      this.setStatus("No rollups for this range yet (granularity " + data.granularity +
        "): the pipeline has not run over it, or nothing was sampled.", false);
      return;
    }
    this.setStatus(n + " " + data.granularity + " buckets, " +
      new Date(data.t[0] * 1000).toLocaleString() + " – " +
      new Date(data.t[n - 1] * 1000).toLocaleString() + ". Drag across a chart to zoom.", false);
    this.specs.forEach(function (spec) {
      var fig = document.createElement("figure");
      fig.className = "history-chart";
      fig.setAttribute("data-chart", spec.key);
      var cap = document.createElement("figcaption");
      cap.textContent = spec.title;
      fig.appendChild(cap);
      self.holder.appendChild(fig);
      var columns = [data.t].concat(spec.columns.map(function (c) { return data[c]; }));
      var axes = [
        {},
        { values: axisValues(spec.fmt), size: 70 }
      ];
      var scales = { x: { time: true } };
      if (spec.stateAxis) {
        axes.push({ scale: "state", side: 1, values: axisValues(fmtState), size: 60,
          splits: function () { return [0, 1, 2, 3]; }, grid: { show: false } });
        scales.state = { range: [0, 3] };
      }
      var series = [{ value: function (u, v) { return v === null ? "–" : new Date(v * 1000).toLocaleString(); } }]
        .concat(spec.series.map(function (s) {
          var copy = {};
          for (var k in s) copy[k] = s[k];
          copy.value = function (u, v) { return s.scale === "state" ? fmtState(v) : spec.fmt(v); };
          return copy;
        }));
      var opts = {
        width: self.width(),
        height: 220,
        series: series,
        axes: axes,
        scales: scales,
        bands: spec.bands,
        cursor: { drag: { x: true, y: false }, sync: { key: "history-" + data.range } },
        hooks: { setScale: [function (u, key) { if (key === "x") self.zoomed(u); }] }
      };
      self.plots.push(new uPlot(opts, columns, fig));
    });
  };

  /* One chart zoomed (a drag, a double click or Reset): the others follow. */
  History.prototype.zoomed = function (source) {
    if (this.syncing || !this.data) return;
    var min = source.scales.x.min, max = source.scales.x.max;
    var t = this.data.t;
    var full = min <= t[0] && max >= t[t.length - 1];
    this.section.setAttribute("data-zoom", full ? "" : Math.round(min) + "-" + Math.round(max));
    this.syncing = true;
    try {
      this.plots.forEach(function (p) {
        if (p !== source && (p.scales.x.min !== min || p.scales.x.max !== max)) {
          p.setScale("x", { min: min, max: max });
        }
      });
    } finally {
      this.syncing = false;
    }
  };

  History.prototype.resetZoom = function () {
    if (!this.data || !this.data.t.length || !this.plots.length) return;
    var t = this.data.t;
    this.plots[0].setScale("x", { min: t[0], max: t[t.length - 1] });
  };

  function start() {
    if (typeof uPlot === "undefined") return;
    Array.prototype.forEach.call(document.querySelectorAll("section.history[data-url]"), function (s) {
      s.historyCharts = new History(s);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
