"use strict";
// A run's page, top to bottom: status and progress, the held-out headline, the held-out episodes turn by
// turn (episodes.js), the delta verdict,
// every logged series (loss first), the HackMonitor with its alarms, the selection and export
// reports, cost, the served endpoint, the config with the command that reproduces it, the error.
// A running run polls for the points past the last step it has (about once a second) and stops
// when the run ends.
(function () {
  const WAI = window.WAI, el = WAI.el;
  const runId = decodeURIComponent(location.pathname.split("/")[2] || "");
  const base = "/page-data/runs/" + encodeURIComponent(runId);
  let view = null, lastStep = -1, timer = null;
  const byMetric = {};  // metric -> [chart handles that draw it]

  function progress(run, expect) {
    const total = run.total_steps;
    const pct = WAI.isNum(total) && total > 0 ? Math.min(100, (100 * run.step) / total) : null;
    const bits = [el("span", {id: "step"}, "step " + run.step + (WAI.isNum(total) ? " of " + total : ""))];
    if (run.status === "running" && pct !== null && run.step > 0) {
      const spent = Date.now() / 1000 - run.created_at;
      const eta = (spent / run.step) * (total - run.step);
      bits.push(el("span", {class: "muted", id: "eta"}, " · about " + WAI.duration(eta) + " left"));
    }
    const bar = el("div", {class: "bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100",
      "aria-valuenow": pct === null ? "0" : pct.toFixed(0)}, el("div", {class: "fill"}));
    bar.firstChild.style.width = (pct === null ? 0 : pct) + "%";
    return el("div", {class: "progress st-" + String(run.status).replace(/[^a-z]/g, ""), id: "progress"},
      WAI.status(run.status), WAI.expectVerdict(expect), " ", ...bits, bar);
  }

  function header(v) {
    const r = v.run, f = v.facts;
    const meta = [r.id, f.method && "method " + f.method, f.recipe && "recipe " + f.recipe,
      r.dataset && "dataset " + r.dataset, "started " + WAI.when(r.created_at),
      f.duration_s !== null && "took " + WAI.duration(f.duration_s)].filter(Boolean).join(" · ");
    const head = el("header", {class: "run-head"}, el("h1", {id: "run-name"}, r.name || r.id),
      el("p", {class: "muted"}, meta), progress(r, f.expect));
    if (f.sweep !== null && f.sweep !== undefined) {
      head.append(el("p", {}, "Part of sweep ", el("a", {href: "/sweeps/" + encodeURIComponent(f.sweep)}, String(f.sweep))));
    }
    const c = v.config, runLink = (id) => el("a", {href: "/runs/" + encodeURIComponent(id)}, String(id));
    if (c.stage && c.stage.name) head.append(el("p", {class: "muted"}, "stage " + c.stage.name +
      (Array.isArray(c.stage.stages) ? " (" + (Number(c.stage.index) + 1) + " of " + c.stage.stages.length + ": " + c.stage.stages.join(" → ") + ")" : "")));
    if (typeof c.init_from === "string") head.append(el("p", {}, "Started from ", runLink(c.init_from)));
    if (typeof c.reproduces === "string") head.append(el("p", {}, "Reproduces ", runLink(c.reproduces)));
    const resumed = f.resumed;
    if (resumed && resumed.times) head.append(el("p", {class: "muted"}, "Resumed " + (resumed.times === 1 ? "once" :
      resumed.times + " times") + ", last from its checkpoint at step " + resumed.from_step));
    if (r.status === "failed" || r.status === "crashed") head.append(el("p", {class: "notice bad"}, "This run " + r.status + "; its error is at the bottom of the page. ",
      el("a", {href: "#error"}, "Read the error")));
    if (f.phase && r.status === "running") head.append(el("p", {class: "muted"}, "now: " + f.phase));
    return head;
  }

  function headline(v) {
    if (!v.headline.length) {
      const note = v.training && v.training.holdout_note;
      const ended = ["failed", "stopped", "crashed"].includes(v.run.status);
      return WAI.section("Did it work?", setupLine(v), constraintsNote(v), el("p", {class: "muted"}, note || (ended ?
        "No held-out result: the run " + v.run.status + " before its held-out set was measured after training." :
        "No held-out result yet: it appears here when the run records its held-out measure before and after " +
        "(run.holdout(before, after), or wai.train with a held-out set).")));
    }
    const cards = v.headline.map((h) => el("div", {class: "headline", dataset: {metric: h.metric}},
      el("div", {class: "label"}, h.label),
      el("div", {class: "big"}, WAI.rate(h, "before"), el("span", {class: "arrow"}, " → "), WAI.rate(h, "after")),
      // coloured by the paired test where there is one, so a gain with p = 0.5 does not read as a win
      el("div", {class: "change " + (h.significance ? (h.significance === "significant gain" ? "good" :
        h.significance === "significant loss" ? "bad" : "") : h.change === null ? "" :
        (h.change > 0) === (h.better === "higher") ? "good" : h.change === 0 ? "" : "bad")},
        WAI.signed(h.change), h.significance ? el("span", {}, " ", WAI.significance(h)) : null,
        " ", el("span", {class: "muted"}, "(" + h.better + " is better)")),
      h.certainty ? el("div", {class: "certainty muted small"}, h.certainty) :
        WAI.isNum(h.n) ? el("div", {class: "certainty muted small"}, "n = " + h.n) : null,
      // per category (a BFCL mix): the terminal's lines, each with its n and paired p
      (h.groups || []).length ? el("pre", {class: "groups muted small"}, h.groups.join("\n")) : null));
    return WAI.section("Did it work?", el("div", {class: "headlines"}, cards), rewardVersusExact(v), alarmNotice(v),
      constraintsNote(v), setupLine(v));
  }

  // A reward other than the exact judge, beside it on the same held-out prompts, and which rose more (the job's
  // sign test): the terminal's closing "reward" lines, in the same words.
  function rewardVersusExact(v) {
    const r = v.training && v.training.reward_vs_exact;
    if (!r || !WAI.isNum(r.p)) return null;
    const fmt = (x) => WAI.isNum(x) ? Number(x).toFixed(3) : "-";
    const said = r.p < 0.05 && r.reward_rose_more > r.task_rose_more ?
      "the reward rose more than the task: it may be paying for something else" :
      r.p < 0.05 ? "the task rose more than the reward" : "neither rose significantly more";
    const p = r.p < 0.001 ? "p < 0.001" : "p = " + Number(r.p).toFixed(3);
    return el("p", {class: "notice" + (r.p < 0.05 && r.reward_rose_more > r.task_rose_more ? " bad" : ""),
                    id: "reward-vs-exact"},
      "The run's reward " + fmt(r.reward_before) + " → " + fmt(r.reward_after) + " on the same " + r.prompts +
      " held-out prompts; the exact judge " + fmt(r.exact_before) + " → " + fmt(r.exact_after) + ". The reward rose more on " +
      r.reward_rose_more + " prompts, the task on " + r.task_rose_more + " (sign test " + p + "): " + said + ".");
  }

  // Beside the result: the packages this run had at another version than constraints.txt pins (the
  // recipes' figures were measured with the pinned ones; a newer transformers or TRL can move them).
  function constraintsNote(v) {
    const text = v.config && v.config.constraints_text;
    return text ? el("p", {class: "notice", id: "constraints-differ"}, String(text)) : null;
  }

  // What an alarm means for the result above, by the direction the held-out figure moved.
  function alarmReading(v) {
    const h = v.headline[0];
    const change = h && typeof h.change === "number" ? (h.better === "lower" ? -h.change : h.change) : null;
    if (change === null) return "the reward may be paying for something other than the task. ";
    if (change > 0) return "the held-out gain above may not be the task learned. ";
    if (change < 0) return "the held-out loss above may be the policy learning what the reward pays for instead of the task. ";
    return "the held-out figure above did not move while the reward was paying for something else. ";
  }

  // The HackMonitor's alarms, said where the result is read: what each means, and a link to its chart.
  function alarmNotice(v) {
    const alarms = (v.monitor && v.monitor.alarms) || [];
    if (!alarms.length) return null;
    return el("div", {class: "notice bad", id: "alarm-notice"},
      el("p", {}, "The HackMonitor raised " + alarms.length + (alarms.length === 1 ? " alarm" : " alarms") +
        ": " + alarmReading(v), el("a", {href: "#monitor"}, "See its chart")),
      el("ul", {}, alarms.map((a) => el("li", {dataset: {kind: String(a.kind)}},
        String(a.kind) + (a.step === null || a.step === undefined ? "" : " at step " + a.step) + ": " + String(a.meaning || a.text)))));
  }

  // The recipe's expect block as the runner checked it: each line, what the run showed, and where it was written.
  function expectSection(v) {
    const e = v.facts.expect;
    if (!e) return null;
    const show = (x) => typeof x === "string" ? x : JSON.stringify(x);
    const rows = e.lines.map((line) => el("tr", {dataset: {key: line.key, passed: String(line.passed)}},
      el("td", {}, el("span", {class: line.passed ? "e-passed" : "e-failed"}, line.passed ? "passed" : "FAILED")),
      el("td", {}, "expect." + line.key + ": " + show(line.want)), el("td", {}, show(line.seen)),
      el("td", {class: "where"}, show(line.where))));
    const sec = WAI.section("Expect: " + (e.passed ? "passed" : e.failed + " of " + e.lines.length + " lines failed"),
      el("div", {class: "scroll"}, el("table", {class: "data expect-lines"},
        el("thead", {}, el("tr", {}, ["", "line", "the run shows", "written at"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))));
    sec.id = "expect";
    return sec;
  }

  // A reward model's held-out pairs the head got right, per failure kind of the rejected row
  // (training.pairs_by_failure, from the rows' markers.failure), before and after training.
  function failureKinds(v) {
    const kinds = v.training && v.training.pairs_by_failure;
    if (!kinds || !kinds.after || typeof kinds.after !== "object") return null;
    const before = (kinds.before && typeof kinds.before === "object") ? kinds.before : {};
    const cell = (k) => k && WAI.isNum(k.right) && WAI.isNum(k.pairs) ? k.right + " of " + k.pairs : "–";
    const rows = Object.keys(kinds.after).map((kind) => el("tr", {dataset: {kind: kind}}, el("td", {}, kind),
      el("td", {}, cell(before[kind])), el("td", {}, cell(kinds.after[kind]))));
    const sec = WAI.section("Held-out pairs by failure kind",
      el("p", {class: "muted"}, "Pairs whose passing row outscored its failing one, by the failing row's markers.failure."),
      el("div", {class: "scroll"}, el("table", {class: "data", id: "failure-kinds"},
        el("thead", {}, el("tr", {}, ["failure kind", "before", "after"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))));
    sec.id = "failure-kinds-section";
    return sec;
  }

  function ci(x) { return x && x.ci ? "[" + WAI.num(x.ci[0], 3) + ", " + WAI.num(x.ci[1], 3) + "]" : ""; }

  function delta(v) {
    const d = v.delta;
    if (!d) return null;
    const t = d.target || {};
    const rows = [];
    const row = (name, side, verdict) => el("tr", {}, el("td", {}, name),
      el("td", {}, WAI.num(side.before && side.before.value, 3)), el("td", {}, WAI.num(side.after && side.after.value, 3)),
      el("td", {}, WAI.signed(side.delta && side.delta.value), " ", el("span", {class: "muted small"}, ci(side.delta))),
      el("td", {}, verdict ? el("span", {class: "verdict v-" + String(verdict).replace(/[^a-z]/g, "")}, verdict) : ""));
    rows.push(row("all rows (target)", t, d.verdict));
    if (d.proxy) rows.push(row("proxy", d.proxy, ""));
    const groups = (d.by && d.by.groups) || [];
    for (const g of groups) rows.push(row((d.by.key || "group") + " = " + g.group, g.target || {}, g.verdict));
    return WAI.section("Delta verdict",
      el("p", {}, el("span", {class: "verdict big-verdict v-" + String(d.verdict).replace(/[^a-z]/g, "")}, d.verdict || "–")),
      el("p", {id: "delta-reason"}, d.reason || ""),
      el("div", {class: "scroll"}, el("table", {class: "data", id: "delta-table"},
        el("thead", {}, el("tr", {}, ["", "before", "after", "change (CI)", "verdict"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))));
  }

  function lines(series, metrics) {
    return metrics.filter((m) => series[m]).map((m, i) => ({label: m, x: series[m].x, y: series[m].y,
      color: WAI.palette[i % 10], downsampled: series[m].downsampled, points: series[m].points}));
  }

  async function zoom(metrics, min, max) {
    const data = await WAI.getJSON(base + "?metrics=" + encodeURIComponent(metrics.join(",")) + "&start=" + min + "&end=" + max);
    return lines(data.series, metrics);
  }

  function note(series, metrics) {
    const thin = metrics.filter((m) => series[m] && series[m].downsampled);
    if (!thin.length) return null;
    return thin.map((m) => m + ": " + series[m].points.toLocaleString() + " points, drawn as " +
      series[m].x.length.toLocaleString() + " (each bucket's min and max); zoom in for full resolution").join("; ");
  }

  function register(handle, metrics) { for (const m of metrics) (byMetric[m] = byMetric[m] || []).push(handle); }

  function chartTitle(c) {
    const also = Object.keys(c.also || {});
    return also.length ? c.title + " (also logged as " + also.join(", ") + ")" : c.title;
  }

  // Charts under their headings (training, rewards, policy, completions, HackMonitor series, system,
  // other); rarely read sections are a closed <details>. Returns [section, draw] (draw once in the page).
  function chartsSection(v) {
    if (!v.charts.length) {
      return WAI.section("Charts", el("p", {class: "muted"}, Object.keys(v.scalars || {}).length ?
        "Every series was logged once: the values are in the table below." : "No points logged yet."));
    }
    const sec = WAI.section("Charts", WAI.chartControls());
    const boxes = [];
    for (const group of v.sections) {
      if (group.id === "monitor" && v.monitor) continue;  // drawn in the HackMonitor's own section
      const grid = el("div", {class: "charts"});
      for (const c of group.charts) {
        const box = el("div", {dataset: {chart: c.id}});
        grid.append(box);
        boxes.push([box, c]);
      }
      const count = group.charts.length + (group.charts.length === 1 ? " chart" : " charts");
      sec.append(group.collapsed ?
        el("details", {class: "chart-section", dataset: {section: group.id}},
          el("summary", {}, el("span", {class: "section-title"}, group.title), " ", el("span", {class: "muted small"}, count)), grid) :
        el("div", {class: "chart-section", dataset: {section: group.id}}, el("h3", {class: "section-title"}, group.title), grid));
    }
    if (v.unstepped) sec.append(el("p", {class: "muted small"}, v.unstepped + " points were logged without a step; " +
      "they are kept (get_run has them) but not drawn on a step axis."));
    return [sec, () => boxes.forEach(([box, c]) => register(WAI.chart(box, {title: chartTitle(c),
      lines: lines(v.series, c.metrics), note: note(v.series, c.metrics),
      onZoom: (a, b) => zoom(c.metrics, a, b)}), c.metrics))];
  }

  // What the trainer logged once (its end-of-training totals, and any series with a single value).
  const SCALAR_NAMES = {train_runtime: "training time", train_samples_per_second: "samples per second",
    train_steps_per_second: "steps per second", total_flos: "total floating-point operations", train_loss: "mean training loss"};

  function scalarValue(name, value) {
    if (name === "train_runtime") return WAI.duration(value) + " (" + WAI.num(value) + " s)";
    if (name === "total_flos") return WAI.compact(value);
    return WAI.num(value);
  }

  function scalarsSection(v) {
    const entries = Object.entries(v.scalars || {});
    if (!entries.length) return null;
    const order = Object.keys(SCALAR_NAMES);
    const known = entries.filter(([k]) => SCALAR_NAMES[k]).sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]));
    const rest = entries.filter(([k]) => !SCALAR_NAMES[k]);
    const rows = known.concat(rest).map(([k, val]) => el("tr", {dataset: {key: k}},
      el("th", {}, SCALAR_NAMES[k] || k, SCALAR_NAMES[k] ? el("span", {class: "muted small raw-name"}, k) : null),
      el("td", {}, scalarValue(k, val))));
    return WAI.section("Totals and values logged once", el("table", {class: "fields", id: "scalars"}, el("tbody", {}, rows)));
  }

  // Beside the result: the base, LoRA rank and batch size it trained with (the job's default when unset).
  function setupLine(v) {
    const s = v.setup;
    if (!s) return null;
    const names = {base_model: "base model", lora_rank: "LoRA rank", batch_size: "batch size",
                   world_size: "processes", batch_per_device: "per-process batch",
                   gradient_accumulation: "gradient accumulation"};
    const items = Object.entries(names).filter(([k]) => s[k]).map(([k, label]) => el("div", {class: "setup-item", dataset: {key: k}},
      el("dt", {}, label), el("dd", {}, String(s[k].value),
        s[k].source === "default" ? el("span", {class: "muted small"}, " (job default)") :
          s[k].source === "trainer" ? el("span", {class: "muted small"}, " (as the trainer ran)") : null)));
    return items.length ? el("dl", {class: "setup", id: "setup"}, items) : null;
  }

  function monitorSection(v) {
    const m = v.monitor;
    if (!m) return null;
    const box = el("div", {dataset: {chart: "monitor"}});
    const alarms = el("ol", {class: "alarms", id: "alarms"}, m.alarms.map((a) =>
      el("li", {class: "alarm", dataset: {step: a.step, kind: a.kind}}, el("b", {}, "step " + a.step + " · " + a.kind + ": "), a.text)));
    const group = v.sections.find((g) => g.id === "monitor");
    const more = group ? group.charts.map((c) => [el("div", {dataset: {chart: c.id}}), c]) : [];
    const sec = WAI.section("HackMonitor: proxy against gold", box,
      m.alarms.length ? alarms : el("p", {class: "good"}, "No alarms."),
      ...m.notes.map((n) => el("p", {class: "muted"}, n)),
      more.length ? el("div", {class: "chart-section", dataset: {section: "monitor"}},
        el("h3", {class: "section-title"}, "The monitor's other series"), el("div", {class: "charts"}, more.map(([b]) => b))) : null);
    sec.id = "monitor";  // "Did it work?" links here when an alarm fired
    let ls;
    if (m.metrics.length) ls = lines(v.series, m.metrics);
    else ls = ["proxy", "gold"].map((k, i) => {
      const pts = m.curve.filter((p) => WAI.isNum(p.step) && WAI.isNum(p[k]));
      return {label: k, x: pts.map((p) => p.step), y: pts.map((p) => p[k]), color: WAI.palette[i]};
    });
    ls.forEach((l) => { if (/gold/.test(l.label)) l.color = WAI.palette[4]; if (/proxy/.test(l.label)) l.color = WAI.palette[1]; });
    return [sec, () => {
      register(WAI.chart(box, {title: "proxy and gold on the held-out prompts" +
        (m.evaluations ? " (" + m.evaluations + " evaluations)" : ""), lines: ls, alarms: m.alarms,
        onZoom: m.metrics.length ? (a, b) => zoom(m.metrics, a, b) : null}), m.metrics);
      more.forEach(([b, c]) => register(WAI.chart(b, {title: chartTitle(c), lines: lines(v.series, c.metrics),
        note: note(v.series, c.metrics), onZoom: (a, z) => zoom(c.metrics, a, z)}), c.metrics));
    }];
  }

  function reports(v) {
    const out = [];
    const s = v.selection;
    if (s) {
      const dropped = (s.dropped || []).map((d) => el("tr", {}, el("td", {}, d.class), el("td", {}, WAI.num(d.rows)),
        el("td", {}, WAI.num(d.tasks)), el("td", {}, d.reason || "")));
      out.push(WAI.section("Which rows it trained on", el("p", {}, s.summary || ""),
        dropped.length ? el("div", {class: "scroll"}, el("table", {class: "data"},
          el("thead", {}, el("tr", {}, ["dropped", "rows", "tasks", "why"].map((h) => el("th", {}, h)))), el("tbody", {}, dropped))) : null));
    }
    const e = v.export;
    if (e) out.push(WAI.section("Export report", e.summary ? el("p", {}, String(e.summary)) : null,
      WAI.fields(e, ["summary"])));
    return out;
  }

  function cost(v) {
    const r = v.run;
    const t = v.training || {};
    const basis = r.cost_basis ? r.cost_basis.text : t.cost_basis;
    if (!r.cost_basis && !basis) return null;
    return WAI.section("Cost", el("p", {}, el("span", {class: "big-inline", id: "cost"},
      WAI.isNum(r.cost_usd) ? "about " + WAI.cost(r.cost_usd) : "no estimate")),
      el("p", {class: "muted", id: "cost-basis"}, basis || ""));
  }

  function served(v) {
    if (!v.adapter && !v.served.length) return null;
    const parts = [];
    if (v.adapter) parts.push(el("p", {}, "Adapter: ", el("code", {class: "wrap"}, String(v.adapter))));
    for (const m of v.served) {
      parts.push(el("p", {}, "Served as ", el("b", {}, m.name), " (version " + m.version + ") at ", el("code", {}, m.endpoint)));
      parts.push(WAI.copyable("from openai import OpenAI\n\nclient = OpenAI(base_url=" + JSON.stringify(m.endpoint) +
        ", api_key=\"<your whileai key>\")\nreply = client.chat.completions.create(\n    model=" + JSON.stringify(m.name) +
        ",\n    messages=[{\"role\": \"user\", \"content\": \"Hello\"}],\n)\nprint(reply.choices[0].message)", "client snippet"));
    }
    if (!v.served.length) parts.push(el("p", {class: "muted"}, "Not served. wai.serve(run, \"name\") puts it on an endpoint."));
    return WAI.section("Adapter and endpoint", ...parts);
  }

  function config(v) {
    const c = v.config;
    const parts = [];
    for (const cmd of c.reproduce) parts.push(el("p", {class: "label"}, cmd.label), WAI.copyable(cmd.text, cmd.label));
    if (!c.reproduce.length) parts.push(el("p", {class: "muted"}, "No command recorded with this run."));
    if (c.overrides && (Array.isArray(c.overrides) ? c.overrides.length : Object.keys(c.overrides).length)) {
      parts.push(el("p", {class: "label"}, "Overrides as typed"), el("pre", {class: "code", id: "overrides"},
        Array.isArray(c.overrides) ? c.overrides.join(" ") : WAI.json(c.overrides)));
    }
    parts.push(el("p", {class: "label"}, c.overrides || c.recipe ? "Resolved spec" : "Config as given"),
      el("pre", {class: "code", id: "config"}, WAI.json(c.spec)));
    if (c.versions) parts.push(el("p", {class: "label"}, "versions"), el("pre", {class: "code"}, WAI.json(c.versions)));
    // none, the packages that differ, no constraints.txt to compare with, or not recorded (an older record)
    if (c.runner) parts.push(el("p", {class: "label"}, "packages off constraints.txt"),
      el("p", {id: "constraints-words"}, String(c.constraints_words)));
    if (c.git) parts.push(el("p", {class: "label"}, "git"), el("pre", {class: "code"}, WAI.json(c.git)));
    const sec = WAI.section("Config", ...parts);
    sec.id = "config-section";
    return sec;
  }

  function other(v) {
    const keys = Object.keys(v.summary_other || {});
    if (!keys.length) return null;
    return WAI.section("Notes on the run", WAI.fields(v.summary_other));
  }

  // The worker's log: its tail, then what the job appends while the run is live (text only, never markup).
  const log = {text: "", offset: null, job: null, note: null, cut: false};

  async function readLog() {
    const q = log.offset === null ? "" : "?offset=" + log.offset;
    const got = await WAI.getJSON(base + "/log" + q);
    if (log.job !== got.job) { log.text = ""; log.job = got.job; }
    log.text += got.text;
    log.offset = got.size;
    log.note = got.note;
    log.cut = log.cut || !!got.cut;
    const pre = document.getElementById("worker-log");
    if (!pre) { const node = logSection(); if (node) { const before = document.getElementById("config-section"); if (before) before.before(node); } return; }
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = log.text;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function logSection() {
    if (!log.job && !log.text) return null;
    const pre = el("pre", {class: "code log", id: "worker-log", tabindex: "0"}, log.text || "(empty so far)");
    const sec = WAI.section("Worker log", log.cut ? el("p", {class: "muted small"}, "The last part of a longer log.") : null,
      log.note ? el("p", {class: "muted"}, log.note) : null, pre);
    sec.id = "log-section";
    requestAnimationFrame(() => { pre.scrollTop = pre.scrollHeight; });
    return sec;
  }

  function error(v) {
    if (!v.run.error) return null;
    const sec = WAI.section("Error", el("pre", {class: "code error-text"}, v.run.error));
    sec.id = "error";
    return sec;
  }

  function render(v) {
    WAI.forgetCharts();
    for (const k of Object.keys(byMetric)) delete byMetric[k];
    document.title = (v.run.name || v.run.id) + " · whileai";
    const charts = chartsSection(v), monitor = monitorSection(v);
    const nodes = [header(v), headline(v), expectSection(v), failureKinds(v), WAI.episodesSection(v), delta(v),
      Array.isArray(charts) ? charts[0] : charts, monitor && monitor[0], scalarsSection(v), ...reports(v), cost(v), served(v), logSection(), config(v), other(v), error(v)];
    WAI.main().replaceChildren(...nodes.filter(Boolean));
    if (Array.isArray(charts)) charts[1]();
    if (monitor) monitor[1]();
    lastStep = Math.max(-1, ...Object.values(v.series).map((s) => s.x.length ? s.x[s.x.length - 1] : -1));
    document.body.dataset.status = v.run.status;
  }

  async function poll() {
    let live;
    try { live = await WAI.getJSON(base + "/live?after=" + lastStep); } catch (e) { timer = setTimeout(poll, view.live.poll_ms * 3); return; }
    const known = new Set(Object.keys(view.series));
    // a new series, or a new point of one shown as a single value, redraws the page
    const fresh = live.metrics.some((m) => !known.has(m) && !(m in view.scalars && !(m in live.points)));
    readLog().catch(() => null);
    if (fresh || live.status !== "running") {  // a new series, or the run ended: read the whole page once more
      view = await WAI.getJSON(base);
      render(view);
      if (view.run.status === "running") timer = setTimeout(poll, view.live.poll_ms);
      else { document.body.dataset.live = "stopped"; setTimeout(() => readLog().catch(() => null), 1500); }
      return;
    }
    for (const [m, pts] of Object.entries(live.points)) {
      for (const h of byMetric[m] || []) h.append(m, pts.x, pts.y);
      if (pts.x.length) lastStep = Math.max(lastStep, pts.x[pts.x.length - 1]);
    }
    Object.assign(view.run, {status: live.status, step: live.step, total_steps: live.total_steps});
    document.getElementById("progress").replaceWith(progress(view.run, view.facts.expect));
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    timer = setTimeout(poll, view.live.poll_ms);
  }

  WAI.ready(async () => {
    view = await WAI.getJSON(base);
    render(view);
    readLog().catch(() => null);
    if (view.run.status === "running") { document.body.dataset.live = "polling"; timer = setTimeout(poll, view.live.poll_ms); }
  });
})();
