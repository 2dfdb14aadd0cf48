// Spend charts: the element with data-daily-url gets the day-by-day series from the daily spend
// API (the browser's session signs the request) and draws with uPlot each day's cost stacked by
// group, the running total against the month's budget and forecast, and GPU-hours per day. The
// tables beside the charts hold the same figures, rendered by the server. Nothing loads from the
// internet.
(function () {
  "use strict";

  const COLORS = ["#2f5bd3", "#a15c00", "#1b8a5a", "#b83280", "#6b46c1", "#c53030", "#2c7a7b", "#975a16",
    "#4a5568", "#d69e2e", "#3182ce", "#805ad5", "#38a169", "#e53e3e", "#dd6b20", "#319795", "#5a67d8",
    "#d53f8c", "#718096", "#2b6cb0"];
  const OTHERS = "#9aa3b2";
  const DAY = 86400;
  const MONTH = 30 * DAY;  // as uPlot counts them: from a month up, its ticks fall on 1sts
  const YEAR = 365 * DAY;
  // The x axis in whole UTC days, labelled in UTC: the figures are UTC days, so an hour tick, or a
  // viewer's own midnight, would say more than the data does.
  const DAY_TICKS = [DAY, 2 * DAY, 3 * DAY, 4 * DAY, 5 * DAY, 7 * DAY, 10 * DAY, 15 * DAY,
    MONTH, 2 * MONTH, 3 * MONTH, 4 * MONTH, 6 * MONTH, YEAR, 2 * YEAR, 5 * YEAR];

  function utcDate(seconds) { return uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"); }

  // The legend's day: the UTC day a point stands for (a bar sits at its day's noon, a running total
  // at its day's end, so the second before the point lies in its day).
  function dayOf(u, seconds) {
    return seconds == null ? "–" : new Date((seconds - 1) * 1000).toISOString().slice(0, 10);
  }

  function dayStart(iso) { return Date.parse(iso + "T00:00:00Z") / 1000; }

  const dollars = window.ChartFormats.dollars;
  const dateFormat = window.ChartFormats.dateFormat;

  // Day ticks as "Dec 8", the year under the first one and under each January 1st: uPlot's own
  // labels would read in the viewer's locale ("12/8").
  const ON_DAY = dateFormat("{MMM} {D}");
  const ON_DAY_OF_YEAR = dateFormat("{MMM} {D}\n{YYYY}");
  function dayLabels(u, splits) {
    return splits.map(function (seconds, i) {
      if (seconds == null) return null;
      const at = utcDate(seconds);
      return i === 0 || (at.getMonth() === 0 && at.getDate() === 1) ? ON_DAY_OF_YEAR(at) : ON_DAY(at);
    });
  }

  function bars() { return uPlot.paths.bars({ size: [0.7, 48] }); }

  // a day's bar spans its UTC day; the axis shows every day of the range and half a day either side
  function dayAxis(times) {
    return { time: true, range: function () { return [times[0] - DAY / 2, times[times.length - 1] + DAY / 2]; } };
  }

  // Axis and grid colours from the stylesheet (--chart-axis, --chart-grid), read at draw time so
  // that dark mode gets readable axes.
  function themeAxes(axes) {
    const style = getComputedStyle(document.documentElement);
    const stroke = style.getPropertyValue("--chart-axis").trim() || "#475467";
    const grid = style.getPropertyValue("--chart-grid").trim() || "rgba(16, 24, 40, 0.08)";
    return axes.map(function (axis) {
      return Object.assign({ stroke: stroke, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } }, axis);
    });
  }

  function make(element, options, data) {
    if (!element) return;
    options.axes = themeAxes(options.axes || [{}, {}]);
    options.axes[0] = Object.assign({ incrs: DAY_TICKS, values: dayLabels }, options.axes[0]);
    options.tzDate = utcDate;
    options.series[0] = { label: "Day", value: dayOf };
    const empty = element.querySelector(".chart-empty");
    if (empty) empty.remove();
    if (element.chart) element.chart.destroy();
    options.width = Math.max(320, element.clientWidth);
    options.height = 220;
    element.chart = new uPlot(options, data, element);
  }

  // Each day's cost, one bar per day with its groups stacked (largest first, at the bottom): each
  // series draws the running sum up to its group, the taller ones first, so each shows its own part.
  function drawStacked(element, body) {
    if (!body.groups.length) return;
    const times = body.days.map(function (d) { return dayStart(d.day) + DAY / 2; });
    const series = [{}];
    const data = [times];
    let sums = times.map(function () { return 0; });
    const stacked = body.groups.map(function (group, i) {
      sums = sums.map(function (sum, j) { return sum + Number(body.days[j].by_group[i]); });
      return sums;
    });
    for (let i = body.groups.length - 1; i >= 0; i--) {
      const group = body.groups[i];
      const color = group.key === "others" ? OTHERS : COLORS[i % COLORS.length];
      series.push({
        label: group.label,
        scale: "usd",
        fill: color,
        stroke: color,
        width: 0,
        paths: bars(),
        points: { show: false },
        value: function (u, v, si, idx) { return idx == null ? "–" : dollars(body.days[idx].by_group[i]); },
      });
      data.push(stacked[i]);
    }
    make(element, {
      scales: { x: dayAxis(times), usd: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } } },
      series: series,
      axes: [{}, { scale: "usd", label: "$" }],
    }, data);
  }

  // The running total at each day's end; with a month's budget, its line, and the forecast from the
  // last day shown to the month's end.
  function drawCumulative(element, body) {
    if (!body.days.length) return;
    const times = body.days.map(function (d) { return dayStart(d.day) + DAY; });
    const spent = body.days.map(function (d) { return Number(d.cumulative); });
    const series = [{}, {
      label: "Spent so far", scale: "usd", stroke: "#2f5bd3", width: 2, points: { show: body.days.length < 15 },
      value: function (u, v, si, idx) { return idx == null || idx >= body.days.length ? "–" : dollars(body.days[idx].cumulative); },
    }];
    const data = [times, spent];
    const budget = body.budget;
    if (budget) {
      const forecast = budget.forecast;
      if (forecast) {
        const first = new Date(budget.month + "T00:00:00Z");
        const monthEnd = Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 1) / 1000;
        const last = times.length - 1;
        if (monthEnd > times[last]) {
          times.push(monthEnd);
          spent.push(null);
        }
        data.push(times.map(function (t, i) {
          if (i === times.length - 1) return Number(forecast.month_end);
          return i === last ? spent[last] : null;
        }));
        series.push({
          label: "Forecast", scale: "usd", stroke: "#a15c00", width: 2, dash: [6, 4], spanGaps: true,
          value: function (u, v) { return v == null ? "–" : dollars(forecast.month_end); },
        });
      }
      data.push(times.map(function () { return Number(budget.budget); }));
      series.push({
        label: "Budget", scale: "usd", stroke: "#c53030", width: 1.5, points: { show: false },
        value: function () { return dollars(budget.budget); },
      });
    }
    make(element, {
      scales: {
        x: { time: true, range: function () { return [times[0] - DAY, times[times.length - 1]]; } },
        usd: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } },
      },
      series: series,
      axes: [{}, { scale: "usd", label: "$" }],
    }, data);
  }

  function drawHours(element, body) {
    if (!body.days.length) return;
    const times = body.days.map(function (d) { return dayStart(d.day) + DAY / 2; });
    make(element, {
      scales: { x: dayAxis(times), h: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } } },
      series: [{}, {
        label: "GPU-hours", scale: "h", fill: "#1b8a5a", stroke: "#1b8a5a", width: 0, paths: bars(),
        points: { show: false },
        value: function (u, v, si, idx) { return idx == null ? "–" : body.days[idx].gpu_hours; },
      }],
      axes: [{}, { scale: "h", label: "GPU-hours" }],
    }, [times, body.days.map(function (d) { return Number(d.gpu_hours); })]);
  }

  function load(section) {
    const url = section.getAttribute("data-daily-url");
    if (!url || section.getAttribute("data-loaded") === url || typeof uPlot === "undefined") return;
    section.setAttribute("data-loaded", url);
    // what the page says without JavaScript (the figures are in the tables) becomes a wait
    section.querySelectorAll("[data-chart-waits]").forEach(function (p) { p.textContent = "Loading…"; });
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (body) {
        if (!body) return;
        drawStacked(section.querySelector('[data-spend-chart="stacked"]'), body);
        drawCumulative(section.querySelector('[data-spend-chart="cumulative"]'), body);
        drawHours(section.querySelector('[data-spend-chart="hours"]'), body);
      })
      .catch(function (error) {
        console.error("spend charts:", error);  // the browser tests fail on it
        section.removeAttribute("data-loaded");  // the next filter change tries again
      });
  }

  function init() {
    document.querySelectorAll("[data-daily-url]").forEach(load);
  }

  document.addEventListener("DOMContentLoaded", init);
  // the filters swap the table and, out of band, the charts: draw what came new
  document.addEventListener("htmx:afterSettle", init);
})();
