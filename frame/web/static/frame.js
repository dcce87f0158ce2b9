// Keeps the render progress current by polling the daemon's /api/status (the login session's cookie is the owner's).
// Everything else on the page is plain HTML forms, so the page works without this script.
// The mapping from the status JSON mirrors frame/web/present.py:progress_view — keep them in step.
(function () {
  "use strict";
  var box = document.getElementById("progress");
  if (!box || !window.fetch) { return; }
  var url = box.getAttribute("data-status-url");
  var wasActive = box.getAttribute("data-active") === "yes";

  function duration(seconds) {
    if (typeof seconds !== "number" || !isFinite(seconds)) { return ""; }
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 90) { return seconds + " s"; }
    var minutes = Math.round(seconds / 60);
    if (minutes < 90) { return minutes + " min"; }
    var rest = minutes % 60;
    return Math.floor(minutes / 60) + " h " + (rest < 10 ? "0" : "") + rest + " min";
  }

  function bytes(n) {  // present.py:byte_amount
    if (typeof n !== "number" || !isFinite(n) || n < 0) { return ""; }
    var units = [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
    for (var i = 0; i < units.length; i++) {
      if (n >= units[i][1]) {
        var v = n / units[i][1];
        return (v < 100 ? Number(v.toPrecision(3)).toString() : Math.round(v).toString()) + " " + units[i][0];
      }
    }
    return Math.floor(n) + " B";
  }

  function fetchLine(render) {  // present.py:fetch_line
    var parts = [];
    if (bytes(render.bytes_per_step)) { parts.push(bytes(render.bytes_per_step) + " of weights per step"); }
    if (render.link_rate && bytes(render.link_rate)) { parts.push("link " + bytes(render.link_rate) + "/s"); }
    return parts.join(" · ");
  }

  // shown_text.py:neutralise — a file name in the status (a model, a LoRA) reads as what it holds: each
  // control or format character (a right-to-left override) is shown as its code point
  var HIDDEN = /(?![\t\r\n\u200c\u200d])[\p{Cc}\p{Cf}\p{Co}\p{Cs}]/gu;  // checks.py:_REFUSED_CATEGORIES
  function plain(text) {
    return String(text).replace(HIDDEN, function (c) {
      var hex = c.codePointAt(0).toString(16).toUpperCase();
      return "[U+" + ("000" + hex).slice(-Math.max(4, hex.length)) + "]";
    });
  }

  function field(name, text) {
    var el = box.querySelector('[data-field="' + name + '"]');
    if (el) { el.textContent = plain(text); }
  }

  function facts(status) {  // the status page's own lines: the daemon's state and the queue's length
    var state = document.querySelector('dd[data-field="state"]');
    if (state && typeof status.state === "string") { state.textContent = status.state; }
    var queued = document.querySelector('dd[data-field="queued"]');
    if (queued && typeof status.queued_prompts === "number") { queued.textContent = status.queued_prompts; }
  }

  function show(status) {
    facts(status || {});
    var render = (status && (status.render || (status.status && status.status.render))) || null;
    if (!render) {
      box.hidden = true;
      if (wasActive) { window.location.reload(); }  // finished: show the new picture
      return;
    }
    wasActive = true;
    box.hidden = false;
    var title = document.getElementById("progress-title");  // present.py:progress_title
    title.textContent = render.kind && render.kind !== "night" ? "Painting a new picture now" : "Painting tonight's picture";
    var steps = render.steps, step = render.step || 0;
    var bar = document.getElementById("progress-bar");
    var percent = steps > 0 ? Math.floor(100 * step / steps) : 0;
    bar.value = percent;
    bar.textContent = percent + "%";
    field("stage", render.stage || "");
    field("steps", steps ? "step " + step + " of " + steps : "");
    var eta = duration(render.eta_seconds);
    field("eta", eta ? "· about " + eta + " left" : "");
    field("fetch", fetchLine(render));
    var note = box.querySelector('[data-field="backend_note"]');
    if (note) {
      note.textContent = plain(render.backend_note || "");
      note.hidden = !render.backend_note;
    }
    var choice = box.querySelector('[data-field="step_choice"]');
    if (choice) {
      choice.textContent = render.step_choice ? plain("Tonight: " + render.step_choice + ".") : "";
      choice.hidden = !render.step_choice;
    }
    var img = document.getElementById("progress-preview");
    if (render.preview) {
      img.src = "/render/preview?step=" + encodeURIComponent(step);
      img.hidden = false;
    }
  }

  function poll() {
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data) { show(data); } })
      .catch(function () { /* the frame may be restarting; try again later */ })
      .then(function () { window.setTimeout(poll, wasActive ? 5000 : 30000); });
  }
  window.setTimeout(poll, wasActive ? 2000 : 10000);
}());

// "More like this": the strength slider says its value (a range input shows none by itself).
(function () {
  "use strict";
  var slider = document.getElementById("strength");
  var shown = document.getElementById("strength-value");
  if (!slider || !shown || slider.type !== "range") { return; }
  function update() { shown.textContent = Number(slider.value).toString(); }
  slider.addEventListener("input", update);
  update();
}());

// The queue form: a LoRA's button adds its <lora:NAME:1> tag to the prompt (typing it works without this).
(function () {
  "use strict";
  var prompt = document.getElementById("prompt");
  if (!prompt) { return; }
  var buttons = document.querySelectorAll("[data-lora-tag]");
  for (var i = 0; i < buttons.length; i++) {
    buttons[i].addEventListener("click", function () {
      var text = prompt.value.replace(/\s+$/, "");
      prompt.value = (text ? text + " " : "") + this.getAttribute("data-lora-tag");
      prompt.focus();
    });
  }
})();

// The queue form: an embedding's button adds its word to its field (data-into: the prompt or the negative
// prompt), after a comma as prompts list words; typing the name works without this.
(function () {
  "use strict";
  var buttons = document.querySelectorAll("[data-embedding][data-into]");
  for (var i = 0; i < buttons.length; i++) {
    buttons[i].addEventListener("click", function () {
      var field = document.getElementById(this.getAttribute("data-into"));
      if (!field) { return; }
      var text = field.value.replace(/\s+$/, "");
      var joint = !text ? "" : (/,$/.test(text) ? " " : ", ");
      field.value = text + joint + this.getAttribute("data-embedding");
      field.focus();
    });
  }
})();
