"use strict";
// The answer for a run, sweep or comparison that is not in the reader's account (404).
document.addEventListener("DOMContentLoaded", () => {
  const main = document.getElementById("main");
  main.replaceChildren(
    WAI.el("h1", {}, "Not found in this account"),
    WAI.el("p", {}, "Nothing with this id is in the account you are signed in to. ",
      WAI.el("a", {href: "/runs"}, "See your runs"), "."));
  document.title = "not found · whileai";
});
