"use strict";
// What every page script shares: building DOM nodes (text only: nothing a user logged is ever
// parsed as markup), reading page data, and formatting numbers, times and costs.
(function () {
  const WAI = (window.WAI = {});

  // el("a", {href: "/runs", class: "x", onclick: fn}, "text", node, ...): children are text or nodes.
  WAI.el = function (tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  };

  WAI.main = () => document.getElementById("main");

  WAI.fail = function (message) {
    WAI.main().replaceChildren(WAI.el("h1", {}, "Could not read this page"), WAI.el("p", {class: "notice"}, message));
  };

  // GET a page-data route; 401 goes to the sign-in form, other errors show the platform's message.
  WAI.getJSON = async function (url) {
    const response = await fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}});
    if (response.status === 401) {
      const here = location.pathname + location.search;
      location.assign("/signin?next=" + encodeURIComponent(here));
      throw new Error("signed out");
    }
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const message = body && body.error ? body.error.message : "the platform answered " + response.status;
      const err = new Error(message);
      err.status = response.status;
      throw err;
    }
    return body;
  };

  WAI.isNum = (v) => typeof v === "number" && isFinite(v);

  WAI.num = function (v, digits) {
    if (!WAI.isNum(v)) return "–";
    if (Number.isInteger(v) && Math.abs(v) < 1e6) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    return Number(v.toPrecision(digits || 4)).toString();
  };

  // A short label for an axis or a total: SI prefixes past a thousand (1.2k, 3.4M, 5.6T), a short
  // exponent below a hundredth (2e-5, 1.5e-4), three significant digits otherwise.
  WAI.compact = function (v) {
    if (!WAI.isNum(v)) return "–";
    const a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e3) {
      const units = ["", "k", "M", "G", "T", "P", "E"];
      const i = Math.min(units.length - 1, Math.floor(Math.log10(a) / 3));
      return Number((v / Math.pow(1000, i)).toPrecision(3)).toString() + units[i];
    }
    if (a < 1e-2) {
      const [m, e] = v.toExponential(2).split("e");
      return Number(m).toString() + "e" + Number(e);
    }
    return Number(v.toPrecision(3)).toString();
  };

  // A held-out rate or loss with fixed decimals, so a column of them lines up (0.082, 1.000).
  WAI.fixed = (v) => (WAI.isNum(v) ? v.toFixed(3) : "–");

  WAI.signed = (v) => (WAI.isNum(v) ? (v > 0 ? "+" : v < 0 ? "−" : "±") + WAI.num(Math.abs(v)) : "–");

  WAI.cost = function (usd) {
    if (!WAI.isNum(usd)) return "–";
    return usd < 0.01 ? "<$0.01" : "$" + usd.toFixed(2);
  };

  WAI.duration = function (s) {
    if (!WAI.isNum(s) || s < 0) return "–";
    if (s < 60) return Math.round(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  };

  WAI.when = function (epoch) {
    if (!WAI.isNum(epoch)) return "–";
    const d = new Date(epoch * 1000);
    const pad = (n) => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes());
  };

  WAI.status = (s) => WAI.el("span", {class: "status s-" + String(s).replace(/[^a-z]/g, "")}, s);

  // The runner's expect verdict beside a status: " · expect failed" / " · expect passed" (nothing when none was checked).
  WAI.expectVerdict = function (e) {
    if (!e) return null;
    return WAI.el("span", {class: "expect-verdict " + (e.passed ? "e-passed" : "e-failed"), dataset: {expect: e.passed ? "passed" : "failed"},
      title: e.passed ? "every expect line held" : e.failed + " expect line(s) failed"}, " · expect " + (e.passed ? "passed" : "failed"));
  };

  // A headline item's before or after as the server wrote it (whileai.core.stats.rate_text, the
  // terminal's formatter too), so a page and the CLI print the same digits; WAI.fixed for older data.
  WAI.rate = (h, side) => (typeof h[side + "_text"] === "string" ? h[side + "_text"] : WAI.fixed(h[side]));

  // "held-out pass rate 0.125 → 0.875" as nodes; `h` is a headline item from the page data.
  WAI.holdout = function (h) {
    if (!h) return WAI.el("span", {class: "muted"}, "–");
    return WAI.el("span", {class: "holdout"}, WAI.rate(h, "before"), " → ",
      WAI.el("b", {}, WAI.rate(h, "after")), h.significance ? WAI.el("span", {}, ", ", WAI.significance(h)) : null,
      WAI.isNum(h.n) ? WAI.el("span", {class: "muted small n"}, " (n=" + h.n + ")") : null);
  };

  // The paired test's verdict in words (whileai.core.stats.significance_word): only a significant gain is green.
  WAI.significance = function (h) {
    if (!h || !h.significance) return null;
    const tone = h.significance === "significant gain" ? "good" : h.significance === "significant loss" ? "bad" : "muted";
    return WAI.el("span", {class: "significance " + tone, dataset: {significance: h.significance}}, h.significance);
  };

  WAI.section = (title, ...kids) => WAI.el("section", {class: "card"}, WAI.el("h2", {}, title), ...kids);

  WAI.copyable = function (text, label) {
    const pre = WAI.el("pre", {class: "code"}, text);
    const button = WAI.el("button", {type: "button", class: "copy", "aria-label": "copy " + (label || "")}, "Copy");
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "Copied";
      } catch (e) {
        const range = document.createRange();
        range.selectNodeContents(pre);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        button.textContent = "Selected: press Ctrl+C";
      }
      setTimeout(() => (button.textContent = "Copy"), 2000);
    });
    return WAI.el("div", {class: "copyable"}, button, pre);
  };

  WAI.json = (v) => JSON.stringify(v, null, 2);

  // A small key/value table of an object's plain fields (nested values as JSON text).
  WAI.fields = function (obj, skip) {
    const rows = Object.entries(obj || {}).filter(([k]) => !(skip || []).includes(k)).map(([k, v]) =>
      WAI.el("tr", {}, WAI.el("th", {}, k),
        WAI.el("td", {}, v !== null && typeof v === "object" ? WAI.el("code", {class: "wrap"}, JSON.stringify(v)) :
          WAI.isNum(v) ? WAI.num(v) : String(v))));
    return WAI.el("table", {class: "fields"}, WAI.el("tbody", {}, rows));
  };

  WAI.ready = (fn) => document.addEventListener("DOMContentLoaded", () => {
    fn().catch((e) => { if (e.message !== "signed out") WAI.fail(e.message); });
  });
})();
