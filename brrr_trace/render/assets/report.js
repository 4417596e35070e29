// brrr-trace HTML report: ties the lines table and the steps table to the timeline
// (timeline.js); trace strings are read from data attributes and never written as markup.
(function () {
  "use strict";

  function timelines() {
    return document.querySelectorAll(".brrr-timeline");
  }

  function send(name, detail) {
    var roots = timelines();
    for (var i = 0; i < roots.length; i++) {
      roots[i].dispatchEvent(new CustomEvent(name, { detail: detail }));
    }
  }

  function rows(selector) {
    return Array.prototype.slice.call(document.querySelectorAll(selector));
  }

  rows("tr.brrr-line").forEach(function (row) {
    row.addEventListener("click", function () {
      rows("tr.brrr-line.brrr-picked").forEach(function (r) { r.classList.remove("brrr-picked"); });
      row.classList.add("brrr-picked");
      send("brrr:highlight", {
        type: "highlight",
        path: row.getAttribute("data-path") || row.getAttribute("data-file"),
        line: Number(row.getAttribute("data-line")),
      });
    });
  });

  rows("tr.brrr-step").forEach(function (row) {
    row.addEventListener("click", function () {
      send("brrr:zoom", {
        type: "zoom",
        start_ns: Number(row.getAttribute("data-start")),
        end_ns: Number(row.getAttribute("data-end")),
      });
      var tl = document.getElementById("timeline");
      if (tl) tl.scrollIntoView({ block: "nearest" });
    });
  });

  // A kernel or gap clicked in the timeline: show its line in the lines table.
  document.addEventListener("brrr:reveal", function (e) {
    var m = e.detail || {};
    var found = rows("tr.brrr-line").filter(function (row) {
      return Number(row.getAttribute("data-line")) === m.line &&
        (row.getAttribute("data-file") === m.file || (m.path && row.getAttribute("data-path") === m.path));
    });
    rows("tr.brrr-revealed").forEach(function (r) { r.classList.remove("brrr-revealed"); });
    if (!found.length) return;
    found[0].classList.add("brrr-revealed");
    var next = found[0].nextElementSibling;
    var more = next && next.classList.contains("brrr-more") ? next.querySelector("details") : null;
    if (more) more.open = true;
    found[0].scrollIntoView({ block: "center" });
  });
})();
