// The spend page's "Download CSV/JSON" links follow the filters as they change (the table is
// swapped by htmx, the links are not). Without this script the links carry the page's own query.
(function () {
  "use strict";

  function follow(form) {
    const query = new URLSearchParams(new FormData(form)).toString();
    document.querySelectorAll("a[data-export-link]").forEach(function (link) {
      link.setAttribute("href", link.pathname + (query ? "?" + query : ""));
    });
  }

  document.addEventListener("change", function (event) {
    const form = event.target.closest("form.filters");
    if (form) follow(form);
  });
})();
