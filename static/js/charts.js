// GPU utilization charts: an element with data-series-url gets the series from the API (the
// browser's session signs the request) and draws utilization (%) and memory (GB) with uPlot,
// again every 30 s while data-live is "true". Nothing loads from the internet.
(function () {
  "use strict";

  function draw(element, points) {
    const empty = element.querySelector(".chart-empty");
    if (!points.length) return;
    if (empty) empty.remove();
    const times = points.map(function (p) { return Date.parse(p.at) / 1000; });
    const utilization = points.map(function (p) { return p.utilization; });
    const memory = points.map(function (p) { return Math.round(p.memory_used_mb / 102.4) / 10; });
    const data = [times, utilization, memory];
    if (element.chart) {
      element.chart.setData(data);
      return;
    }
    element.chart = new uPlot({
      width: Math.max(320, element.clientWidth),
      height: 220,
      scales: {
        // at least the last hour on the time axis: a sandbox a few minutes old is not a dot in a year
        x: { time: true, range: function (u, min, max) { return [Math.min(min, max - 3600), max + 60]; } },
        pct: { range: [0, 100] },
        gb: { range: function (u, min, max) { return [0, Math.max(1, max * 1.2)]; } },
      },
      series: [
        {},
        { label: "Utilization %", scale: "pct", stroke: "#2f5bd3", width: 2, spanGaps: false },
        { label: "Memory GB", scale: "gb", stroke: "#a15c00", width: 1.5 },
      ],
      axes: [{}, { scale: "pct", label: "%" }, { scale: "gb", side: 1, label: "GB", grid: { show: false } }],
    }, data, element);
  }

  function seriesUrl(element) {
    // hour by hour for a workload older than two days: minutes are kept for days, not its life
    const url = new URL(element.getAttribute("data-series-url"), window.location.href);
    const from = Date.parse(url.searchParams.get("from") || "");
    if (from && Date.now() - from > 2 * 86400 * 1000) url.searchParams.set("step", "3600");
    return url.toString();
  }

  function load(element) {
    fetch(seriesUrl(element), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : []; })
      .then(function (points) { draw(element, points); })
      .catch(function () { /* the next refresh tries again */ });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (typeof uPlot === "undefined") return;
    document.querySelectorAll("[data-series-url]").forEach(function (element) {
      load(element);
      if (element.getAttribute("data-live") === "true") {
        setInterval(function () { load(element); }, 30000);
      }
    });
  });
})();
