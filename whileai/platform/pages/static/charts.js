"use strict";
// Charts on uPlot (vendored): one line per series, drag to zoom (fetching full resolution for
// the zoomed range when the server sent a downsampled series), double-click to zoom out,
// smoothing and a log scale shared by every chart of the page, alarms as marked steps.
(function () {
  const WAI = window.WAI;
  // Ten colours that stay apart on white and on near-black (Tableau 10).
  WAI.palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac"];
  WAI.chartSettings = {smooth: 0, log: false};
  const charts = [];

  function cssVar(name, fallback) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  // Exponential moving average over the finite points of one line (TensorBoard's smoothing).
  function smooth(y, weight) {
    if (!weight) return y;
    const out = new Array(y.length);
    let last = null;
    for (let i = 0; i < y.length; i++) {
      const v = y[i];
      if (v === null || v === undefined || !isFinite(v)) { out[i] = null; continue; }
      last = last === null ? v : last * weight + (1 - weight) * v;
      out[i] = last;
    }
    return out;
  }

  function tables(lines) {
    const s = WAI.chartSettings;
    return lines.map((line) => {
      let y = smooth(line.y, s.smooth);
      if (s.log) y = y.map((v) => (v !== null && v > 0 ? v : null));
      return [line.x, y];
    });
  }

  function joined(lines) {
    if (!lines.length) return [[]];
    if (lines.length === 1) { const [x, y] = tables(lines)[0]; return [x, y]; }
    return uPlot.join(tables(lines));
  }

  function drawn(lines) {
    return lines.map((l) => l.y.filter((v) => v !== null && isFinite(v)).length).join(",");
  }

  // WAI.chart(container, {title, lines: [{label, x, y, color, downsampled}], alarms, onZoom, scatter, xLabels})
  WAI.chart = function (box, spec) {
    const handle = {spec, overview: spec.lines.map((l) => ({...l})), lines: spec.lines, u: null, zoomed: false};
    const height = spec.height || 220;
    box.classList.add("chart");
    const plot = WAI.el("div", {class: "plot"});
    box.replaceChildren(WAI.el("h3", {}, spec.title), plot);
    if (spec.note) box.append(WAI.el("p", {class: "muted small"}, spec.note));
    let zoomTimer = null;
    let settingData = false;

    function options(width) {
      const fg = cssVar("--fg-muted", "#666"), grid = cssVar("--grid", "#e5e5e5");
      const axis = {stroke: fg, grid: {stroke: grid, width: 1}, ticks: {stroke: grid, width: 1},
        font: "11px system-ui, sans-serif", values: (u, splits) => splits.map((v) => WAI.compact(v))};
      const xAxis = {...axis};
      if (spec.xLabels) {
        xAxis.splits = () => spec.xLabels.map((_, i) => i);
        xAxis.values = (u, splits) => splits.map((v) => spec.xLabels[v] === undefined ? "" : spec.xLabels[v]);
      }
      const opts = {
        width, height,
        legend: {show: spec.legend !== false, live: !spec.scatter},
        cursor: {drag: {x: !spec.scatter, y: false, setScale: true},
          bind: {dblclick: () => () => { reset(); return null; }}},
        scales: {x: {time: false}, y: {distr: WAI.chartSettings.log && !spec.scatter ? 3 : 1}},
        axes: [xAxis, {...axis, size: axisWidth}],
        series: [{label: spec.xLabel || "step", value: (u, v) => spec.xLabels ? (spec.xLabels[v] ?? "") : WAI.num(v)}]
          .concat(handle.lines.map((line, i) => ({
            label: line.label, stroke: line.color || WAI.palette[i % 10], width: spec.scatter ? 0 : 1.5,
            spanGaps: true, value: (u, v) => WAI.num(v),
            points: spec.scatter ? {show: true, size: 9, fill: line.color || WAI.palette[i % 10]}
              : {show: line.x.length < 60},
            paths: spec.scatter ? () => null : undefined,
          }))),
        hooks: {
          setScale: [(u, key) => { if (key === "x" && !settingData) zoomed(u); }],
          draw: [(u) => marks(u)],
        },
      };
      // a flat line (all zeros, a constant rate) gets a small range around it, not uPlot's 0 to 100
      if (!WAI.chartSettings.log && !spec.scatter) opts.scales.y.range = (u, lo, hi) => {
        if (lo === null || hi === null) return [0, 1];
        if (lo === hi) return lo === 0 ? [0, 1] : [lo - Math.abs(lo) * 0.1, hi + Math.abs(hi) * 0.1];
        return uPlot.rangeNum(lo, hi, 0.1, true);
      };
      if (spec.xLabels) opts.scales.x.range = () => [-0.5, spec.xLabels.length - 0.5];
      else if (spec.scatter) opts.scales.x.range = (u, lo, hi) => {
        const pad = (hi - lo) * 0.06 || Math.abs(lo) * 0.1 || 1;
        return [lo - pad, hi + pad];
      };
      return opts;
    }

    // The y axis as wide as its widest label (measured in the axis font), so no label is clipped.
    function axisWidth(u, values) {
      if (!values || !values.length) return 40;
      const ctx = u.ctx;
      ctx.save();
      ctx.font = "11px system-ui, sans-serif";
      const widest = Math.max(...values.map((t) => ctx.measureText(String(t)).width));
      ctx.restore();
      return Math.ceil(widest) + 18;  // the tick (about 10 px) and a gap
    }

    function marks(u) {
      const alarms = spec.alarms || [];
      if (!alarms.length) return;
      const ctx = u.ctx, top = u.bbox.top, bottom = u.bbox.top + u.bbox.height;
      ctx.save();
      ctx.strokeStyle = cssVar("--alarm", "#d62728");
      ctx.fillStyle = ctx.strokeStyle;
      ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
      ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
      alarms.forEach((a, i) => {
        if (!WAI.isNum(a.step)) return;
        const x = u.valToPos(a.step, "x", true);
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
        ctx.fillText("⚠ " + (i + 1), x + 3 * devicePixelRatio, top + 12 * devicePixelRatio);
      });
      ctx.restore();
    }

    function zoomed(u) {
      if (!spec.onZoom || !u.scales.x) return;
      const {min, max} = u.scales.x;
      const lo = Math.min(...handle.overview.map((l) => l.x[0] ?? Infinity));
      const hi = Math.max(...handle.overview.map((l) => l.x[l.x.length - 1] ?? -Infinity));
      handle.zoomed = min > lo || max < hi;
      const thin = handle.overview.some((l) => l.downsampled);
      if (!thin || !handle.zoomed) return;
      clearTimeout(zoomTimer);
      zoomTimer = setTimeout(async () => {
        const lines = await spec.onZoom(Math.floor(min), Math.ceil(max));
        if (!lines || !handle.u) return;
        handle.lines = lines;
        settingData = true;
        handle.u.setData(joined(lines), false);
        settingData = false;
        box.dataset.points = drawn(lines);
        box.dataset.zoom = "full";
      }, 150);
    }

    function reset() {
      handle.lines = handle.overview.map((l) => ({...l}));
      handle.zoomed = false;
      box.dataset.zoom = "";
      build();
    }

    function build() {
      if (handle.u) handle.u.destroy();
      const width = Math.max(plot.clientWidth || box.clientWidth || 600, 200);
      handle.u = new uPlot(options(width), joined(handle.lines), plot);
      box.dataset.points = drawn(handle.lines);
      box.dataset.alarms = String((spec.alarms || []).length);
      box.dataset.downsampled = String(handle.lines.some((l) => l.downsampled));
    }

    // New points for line `label` (a live run): appended to the overview and, unzoomed, drawn.
    handle.append = function (label, xs, ys) {
      for (const set of [handle.overview, handle.lines]) {
        const line = set.find((l) => l.label === label);
        if (!line) continue;
        line.x = line.x.concat(xs);
        line.y = line.y.concat(ys);
      }
      if (!handle.zoomed) {
        settingData = true;
        handle.u.setData(joined(handle.lines), true);
        settingData = false;
        box.dataset.points = drawn(handle.lines);
      }
    };
    handle.has = (label) => handle.overview.some((l) => l.label === label);
    handle.rebuild = build;
    handle.reset = reset;
    build();
    box.wai = handle;
    charts.push(handle);
    new ResizeObserver(() => {
      if (!handle.u) return;
      const w = Math.max(plot.clientWidth, 200);
      if (Math.abs(w - handle.u.width) > 2) handle.u.setSize({width: w, height});
    }).observe(plot);
    return handle;
  };

  WAI.forgetCharts = () => { charts.splice(0).forEach((c) => c.u && c.u.destroy()); };

  // The bar above a page's charts: smoothing, log scale, zoom out.
  WAI.chartControls = function () {
    const value = WAI.el("output", {}, "0");
    const slider = WAI.el("input", {type: "range", min: "0", max: "0.99", step: "0.01", value: "0",
      "aria-label": "smoothing"});
    slider.addEventListener("input", () => {
      WAI.chartSettings.smooth = Number(slider.value);
      value.textContent = slider.value;
      charts.forEach((c) => c.rebuild());
    });
    const log = WAI.el("input", {type: "checkbox", "aria-label": "log scale"});
    log.addEventListener("change", () => { WAI.chartSettings.log = log.checked; charts.forEach((c) => c.rebuild()); });
    const reset = WAI.el("button", {type: "button"}, "Zoom out");
    reset.addEventListener("click", () => charts.forEach((c) => c.reset()));
    return WAI.el("div", {class: "controls"},
      WAI.el("label", {}, "Smoothing ", slider, " ", value),
      WAI.el("label", {}, log, " log scale"),
      reset,
      WAI.el("span", {class: "muted small"}, "drag across a chart to zoom, double-click to zoom out"));
  };
})();
