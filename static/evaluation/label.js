// The labelling page by keyboard: a level's number picks it on the current dimension and moves to the next;
// arrows change dimension; Enter submits; S skips; B goes back; C writes a comment, Esc leaves it.
// A static script: the CSP runs no inline code.
(function () {
  "use strict";
  if (!document.getElementById("labelling")) return;
  var form = document.getElementById("label-form");
  var back = document.getElementById("back");
  var dims = form ? Array.prototype.slice.call(form.querySelectorAll("fieldset.dimension")) : [];
  var comment = document.getElementById("comment");
  var current = 0;
  function firstOpen() {
    for (var i = 0; i < dims.length; i++) if (!dims[i].querySelector("input:checked")) return i;
    return dims.length - 1;
  }
  function show(i) {
    if (!dims.length) return;
    current = Math.max(0, Math.min(dims.length - 1, i));
    dims.forEach(function (d, k) { d.classList.toggle("current", k === current); });
    dims[current].scrollIntoView({ block: "nearest" });
  }
  show(firstOpen());
  dims.forEach(function (d, k) {
    d.addEventListener("change", function () { show(k + 1 < dims.length ? k + 1 : k); });
  });
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (comment && e.target === comment) {
      if (e.key === "Escape") { comment.blur(); e.preventDefault(); }
      return;
    }
    var key = e.key;
    if ((key === "b" || key === "B") && back) {
      e.preventDefault(); window.location.assign(back.href); return;
    }
    if (!form) return;
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
    } else if (key === "c" || key === "C") {
      if (comment) { e.preventDefault(); comment.focus(); }
    }
  });
})();
