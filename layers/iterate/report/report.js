(function () {
  "use strict";
  var issues = Array.prototype.slice.call(document.querySelectorAll("details.issue"));
  var boxes = Array.prototype.slice.call(document.querySelectorAll("input[data-filter-sev]"));
  var search = document.getElementById("issue-search");
  var shown = document.getElementById("issue-shown");
  function apply() {
    var on = {};
    boxes.forEach(function (b) { on[b.getAttribute("data-filter-sev")] = b.checked; });
    var q = search ? search.value.trim().toLowerCase() : "";
    var n = 0;
    issues.forEach(function (el) {
      var ok = on[el.getAttribute("data-sev")] !== false &&
        (!q || (el.getAttribute("data-text") || "").indexOf(q) !== -1);
      el.classList.toggle("hidden", !ok);
      if (ok) { n += 1; }
    });
    if (shown) { shown.textContent = String(n); }
  }
  boxes.forEach(function (b) { b.addEventListener("change", apply); });
  if (search) { search.addEventListener("input", apply); }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { issues.forEach(function (el) { el.open = true; }); }); }
  if (collapse) { collapse.addEventListener("click", function () { issues.forEach(function (el) { el.open = false; }); }); }
  apply();
})();
