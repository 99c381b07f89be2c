"use strict";
// The runs list: newest first, paged on the server, filtered by status, method, recipe, dataset
// and sweep (the filters live in the address, so a filtered list can be bookmarked); tick two or
// more runs to compare them.
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
      history.replaceState(null, "", "/runs"); load(); }}, "Clear filters") : null);
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

  function row(r) {
    const box = el("input", {type: "checkbox", "aria-label": "compare " + (r.name || r.id), checked: ticked.has(r.id)});
    box.addEventListener("change", () => { if (box.checked) ticked.add(r.id); else ticked.delete(r.id); refreshBar(); });
    const sweep = r.sweep !== null && r.sweep !== undefined ?
      el("a", {href: "/sweeps/" + encodeURIComponent(r.sweep), class: "small"}, "sweep " + r.sweep) : null;
    return el("tr", {dataset: {run: r.id, status: r.status}},
      el("td", {}, box),
      el("td", {class: "name"}, el("a", {href: "/runs/" + encodeURIComponent(r.id)}, r.name || r.id),
        el("div", {class: "muted small"}, r.id, sweep ? " · " : "", sweep)),
      el("td", {class: "meta"}, WAI.status(r.status), r.alarms ? el("span", {class: "alarm-badge", title: r.alarms + " HackMonitor alarms"}, " ⚠ " + r.alarms) : null),
      el("td", {class: "meta", "data-label": "method"}, r.method || "–"),
      el("td", {class: "meta wide", "data-label": "recipe"}, r.recipe || "–"),
      el("td", {class: "meta wide", "data-label": "dataset"}, r.dataset || "–"),
      el("td", {class: "meta", "data-label": "held-out"}, WAI.holdout(r.holdout)),
      el("td", {class: "meta", "data-label": "cost"}, WAI.cost(r.cost_usd)),
      el("td", {class: "meta wide", "data-label": "started"}, WAI.when(r.started)),
      el("td", {class: "meta wide", "data-label": "took"}, WAI.duration(r.duration_s)));
  }

  function pager(data) {
    if (data.pages <= 1) return el("p", {class: "muted small"}, data.total + (data.total === 1 ? " run" : " runs"));
    const link = (page, label) => el("button", {type: "button", disabled: page < 1 || page > data.pages,
      onclick: () => go({page: String(page)})}, label);
    return el("div", {class: "pager"}, link(data.page - 1, "← Newer"),
      el("span", {class: "muted"}, "page " + data.page + " of " + data.pages + " · " + data.total + " runs"),
      link(data.page + 1, "Older →"));
  }

  async function load() {
    const p = params();
    const q = new URLSearchParams();
    for (const k of FILTERS.concat(["page"])) if (p.get(k)) q.set(k, p.get(k));
    const data = await WAI.getJSON("/page-data/runs" + (q.toString() ? "?" + q : ""));
    limits = data.compare;
    const head = ["", "run", "status", "method", "recipe", "dataset", "held-out before → after", "cost", "started", "took"];
    const wide = ["recipe", "dataset", "started", "took"];
    const table = data.runs.length ? el("div", {class: "scroll"}, el("table", {class: "data runs", id: "runs"},
      el("thead", {}, el("tr", {}, head.map((h) => el("th", {class: wide.includes(h) ? "wide" : null}, h)))),
      el("tbody", {}, data.runs.map(row)))) :
      el("p", {class: "muted", id: "no-runs"}, Object.keys(data.filters).length ? "No run matches these filters." :
        "No runs yet. Train one (python -m whileai run recipe=sft_tooluse, or wai.train) and it appears here.");
    WAI.main().replaceChildren(el("h1", {}, "Runs"), filters(data), compareBar(), table, pager(data));
    document.title = "Runs · whileai";
  }

  WAI.ready(load);
})();
