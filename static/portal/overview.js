/* The overview's live figures: a WebSocket to the portal (Channels) that sends
 *   {"type": "history", "samples": [...]} on connect, then {"type": "sample", ...} every second,
 * with the broker's figures (message rates, connections, memory state, destination depths),
 * and {"type": "change", "event": {"type", "op", "name", "by", ...}} when an administrator
 * changes something (shown in the "Recent changes" list; the next sample has the figures).
 * Keeps the last 10 minutes of samples and draws two line charts as inline SVG.
 * Plain JavaScript: no library, no build step. */
(function () {
  "use strict";

  var script = document.currentScript;
  var WS_PATH = (script && script.getAttribute("data-ws-path")) || "/ws/overview/";
  var DEST_BASE = (script && script.getAttribute("data-destination-url")) || "/destinations/";
  var WINDOW_MS = 10 * 60 * 1000;
  var SVG_NS = "http://www.w3.org/2000/svg";
  var samples = [];
  var received = 0;
  var retryDelay = 1000;

  function $(id) { return document.getElementById(id); }

  function num(v) {
    if (v === null || v === undefined || v === "") return null;
    var n = Number(v);
    return isFinite(n) ? n : null;
  }

  function pick(obj, names) {
    for (var i = 0; i < names.length; i++) {
      if (obj && obj[names[i]] !== undefined && obj[names[i]] !== null) return obj[names[i]];
    }
    return undefined;
  }

  function toMillis(ts) {
    if (typeof ts === "number") return ts < 1e12 ? ts * 1000 : ts;
    if (typeof ts === "string") {
      var n = Number(ts);
      if (isFinite(n)) return n < 1e12 ? n * 1000 : n;
      var d = Date.parse(ts);
      if (!isNaN(d)) return d;
    }
    return Date.now();
  }

  /* One sample in the shape the page uses (broker/server/events.py: msgs_in, msgs_out,
   * bytes_in, bytes_out are per-second rates; depths the deepest destinations). */
  function normalize(raw) {
    var s = {
      t: toMillis(pick(raw, ["timestamp", "time", "ts"])),
      inRate: num(pick(raw, ["msgs_in", "msgs_in_rate"])),
      outRate: num(pick(raw, ["msgs_out", "msgs_out_rate"])),
      bytesIn: num(pick(raw, ["bytes_in", "bytes_in_rate"])),
      bytesOut: num(pick(raw, ["bytes_out", "bytes_out_rate"])),
      connections: num(pick(raw, ["connections"])),
      memory: pick(raw, ["memory_state"]),
      state: pick(raw, ["broker_state"]),
      messages: num(pick(raw, ["messages"])),
      lagMax: num(pick(raw, ["loop_lag_max"])),
      lagP99: num(pick(raw, ["loop_lag_p99"])),
      pagedOut: num(pick(raw, ["paged_out"])),
      readBack: num(pick(raw, ["read_back"])),
      destinations: null,
      depths: depthRows(pick(raw, ["depths"]))
    };
    var dests = pick(raw, ["destinations"]);
    if (typeof dests === "number") s.destinations = dests;
    else if (Array.isArray(dests)) s.destinations = dests.length;
    return s;
  }

  function depthRows(depths) {
    if (!depths) return null;
    var rows = [];
    if (Array.isArray(depths)) {
      depths.forEach(function (d) {
        if (Array.isArray(d)) rows.push({ name: String(d[0]), messages: num(d[1]) || 0 });
        else if (d && typeof d === "object") rows.push({
          name: String(pick(d, ["name", "destination"]) || ""),
          type: pick(d, ["type", "kind"]),
          messages: num(pick(d, ["messages", "depth", "count", "nMessages"])) || 0,
          bytes: num(pick(d, ["bytes", "nMessageBytes"])),
          producers: num(pick(d, ["producers", "nProducers"])),
          consumers: num(pick(d, ["consumers", "nConsumers"]))
        });
      });
    } else if (typeof depths === "object") {
      Object.keys(depths).forEach(function (k) {
        var v = depths[k];
        if (v && typeof v === "object") {
          var row = depthRows([v]);
          if (row && row[0]) { row[0].name = row[0].name || k; rows.push(row[0]); }
        } else rows.push({ name: k, messages: num(v) || 0 });
      });
    }
    /* Temporary destinations (reply queues, the portal's own among them) are left out. */
    rows = rows.filter(function (r) { return r.name.indexOf("temporary_destination://") !== 0; });
    rows.sort(function (a, b) { return b.messages - a.messages || (a.name < b.name ? -1 : 1); });
    return rows.slice(0, 20);
  }

  function add(raw) {
    var s = normalize(raw);
    if (samples.length && s.t < samples[samples.length - 1].t) return; /* out of order */
    samples.push(s);
    var cutoff = s.t - WINDOW_MS;
    while (samples.length && samples[0].t < cutoff) samples.shift();
    received++;
  }

  /* ---- figures ------------------------------------------------------------------- */

  function fmt(n, digits) {
    if (n === null || n === undefined) return "–";
    if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(1) + "G";
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
    return digits ? n.toFixed(digits).replace(/\.0+$/, "") : String(Math.round(n));
  }

  function setText(id, text) {
    var el = $(id);
    if (el && el.textContent !== text) el.textContent = text;
  }

  function renderFigures() {
    var s = samples[samples.length - 1];
    if (!s) return;
    setText("fig-msgs-in", fmt(s.inRate, 1));
    setText("fig-msgs-out", fmt(s.outRate, 1));
    setText("fig-bytes-in", fmt(s.bytesIn, 0));
    setText("fig-bytes-out", fmt(s.bytesOut, 0));
    if (s.connections !== null) setText("fig-connections", fmt(s.connections));
    if (s.destinations !== null) setText("fig-destinations", fmt(s.destinations));
    if (s.messages !== null) setText("fig-messages", fmt(s.messages));
    if (s.lagP99 !== null && s.lagMax !== null) {
      setText("fig-loop-lag", fmt(s.lagP99, 2) + " / " + fmt(s.lagMax, 2));
    }
    if (s.pagedOut !== null && s.readBack !== null) {
      setText("fig-paging", fmt(s.pagedOut, 1) + " / " + fmt(s.readBack, 1));
    }
    if (s.memory) {
      var mem = $("fig-memory");
      if (mem) {
        mem.textContent = String(s.memory);
        mem.className = "value mem mem-" + String(s.memory).toLowerCase();
      }
    }
    if (s.state) setText("broker-state", String(s.state));
    if (s.depths) renderDepths(s.depths);
    var root = $("live-status");
    if (root) root.setAttribute("data-samples", String(received));
  }

  function destUrl(row) {
    var kind = row.type && String(row.type).charAt(0).toLowerCase() === "t" ? "t" : "q";
    return DEST_BASE + kind + "/" + encodeURIComponent(row.name) + "/";
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text === null || text === undefined ? "–" : String(text);
    tr.appendChild(td);
    return td;
  }

  function renderDepths(rows) {
    var table = $("deepest");
    if (!table) return;
    var body = table.tBodies[0];
    var fresh = document.createElement("tbody");
    if (!rows.length) {
      var tr = document.createElement("tr");
      tr.className = "empty";
      var td = cell(tr, "No destinations.");
      td.colSpan = 6;
      fresh.appendChild(tr);
    }
    rows.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-name", r.name);
      var td = document.createElement("td");
      var a = document.createElement("a");
      a.href = destUrl(r);
      a.textContent = r.name;
      td.appendChild(a);
      tr.appendChild(td);
      cell(tr, r.type || "");
      cell(tr, r.messages, "num messages");
      cell(tr, r.bytes, "num");
      cell(tr, r.producers, "num");
      cell(tr, r.consumers, "num");
      fresh.appendChild(tr);
    });
    table.replaceChild(fresh, body);
  }

  /* ---- charts -------------------------------------------------------------------- */

  function niceMax(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var m = v / p;
    var step = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
    return step * p;
  }

  function el(name, attrs, text) {
    var e = document.createElementNS(SVG_NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function drawChart(svg, series) {
    if (!svg) return;
    var W = 600, H = 200, L = 44, R = 10, T = 10, B = 22;
    var now = samples.length ? samples[samples.length - 1].t : Date.now();
    /* The time axis spans the data there is, in steps: 1, 2, 5 or 10 minutes. */
    var have = samples.length ? now - samples[0].t : 0;
    var span = [60000, 120000, 300000, WINDOW_MS].filter(function (w) { return w >= have; })[0] || WINDOW_MS;
    var tick = span <= 120000 ? span / 6 : span / 5;
    var t0 = now - span;
    var max = 0;
    series.forEach(function (sr) {
      samples.forEach(function (s) { var v = sr.get(s); if (v !== null && v > max) max = v; });
    });
    max = niceMax(max);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var ticks = 5, step = max / ticks;
    for (var i = 0; i <= ticks; i++) {
      var y = T + (H - T - B) * (i / ticks);
      var v = max - step * i;
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y, y2: y, "class": "gridline" }));
      svg.appendChild(el("text", { x: L - 6, y: y + 4, "text-anchor": "end", "class": "axis-label" },
        v >= 1e4 ? fmt(v) : v.toFixed(step < 1 ? 1 : 0)));
    }
    for (var ago = span; ago >= 0; ago -= tick) {
      var x = L + (W - L - R) * (1 - ago / span);
      var label = ago === 0 ? "now" : span <= 120000 ? "-" + Math.round(ago / 1000) + " s" : "-" + Math.round(ago / 60000) + " min";
      svg.appendChild(el("text", { x: x, y: H - 6, "text-anchor": ago === span ? "start" : ago === 0 ? "end" : "middle", "class": "axis-label" }, label));
    }
    var drawn = 0;
    series.forEach(function (sr) {
      var pts = [];
      samples.forEach(function (s) {
        var v = sr.get(s);
        if (v === null) return;
        if (s.t < t0) return;
        var px = L + (W - L - R) * ((s.t - t0) / span);
        var py = T + (H - T - B) * (1 - v / max);
        pts.push(px.toFixed(1) + "," + py.toFixed(1));
      });
      if (pts.length === 1) pts.push(pts[0]);
      if (pts.length) {
        svg.appendChild(el("polyline", { points: pts.join(" "), "class": "series " + sr.cls }));
        drawn++;
      }
    });
    if (!drawn) {
      svg.appendChild(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", "class": "nodata" }, "waiting for data…"));
    }
    svg.setAttribute("data-points", String(samples.length));
  }

  function renderCharts() {
    drawChart($("chart-rates"), [
      { cls: "in", get: function (s) { return s.inRate; } },
      { cls: "out", get: function (s) { return s.outRate; } }
    ]);
    drawChart($("chart-connections"), [
      { cls: "conn", get: function (s) { return s.connections; } }
    ]);
  }

  var pending = false;
  function render() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      renderFigures();
      renderCharts();
    });
  }

  /* ---- administrators' changes ------------------------------------------------------ */

  var MAX_CHANGES = 5;

  function showChange(ev) {
    var list = $("live-changes");
    if (!list || !ev || typeof ev !== "object") return;
    var what = [ev.op, String(ev.type || "").replace("_", " "), ev.name || ev.id || ev.key || ""];
    var li = document.createElement("li");
    li.textContent = new Date().toLocaleTimeString() + " " + (ev.by || "someone") + ": " +
      what.filter(function (w) { return w !== undefined && w !== ""; }).join(" ");
    list.insertBefore(li, list.firstChild);
    while (list.children.length > MAX_CHANGES) list.removeChild(list.lastChild);
    list.hidden = false;
  }

  /* ---- the socket ---------------------------------------------------------------- */

  function status(state, text) {
    var s = $("live-status");
    if (!s) return;
    s.setAttribute("data-state", state);
    s.textContent = text;
  }

  function connect() {
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + WS_PATH;
    var ws;
    try {
      ws = new WebSocket(url);
    } catch (e) {
      status("disconnected", "live updates unavailable");
      return;
    }
    ws.onopen = function () { retryDelay = 1000; status("live", "live"); };
    ws.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (!msg || typeof msg !== "object") return;
      if (msg.type === "history") {
        samples = [];
        (msg.samples || []).forEach(add);
        var last = samples[samples.length - 1];
        if (last && !last.depths && msg.depths) last.depths = depthRows(msg.depths);
      } else if (msg.type === "sample") {
        add(msg.sample && typeof msg.sample === "object" ? msg.sample : msg);
      } else if (msg.type === "change") {
        showChange(msg.event);
        return;
      } else {
        return;
      }
      render();
    };
    ws.onclose = function () {
      status("disconnected", "disconnected — retrying");
      window.setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 15000);
    };
  }

  /* Initial figures from the page, so the charts have a frame before the first sample. */
  try {
    var initial = JSON.parse($("overview-initial").textContent);
    if (initial && initial.deepest) renderDepths(depthRows(initial.deepest));
  } catch (e) { /* the server-rendered table stays */ }
  renderCharts();
  if ("WebSocket" in window) connect();
  else status("disconnected", "live updates need WebSockets");
})();
