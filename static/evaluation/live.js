// Live progress for the dashboard and the report page: a WebSocket when the server has a shared
// channel layer (reconnecting with backoff, polling meanwhile and for good after repeated failures),
// otherwise polling every 2 s. When the watched runs finish, the page reloads.
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

  // What a card or report shows as a run's one status: the detail while it runs ("Turn 5/20"), then
  // the lifecycle status once it has ended.
  function cap(text) { return text ? text.charAt(0).toUpperCase() + text.slice(1) : ""; }
  // An active run's detail, or its stage where that says more than its status; never the status again
  // ("Queued · queued"). The server's status_detail filter says the same.
  function detailText(s) {
    var detail = (s.detail || "").trim();
    if (!detail && s.status !== s.run_status) detail = cap((s.status || "").replace(/_/g, " "));
    return detail.toLowerCase() === (s.run_status || "").toLowerCase() ? "" : detail;
  }
  function statusText(s) {
    if (finished.indexOf(s.run_status) >= 0) return cap(s.run_status);
    return detailText(s) || cap(s.run_status);
  }

  // Run controls follow the status: Cancel while a run is queued or running, Retry and Evaluate again
  // once it has ended.
  function showControls(root, ended) {
    root.querySelectorAll("[data-while-active]").forEach(function (el) { el.hidden = ended; });
    root.querySelectorAll("[data-when-ended]").forEach(function (el) { el.hidden = !ended; });
  }

  // Live updates of a list of runs: a WebSocket when the server has a shared channel layer, which
  // reconnects with growing waits (1 s, 2 s, 4 s ... 30 s) and polls status.json meanwhile; after
  // MAX_RECONNECTS failures in a row it stays on polling. page.dataset.liveMode says which is in use.
  var MAX_RECONNECTS = 5;
  function watchRuns(ids, onStatus) {
    var pollTimer = null, failures = 0;
    function mode(m) { page.dataset.liveMode = m; }
    function poll() {
      pollTimer = null;
      if (!ids().length) return;
      fetch("runs/status.json?ids=" + encodeURIComponent(ids().join(",")), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) { data.runs.forEach(onStatus); })
        .catch(function () {})
        .then(function () { if (page.dataset.liveMode !== "socket") pollTimer = setTimeout(poll, 2000); });
    }
    function startPolling() {
      if (page.dataset.liveMode !== "polling") mode("polling");
      if (!pollTimer) pollTimer = setTimeout(poll, 2000);
    }
    function connect() {
      var ws;
      try {
        ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws/runs/");
      } catch (e) { startPolling(); return; }
      ws.onopen = function () {
        failures = 0;
        mode("socket");
        if (pollTimer) { clearTimeout(pollTimer); pollTimer = null; }
        poll(); // catch up on what changed while disconnected
      };
      ws.onmessage = function (e) { onStatus(JSON.parse(e.data)); };
      ws.onclose = function () {
        if (!ids().length) return;
        failures += 1;
        startPolling();
        if (failures <= MAX_RECONNECTS) {
          var wait = Math.min(30000, 1000 * Math.pow(2, failures - 1)) * (0.8 + 0.4 * Math.random());
          page.dataset.reconnects = String(failures);
          setTimeout(connect, wait);
        }
      };
    }
    if (useSocket) connect();
    else startPolling();
  }

  // Run list: update the active cards' status; reload when they have all finished.
  var cards = document.querySelector(".cards");
  if (cards && cards.dataset.active) {
    var active = cards.dataset.active.split(",").filter(Boolean);
    watchRuns(function () { return active; }, function (s) {
      var card = cards.querySelector('[data-run="' + s.run_id + '"]');
      if (!card || active.indexOf(s.run_id) < 0) return;
      setText(card, "[data-status]", statusText(s));
      showControls(card, finished.indexOf(s.run_status) >= 0);
      if (finished.indexOf(s.run_status) >= 0) {
        active = active.filter(function (i) { return i !== s.run_id; });
        if (!active.length) window.location.reload();
      }
    });
  }

  // Report page of a running run: stage, "Turn 5/20", and the transcript growing turn by turn.
  if (page.classList.contains("report") && page.dataset.active === "1") {
    var box = document.getElementById("messages");
    var last = function () {
      var items = box.querySelectorAll(".msg");
      return items.length ? parseInt(items[items.length - 1].id.replace("message-", ""), 10) : 0;
    };
    var tick = function () {
      fetch("live.json?after=" + last(), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          setText(page, "[data-status]", cap(data.status.run_status));
          var detail = detailText(data.status);
          setText(page, "[data-detail]", detail);
          var line = page.querySelector("[data-detail-line]");
          if (line) line.hidden = !detail;
          showControls(page, finished.indexOf(data.status.run_status) >= 0);
          data.messages.forEach(function (m) {
            var div = document.createElement("div");
            div.className = "msg role-" + m.role;
            div.id = "message-" + m.turn;
            var who = document.createElement("div");
            who.className = "who";
            who.textContent = "Message " + m.turn + " · " + m.role.toUpperCase();
            var body = document.createElement("div");
            body.className = "body";
            body.innerHTML = m.html; // sanitised on the server (markdown-it without HTML, then nh3)
            div.appendChild(who);
            div.appendChild(body);
            box.appendChild(div);
          });
          // the usage line as the server renders it (escaped there), saved with the same turn as the messages
          var usage = page.querySelector("[data-usage]");
          if (usage && data.usage_html) usage.innerHTML = data.usage_html;
          if (finished.indexOf(data.status.run_status) >= 0) window.location.reload();
          else setTimeout(tick, 2000);
        })
        .catch(function () { setTimeout(tick, 4000); }); // a failed poll (server restarting, 503) tries again
    };
    setTimeout(tick, 2000);
  }
})();
