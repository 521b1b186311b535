/* curate view: the page behind `curate view`. No dependencies, nothing from the network.
 *
 * Data arrives as scripts that call curateView.index/chunk/search (browsers refuse to
 * fetch file:// URLs). Everything from a run (completions, prompts, references, ids, labels) is
 * untrusted text: it only ever reaches the page through textContent, never as markup,
 * and never as a URL. */
(function () {
  "use strict";

  var ROW = 26; // px, as --row in view.css
  var state = {
    meta: null, table: null, run: 0,
    chunks: {}, pending: {},
    search: [], searchRequested: false,
    view: [], sortKey: null, sortDir: 1,
    positions: null, current: null, columns: [], rendered: -1, renderedCount: -1,
    filterTimer: 0, firstRender: 0
  };

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      if (arguments[i]) { parent.appendChild(arguments[i]); }
    }
    return parent;
  }

  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }

  function loadScript(src, onError) {
    var node = document.createElement("script");
    node.src = src;
    node.onerror = onError || null;
    document.head.appendChild(node);
  }

  function fmt(value, digits) {
    if (value === null || value === undefined) { return ""; }
    return Number(value).toFixed(digits === undefined ? 3 : digits);
  }

  // -- registration: the data scripts call these ------------------------------------
  window.curateView = {
    index: function (meta, table) {
      state.meta = meta;
      state.table = table;
      start();
    },
    chunk: function (k, samples) {
      state.chunks[k] = samples;
      var waiting = state.pending[k] || [];
      delete state.pending[k];
      waiting.forEach(function (fn) { fn(samples); });
    },
    search: function (k, rows) {
      state.search[k] = rows;
      if (searchReady()) { applyFilters(); }
    },
    state: state
  };

  // -- the front page ----------------------------------------------------------------
  function start() {
    var meta = state.meta;
    $("loading").hidden = true;
    $("runs-line").textContent = meta.runs.map(function (r) { return r.label; }).join(" \u2192 ");
    renderHeadline();
    renderComparison();
    renderPlots();
    setUpTable();
    window.addEventListener("hashchange", route);
    document.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape" && location.hash) { location.hash = ""; }
    });
    route();
  }

  function kvTable(rows) {
    var table = el("table", "kv");
    rows.forEach(function (row) {
      var tr = el("tr");
      add(tr, el("th", null, row[0]));
      var td = el("td", "num", row[1]);
      if (row[2]) { td.setAttribute("data-key", row[2]); }
      add(table, add(tr, td));
    });
    return table;
  }

  function renderHeadline() {
    var box = $("headline");
    var cards = el("div", "cards");
    state.meta.runs.forEach(function (run, i) {
      var card = el("div", "card");
      card.setAttribute("data-run", String(i));
      add(card, el("h2", null, run.label));
      var facts = [];
      if (run.model) { facts.push("model " + run.model); }
      if (run.grader) { facts.push("grader " + run.grader + (run.grader_reason ? " (" + run.grader_reason + ")" : "")); }
      if (run.layout) { facts.push(run.layout); }
      facts.forEach(function (f) { add(card, el("div", "muted", f)); });
      run.notes.forEach(function (n) { add(card, el("div", "note", n)); });
      var blocks = el("div", "blocks");
      add(card, blocks);
      add(blocks, add(el("div"), el("h3", null, "figures"),
        kvTable(run.headline.map(function (h) { return [h.label, h.text, h.key]; }))));
      var report = run.report;
      var block = el("div");
      add(blocks, block);
      add(block, el("h3", null, "categories (variance threshold " + report.threshold + ")"));
      add(block, kvTable(state.meta.categories.map(function (c) {
        return [state.meta.category_labels[c], String(report.categories[c]), "categories." + c];
      })));
      var ks = Object.keys(report.pass_at_k || {});
      if (ks.length) {
        add(block, el("h3", null, "pass@k (unbiased)"));
        add(block, kvTable(ks.map(function (k) {
          return ["k=" + k, String(report.pass_at_k[k]), "pass_at_k." + k];
        })));
      }
      if (report.by_group && report.by_group.length) {
        var groupBlock = el("div");
        add(blocks, groupBlock);
        add(groupBlock, el("h3", null, "by " + (report.group_by || "group")));
        var t = el("table", "kv");
        var head = el("tr");
        [report.group_by || "group", "samples", "mean score", "high var", "mixed", "errors"].forEach(function (h) {
          add(head, el("th", null, h));
        });
        add(t, head);
        report.by_group.forEach(function (g) {
          var tr = el("tr");
          add(tr, el("td", null, g.group === null ? "(none)" : g.group));
          [g.samples, g.mean_score, g.high_variance_fraction, g.expected_open_fraction, g.errors].forEach(function (v) {
            add(tr, el("td", "num", v === null ? "" : String(v)));
          });
          add(t, tr);
        });
        add(groupBlock, t);
      }
      if (report.compute_multiplier && report.compute_multiplier.reason) {
        add(card, el("p", "muted", report.compute_multiplier.reason));
      }
      (report.warnings || []).forEach(function (w) { add(card, el("div", "note", w)); });
      add(cards, card);
    });
    add(box, cards);
  }

  function renderComparison() {
    var c = state.meta.comparison;
    if (!c) { return; }
    var box = $("comparison");
    box.hidden = false;
    add(box, el("h2", null, "From " + c.before + " to " + c.after + " (" + c.samples_compared + " samples compared)"));
    add(box, el("p", "muted", "per-sample test: " + c.test + " at alpha " + c.alpha +
      "; significant changes: " + c.significant));
    var sets = Object.keys(c.sets).map(function (name) {
      return [name.replace(/_/g, " "), String(c.sets[name].count), "sets." + name + ".count"];
    });
    add(box, kvTable(sets));
    add(box, el("h3", null, "transitions"));
    add(box, kvTable(c.transitions.map(function (t, i) {
      return [t.before + " \u2192 " + t.after, String(t.count), "transitions." + i + ".count"];
    })));
    (c.warnings || []).forEach(function (w) { add(box, el("div", "note", w)); });
  }

  function figure(file, caption) {
    var fig = el("figure");
    var img = el("img");
    img.src = file;
    img.alt = caption;
    return add(fig, img, el("figcaption", "muted", caption));
  }

  function renderPlots() {
    var box = $("plots");
    add(box, el("h2", null, "Plots"));
    var row = el("div", "plots");
    state.meta.runs.forEach(function (run) {
      run.plots.forEach(function (p) { add(row, figure(p.file, run.label + ": " + p.kind)); });
    });
    state.meta.compare_plots.forEach(function (p) { add(row, figure(p.file, "comparison: " + p.kind)); });
    add(box, row);
  }

  // -- the sample table --------------------------------------------------------------
  function runCol(name) { return state.table.runs[state.run][name]; }

  function buildColumns() {
    var t = state.table, meta = state.meta;
    var cats = meta.categories;
    var cols = [
      { key: "id", label: "sample", cls: "c-id", value: function (i) { return t.id[i]; } },
      { key: "category", label: "category", cls: "c-cat",
        value: function (i) { var c = runCol("category")[i]; return c < 0 ? null : c; },
        text: function (i) { var c = runCol("category")[i]; return c < 0 ? missing(i) : meta.category_labels[cats[c]]; },
        klass: function (i) { var c = runCol("category")[i]; return c < 0 ? "" : "cat-" + cats[c]; } },
      { key: "pass_rate", label: "pass rate", cls: "c-num", num: 3, value: function (i) { return runCol("pass_rate")[i]; } },
      { key: "mean_score", label: "mean score", cls: "c-num", num: 3, value: function (i) { return runCol("mean_score")[i]; } },
      { key: "variance", label: "variance", cls: "c-num", num: 4, value: function (i) { return runCol("variance")[i]; } },
      { key: "n", label: "scored", cls: "c-num", value: function (i) { return runCol("n")[i]; } },
      { key: "errors", label: "failed", cls: "c-num", value: function (i) { return runCol("errors")[i]; } },
      { key: "truncation", label: "truncated", cls: "c-num", num: 2, value: function (i) { return runCol("truncation")[i]; } },
      { key: "suspect", label: "suspect", cls: "c-flag",
        value: function (i) { return runCol("suspect")[i]; },
        text: function (i) { return runCol("suspect")[i] ? "yes" : ""; } }
    ];
    if (t.groups.length) {
      cols.push({ key: "group", label: meta.group_by || "group", cls: "c-group",
        value: function (i) { var g = t.group[i]; return g < 0 ? null : t.groups[g]; } });
    }
    if (t.transition) {
      cols.push({ key: "transition", label: "transition", cls: "c-trans",
        value: function (i) { var c = t.transition[i]; return c < 0 ? null : t.transitions[c]; } });
      cols.push({ key: "set", label: "change", cls: "c-set",
        value: function (i) { var c = t.set[i]; return c < 0 ? null : t.sets[c].replace(/_/g, " "); } });
      cols.push({ key: "p_value", label: "p-value", cls: "c-num", num: 4, value: function (i) { return t.p_value[i]; } });
    }
    cols.push({ key: "preview", label: "prompt", cls: "c-preview", value: function (i) { return t.preview[i]; } });
    return cols;
  }

  // A sample without a category: absent from the run, or every rollout of it failed.
  function missing(i) { return runCol("n")[i] === null ? "(not in run)" : "(unscored)"; }

  function cellText(col, i) {
    if (col.text) { return col.text(i); }
    var v = col.value(i);
    if (v === null || v === undefined) { return ""; }
    return col.num !== undefined ? fmt(v, col.num) : String(v);
  }

  function option(select, value, label) {
    var o = el("option", null, label);
    o.value = value;
    select.appendChild(o);
  }

  function setUpTable() {
    var meta = state.meta, t = state.table;
    var runSel = $("f-run");
    meta.runs.forEach(function (r, i) { option(runSel, String(i), r.label); });
    var catSel = $("f-category");
    option(catSel, "", "all");
    meta.categories.forEach(function (c, i) { option(catSel, String(i), meta.category_labels[c]); });
    option(catSel, "-1", "unscored or not in this run");
    var groupSel = $("f-group");
    option(groupSel, "", "all");
    t.groups.forEach(function (g, i) { option(groupSel, String(i), g); });
    if (!t.groups.length) { $("l-group").hidden = true; }
    if (t.transition) {
      $("l-transition").hidden = false;
      $("l-set").hidden = false;
      $("l-significant").hidden = false;
      var trSel = $("f-transition");
      option(trSel, "", "all");
      t.transitions.forEach(function (name, i) { option(trSel, String(i), name); });
      var setSel = $("f-set");
      option(setSel, "", "all");
      t.sets.forEach(function (name, i) { option(setSel, String(i), name.replace(/_/g, " ")); });
      option(setSel, "-1", "none of these");
    }
    ["f-run", "f-category", "f-group", "f-transition", "f-set", "f-suspect", "f-significant"].forEach(function (id) {
      $(id).addEventListener("change", function () {
        if (id === "f-run") { state.run = Number($("f-run").value); }
        applyFilters();
      });
    });
    ["f-min", "f-max", "f-trunc", "f-search"].forEach(function (id) {
      $(id).addEventListener("input", function () {
        clearTimeout(state.filterTimer);
        state.filterTimer = setTimeout(applyFilters, 120);
      });
    });
    state.columns = buildColumns();
    renderHead();
    var vp = $("viewport");
    // Rows are rendered in the scroll event itself: a handful of elements, and it redraws
    // only when the first visible row changes.
    vp.addEventListener("scroll", function () { renderRows(false); });
    vp.addEventListener("click", function (ev) {
      var row = ev.target.closest ? ev.target.closest(".row") : null;
      if (row && row.hasAttribute("data-index")) {
        openSample(state.table.id[Number(row.getAttribute("data-index"))]);
      }
    });
    window.addEventListener("resize", function () { renderRows(true); });
    applyFilters();
  }

  function renderHead() {
    var head = $("table-head");
    clear(head);
    state.columns.forEach(function (col) {
      var cell = el("span", col.cls, col.label);
      cell.setAttribute("data-sort", col.key);
      if (state.sortKey === col.key) { cell.className += state.sortDir > 0 ? " sorted-asc" : " sorted-desc"; }
      cell.addEventListener("click", function () { sortBy(col.key); });
      head.appendChild(cell);
    });
  }

  function sortBy(key) {
    if (state.sortKey === key) { state.sortDir = -state.sortDir; } else { state.sortKey = key; state.sortDir = 1; }
    renderHead();
    sortView();
    renderRows(true);
  }

  function sortView() {
    if (!state.sortKey) { return; }
    var col = state.columns.filter(function (c) { return c.key === state.sortKey; })[0];
    if (!col) { return; }
    var dir = state.sortDir;
    var keys = new Map();
    state.view.forEach(function (i) { keys.set(i, col.value(i)); });
    state.view.sort(function (a, b) {
      var x = keys.get(a), y = keys.get(b);
      var xn = x === null || x === undefined, yn = y === null || y === undefined;
      if (xn || yn) { return xn === yn ? a - b : (xn ? 1 : -1); } // missing values last
      if (x < y) { return -dir; }
      if (x > y) { return dir; }
      return a - b;
    });
  }

  function searchReady() {
    for (var k = 0; k < state.meta.searches; k++) { if (!state.search[k]) { return false; } }
    return true;
  }

  function requestSearch() {
    if (state.searchRequested) { return; }
    state.searchRequested = true;
    for (var k = 0; k < state.meta.searches; k++) { loadScript("data/search-" + k + ".js"); }
  }

  function number(id) {
    var v = $(id).value;
    return v === "" ? null : Number(v);
  }

  function applyFilters() {
    var t = state.table, r = t.runs[state.run];
    var cat = $("f-category").value, group = $("f-group").value;
    var tr = t.transition ? $("f-transition").value : "", set = t.transition ? $("f-set").value : "";
    var lo = number("f-min"), hi = number("f-max"), trunc = number("f-trunc");
    var suspect = $("f-suspect").checked, significant = t.transition && $("f-significant").checked;
    var query = $("f-search").value.trim().toLowerCase();
    var searching = query !== "";
    if (searching && !searchReady()) {
      requestSearch();
      $("count").textContent = "loading the search text\u2026";
      return; // curateView.search calls applyFilters again when every part is in
    }
    var per = state.meta.search_samples;
    var out = [];
    for (var i = 0; i < t.id.length; i++) {
      if (cat !== "" && r.category[i] !== Number(cat)) { continue; }
      if (group !== "" && t.group[i] !== Number(group)) { continue; }
      if (tr !== "" && t.transition[i] !== Number(tr)) { continue; }
      if (set !== "" && t.set[i] !== Number(set)) { continue; }
      if (lo !== null && !(r.pass_rate[i] !== null && r.pass_rate[i] >= lo)) { continue; }
      if (hi !== null && !(r.pass_rate[i] !== null && r.pass_rate[i] <= hi)) { continue; }
      if (trunc !== null && !(r.truncation[i] !== null && r.truncation[i] >= trunc)) { continue; }
      if (suspect && !r.suspect[i]) { continue; }
      if (significant && !t.significant[i]) { continue; }
      if (searching) {
        var text = state.search[Math.floor(i / per)][i % per];
        if (text.indexOf(query) < 0 && t.id[i].toLowerCase().indexOf(query) < 0) { continue; }
      }
      out.push(i);
    }
    state.view = out;
    sortView();
    var count = $("count");
    count.textContent = out.length.toLocaleString("en") + " of " + t.id.length.toLocaleString("en") + " samples";
    count.setAttribute("data-count", String(out.length));
    $("viewport").scrollTop = 0;
    renderRows(true);
  }

  function renderRows(force) {
    var vp = $("viewport"), spacer = $("spacer");
    var n = state.view.length;
    spacer.style.height = (n * ROW) + "px";
    var first = Math.max(0, Math.floor((vp.scrollTop - $("table-head").offsetHeight) / ROW) - 5);
    var count = Math.ceil(vp.clientHeight / ROW) + 10;
    if (!force && first === state.rendered && count === state.renderedCount) { return; }
    state.rendered = first;
    state.renderedCount = count;
    clear(spacer);
    var last = Math.min(n, first + count);
    for (var p = first; p < last; p++) {
      var i = state.view[p];
      var row = el("div", "row");
      row.setAttribute("data-index", String(i));
      row.style.top = (p * ROW) + "px";
      state.columns.forEach(function (col) {
        var text = cellText(col, i);
        var cell = el("span", col.cls, text);
        if (col.klass) { cell.className += " " + col.klass(i); }
        if (col.key === "id" || col.key === "preview") { cell.title = text; } // cut cells in full
        row.appendChild(cell);
      });
      spacer.appendChild(row);
    }
    if (!state.firstRender) { state.firstRender = performance.now(); }
  }

  // -- a sample's view ---------------------------------------------------------------
  function openSample(id) { location.hash = "sample=" + encodeURIComponent(id); }

  function route() {
    var hash = location.hash.replace(/^#/, "");
    if (hash.indexOf("sample=") === 0) {
      var id;
      try { id = decodeURIComponent(hash.slice(7)); } catch (e) { id = null; }
      if (id !== null) { showSample(id); return; }
    }
    state.current = null;
    $("sample").hidden = true;
    $("front").hidden = false;
    renderRows(true);
  }

  function positionOf(id) {
    if (!state.positions) {
      state.positions = new Map();
      state.table.id.forEach(function (sid, i) { state.positions.set(sid, i); });
    }
    return state.positions.has(id) ? state.positions.get(id) : -1;
  }

  function withChunk(k, fn) {
    if (state.chunks[k]) { fn(state.chunks[k]); return; }
    var first = !state.pending[k];
    (state.pending[k] = state.pending[k] || []).push(fn);
    if (first) {
      loadScript("data/chunk-" + k + ".js", function () {
        delete state.pending[k];
        var box = $("sample");
        clear(box);
        add(box, el("p", "note", "cannot load data/chunk-" + k + ".js (was the site copied whole?)"));
      });
    }
  }

  function showSample(id) {
    var pos = positionOf(id);
    var box = $("sample");
    state.current = id;
    $("front").hidden = true;
    box.hidden = false;
    clear(box);
    if (pos < 0) {
      add(box, backLink(), el("p", "note", "no sample with this id in the site"));
      return;
    }
    add(box, el("p", "muted", "loading\u2026"));
    var size = state.meta.chunk_samples;
    withChunk(Math.floor(pos / size), function (samples) {
      if (state.current !== id) { return; } // another sample was opened meanwhile
      renderSample(box, pos, samples[pos % size]);
    });
  }

  function backLink() {
    var a = el("a", "back", "\u2190 all samples");
    a.href = "#";
    return a;
  }

  function turns(prompt) {
    var box = el("div", "prompt");
    if (prompt === null || prompt === undefined) {
      add(box, el("p", "muted", "not stored"));
    } else if (typeof prompt === "string") {
      add(box, el("pre", "text", prompt));
    } else {
      prompt.forEach(function (turn) {
        add(box, add(el("div", "turn"), el("div", "role", turn[0]), el("pre", "text", turn[1])));
      });
    }
    return box;
  }

  function reference(ref) {
    var box = el("div", "reference");
    if (!ref) { return add(box, el("p", "muted", "not stored")); }
    add(box, el("pre", "text", ref[0] === null ? "" : ref[0]));
    if (ref[1] !== null && ref[1] !== ref[0]) {
      add(box, add(el("details"), el("summary", null, "as stored in the data set"), el("pre", "text", ref[1])));
    }
    return box;
  }

  // What a grader keeps in a rollout's `extracted`: the answer it compared, the code
  // grader's per-test verdicts, or the judge's reply.
  function extractedLabel(grader) {
    var g = String(grader || "");
    if (g.indexOf("code") === 0) { return "verdicts"; }
    if (g.indexOf("judge") === 0) { return "judge"; }
    return "answer";
  }

  function rollout(r, grader) {
    var box = el("div", "rollout" + (r.e !== undefined ? " error" : ""));
    var facts = el("div", "facts");
    add(facts, el("b", null, "#" + r.i));
    if (r.e !== undefined) {
      add(facts, el("span", "score-0", "error"));
    } else if (r.s !== undefined) {
      add(facts, el("span", r.s >= 1 ? "score-1" : (r.s <= 0 ? "score-0" : ""), "score " + r.s));
    }
    if (r.rs !== undefined) { add(facts, el("span", null, "raw reward " + r.rs)); }
    var long = r.x !== undefined && (r.x.length > 60 || r.x.indexOf("\n") >= 0);
    if (r.x !== undefined && !long) { add(facts, el("span", "extracted", extractedLabel(grader) + ": " + r.x)); }
    if (r.f !== undefined) { add(facts, el("span", null, "finish " + r.f)); }
    if (r.t) { add(facts, el("span", "note", "truncated")); }
    if (r.ct !== undefined) { add(facts, el("span", null, r.ct + " completion tokens")); }
    if (r.pt !== undefined) { add(facts, el("span", null, r.pt + " prompt tokens")); }
    if (r.l !== undefined) { add(facts, el("span", null, fmt(r.l, 2) + " s")); }
    if (r.a !== undefined && r.a > 1) { add(facts, el("span", null, r.a + " attempts")); }
    add(box, facts);
    if (long) {
      add(box, add(el("div", "extracted"), el("span", "muted", extractedLabel(grader) + ":"), el("pre", "text", r.x)));
    }
    if (r.e !== undefined) { add(box, el("pre", "text error-text", r.e)); }
    if (r.r !== undefined) {
      var summary = "reasoning (" + (r.rn || r.r.length).toLocaleString("en") + " characters" +
        (r.rc === false ? ", never closed" : "") + ")";
      add(box, add(el("details", "reasoning"), el("summary", null, summary), el("pre", "text", r.r)));
    }
    if (r.c !== undefined) {
      add(box, el("pre", "text completion", r.c));
      if (r.cn) {
        add(box, el("p", "note", "cut at " + r.c.length.toLocaleString("en") + " of " +
          r.cn.toLocaleString("en") + " characters (--max-chars)"));
      }
    }
    return box;
  }

  // A run's rollouts of one sample arrive as columns ({"i": [...], "s": [...], ...}, null
  // where a rollout has no value): one object a rollout, without its null fields.
  function rowsOf(columns) {
    if (!columns) { return []; }
    var keys = Object.keys(columns), rows = [];
    var n = columns.i ? columns.i.length : 0;
    for (var k = 0; k < n; k++) {
      var row = {};
      keys.forEach(function (key) {
        var v = columns[key][k];
        if (v !== null && v !== undefined) { row[key] = v; }
      });
      rows.push(row);
    }
    return rows;
  }

  function renderSample(box, pos, sample) {
    var meta = state.meta, t = state.table;
    clear(box);
    add(box, backLink());
    var head = el("div", "sample-head");
    add(head, el("h2", "sample-id", sample.id));
    meta.runs.forEach(function (run, j) {
      var c = t.runs[j].category[pos];
      var absent = t.runs[j].n[pos] === null ? "not in run" : "unscored";
      add(head, el("span", c < 0 ? "muted" : "cat-" + meta.categories[c],
        run.label + ": " + (c < 0 ? absent : meta.category_labels[meta.categories[c]])));
    });
    if (t.transition && t.transition[pos] >= 0) {
      add(head, el("span", null, t.transitions[t.transition[pos]] +
        (t.p_value[pos] !== null ? " (p = " + fmt(t.p_value[pos], 4) + ")" : "")));
    }
    add(box, head);
    var runs = el("div", "runs");
    runs.style.setProperty("--cols", String(meta.runs.length));
    var samePrompt = sample.p.slice(1).every(function (p) { return p === null; });
    var sameRef = sample.ref.slice(1).every(function (r) { return r === null; });
    if (samePrompt) { add(box, el("h3", null, "prompt"), turns(sample.p[0])); }
    if (sameRef) { add(box, el("h3", null, "reference (as graded)"), reference(sample.ref[0])); }
    meta.runs.forEach(function (run, j) {
      var col = el("div", "run-col");
      col.setAttribute("data-run", String(j));
      add(col, el("h3", null, run.label));
      var facts = [];
      if (run.grader) { facts.push("grader " + run.grader); }
      if (run.layout) { facts.push(run.layout); }
      if (run.mode) { facts.push(run.mode + " mode"); }
      facts.forEach(function (f) { add(col, el("div", "muted", f)); });
      var r = t.runs[j];
      if (r.n[pos] !== null) {
        add(col, el("div", null, "pass rate " + fmt(r.pass_rate[pos]) + " \u00b7 variance " +
          fmt(r.variance[pos], 4) + " \u00b7 " + r.n[pos] + " scored, " + r.errors[pos] + " failed" +
          (r.suspect[pos] ? " \u00b7 suspect label" : "")));
      }
      if (!samePrompt) { add(col, el("h3", null, "prompt"), turns(sample.p[j] === null ? sample.p[0] : sample.p[j])); }
      if (!sameRef) { add(col, el("h3", null, "reference (as graded)"), reference(sample.ref[j] === null ? sample.ref[0] : sample.ref[j])); }
      var list = rowsOf(sample.ro[j]);
      add(col, el("h3", null, list.length + " rollouts"));
      list.forEach(function (item) { add(col, rollout(item, run.grader)); });
      add(runs, col);
    });
    add(box, runs);
    box.setAttribute("data-ready", sample.id);
    window.scrollTo(0, 0);
  }
})();
