"use strict";
// A run's held-out episodes (page data "episodes", pages/_episodes.py): each episode before training beside it
// after, turn by turn. The verdicts that changed come first; each episode is a closed <details> whose turns are
// drawn when it is first opened, so a run with hundreds of episodes stays quick. Every logged string is inserted
// as text.
(function () {
  const WAI = window.WAI, el = WAI.el;
  const CHANGE_CLASS = {lost: "bad", gained: "good"};
  const hasError = (s) => s.error !== null && s.error !== undefined;

  function verdict(side) {
    if (!side) return el("span", {class: "ep-verdict muted"}, "not played");
    return el("span", {class: "ep-verdict " + (side.passed ? "good" : "bad")}, side.passed ? "passed" : "failed");
  }

  function call(c) {
    return el("div", {class: "ep-call", dataset: {call: c.id}}, el("span", {class: "ep-label"}, "calls "),
      el("code", {class: "ep-name"}, c.name), " ", el("pre", {class: "ep-args"}, c.arguments));
  }

  function step(s) {
    const role = String(s.role);
    if (role === "system") {  // the same long prompt in every episode: folded
      return el("li", {class: "ep-step ep-system", dataset: {role: role}},
        el("details", {}, el("summary", {class: "ep-role"}, "system prompt"), el("pre", {class: "ep-text"}, s.text)));
    }
    if (role === "assistant") {
      const calls = s.calls || [];
      return el("li", {class: "ep-step ep-assistant", dataset: {role: role, turn: s.turn}},
        el("div", {class: "ep-role"}, "assistant · turn " + s.turn),
        s.text ? el("pre", {class: "ep-text"}, s.text) : null, calls.map(call),
        !s.text && !calls.length ? el("p", {class: "muted small"}, "(an empty reply)") : null);
    }
    if (role === "tool") {
      return el("li", {class: "ep-step ep-tool" + (hasError(s) ? " ep-error" : ""), dataset: {role: role, call: s.call_id}},
        // an error answer shows its message (the model read it wrapped as {'error': ...})
        el("div", {class: "ep-role"}, (hasError(s) ? "tool error · " : "tool · ") + s.name),
        el("pre", {class: "ep-text"}, hasError(s) ? s.error : s.text));
    }
    return el("li", {class: "ep-step ep-other", dataset: {role: role}}, el("div", {class: "ep-role"}, role),
      el("pre", {class: "ep-text"}, s.text));
  }

  function side(name, s) {
    const label = name + " training";
    if (!s) return el("div", {class: "ep-side", dataset: {side: name}}, el("h4", {}, label + ": not played"));
    const how = [s.turns !== null ? s.turns + (s.turns === 1 ? " reply" : " replies") : null,
      s.stopped === "cap" ? "stopped at the turn cap" : s.stopped === "episode_cap" ? "stopped at the episode's cap" :
        s.stopped === "answered" ? "ended with an answer" : null];
    return el("div", {class: "ep-side", dataset: {side: name}},
      el("h4", {}, label + ": ", verdict(s)), el("p", {class: "ep-reason"}, s.reason),
      el("p", {class: "muted small"}, how.filter(Boolean).join(" · ")),
      el("ol", {class: "ep-steps"}, s.steps.map(step)));
  }

  function pair(p) {
    const box = el("details", {class: "episode", dataset: {task: p.task_id, change: p.change}},
      el("summary", {}, el("code", {class: "ep-task"}, p.task_id), " ", verdict(p.before),
        el("span", {class: "arrow"}, " → "), verdict(p.after), " ",
        el("span", {class: "ep-change " + (CHANGE_CLASS[p.change] || "muted")}, p.change)));
    box.addEventListener("toggle", () => {
      if (box.open && !box.querySelector(".ep-sides")) {
        box.append(el("div", {class: "ep-sides"}, side("before", p.before), side("after", p.after)));
      }
    });
    return box;
  }

  function counted(side, when) {
    return side.of ? side.passed + " of " + side.of + " passed " + when : "none played " + when;
  }

  WAI.episodesSection = function (view) {
    const e = view.episodes;
    if (!e || !e.pairs.length) return null;
    const c = e.counts, changed = c.gained + c.lost;
    const oneSide = c["before only"] + c["after only"];
    const said = counted(e.passed.before, "before training") + ", " + counted(e.passed.after, "after") + ": " +
      c.gained + " gained, " + c.lost + " lost, " + (c["failed both"] + c["passed both"]) + " unchanged" +
      (oneSide ? ", " + oneSide + " played on one side only" : "") + ".";
    const list = el("div", {class: "episodes", id: "episodes"}, e.pairs.map(pair));
    const only = el("label", {class: "small"}, el("input", {type: "checkbox", id: "episodes-changed-only",
      onchange: (ev) => list.classList.toggle("changed-only", ev.target.checked)}),
      " only the episodes whose verdict changed (" + changed + ")");
    const sec = WAI.section("Held-out episodes", el("p", {id: "episodes-summary"}, said),
      e.left_out ? el("p", {class: "muted small", id: "episodes-left-out"}, e.left_out + (e.left_out === 1 ?
        " more episode was" : " more episodes were") + " played but not kept in the run's record (its size cap " +
        "keeps changed verdicts first); the held-out figure above counts every one.") : null,
      el("div", {class: "controls"}, only), list);
    sec.id = "episodes-section";
    return sec;
  };
})();
