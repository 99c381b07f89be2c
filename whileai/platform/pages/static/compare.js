"use strict";
// Two to ten runs side by side: held-out, delta and cost in one row per run, every metric's curves
// overlaid (one colour per run), and the configs with the keys that differ first.
(function () {
  const WAI = window.WAI, el = WAI.el;
  const ids = (new URLSearchParams(location.search).get("runs") || "").split(",").filter(Boolean);
  const base = "/page-data/compare?runs=" + ids.map(encodeURIComponent).join(",");

  function summary(data) {
    return el("div", {class: "scroll"}, el("table", {class: "data", id: "compare-runs"},
      el("thead", {}, el("tr", {}, ["run", "status", "held-out before → after", "change", "how sure", "delta verdict", "cost"].map((h) => el("th", {}, h)))),
      el("tbody", {}, data.runs.map((r, i) => {
        const h = r.headline[0];
        return el("tr", {dataset: {run: r.id}},
          el("td", {}, el("span", {class: "swatch"}, "■"), " ", el("a", {href: "/runs/" + encodeURIComponent(r.id)}, r.name || r.id)),
          el("td", {}, WAI.status(r.status), WAI.expectVerdict(r.facts && r.facts.expect)), el("td", {}, WAI.holdout(h)),
          el("td", {}, h ? WAI.signed(h.change) : "–"),
          el("td", {class: "certainty small"}, h && h.certainty ? h.certainty : "–"),
          el("td", {}, r.delta ? el("span", {class: "verdict v-" + r.delta.replace(/[^a-z]/g, "")}, r.delta) : "–"),
          el("td", {}, WAI.cost(r.cost_usd)));
      }))));
  }

  function colour(table, data) {
    table.querySelectorAll(".swatch").forEach((s, i) => { s.style.color = WAI.palette[i % 10]; });
    return table;
  }

  function configTable(data) {
    const only = el("input", {type: "checkbox", id: "differences-only"});
    const rows = data.config.map((row) => el("tr", {class: row.differs ? "differs" : "same", dataset: {key: row.key}},
      el("th", {}, row.key), row.values.map((v, i) => el("td", {}, row.present[i] ? (v !== null && typeof v === "object" ?
        JSON.stringify(v) : String(v)) : el("span", {class: "muted"}, "(not set)")))));
    const table = el("table", {class: "data config", id: "config-table"},
      el("thead", {}, el("tr", {}, el("th", {}, "key"), data.runs.map((r) => el("th", {}, r.name || r.id)))),
      el("tbody", {}, rows));
    only.addEventListener("change", () => table.classList.toggle("only-differences", only.checked));
    const n = data.config.filter((r) => r.differs).length;
    return WAI.section("Configs", el("p", {}, el("label", {}, only, " differences only"),
      el("span", {class: "muted"}, " · " + n + " of " + data.config.length + " keys differ; they come first")),
      el("div", {class: "scroll"}, table));
  }

  function lines(data, metric) {
    return data.runs.map((r, i) => {
      const s = (data.series[r.id] || {})[metric];
      return s ? {label: r.name || r.id, x: s.x, y: s.y, color: WAI.palette[i % 10], downsampled: s.downsampled} : null;
    }).filter(Boolean);
  }

  WAI.ready(async () => {
    const data = await WAI.getJSON(base);
    document.title = "Compare " + data.runs.length + " runs · whileai";
    const grid = el("div", {class: "charts"});
    WAI.main().replaceChildren(el("h1", {}, "Comparing " + data.runs.length + " runs"),
      WAI.section("Held-out, delta and cost", colour(summary(data), data)),
      WAI.section("Curves", WAI.chartControls(), grid), configTable(data));
    for (const c of data.charts) {
      const box = el("div", {dataset: {chart: c.id}});
      grid.append(box);
      const metric = c.metrics[0];
      WAI.chart(box, {title: metric + (c.in_all ? "" : " (not logged by every run)"), lines: lines(data, metric),
        legend: false,  // the colours are the runs' swatches in the table above
        onZoom: async (a, b) => {
          const z = await WAI.getJSON(base + "&metrics=" + encodeURIComponent(metric) + "&start=" + a + "&end=" + b);
          return lines({runs: data.runs, series: z.series}, metric);
        }});
    }
  });
})();
