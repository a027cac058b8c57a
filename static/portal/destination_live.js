/* A destination page's live rates: the overview's WebSocket (/ws/overview/) sends the
 * broker's sample every second; its "activity" list has the busiest destinations' rates
 * (broker/server/events.py).  This destination absent from it had no traffic in that
 * second (0/s).  Keeps the last 10 minutes and draws messages in/out per second with
 * uPlot.  Plain JavaScript, no build step. */
(function () {
  "use strict";

  var card = document.getElementById("live-rates");
  if (!card) return;
  var NAME = card.getAttribute("data-name");
  var TYPE = card.getAttribute("data-type");
  var WS_PATH = card.getAttribute("data-ws-path") || "/ws/overview/";
  var WINDOW_S = 600;
  var xs = [], ins = [], outs = [];
  var plot = null;
  var retryDelay = 1000;

  function $(id) { return document.getElementById(id); }

  function bytes(n) {
    if (n === null || n === undefined || !isFinite(n)) return "–";
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(1)) + " " + units[i];
  }

  function rate(n) { return n >= 100 ? String(Math.round(n)) : String(Math.round(n * 10) / 10); }

  function status(text) { $("live-status").textContent = text; }

  function draw() {
    var el = $("live-chart");
    if (typeof uPlot === "undefined") { status("The chart library did not load."); return; }
    var width = Math.max(300, el.clientWidth || card.clientWidth - 40);
    if (!plot) {
      plot = new uPlot({
        width: width,
        height: 220,
        scales: { x: { time: true } },
        axes: [{}, { label: "messages/s" }],
        series: [
          {},
          { label: "in", stroke: "#2b6cb0", width: 2 },
          { label: "out", stroke: "#c05621", width: 2 }
        ]
      }, [xs, ins, outs], el);
    } else {
      plot.setData([xs, ins, outs]);
    }
  }

  function onSample(s) {
    var mine = null, list = s.activity || [];
    for (var i = 0; i < list.length; i++) {
      if (list[i].name === NAME && list[i].type === TYPE) { mine = list[i]; break; }
    }
    var depth = null;
    (s.depths || []).forEach(function (d) { if (d.name === NAME && d.type === TYPE) depth = d; });
    var held = mine || depth;
    var t = Number(s.timestamp) || Date.now() / 1000;
    xs.push(t);
    ins.push(mine ? mine.msgs_in : 0);
    outs.push(mine ? mine.msgs_out : 0);
    while (xs.length && xs[0] < t - WINDOW_S) { xs.shift(); ins.shift(); outs.shift(); }
    $("live-in").textContent = rate(mine ? mine.msgs_in : 0);
    $("live-out").textContent = rate(mine ? mine.msgs_out : 0);
    $("live-bytes-in").textContent = bytes(mine ? mine.bytes_in : 0);
    $("live-bytes-out").textContent = bytes(mine ? mine.bytes_out : 0);
    if (held) {
      $("live-messages").textContent = String(held.messages);
      $("live-bytes").textContent = bytes(held.bytes);
    }
    status("Live: updated " + new Date(t * 1000).toLocaleTimeString() + ".");
    draw();
  }

  function connect() {
    var proto = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(proto + location.host + WS_PATH);
    ws.onopen = function () { retryDelay = 1000; status("Connected: waiting for the broker's next sample."); };
    ws.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === "sample") onSample(msg);
    };
    ws.onclose = function () {
      status("Live updates stopped; reconnecting…");
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    };
  }

  status("Connecting…");
  connect();
})();
