// The fleet summary page's table: filter and sort (summary.py inlines this file: the page loads nothing).
// Without JavaScript the page shows everything, in the fleet's order.
(function () {
  "use strict";
  var table = document.getElementById("hosts-table");
  var input = document.getElementById("filter");
  var shown = document.getElementById("shown");
  if (!table || !input) return;
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);

  // Filter: every word typed must occur in the row's host, verdict, check, OS or GPU archs (data-search), or be its
  // group ("group:g2", what a finding's "show these hosts" button types).
  function applyFilter() {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var visible = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute("data-search");
      var match = words.every(function (word) { return text.indexOf(word) >= 0; });
      row.hidden = !match;
      if (match) visible += 1;
    });
    shown.textContent = visible + " of " + rows.length + " hosts";
  }
  // "input" as one types; "change" and "search" when the field is emptied at once (its clear button, a form reset).
  ["input", "change", "search"].forEach(function (name) { input.addEventListener(name, applyFilter); });
  Array.prototype.forEach.call(document.querySelectorAll("button[data-group]"), function (button) {
    button.addEventListener("click", function () {
      input.value = "group:" + button.getAttribute("data-group");
      applyFilter();
      input.scrollIntoView();
    });
  });

  // Sort: a click on a column's header sorts by it, a second click the other way. Cells may carry data-key (the
  // verdict's severity, the time as a number); otherwise the text, numbers inside it compared as numbers (ws2 < ws10).
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});
  function key(row, index) {
    var cell = row.cells[index];
    return cell.hasAttribute("data-key") ? cell.getAttribute("data-key") : cell.textContent.trim();
  }
  headers.forEach(function (header, index) {
    if (header.hasAttribute("data-nosort")) return;
    header.addEventListener("click", function () {
      var ascending = header.getAttribute("aria-sort") !== "ascending";
      headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      rows.sort(function (a, b) {
        var order = collator.compare(key(a, index), key(b, index));
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });

  // Printed, every host's details are open (a closed <details> prints as its summary line only); afterwards the
  // ones this opened close again. Marked on the element, so a second beforeprint before the afterprint changes nothing.
  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details:not([open])"), function (d) {
      d.setAttribute("data-opened-for-print", "");
      d.open = true;
    });
  });
  window.addEventListener("afterprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details[data-opened-for-print]"), function (d) {
      d.removeAttribute("data-opened-for-print");
      d.open = false;
    });
  });
  applyFilter();
})();
