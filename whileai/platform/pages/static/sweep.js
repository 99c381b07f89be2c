"use strict";
// One sweep: its runs as a table with the swept knobs as columns (click a heading to sort), and
// held-out after against each swept knob.
(function () {
  const WAI = window.WAI, el = WAI.el;
  const sweep = decodeURIComponent(location.pathname.split("/")[2] || "");
  let sortKey = null, sortDir = 1;

  function show(v) { return v === null || v === undefined ? "–" : typeof v === "object" ? JSON.stringify(v) : WAI.isNum(v) ? WAI.num(v) : String(v); }

  function columns(data) {
    return [{key: "run", get: (r) => r.name || r.id}].concat(
      data.knobs.map((k) => ({key: k, knob: true, get: (r) => r.knobs[k]})),
      [{key: "held-out after", get: (r) => r.holdout ? r.holdout.after : null, text: (r) => r.holdout ? WAI.rate(r.holdout, "after") : "–"},
        {key: "before", get: (r) => r.holdout ? r.holdout.before : null, text: (r) => r.holdout ? WAI.rate(r.holdout, "before") : "–"},
        {key: "alarms", get: (r) => r.alarms}, {key: "verdict", get: (r) => r.verdict},
        {key: "cost", get: (r) => r.cost_usd}, {key: "status", get: (r) => r.status}]);
  }

  function compare(a, b) {
    if (a === b) return 0;
    if (a === null || a === undefined) return 1;
    if (b === null || b === undefined) return -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  }

  function table(data) {
    const cols = columns(data);
    const rows = data.runs.slice();
    if (sortKey) {
      const col = cols.find((c) => c.key === sortKey);
      rows.sort((a, b) => sortDir * compare(col.get(a), col.get(b)));
    }
    const head = cols.map((c) => {
      const mark = c.key === sortKey ? (sortDir > 0 ? " ▲" : " ▼") : "";
      const th = el("th", {class: c.knob ? "knob" : null, "aria-sort": c.key === sortKey ? (sortDir > 0 ? "ascending" : "descending") : null},
        el("button", {type: "button", class: "sort"}, c.key + mark));
      th.firstChild.addEventListener("click", () => {
        sortDir = sortKey === c.key ? -sortDir : 1;
        sortKey = c.key;
        document.getElementById("sweep-table").replaceWith(table(data));
      });
      return th;
    });
    const body = rows.map((r) => el("tr", {dataset: {run: r.id}}, cols.map((c, i) => {
      const v = c.get(r);
      if (i === 0) return el("td", {}, el("a", {href: "/runs/" + encodeURIComponent(r.id)}, show(v)));
      if (c.key === "status") return el("td", {}, WAI.status(v));
      if (c.key === "cost") return el("td", {}, WAI.cost(v));
      if (c.key === "alarms") return el("td", {class: v ? "bad" : null}, v ? "⚠ " + v : "0");
      return el("td", {}, c.text ? c.text(r) : show(v));  // rates: the server's text (core.stats.rate_text)
    })));
    return el("div", {class: "scroll", id: "sweep-table"}, el("table", {class: "data sweep"},
      el("thead", {}, el("tr", {}, head)), el("tbody", {}, body)));
  }

  function knobChart(box, data, knob) {
    const done = data.runs.filter((r) => r.holdout && WAI.isNum(r.holdout.after));
    const values = done.map((r) => r.knobs[knob]);
    const numeric = values.every(WAI.isNum);
    // a few whole numbers (seeds) are categories: one tick per value, not a continuous axis
    const categorical = !numeric || (values.every(Number.isInteger) &&
      new Set(data.runs.map((r) => r.knobs[knob])).size <= (data.categorical_max || 12));
    let xLabels = null, xs;
    if (!categorical) xs = values;
    else {
      const all = data.runs.map((r) => r.knobs[knob]);  // every run's value gets a tick, measured or not
      xLabels = [...new Set(all.map(show))].sort((a, b) => compare(a, b));
      xs = values.map((v) => xLabels.indexOf(show(v)));
    }
    const order = xs.map((x, i) => i).sort((a, b) => xs[a] - xs[b]);
    box.dataset.axis = categorical ? "categorical" : "continuous";
    WAI.chart(box, {title: data.holdout_label + " after, by " + knob, scatter: true, xLabel: knob, xLabels,
      lines: [{label: data.holdout_label + " after", x: order.map((i) => xs[i]), y: order.map((i) => done[i].holdout.after)}],
      note: done.length < data.runs.length ? (data.runs.length - done.length) + " runs without a held-out result are not drawn" : null});
  }

  WAI.ready(async () => {
    const data = await WAI.getJSON("/page-data/sweeps/" + encodeURIComponent(sweep));
    document.title = "Sweep " + sweep + " · whileai";
    const grid = el("div", {class: "charts"});
    const ids = data.runs.slice(-10).map((r) => r.id);
    WAI.main().replaceChildren(el("h1", {}, "Sweep ", el("code", {}, sweep)),
      el("p", {class: "muted"}, data.runs.length + " runs · swept: " + (data.knobs.join(", ") || "no knob differs between the runs")),
      ids.length >= 2 ? el("p", {}, el("a", {href: "/compare?runs=" + ids.map(encodeURIComponent).join(","), class: "button"},
        "Compare " + (data.runs.length > 10 ? "the last 10" : "these") + " runs")) : null,
      WAI.section("Runs", table(data)), data.knobs.length ? WAI.section("Held-out after by knob", grid) : null);
    for (const knob of data.knobs) {
      const box = el("div", {dataset: {chart: "knob:" + knob}});
      grid.append(box);
      knobChart(box, data, knob);
    }
  });
})();
