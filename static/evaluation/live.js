// Live progress for the dashboard and the report page: a WebSocket when the server has a shared
// channel layer, otherwise polling every 2 s. When a watched run finishes, the page reloads.
(function () {
  "use strict";
  // A slider shows its value in the <output> after it (a static script: the CSP runs no inline code).
  document.querySelectorAll("input[type=range]").forEach(function (range) {
    var out = range.nextElementSibling;
    if (!out || out.tagName !== "OUTPUT") return;
    range.addEventListener("input", function () { out.value = range.value; });
  });
  document.querySelectorAll(".tab").forEach(function (tab) {
    tab.addEventListener("click", function () {
      document.querySelectorAll(".tab").forEach(function (t) { t.classList.toggle("active", t === tab); });
      document.querySelectorAll(".tab-panel").forEach(function (p) { p.hidden = p.id !== "tab-" + tab.dataset.tab; });
    });
  });
  var finished = ["completed", "failed", "interrupted", "cancelled"];
  var page = document.querySelector(".eval-page");
  if (!page) return;
  var useSocket = page.dataset.liveSocket === "1" && "WebSocket" in window;

  function setText(root, selector, value) {
    var el = root.querySelector(selector);
    if (el) el.textContent = value;
  }

  // Run list: update the active cards' stage and detail; reload when they finish.
  var cards = document.querySelector(".cards");
  if (cards && cards.dataset.active) {
    var ids = cards.dataset.active.split(",").filter(Boolean);
    var onStatus = function (s) {
      var card = cards.querySelector('[data-run="' + s.run_id + '"]');
      if (!card) return;
      setText(card, "[data-stage]", s.status);
      setText(card, "[data-detail]", s.detail || "");
      if (finished.indexOf(s.status) >= 0) {
        ids = ids.filter(function (i) { return i !== s.run_id; });
        if (!ids.length) window.location.reload();
      }
    };
    if (useSocket) {
      var ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws/runs/");
      ws.onmessage = function (e) { onStatus(JSON.parse(e.data)); };
    } else {
      var poll = function () {
        fetch("runs/status.json?ids=" + encodeURIComponent(ids.join(",")), { credentials: "same-origin" })
          .then(function (r) { return r.json(); })
          .then(function (data) { data.runs.forEach(onStatus); if (ids.length) setTimeout(poll, 2000); });
      };
      setTimeout(poll, 2000);
    }
  }

  // Report page of a running run: stage, "Turn 5/20", and the transcript growing turn by turn.
  if (page.classList.contains("report") && page.dataset.active === "1") {
    var box = document.getElementById("messages");
    var last = function () {
      var items = box.querySelectorAll(".msg");
      return items.length ? parseInt(items[items.length - 1].id.replace("turn-", ""), 10) : 0;
    };
    var tick = function () {
      fetch("live.json?after=" + last(), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          setText(page, "[data-stage]", data.status.status);
          setText(page, "[data-detail]", data.status.detail || "");
          data.messages.forEach(function (m) {
            var div = document.createElement("div");
            div.className = "msg role-" + m.role;
            div.id = "turn-" + m.turn;
            var who = document.createElement("div");
            who.className = "who";
            who.textContent = "[Turn " + m.turn + "] " + m.role.toUpperCase();
            var body = document.createElement("div");
            body.className = "body";
            body.innerHTML = m.html; // sanitised on the server (markdown-it without HTML, then nh3)
            div.appendChild(who);
            div.appendChild(body);
            box.appendChild(div);
          });
          if (finished.indexOf(data.status.status) >= 0) window.location.reload();
          else setTimeout(tick, 2000);
        });
    };
    setTimeout(tick, 2000);
  }
})();
