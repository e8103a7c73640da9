// taskgate dashboard: live updates over server-sent events, and the two checkpoint forms.
// Hand-written, no dependencies. The server renders every fragment (escaped); this script
// only swaps sections whose content key changed, so a form being typed in is kept.
(function () {
  "use strict";
  var body = document.body;
  var page = body.getAttribute("data-page");
  var task = body.getAttribute("data-task");
  var live = document.getElementById("live");
  var flash = document.getElementById("flash");
  var busy = false;
  var again = false;
  var connectedOnce = false;
  var failures = 0;

  function setLive(text, cls) {
    if (!live) return;
    live.textContent = text;
    live.className = "live " + cls;
  }

  function say(text, ok) {
    if (!flash) return;
    flash.textContent = text;
    flash.className = "flash " + (ok ? "ok" : "bad");
    flash.hidden = false;
  }

  function fragmentUrl() {
    if (page === "board") return "/fragment/board";
    if (page === "task") return "/fragment/tasks/" + encodeURIComponent(task);
    return null;
  }

  function apply(html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    var fresh = tpl.content.querySelectorAll("[data-section]");
    for (var i = 0; i < fresh.length; i++) {
      var el = fresh[i];
      var old = document.getElementById(el.id);
      if (!old) {
        var container = document.getElementById(page === "board" ? "board" : "task");
        if (container) container.appendChild(el);
        continue;
      }
      if (old.getAttribute("data-key") === el.getAttribute("data-key")) continue;
      // Keep what the person typed if the same form comes back.
      var typed = old.querySelector("textarea");
      var next = el.querySelector("textarea");
      if (typed && next && typed.value) next.value = typed.value;
      keepOpen(old, el);
      old.replaceWith(el);
    }
    body.setAttribute("data-version", String(Number(body.getAttribute("data-version") || 0) + 1));
    filterCards();
  }

  function filterCards() {
    var box = document.getElementById("filter");
    if (!box) return;
    var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
    var cards = document.querySelectorAll("article.card");
    for (var i = 0; i < cards.length; i++) {
      var text = cards[i].textContent.toLowerCase();
      var shown = words.every(function (w) { return text.indexOf(w) >= 0; });
      cards[i].hidden = !shown;
    }
  }

  var filterBox = document.getElementById("filter");
  if (filterBox) filterBox.addEventListener("input", filterCards);

  function keepOpen(old, el) {
    // <details> the person opened or closed stay that way.
    var a = old.querySelectorAll("details");
    var b = el.querySelectorAll("details");
    if (a.length !== b.length) return;
    for (var i = 0; i < a.length; i++) b[i].open = a[i].open;
  }

  function refresh() {
    var url = fragmentUrl();
    if (!url) return;
    if (busy) { again = true; return; }
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.status === 401) { setLive("logged out", "off"); throw new Error("401"); }
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) { apply(html); failures = 0; })
      .catch(function (err) {
        // The store may be mid-step or the server busy: try again shortly, never give up
        // silently on a stale page (a few tries, then the live badge says so).
        if (String(err && err.message) === "401") return;
        failures += 1;
        if (failures <= 20) setTimeout(refresh, Math.min(250 * failures, 2000));
        else setLive("stale: reload the page", "off");
      })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  function listen() {
    if (!window.EventSource || !fragmentUrl()) return;
    var es = new EventSource("/events");
    es.addEventListener("hello", function () {
      setLive("live", "on");
      if (connectedOnce) refresh(); // changes may have been missed while disconnected
      connectedOnce = true;
    });
    es.addEventListener("change", function (e) {
      var m = {};
      try { m = JSON.parse(e.data); } catch (err) { m = {}; }
      var tasks = m.tasks || [];
      if (page === "board" || tasks.length === 0 || tasks.indexOf(task) >= 0) refresh();
    });
    es.onerror = function () { setLive("reconnecting…", "off"); };
  }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.classList || !form.classList.contains("act")) return;
    e.preventDefault();
    var buttons = form.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) buttons[i].disabled = true;
    fetch(form.action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Accept": "application/json" },
      body: new URLSearchParams(new FormData(form))
    })
      .then(function (r) { return r.json(); })
      .then(function (d) {
        if (d.ok) {
          var moved = d.state_before ? " (" + d.state_before + " → " + d.state_after + ")" : "";
          say((d.message || "Recorded.").split("\n")[0] + moved, true);
          if (!fragmentUrl()) setTimeout(function () { window.location.reload(); }, 1200);
        } else {
          say("Refused: " + d.error + (d.hint ? " — " + d.hint : ""), false);
        }
      })
      .catch(function () { say("The server did not answer; nothing may have been recorded.", false); })
      .then(function () {
        for (var i = 0; i < buttons.length; i++) buttons[i].disabled = false;
        refresh();
      });
  });

  listen();
})();
