// The labelling page by keyboard: a level's number picks it on the current dimension and moves to the next;
// arrows change dimension; Enter submits; S skips; B goes back; C writes a comment, Esc leaves it.
// A static script: the CSP runs no inline code.
(function () {
  "use strict";
  var form = document.getElementById("label-form");
  if (!form) return;
  var dims = Array.prototype.slice.call(form.querySelectorAll("fieldset.dimension"));
  var current = 0;
  function firstOpen() {
    for (var i = 0; i < dims.length; i++) if (!dims[i].querySelector("input:checked")) return i;
    return dims.length - 1;
  }
  function show(i) {
    current = Math.max(0, Math.min(dims.length - 1, i));
    dims.forEach(function (d, k) { d.classList.toggle("current", k === current); });
    dims[current].scrollIntoView({ block: "nearest" });
  }
  show(firstOpen());
  dims.forEach(function (d, k) {
    d.addEventListener("change", function () { show(k + 1 < dims.length ? k + 1 : k); });
  });
  var comment = document.getElementById("comment");
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target === comment) {
      if (e.key === "Escape") { comment.blur(); e.preventDefault(); }
      return;
    }
    var key = e.key;
    if (/^[0-9]$/.test(key)) {
      var input = dims[current].querySelector('input[data-key="' + key + '"]');
      if (input) {
        input.checked = true;
        input.dispatchEvent(new Event("change", { bubbles: true }));
        e.preventDefault();
      }
    } else if (key === "ArrowDown" || key === "ArrowRight") {
      show(current + 1); e.preventDefault();
    } else if (key === "ArrowUp" || key === "ArrowLeft") {
      show(current - 1); e.preventDefault();
    } else if (key === "Enter") {
      e.preventDefault();
      var open = dims.filter(function (d) { return !d.querySelector("input:checked"); });
      if (open.length) { show(dims.indexOf(open[0])); return; }
      document.getElementById("submit").click();
    } else if (key === "s" || key === "S") {
      var skip = document.getElementById("skip");
      if (skip && !skip.disabled) { e.preventDefault(); skip.click(); }
    } else if (key === "b" || key === "B") {
      if (form.dataset.back) { e.preventDefault(); window.location.assign(form.dataset.back); }
    } else if (key === "c" || key === "C") {
      e.preventDefault(); comment.focus();
    }
  });
})();
