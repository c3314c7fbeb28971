// dejavu's HTML report: draws the flame graph and the timeline from the embedded JSON
// (#dejavu-data) and filters the findings by the frame a reader selects. It reads nothing
// but this page, and puts text from the trace into the page only through textContent and
// attributes, never as markup.
(function () {
  "use strict";
  var dataEl = document.getElementById("dejavu-data");
  if (!dataEl) return;
  var D = JSON.parse(dataEl.textContent);

  // Printing shows every finding's details.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
  if (D.kind !== "report") return;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function base(p) { var s = String(p).split("/"); return s[s.length - 1]; }
  function count(n) { return Number(n).toLocaleString("en-US"); }
  function pct(x) { return x >= 0.001 ? (x * 100).toFixed(1) + "%" : (x > 0 ? "<0.1%" : "0%"); }
  function dur(ns) {
    if (ns < 1e3) return Math.round(ns) + "ns";
    if (ns < 1e6) return (ns / 1e3).toFixed(ns < 1e4 ? 1 : 0) + "µs";
    if (ns < 1e9) return (ns / 1e6).toFixed(ns < 1e7 ? 1 : 0) + "ms";
    return (ns / 1e9).toFixed(2) + "s";
  }

  // ---- Findings filter -------------------------------------------------------------
  var findings = Array.prototype.slice.call(document.querySelectorAll("li.finding"));
  var sets = findings.map(function (li) {
    var s = new Set();
    (li.getAttribute("data-frames") || "").split(" ").forEach(function (x) {
      if (x !== "") s.add(Number(x));
    });
    return s;
  });
  var status = document.getElementById("filter-status");
  var clear = document.getElementById("clear-filter");
  var selected = null;

  function filter(node) {
    if (selected && selected.button) selected.button.setAttribute("aria-pressed", "false");
    selected = node;
    if (!node) {
      findings.forEach(function (li) { li.hidden = false; });
      status.textContent = "";
      clear.hidden = true;
      if (location.hash.indexOf("#frame=") === 0) history.replaceState(null, "", location.pathname + location.search);
      return;
    }
    if (node.button) node.button.setAttribute("aria-pressed", "true");
    var shown = 0;
    findings.forEach(function (li, i) {
      var ok = li.getAttribute("data-program") === node.prog &&
        node.path.every(function (id) { return sets[i].has(id); });
      li.hidden = !ok;
      if (ok) shown++;
    });
    status.textContent = "Showing " + shown + " of " + findings.length + " findings whose calls pass through " +
      node.title + ".";
    clear.hidden = false;
    // A match among the folded findings (runtime, launchers) must be seen too.
    document.querySelectorAll("details.folded").forEach(function (d) {
      if (d.querySelector("li.finding:not([hidden])")) d.open = true;
    });
  }
  clear.addEventListener("click", function () { filter(null); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && selected) filter(null);
  });

  // ---- Flame graph (icicle) --------------------------------------------------------
  var frames = D.frames;
  var flameEl = document.getElementById("flame");
  var foldBtn = document.getElementById("fold");
  var MAX_DEPTH = 64, MAX_NODES = 3000;

  function frameName(i) {
    var f = frames[i];
    if (f[0]) return f[0];
    if (f[3]) return base(f[3]);
    return f[1] ? base(f[1]) + (f[2] ? ":" + f[2] : "") : "?";
  }
  function framePlace(i) {
    var f = frames[i];
    // A named function is one box for all its lines: its file only.
    var named = f[0] && f[0].charAt(0) !== "<";
    if (f[1]) return base(f[1]) + (f[2] && !named ? ":" + f[2] : "");
    if (f[3]) return base(f[3]);
    return "";
  }

  function build(fold) {
    var root = { key: "", name: "all redundant calls", calls: 0, ns: 0, kids: new Map(), path: [], own: false, fold: false, root: true };
    D.flame.stacks.forEach(function (s) {
      var ids = s[0], n = s[1], ns = s[2], node = root;
      root.calls += n; root.ns += ns;
      // The first level is the program that made the calls.
      var prog = D.flame.programs[s[3]] || "";
      var pk = "p" + s[3], pn = root.kids.get(pk);
      if (!pn) {
        pn = { key: pk, name: prog, calls: 0, ns: 0, kids: new Map(), path: [], own: false, fold: false, prog: prog, ids: [] };
        root.kids.set(pk, pn);
      }
      pn.calls += n; pn.ns += ns;
      node = pn;
      var i = 0;
      while (i < ids.length) {
        var run, key, name, own, folded = false;
        if (fold && !frames[ids[i]][4]) {
          var j = i;
          while (j < ids.length && !frames[ids[j]][4]) j++;
          run = ids.slice(i, j);
          key = "r" + run.join(",");
          var inner = run[run.length - 1];
          name = run.length > 1 ? frameName(inner) + " (+" + (run.length - 1) + " runtime)" : frameName(inner);
          own = false; folded = run.length > 1;
          i = j;
        } else {
          run = [ids[i]];
          key = "f" + ids[i];
          name = frameName(ids[i]);
          own = frames[ids[i]][4] === 1;
          i++;
        }
        var kid = node.kids.get(key);
        if (!kid) {
          kid = { key: key, name: name, calls: 0, ns: 0, kids: new Map(), path: node.path.concat(run), own: own, fold: folded, ids: run, prog: node.prog };
          node.kids.set(key, kid);
        }
        kid.calls += n; kid.ns += ns;
        node = kid;
      }
    });
    var rest = (D.flame.other || 0) + (D.flame.unstacked || 0);
    root.total = root.calls + rest;
    return root;
  }

  function drawFlame() {
    var fold = foldBtn.getAttribute("aria-pressed") === "true";
    var root = build(fold);
    flameEl.textContent = "";
    if (root.calls === 0) {
      flameEl.appendChild(el("p", "hint", D.flame.total > 0
        ? "No stacks were recorded for the redundant calls (record with --stacks on, the default, to see where they come from)."
        : "No redundant calls."));
      return;
    }
    var rows = [], nodes = 0, byKey = [];
    function place(node, depth, x, w) {
      if (depth > MAX_DEPTH || nodes >= MAX_NODES || w < 0.0015) return;
      if (!rows[depth]) rows[depth] = [];
      rows[depth].push({ node: node, x: x, w: w });
      nodes++;
      var kids = Array.from(node.kids.values()).sort(function (a, b) { return b.calls - a.calls; });
      var cx = x;
      kids.forEach(function (k) {
        k.parent = node;
        var kw = w * k.calls / node.calls;
        place(k, depth + 1, cx, kw);
        cx += kw;
      });
    }
    place(root, 0, 0, root.calls / root.total);
    // Arrow keys move between frames: up to the caller, down to the heaviest callee,
    // left and right along the row.
    rows.forEach(function (row, d) {
      row.forEach(function (p, i) { p.node.row = d; p.node.col = i; });
    });
    function focusAt(d, i) {
      var r = rows[d];
      if (r && r[i]) r[i].node.button.focus();
    }
    rows.forEach(function (row) {
      var r = el("div", "fl-row");
      row.forEach(function (p) {
        var n = p.node;
        var b = el("button", "fr" + (n.own ? " own" : "") + (n.root ? " root" : "") + (n.fold ? " fold" : ""));
        b.type = "button";
        b.style.left = (p.x * 100).toFixed(3) + "%";
        b.style.width = (p.w * 100).toFixed(3) + "%";
        var where = n.ids && n.ids.length ? framePlace(n.ids[n.ids.length - 1]) : "";
        n.title = n.root ? "all redundant calls" : n.ids.length === 0 ? "the program " + n.name :
          n.name + (where ? " (" + where + ")" : "");
        if (!n.root && n.ids.length === 0) b.className += " prog";
        b.textContent = n.name;
        var text = n.title + ": " + count(n.calls) + " redundant calls, " + pct(n.calls / root.total) + ", " + dur(n.ns) +
          (n.own ? "; the program's own code" : n.root ? "" : "; runtime or library");
        b.title = text;
        b.setAttribute("aria-label", text);
        b.setAttribute("aria-pressed", "false");
        b.setAttribute("data-frame", n.ids && n.ids.length ? frameName(n.ids[n.ids.length - 1]) : "");
        b.tabIndex = p.w >= 0.01 ? 0 : -1;
        n.button = b;
        byKey.push(n);
        b.addEventListener("click", function () {
          if (n.root || selected === n) filter(null); else filter(n);
        });
        b.addEventListener("keydown", function (e) {
          var d = n.row, i = n.col;
          if (e.key === "ArrowLeft") focusAt(d, i - 1);
          else if (e.key === "ArrowRight") focusAt(d, i + 1);
          else if (e.key === "ArrowUp" && n.parent) n.parent.button.focus();
          else if (e.key === "ArrowDown") {
            var kid = rows[d + 1] && rows[d + 1].filter(function (q) { return q.node.parent === n; })[0];
            if (kid) kid.node.button.focus();
          } else return;
          e.preventDefault();
        });
        r.appendChild(b);
      });
      flameEl.appendChild(r);
    });
    var rest = (D.flame.other || 0) + (D.flame.unstacked || 0);
    if (rest > 0) {
      flameEl.appendChild(el("p", "hint", count(rest) + " redundant calls are not drawn: " +
        count(D.flame.unstacked || 0) + " were recorded without a stack, " + count(D.flame.other || 0) +
        " came from stacks beyond the " + count(D.flame.stacks.length) + " heaviest."));
    }
    flameEl._nodes = byKey;
  }
  foldBtn.addEventListener("click", function () {
    var on = foldBtn.getAttribute("aria-pressed") !== "true";
    foldBtn.setAttribute("aria-pressed", on ? "true" : "false");
    filter(null);
    drawFlame();
  });
  drawFlame();

  // A link can pre-select a frame: report.html#frame=check_config.
  function fromHash() {
    var m = /^#frame=(.+)$/.exec(location.hash);
    if (!m) return;
    var name = decodeURIComponent(m[1]);
    var hit = (flameEl._nodes || []).filter(function (n) {
      return !n.root && n.ids.length > 0 && n.ids.some(function (id) { return frames[id][0] === name; });
    });
    // The outermost such node: every call through the function.
    hit.sort(function (a, b) { return a.path.length - b.path.length; });
    if (hit.length) filter(hit[0]);
  }
  fromHash();
  window.addEventListener("hashchange", fromHash);

  // ---- Timeline --------------------------------------------------------------------
  var T = D.timeline, tlEl = document.getElementById("timeline");
  // Unflatten each thread's [gap, calls, redundant, ...] into [bucket, calls, redundant].
  T.threads.forEach(function (t) {
    var out = [], at = -1;
    for (var i = 0; i + 2 < t.b.length; i += 3) {
      at += t.b[i];
      out.push([at, t.b[i + 1], t.b[i + 2]]);
    }
    t.buckets = out;
  });
  // The recording often starts well before the program's first call (loading the
  // tracer): open on the span that has calls; "Whole recording" shows all of it.
  var first = T.buckets || 1, last = 0;
  T.threads.forEach(function (t) {
    if (t.buckets.length) {
      first = Math.min(first, t.buckets[0][0]);
      last = Math.max(last, t.buckets[t.buckets.length - 1][0] + 1);
    }
  });
  if (last <= first) { first = 0; last = T.buckets || 1; }
  if (last - first < 10) { last = Math.min(T.buckets || 1, first + 10); first = Math.max(0, last - 10); }
  var view = [first, last];
  var ROWS = 12, showAll = false;
  var rangeEl = document.getElementById("tl-range");
  var SVGNS = "http://www.w3.org/2000/svg";

  function drawTimeline() {
    tlEl.textContent = "";
    if (!T.threads || T.threads.length === 0) {
      tlEl.appendChild(el("p", "hint", "No calls were traced."));
      return;
    }
    var v0 = view[0], v1 = view[1], w = v1 - v0, H = 28;
    var max = 1;
    T.threads.forEach(function (t) {
      t.buckets.forEach(function (b) { if (b[0] >= v0 && b[0] < v1 && b[1] > max) max = b[1]; });
    });
    var lmax = Math.log(1 + max);
    var rows = showAll ? T.threads : T.threads.slice(0, ROWS);
    rows.forEach(function (t) {
      var row = el("div", "tl-row");
      var label = t.program + " " + t.pid + (t.tid !== t.pid ? "/" + t.tid : "");
      var lab = el("div", "tl-label", label);
      lab.title = label + ": " + count(t.calls) + " calls, " + count(t.redundant_calls) + " redundant";
      row.appendChild(lab);
      var svg = document.createElementNS(SVGNS, "svg");
      svg.setAttribute("viewBox", "0 0 " + w + " " + H);
      svg.setAttribute("preserveAspectRatio", "none");
      svg.setAttribute("role", "img");
      svg.setAttribute("aria-label", "Thread " + label + ": " + count(t.calls) + " traced calls, " +
        count(t.redundant_calls) + " redundant, over the recording");
      if (D.skip_startup_ns > 0) {
        var sk = Math.min(D.skip_startup_ns / T.bucket_ns, v1) - v0;
        if (sk > 0) {
          var rect = document.createElementNS(SVGNS, "rect");
          rect.setAttribute("class", "tl-skip");
          rect.setAttribute("x", 0); rect.setAttribute("y", 0);
          rect.setAttribute("width", sk); rect.setAttribute("height", H);
          svg.appendChild(rect);
        }
      }
      var all = "", red = "";
      t.buckets.forEach(function (b) {
        if (b[0] < v0 || b[0] >= v1) return;
        var x = b[0] - v0;
        var h = H * Math.log(1 + b[1]) / lmax;
        all += "M" + x + " " + H + "v" + (-h).toFixed(2) + "h1v" + h.toFixed(2) + "z";
        if (b[2] > 0) {
          var hr = Math.max(H * Math.log(1 + b[2]) / lmax, 2);
          red += "M" + x + " " + H + "v" + (-hr).toFixed(2) + "h1v" + hr.toFixed(2) + "z";
        }
      });
      [["tl-all", all], ["tl-red", red]].forEach(function (p) {
        if (!p[1]) return;
        var path = document.createElementNS(SVGNS, "path");
        path.setAttribute("class", p[0]);
        path.setAttribute("d", p[1]);
        svg.appendChild(path);
      });
      row.appendChild(svg);
      tlEl.appendChild(row);
    });
    var axis = el("div", "tl-axis");
    var hiddenRows = T.threads.length - rows.length, left = el("div");
    if (hiddenRows > 0 || showAll) {
      var more = el("button", "", showAll ? "Show the busiest " + ROWS + " threads" : "Show " + hiddenRows + " more threads");
      more.type = "button";
      more.addEventListener("click", function () { showAll = !showAll; drawTimeline(); });
      left.appendChild(more);
    }
    if (T.other_threads > 0) left.appendChild(el("span", "", " +" + T.other_threads + " threads not recorded here"));
    axis.appendChild(left);
    var ticks = el("div");
    for (var k = 0; k <= 4; k++) ticks.appendChild(el("span", "", dur((v0 + w * k / 4) * T.bucket_ns)));
    axis.appendChild(ticks);
    tlEl.appendChild(axis);
    rangeEl.textContent = "showing " + dur(v0 * T.bucket_ns) + " to " + dur(v1 * T.bucket_ns) + " of " + dur(T.end_ns);
  }
  function zoom(f) {
    var n = T.buckets, c = (view[0] + view[1]) / 2, w = Math.min(n, Math.max(10, (view[1] - view[0]) * f));
    var a = Math.max(0, Math.min(n - w, Math.round(c - w / 2)));
    view = [a, Math.round(a + w)];
    drawTimeline();
  }
  function pan(f) {
    var n = T.buckets, w = view[1] - view[0];
    var a = Math.max(0, Math.min(n - w, Math.round(view[0] + w * f)));
    view = [a, a + w];
    drawTimeline();
  }
  document.getElementById("tl-in").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("tl-out").addEventListener("click", function () { zoom(2); });
  document.getElementById("tl-left").addEventListener("click", function () { pan(-0.5); });
  document.getElementById("tl-right").addEventListener("click", function () { pan(0.5); });
  document.getElementById("tl-reset").addEventListener("click", function () { view = [0, T.buckets || 1]; drawTimeline(); });
  drawTimeline();
  document.documentElement.setAttribute("data-rendered", "1");
  // Time from the start of navigation to a drawn page, for bench/html.py.
  if (window.performance) document.documentElement.setAttribute("data-render-ms", String(Math.round(performance.now())));
})();
