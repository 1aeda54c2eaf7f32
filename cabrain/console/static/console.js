// CaBrain console: small keyboard helpers. Pages work without this file.
"use strict";
document.addEventListener("keydown", (event) => {
  const target = event.target;
  const typing = target instanceof HTMLInputElement || target instanceof HTMLSelectElement || target instanceof HTMLTextAreaElement;
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === "/") {  // "/" focuses the page's first text field (the query, the source filter)
    const field = document.querySelector("main input[name=q], main input[type=text], main input:not([type])");
    if (field) { event.preventDefault(); field.focus(); }
  } else if (event.key === "n") {  // "n": the next page of a list
    const next = document.getElementById("next-page");
    if (next) next.click();
  }
});
