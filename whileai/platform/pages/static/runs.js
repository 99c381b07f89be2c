"use strict";
// The runs list: newest first, paged on the server, filtered by status, method, recipe, dataset
// and sweep (the filters live in the address, so a filtered list can be bookmarked); tick two or
// more runs to compare them. Columns can be added from any config key or final metric (kept in the
// address as cols=config.beta,metric.loss, so the view can be shared), and a stage run is nested
// under the run it started from when both are on the page.
(function () {
  const WAI = window.WAI, el = WAI.el;
  const FILTERS = ["status", "method", "recipe", "dataset", "sweep"];
  const ticked = new Set();
  let limits = [2, 10];

  function params() { return new URLSearchParams(location.search); }

  function go(changes) {
    const p = params();
    for (const [k, v] of Object.entries(changes)) { if (v) p.set(k, v); else p.delete(k); }
    history.replaceState(null, "", "/runs" + (p.toString() ? "?" + p : ""));
    load();
  }

  function filters(data) {
    const p = params();
    return el("form", {class: "filters", id: "filters", onsubmit: (e) => e.preventDefault()}, FILTERS.map((name) => {
      const chosen = p.get(name) || "";
      const values = data.choices[name] || [];
      if (chosen && !values.includes(chosen)) values.unshift(chosen);
      const select = el("select", {name, "aria-label": name},
        el("option", {value: ""}, "any " + name), values.map((v) => el("option", {value: v, selected: v === chosen}, v)));
      select.addEventListener("change", () => go({[name]: select.value, page: ""}));
      return el("label", {}, select);
    }), Object.keys(data.filters).length ? el("button", {type: "button", onclick: () => {
      const cols = params().get("cols");  // the added columns stay
      history.replaceState(null, "", "/runs" + (cols ? "?" + new URLSearchParams({cols}) : "")); load(); }}, "Clear filters") : null);
  }

  function compareBar() {
    const n = ticked.size;
    const ok = n >= limits[0] && n <= limits[1];
    const button = el("a", {class: "button" + (ok ? "" : " disabled"), id: "compare",
      href: ok ? "/compare?runs=" + [...ticked].map(encodeURIComponent).join(",") : null, "aria-disabled": ok ? null : "true"},
      "Compare " + (n ? n + " " : "") + "runs");
    return el("div", {class: "compare-bar", id: "compare-bar"}, button,
      el("span", {class: "muted small"}, n > limits[1] ? "compare at most " + limits[1] + " runs" :
        "tick " + limits[0] + " to " + limits[1] + " runs to compare them"));
  }

  function refreshBar() { document.getElementById("compare-bar").replaceWith(compareBar()); }

  const METRIC_NAMES = {pass_rate: "pass rate", pair_accuracy: "pair accuracy", row_accuracy: "row accuracy", loss: "loss"};

  function holdoutCell(r, shared) {
    if (!r.holdout) return WAI.holdout(null);
    const name = METRIC_NAMES[r.holdout.metric] || r.holdout.metric;
    return el("span", {}, shared ? null : el("span", {class: "muted small metric-name"}, name + " "), WAI.holdout(r.holdout));
  }

  function cell(v) {
    if (v === null || v === undefined) return el("span", {class: "muted"}, "–");
    if (typeof v === "object") return el("code", {class: "wrap"}, JSON.stringify(v));
    return WAI.isNum(v) ? WAI.num(v) : String(v);
  }

  function colsParam() { return (params().get("cols") || "").split(",").filter(Boolean); }

  function row(r, data, shared, child) {
    const box = el("input", {type: "checkbox", "aria-label": "compare " + (r.name || r.id), checked: ticked.has(r.id)});
    box.addEventListener("change", () => { if (box.checked) ticked.add(r.id); else ticked.delete(r.id); refreshBar(); });
    const sweep = r.sweep !== null && r.sweep !== undefined ?
      el("a", {href: "/sweeps/" + encodeURIComponent(r.sweep), class: "small"}, "sweep " + r.sweep) : null;
    const from = r.parent && !child ? el("span", {class: "small"}, " · from ",
      el("a", {href: "/runs/" + encodeURIComponent(r.parent)}, r.parent)) : null;
    return el("tr", {class: child ? "stage-child" : null, dataset: {run: r.id, status: r.status, parent: child ? r.parent : null}},
      el("td", {}, box),
      el("td", {class: "name"}, child ? el("span", {class: "muted stage-mark", "aria-label": "started from the run above"}, "↳ ") : null,
        el("a", {href: "/runs/" + encodeURIComponent(r.id)}, r.name || r.id),
        el("div", {class: "muted small"}, r.id, sweep ? " · " : "", sweep, from)),
      el("td", {class: "meta"}, WAI.status(r.status), WAI.expectVerdict(r.expect), r.alarms ? el("span", {class: "alarm-badge", title: r.alarms + " HackMonitor alarms"}, " ⚠ " + r.alarms) : null),
      el("td", {class: "meta", "data-label": "method"}, r.method || "–"),
      el("td", {class: "meta wide", "data-label": "recipe"}, r.recipe || "–"),
      el("td", {class: "meta wide", "data-label": "dataset"}, r.dataset || "–"),
      el("td", {class: "meta", "data-label": shared && r.holdout ? "held-out " + (METRIC_NAMES[r.holdout.metric] || r.holdout.metric) : "held-out"},
        holdoutCell(r, shared)),
      el("td", {class: "meta", "data-label": "cost"}, WAI.cost(r.cost_usd)),
      el("td", {class: "meta wide", "data-label": "started"}, WAI.when(r.started)),
      el("td", {class: "meta wide", "data-label": "took"}, WAI.duration(r.duration_s)),
      data.columns.map((c) => el("td", {class: "meta added", "data-label": c.id, dataset: {col: c.id}}, cell(r.cols[c.id]))));
  }

  // Roots newest first, each stage run right under the run it started from (when that is on this page).
  function nested(runs) {
    const here = new Set(runs.map((r) => r.id));
    const kids = {};
    for (const r of runs) if (r.parent && here.has(r.parent)) (kids[r.parent] = kids[r.parent] || []).push(r);
    const out = [];
    const visit = (r, depth) => {
      out.push([r, depth]);
      for (const k of (kids[r.id] || []).slice().reverse()) visit(k, depth + 1);  // the first stage first
    };
    for (const r of runs) if (!(r.parent && here.has(r.parent))) visit(r, 0);
    return out;
  }

  function columnPicker(data) {
    const chosen = colsParam();
    const list = el("datalist", {id: "column-choices"}, data.column_choices.filter((c) => !chosen.includes(c))
      .map((c) => el("option", {value: c})));
    const input = el("input", {type: "text", id: "add-column", list: "column-choices", "aria-label": "add a column",
      placeholder: "add a column: config.beta, metric.loss", autocomplete: "off"});
    let added = false;  // Enter and the datalist's change can both fire for one entry: add it once
    const add = () => {
      const v = input.value.trim();
      if (added || !v || chosen.includes(v)) return;
      added = true;
      go({cols: chosen.concat([v]).join(","), page: ""});
    };
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); add(); } });
    input.addEventListener("change", () => { if (data.column_choices.includes(input.value.trim())) add(); });
    const chips = chosen.map((c) => el("span", {class: "chip", dataset: {col: c}}, c, " ",
      el("button", {type: "button", class: "chip-x", "aria-label": "remove column " + c,
        onclick: () => go({cols: chosen.filter((x) => x !== c).join(","), page: ""})}, "×")));
    return el("div", {class: "columns-bar", id: "columns-bar"}, el("label", {}, input, list), ...chips);
  }

  function pager(data) {
    if (data.pages <= 1) return el("p", {class: "muted small"}, data.total + (data.total === 1 ? " run" : " runs"));
    const link = (page, label) => el("button", {type: "button", disabled: page < 1 || page > data.pages,
      onclick: () => go({page: String(page)})}, label);
    return el("div", {class: "pager"}, link(data.page - 1, "← Newer"),
      el("span", {class: "muted"}, "page " + data.page + " of " + data.pages + " · " + data.total + " runs"),
      link(data.page + 1, "Older →"));
  }

  let loads = 0;  // only the newest load draws the page: an older answer arriving late never replaces it

  async function load() {
    const mine = ++loads;
    const p = params();
    const q = new URLSearchParams();
    for (const k of FILTERS.concat(["page", "cols"])) if (p.get(k)) q.set(k, p.get(k));
    const data = await WAI.getJSON("/page-data/runs" + (q.toString() ? "?" + q : ""));
    if (mine !== loads) return;
    limits = data.compare;
    const metrics = [...new Set(data.runs.filter((r) => r.holdout).map((r) => r.holdout.metric))];
    const shared = metrics.length === 1;  // one metric on the page: named once, in the heading
    const held = "held-out " + (shared ? (METRIC_NAMES[metrics[0]] || metrics[0]) + " " : "") + "before → after";
    const head = ["", "run", "status", "method", "recipe", "dataset", held, "cost", "started", "took"];
    const wide = ["recipe", "dataset", "started", "took"];
    const table = data.runs.length ? el("div", {class: "scroll"}, el("table", {class: "data runs", id: "runs"},
      el("thead", {}, el("tr", {}, head.map((h) => el("th", {class: wide.includes(h) ? "wide" : null}, h)),
        data.columns.map((c) => el("th", {class: "added", dataset: {col: c.id}}, c.id)))),
      el("tbody", {}, nested(data.runs).map(([r, depth]) => row(r, data, shared, depth > 0))))) :
      el("p", {class: "muted", id: "no-runs"}, Object.keys(data.filters).length ? "No run matches these filters." :
        "No runs yet. Train one (python -m whileai run recipe=sft_tooluse, or wai.train) and it appears here.");
    WAI.main().replaceChildren(el("h1", {}, "Runs"), filters(data), columnPicker(data), compareBar(), table, pager(data));
    document.title = "Runs · whileai";
  }

  WAI.ready(load);
})();
