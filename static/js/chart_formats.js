// What the charts (static/js/charts.js, static/js/spend_charts.js) write money and dates with, as
// the pages do: loaded before them.
window.ChartFormats = (function () {
  "use strict";

  // "$12,345.67" from "12345.67" (the string kept exact: no float)
  function dollars(text) {
    if (text == null) return "–";
    const negative = String(text).charAt(0) === "-";
    const parts = String(text).replace("-", "").split(".");
    parts[0] = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return (negative ? "-$" : "$") + parts.join(".");
  }

  // A uPlot date format, made when first used: a page may lack uPlot (its tables still fill).
  function dateFormat(template) {
    let format = null;
    return function (date) { format = format || uPlot.fmtDate(template); return format(date); };
  }

  return { dollars: dollars, dateFormat: dateFormat };
})();
