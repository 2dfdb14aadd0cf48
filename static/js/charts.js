// Workload charts: an element with data-series-url gets the series from the API (the browser's
// session signs the request) and draws GPU utilization (%) and memory (GB) with uPlot, again
// every 30 s while data-live is "true"; data-cost-url the cost over time, data-serving-url what a
// deployment served. Nothing loads from the internet.
(function () {
  "use strict";

  // Axis and grid colours from the stylesheet (--chart-axis, --chart-grid), read when a chart is
  // drawn so that dark mode gets readable axes.
  function themed(axis) {
    const style = getComputedStyle(document.documentElement);
    const stroke = style.getPropertyValue("--chart-axis").trim() || "#475467";
    const grid = style.getPropertyValue("--chart-grid").trim() || "rgba(16, 24, 40, 0.08)";
    return Object.assign({ stroke: stroke, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } }, axis);
  }

  const dollars = window.ChartFormats.dollars;
  const dateFormat = window.ChartFormats.dateFormat;

  // Times in UTC, as the rest of the portal (and these charts' tables) give them.
  function utcDate(seconds) { return uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"); }

  // The time axis in 24-hour UTC ("13:00"), the day named at the first tick and at each midnight
  // ("Dec 8 00:00"); the legend's time in full, as the pages write it. uPlot's own labels would
  // read in the viewer's locale ("1:00pm 12/8/26").
  const AT_TIME = dateFormat("{HH}:{mm}");
  const AT_DAY = dateFormat("{MMM} {D}\n{HH}:{mm}");
  function timeLabels(u, splits) {
    return splits.map(function (seconds, i) {
      if (seconds == null) return null;
      const at = utcDate(seconds);
      return i === 0 || (at.getHours() === 0 && at.getMinutes() === 0) ? AT_DAY(at) : AT_TIME(at);
    });
  }
  function timeAxis() { return themed({ values: timeLabels }); }
  function timeSeries() { return { label: "Time", value: "{YYYY}-{MM}-{DD} {HH}:{mm} UTC" }; }  // uPlot writes into it

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
    element.chart = twoAxisChart(element, data,
      { label: "Utilization %", scale: "pct", unit: "%", range: [0, 100] },
      { label: "Memory GB", scale: "gb", unit: "GB", least: 1 });
  }

  // A chart over time of two series on two axes (left and right), each from 0; the time axis
  // shows at least the last hour: a workload a few minutes old is not a dot in a year.
  function twoAxisChart(element, data, left, right) {
    function scale(side) {
      return side.range ? { range: side.range } : { range: function (u, min, max) { return [0, Math.max(side.least, max * 1.2)]; } };
    }
    // from the data's own times (as refreshed), which uPlot does not pass for a single reading;
    // a range dragged out inside them (a zoom) is kept as chosen
    function span(u, min, max) {
      const times = u.data[0], first = times[0], last = times[times.length - 1];
      if (min != null && max != null && max > min && (min > first || max < last)) return [min, max];
      return [Math.min(first, last - 3600), last + 60];
    }
    const scales = { x: { time: true, range: span } };
    scales[left.scale] = scale(left);
    scales[right.scale] = scale(right);
    return new uPlot({
      width: Math.max(320, element.clientWidth),
      height: 220,
      tzDate: utcDate,
      scales: scales,
      series: [
        timeSeries(),
        { label: left.label, scale: left.scale, stroke: "#2f5bd3", width: 2, spanGaps: false },
        { label: right.label, scale: right.scale, stroke: "#a15c00", width: 1.5, spanGaps: false },
      ],
      axes: [timeAxis(), themed({ scale: left.scale, label: left.unit }),
             themed({ scale: right.scale, side: 1, label: right.unit, grid: { show: false } })],
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

  // A chart's table: one row of cells per record (the first cell a time, the others numbers), or
  // one row saying `nothing` when there is none.
  function fillRows(rows, records, nothing, columns) {
    if (!rows) return;
    if (!records.length) records = [[nothing]];
    rows.replaceChildren.apply(rows, records.map(function (cells) {
      const tr = document.createElement("tr");
      cells.forEach(function (text, i) {
        const td = document.createElement("td");
        td.textContent = text;
        if (cells.length === 1) {
          td.colSpan = columns;
          td.className = "muted";
        } else if (i) {
          td.className = "num";
        }
        tr.appendChild(td);
      });
      return tr;
    }));
  }

  // Cost over time: the running total (a line) and each hour's cost (steps), and the same figures
  // as rows of the table beside it, for screen readers and for anyone who wants the numbers.
  function drawCost(element, points) {
    const nothing = element.getAttribute("data-empty") || "Nothing billed yet.";
    fillRows(element.parentElement.querySelector("[data-cost-rows]"), points.slice().reverse().map(function (p) {
      return [p.at.replace("T", " ").slice(0, 16), dollars(p.cost), dollars(p.total)];
    }), nothing, 3);
    const empty = element.querySelector(".chart-empty");
    // what is true for its state: "Nothing billed yet." while it lives, "Nothing was billed." after
    if (!points.length) {
      if (empty) empty.textContent = nothing;
      return;
    }
    if (typeof uPlot === "undefined") {
      if (empty) empty.textContent = "The figures are in the table below.";
      return;
    }
    if (empty) empty.remove();
    const times = points.map(function (p) { return Date.parse(p.at) / 1000; });
    // the axis spans the data's own times (uPlot widens a single time far beyond it): a few hours at least
    element.span = [times[0], times[times.length - 1] + 3600];
    const data = [
      times,
      points.map(function (p) { return Number(p.total); }),
      points.map(function (p) { return Number(p.cost); }),
    ];
    if (element.chart) {
      element.chart.setData(data);
      return;
    }
    element.chart = new uPlot({
      width: Math.max(320, element.clientWidth),
      height: 200,
      tzDate: utcDate,
      scales: {
        // at least a few hours on the time axis, from the first hour billed: a workload's first hour
        // is not a dot in a year, nor at the end of hours before it existed
        x: { time: true, range: function () { return [element.span[0], Math.max(element.span[1], element.span[0] + 4 * 3600)]; } },
        usd: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } },
      },
      series: [
        timeSeries(),
        { label: "Total $", scale: "usd", stroke: "#2f5bd3", width: 2, points: { show: true } },
        { label: "Per hour $", scale: "usd", stroke: "#a15c00", width: 1, paths: uPlot.paths.stepped({ align: 1 }) },
      ],
      axes: [timeAxis(), themed({ scale: "usd", label: "$" })],
    }, data, element);
  }

  function loadCost(element) {
    fetch(element.getAttribute("data-cost-url"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : []; })
      .then(function (points) { drawCost(element, points); })
      .catch(function () { /* the next refresh tries again */ });
  }

  // Serving over time: the throughput (generated tokens per second, or requests per second where
  // the runtime reports no tokens) and the mean latency, per minute, and the same as table rows.
  function fixed(value, digits) { return value === null || value === undefined ? "–" : Number(value).toFixed(digits); }

  function drawServing(element, points) {
    const served = points.filter(function (p) { return p.requests_per_second !== null || p.tokens_per_second !== null; });
    fillRows(element.parentNode.querySelector("[data-serving-rows]"), served.slice().reverse().map(function (p) {
      return [p.at.replace("T", " ").slice(0, 16), fixed(p.requests_per_second, 2), fixed(p.tokens_per_second, 1),
              fixed(p.request_latency_seconds, 2)];
    }), "Nothing served in its last day.", 4);
    // generated tokens where the model generates any (an embedding model, Triton: requests)
    const tokens = points.some(function (p) { return p.tokens_per_second > 0; });
    const empty = element.querySelector(".chart-empty");
    if (!served.length) return;
    if (typeof uPlot === "undefined") {
      if (empty) empty.textContent = "The figures are in the table below.";
      return;
    }
    if (empty) empty.remove();
    const data = [
      points.map(function (p) { return Date.parse(p.at) / 1000; }),
      points.map(function (p) { return tokens ? p.tokens_per_second : p.requests_per_second; }),
      points.map(function (p) { return p.request_latency_seconds; }),
    ];
    if (element.chart) {
      element.chart.setData(data);
      return;
    }
    element.chart = twoAxisChart(element, data,
      { label: tokens ? "Tokens/s" : "Requests/s", scale: "rate", unit: tokens ? "tokens/s" : "requests/s", least: 1 },
      { label: "Latency s", scale: "sec", unit: "s", least: 0.1 });
  }

  function loadServing(element) {
    fetch(element.getAttribute("data-serving-url"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : { points: [] }; })
      .then(function (body) { drawServing(element, body.points || []); })
      .catch(function () { /* the next refresh tries again */ });
  }

  // Refresh a live chart every so often, until it leaves the page (a refresh swapped it out).
  function every(element, seconds, load) {
    if (element.getAttribute("data-live") !== "true") return;
    const timer = setInterval(function () {
      if (element.isConnected) load(element);
      else clearInterval(timer);
    }, seconds * 1000);
  }

  // Start each chart once: those on the page, and those a refresh swaps in (a workload that
  // starts running gets its charts without a reload).
  function start(root) {
    root.querySelectorAll("[data-cost-url]").forEach(function (element) {
      if (element.started) return;
      element.started = true;
      loadCost(element);
      every(element, 60, loadCost);
    });
    root.querySelectorAll("[data-serving-url]").forEach(function (element) {
      if (element.started) return;
      element.started = true;
      loadServing(element);
      every(element, 60, loadServing);
    });
    if (typeof uPlot === "undefined") return;
    root.querySelectorAll("[data-series-url]").forEach(function (element) {
      if (element.started) return;
      element.started = true;
      load(element);
      every(element, 30, load);
    });
  }

  document.addEventListener("DOMContentLoaded", function () { start(document); });
  document.addEventListener("htmx:load", function (event) { start(event.detail.elt); });
})();
