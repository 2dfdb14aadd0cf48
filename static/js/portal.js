// Small progressive enhancements; every page works without them.
(function () {
  "use strict";

  // <button data-copy="text">: copy to the clipboard and say so.
  document.addEventListener("click", function (event) {
    const button = event.target.closest("[data-copy]");
    if (!button) return;
    const text = button.getAttribute("data-copy");
    const done = function () {
      const label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { window.prompt("Copy this:", text); });
    } else {
      window.prompt("Copy this:", text);
    }
  });

  // <form data-relay-inputs="selector">: its fields' change and keyup (and input) events are sent on to it as
  // "input-changed" and "input-typed" (htmx triggers), except from fields inside the selector's
  // match; with data-relay-typed="selector", only keyups from fields that match it. htmx's own
  // trigger filters (change[...]) are evaluated code, which the Content Security Policy refuses.
  function relayInputs(event, name) {
    if (!(event.target instanceof Element)) return;
    let relay = event.target.closest("[data-relay-inputs]");
    while (relay) {
      const skip = relay.getAttribute("data-relay-inputs");
      const typed = relay.getAttribute("data-relay-typed");
      const skipped = skip && event.target.closest(skip);
      const untyped = name === "input-typed" && typed && !event.target.matches(typed);
      if (!skipped && !untyped) {
        // Not bubbling: an enclosing relay decides for itself.
        relay.dispatchEvent(new CustomEvent(name, { bubbles: false }));
      }
      relay = relay.parentElement && relay.parentElement.closest("[data-relay-inputs]");
    }
  }
  document.addEventListener("change", function (event) { relayInputs(event, "input-changed"); });
  document.addEventListener("keyup", function (event) { relayInputs(event, "input-typed"); });
  // a paste, a drop or the browser's autofill changes a text field without a key: typed too (the
  // trigger's delay makes a key's two events one); a select, box or radio says so by "change"
  const TEXTUAL = "textarea, input:not([type=checkbox]):not([type=radio]):not([type=file])";
  document.addEventListener("input", function (event) {
    if (event.isComposing || !(event.target instanceof Element) || !event.target.matches(TEXTUAL)) return;
    relayInputs(event, "input-typed");
  });

  // A page sent back with errors puts the focus on the first field in error (unless a field asks
  // for it), so that a keyboard or a screen reader starts where there is something to fix.
  document.addEventListener("DOMContentLoaded", function () {
    if (document.querySelector("[autofocus]")) return;
    const invalid = document.querySelector("main [aria-invalid='true']");
    if (invalid) invalid.focus();
  });

  // <input data-list-by="team" data-list-prefix="project-suggestions-">: the datalist it suggests
  // from follows the form's field named "team" (the list of its value: project-suggestions-vision).
  document.addEventListener("change", function (event) {
    const field = event.target;
    if (!(field instanceof Element) || !field.name || !field.form) return;
    field.form.querySelectorAll("[data-list-by]").forEach(function (input) {
      if (input.getAttribute("data-list-by") !== field.name) return;
      input.setAttribute("list", input.getAttribute("data-list-prefix") + field.value);
    });
  });

  // <form data-confirm="question">: ask before a destructive submit; <button data-confirm> asks
  // only when that button sends the form (a form whose other button is harmless); a form with
  // data-confirm-zero="field" only when that field is 0 (scaling to zero, not to three).
  document.addEventListener("submit", function (event) {
    const button = event.submitter && event.submitter.closest("[data-confirm]");
    let asking = button || event.target.closest("form[data-confirm]");
    const zero = asking && asking.getAttribute("data-confirm-zero");
    if (zero && asking.elements && asking.elements[zero] && Number(asking.elements[zero].value) !== 0) {
      asking = null;
    }
    if (asking && !window.confirm(asking.getAttribute("data-confirm"))) {
      event.preventDefault();
    }
  }, true);

  // A form posted once is not posted again while the next page loads: a double click or a second
  // Enter would send the request twice, and the second answer (a name already taken, a request
  // already decided) would replace the page of the first, which went through. Its buttons look
  // busy meanwhile. Forms sent by htmx are left out: their answer replaces the row or panel that
  // holds them, so the request htmx queues behind the first has no form to send. Coming back to
  // the page (the browser's Back) makes the form usable again, and so does waiting: a navigation
  // the user stopped leaves no form locked for good.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || event.defaultPrevented) return;
    if (form.method.toLowerCase() !== "post" || form.target === "_blank") return;
    if (form.hasAttribute("aria-busy")) {
      event.preventDefault();
      return;
    }
    form.setAttribute("aria-busy", "true");
    setTimeout(function () { form.removeAttribute("aria-busy"); }, 15000);
  });
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("form[aria-busy]").forEach(function (form) { form.removeAttribute("aria-busy"); });
  });

  // <span data-countdown-until="ISO time" data-countdown-done="ending">: the last hour before a
  // workload's expiry, ticking as "1 min 01 s"; at the deadline it says what happens next. htmx swaps
  // in fresh spans as the page refreshes, so each tick finds them anew.
  function tickCountdowns() {
    const now = Date.now();
    document.querySelectorAll("[data-countdown-until]").forEach(function (span) {
      const until = Date.parse(span.getAttribute("data-countdown-until"));
      if (isNaN(until)) return;
      const left = Math.floor((until - now) / 1000);
      if (left <= 0) {
        span.textContent = span.getAttribute("data-countdown-done") || "now";
        span.classList.add("ending");
        return;
      }
      // "in 1 min 01 s", "in 42 s": never "01:01", which reads as hours and minutes
      const minutes = Math.floor(left / 60);
      const seconds = left % 60;
      span.textContent = minutes > 0
        ? "in " + minutes + " min " + String(seconds).padStart(2, "0") + " s"
        : "in " + seconds + " s";
    });
  }
  tickCountdowns();
  setInterval(tickCountdowns, 1000);

  // The main menu on phones: [data-nav] gets "nav-collapsible" (the stylesheet folds its links
  // away on narrow screens) and its toggle button shows; the button opens and closes the links and
  // says so in aria-expanded. Without this script the links stay in view.
  document.querySelectorAll("[data-nav]").forEach(function (header) {
    const toggle = header.querySelector(".nav-toggle");
    if (!toggle) return;
    header.classList.add("nav-collapsible");
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      const open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      header.classList.toggle("nav-open", open);
    });
  });

  // Live regions ([data-live], polled by htmx): skip a poll while the tab is hidden, and while
  // someone types in the region (a swap would throw their text away); the next poll catches up.
  // htmx's own trigger filters (every 5s[...]) are evaluated code, which the CSP refuses.
  document.addEventListener("htmx:beforeRequest", function (event) {
    const region = event.detail && event.detail.elt;
    if (!(region instanceof Element) || !region.hasAttribute("data-live")) return;
    if (document.visibilityState === "hidden") {
      event.preventDefault();
      return;
    }
    const active = document.activeElement;
    const typing = active && region.contains(active) && active.matches("input, textarea, select");
    const typed = Array.prototype.some.call(region.querySelectorAll("input[type=text], textarea"), function (field) {
      return field.value !== field.defaultValue;
    });
    if (typing || typed) event.preventDefault();
  });

  // <div data-marks-form="form id" data-invalid-fields="name ..." data-alert="id">, swapped in by
  // htmx beside a form it does not replace (the catalog's sizing): the named fields are marked
  // invalid (the error style, aria-invalid, described by the alert), the others cleared, as a full
  // page marks them.
  function markInvalid() {
    document.querySelectorAll("[data-marks-form]").forEach(function (box) {
      const form = document.getElementById(box.getAttribute("data-marks-form"));
      if (!form) return;
      const invalid = (box.getAttribute("data-invalid-fields") || "").split(" ").filter(Boolean);
      const alert = box.getAttribute("data-alert") || "";
      form.querySelectorAll(".field").forEach(function (field) {
        const input = field.querySelector("input[name], select[name], textarea[name]");
        if (!input) return;
        const bad = invalid.indexOf(input.name) !== -1;
        const described = (input.getAttribute("aria-describedby") || "").split(" ").filter(function (id) {
          return id && id !== alert;
        });
        field.classList.toggle("has-error", bad);
        if (bad) {
          input.setAttribute("aria-invalid", "true");
          if (alert) described.push(alert);
        } else {
          input.removeAttribute("aria-invalid");
          field.querySelectorAll(".field-error").forEach(function (error) { error.remove(); });
        }
        if (described.length) input.setAttribute("aria-describedby", described.join(" "));
        else input.removeAttribute("aria-describedby");
      });
    });
  }
  markInvalid();
  document.addEventListener("htmx:afterSettle", markInvalid);

  // An action sent by htmx (a decision, a token, a budget) that failed would otherwise change
  // nothing on the page and say nothing: htmx does not swap an error answer. Say what happened in
  // the messages area. Polls are left out: the next one tries again.
  function actionFailed(text) {
    const area = document.getElementById("messages");
    if (!area) return;
    const note = document.createElement("div");
    note.className = "flash flash-error";
    note.setAttribute("role", "alert");
    note.textContent = text;
    area.replaceChildren(note);
    area.scrollIntoView({ block: "nearest" });
  }
  function isAction(event) {
    const config = event.detail && event.detail.requestConfig;
    return Boolean(config) && config.verb !== "get";
  }
  document.addEventListener("htmx:responseError", function (event) {
    if (!isAction(event)) return;
    const status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status === 403) {
      actionFailed("That did not go through: the portal refused it, most likely because this page is older than your sign-in. Reload it and try again; nothing was changed.");
    } else if (status >= 500) {
      actionFailed("That did not go through: the portal failed on its side (the error was logged). Reload the page to see what changed, then try again.");
    } else {
      actionFailed("That did not go through (the portal answered " + status + "). Reload the page and try again.");
    }
  });
  document.addEventListener("htmx:sendError", function (event) {
    if (isAction(event)) actionFailed("The portal could not be reached. Check your connection, then try again.");
  });

  // Close the user menu when clicking elsewhere.
  document.addEventListener("click", function (event) {
    document.querySelectorAll("details.user-menu[open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.removeAttribute("open");
    });
  });
})();
