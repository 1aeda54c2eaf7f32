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

// The entity graph: nodes and edges from the page's graph.json, laid out by a force simulation
// whose repulsion only looks at neighbouring grid cells (linear in the nodes, so thousands stay
// smooth), drawn on a canvas. Text is drawn as text (fillText) and listed with textContent only.
(function () {
  const canvas = document.getElementById("graph");
  if (!canvas) return;
  const status = document.getElementById("graph-status");
  const list = document.getElementById("graph-list");
  const namespace = canvas.dataset.namespace;
  const ctx = canvas.getContext("2d");
  let nodes = [], edges = [], byId = new Map();
  let view = { x: 0, y: 0, k: 1 }, hover = null, ticks = 0;

  function href(node) {
    return node.kind === "entity"
      ? "/console/entity?namespace=" + encodeURIComponent(namespace) + "&name=" + encodeURIComponent(node.ref)
      : "/console/memories/" + encodeURIComponent(node.ref);
  }

  function resize() {
    const ratio = window.devicePixelRatio || 1;
    canvas.width = canvas.clientWidth * ratio;
    canvas.height = canvas.clientHeight * ratio;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }

  function step() {
    const cell = 80, grid = new Map();
    for (const n of nodes) {
      const key = Math.floor(n.x / cell) + "," + Math.floor(n.y / cell);
      if (!grid.has(key)) grid.set(key, []);
      grid.get(key).push(n);
    }
    for (const n of nodes) {
      const cx = Math.floor(n.x / cell), cy = Math.floor(n.y / cell);
      for (let dx = -1; dx <= 1; dx++) for (let dy = -1; dy <= 1; dy++) {
        const near = grid.get((cx + dx) + "," + (cy + dy));
        if (!near) continue;
        for (const m of near) {
          if (m === n) continue;
          let ex = n.x - m.x, ey = n.y - m.y, d2 = ex * ex + ey * ey || 0.01;
          if (d2 > cell * cell) continue;
          const f = 120 / d2;
          n.vx += ex * f; n.vy += ey * f;
        }
      }
      n.vx -= n.x * 0.002; n.vy -= n.y * 0.002;  // a little gravity to the middle
    }
    for (const e of edges) {
      const a = e.a, b = e.b, ex = b.x - a.x, ey = b.y - a.y;
      const d = Math.sqrt(ex * ex + ey * ey) || 0.01, f = (d - 50) * 0.02;
      a.vx += ex / d * f; a.vy += ey / d * f; b.vx -= ex / d * f; b.vy -= ey / d * f;
    }
    for (const n of nodes) {
      if (n.fixed) { n.vx = n.vy = 0; continue; }
      n.vx *= 0.6; n.vy *= 0.6;
      n.x += Math.max(-20, Math.min(20, n.vx)); n.y += Math.max(-20, Math.min(20, n.vy));
    }
  }

  function draw() {
    const w = canvas.clientWidth, h = canvas.clientHeight;
    ctx.clearRect(0, 0, w, h);
    ctx.save();
    ctx.translate(w / 2 + view.x, h / 2 + view.y);
    ctx.scale(view.k, view.k);
    ctx.strokeStyle = "rgba(90,100,110,0.25)";
    ctx.lineWidth = 1 / view.k;
    ctx.beginPath();
    for (const e of edges) { ctx.moveTo(e.a.x, e.a.y); ctx.lineTo(e.b.x, e.b.y); }
    ctx.stroke();
    for (const n of nodes) {
      ctx.fillStyle = n.center ? "#b3261e" : n.kind === "entity" ? "#0b5cad" : "#8a96a0";
      ctx.beginPath();
      ctx.arc(n.x, n.y, (n.kind === "entity" ? 6 : 3.5) / Math.sqrt(view.k), 0, 2 * Math.PI);
      ctx.fill();
    }
    ctx.fillStyle = "#1d2327";
    ctx.font = (12 / view.k) + "px system-ui, sans-serif";
    const labelAll = nodes.length < 150 || view.k > 1.5;
    for (const n of nodes) {
      if (n.kind === "entity" && (labelAll || n.center)) ctx.fillText(n.label, n.x + 8 / view.k, n.y + 4 / view.k);
    }
    if (hover) {
      ctx.fillStyle = "#000";
      ctx.fillText(hover.label.slice(0, 120), hover.x + 8 / view.k, hover.y - 8 / view.k);
    }
    ctx.restore();
  }

  function animate() {
    for (let i = 0; i < 5 && ticks < 400; i++, ticks++) step();
    draw();
    if (ticks < 400) requestAnimationFrame(animate);
  }

  function at(event) {
    const r = canvas.getBoundingClientRect();
    const x = (event.clientX - r.left - r.width / 2 - view.x) / view.k;
    const y = (event.clientY - r.top - r.height / 2 - view.y) / view.k;
    let best = null, bestD = (10 / view.k) ** 2;
    for (const n of nodes) {
      const d = (n.x - x) ** 2 + (n.y - y) ** 2;
      if (d < bestD) { best = n; bestD = d; }
    }
    return best;
  }

  let drag = null, moved = false;
  canvas.addEventListener("pointerdown", (e) => { drag = { x: e.clientX, y: e.clientY }; moved = false; canvas.setPointerCapture(e.pointerId); });
  canvas.addEventListener("pointermove", (e) => {
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 2) moved = true;
      view.x += dx; view.y += dy; drag = { x: e.clientX, y: e.clientY }; draw();
    } else {
      const found = at(e);
      if (found !== hover) { hover = found; canvas.style.cursor = found ? "pointer" : "grab"; draw(); }
    }
  });
  canvas.addEventListener("pointerup", (e) => {
    drag = null;
    if (!moved) { const found = at(e); if (found) window.location.href = href(found); }
  });
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    view.k = Math.max(0.1, Math.min(8, view.k * (e.deltaY < 0 ? 1.15 : 1 / 1.15)));
    draw();
  }, { passive: false });
  window.addEventListener("resize", () => { resize(); draw(); });

  fetch(canvas.dataset.src, { credentials: "same-origin" })
    .then((r) => r.ok ? r.json() : Promise.reject(new Error("the graph could not be loaded (" + r.status + ")")))
    .then((data) => {
      nodes = data.nodes.map((n, i) => {
        const angle = i * 2.399963, radius = 10 * Math.sqrt(i);  // a sunflower: even and deterministic
        return Object.assign({}, n, { x: radius * Math.cos(angle), y: radius * Math.sin(angle), vx: 0, vy: 0 });
      });
      byId = new Map(nodes.map((n) => [n.id, n]));
      const center = byId.get(data.center);
      if (center) { center.center = true; center.fixed = true; center.x = center.y = 0; }
      edges = data.edges.map((e) => ({ a: byId.get(e.source), b: byId.get(e.target) })).filter((e) => e.a && e.b);
      const entities = nodes.filter((n) => n.kind === "entity").length;
      status.textContent = entities + " entities, " + (nodes.length - entities) + " memories, " + edges.length + " links";
      canvas.dataset.nodes = String(nodes.length);
      for (const n of nodes) {
        const li = document.createElement("li"), a = document.createElement("a");
        a.href = href(n); a.textContent = (n.kind === "entity" ? "entity: " : "memory: ") + n.label;
        a.dir = "auto"; li.appendChild(a); list.appendChild(li);
      }
      resize();
      animate();
    })
    .catch((error) => { status.textContent = error.message; });
})();

// The capture feed: polls capture.json for what was stored since the newest item shown and adds it
// on top, built with text nodes only (the [REDACTED] marks included).
(function () {
  const feed = document.getElementById("feed");
  if (!feed) return;
  const status = document.getElementById("feed-status");
  const marker = feed.dataset.marker;
  let since = feed.dataset.since;

  function render(item) {
    const li = document.createElement("li"), p = document.createElement("p"), meta = document.createElement("p");
    li.className = "memory fresh"; li.dataset.id = item.id;
    p.className = "content"; p.dir = "auto";
    item.content.split(marker).forEach((part, i, parts) => {
      p.appendChild(document.createTextNode(part));
      if (i < parts.length - 1) {
        const mark = document.createElement("mark");
        mark.className = "redacted"; mark.textContent = marker; p.appendChild(mark);
      }
    });
    const link = document.createElement("a");
    link.href = "/console/memories/" + encodeURIComponent(item.id);
    link.textContent = item.valid_at.replace("T", " ").slice(0, 19) + " UTC";
    meta.className = "meta";
    meta.appendChild(link);
    meta.appendChild(document.createTextNode(" · session " + (item.session || "-") + (item.hook ? " · " + item.hook : "")));
    li.appendChild(p); li.appendChild(meta);
    return li;
  }

  async function poll() {
    const query = new URLSearchParams({ namespace: feed.dataset.namespace, since: since });
    if (feed.dataset.session) query.set("session", feed.dataset.session);
    try {
      const response = await fetch("/console/capture.json?" + query.toString(), { credentials: "same-origin" });
      if (!response.ok) throw new Error("the feed answered " + response.status);
      const data = await response.json();
      const fresh = data.items.filter((item) => !feed.querySelector('li[data-id="' + CSS.escape(item.id) + '"]'));
      for (const item of fresh.reverse()) feed.insertBefore(render(item), feed.firstChild);
      if (data.items.length) since = data.items[0].valid_at;
      if (fresh.length) { const empty = document.getElementById("empty"); if (empty) empty.remove(); }
      status.textContent = "Live: checked " + new Date().toLocaleTimeString() + (fresh.length ? ", " + fresh.length + " new" : "");
    } catch (error) {
      status.textContent = "Live updates paused: " + error.message;
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();

// Live findings (the pushes page): the brain's events, as the signed-in agent may see them, over
// server-sent events. Text only (textContent): an event's words never become markup.
(function () {
  const list = document.getElementById("findings");
  if (!list || !window.EventSource) return;
  const status = document.getElementById("findings-status");
  const source = new EventSource(list.dataset.src);
  function show(event) {
    const data = JSON.parse(event.data);
    if (data.kind === "gap") return;
    const li = document.createElement("li");
    li.dataset.kind = data.kind;
    const head = document.createElement("p");
    head.textContent = data.kind + " in " + data.namespace + (data.title ? ": " + data.title : "");
    li.appendChild(head);
    for (const memory of data.memories || []) {
      const line = document.createElement("p");
      line.className = "meta";
      const link = document.createElement("a");
      link.href = "/console/memories/" + encodeURIComponent(memory.id);
      link.textContent = memory.current ? "now" : "was";
      line.appendChild(link);
      line.appendChild(document.createTextNode(": " + memory.content));
      li.appendChild(line);
    }
    list.insertBefore(li, list.firstChild);
    const empty = document.getElementById("findings-empty");
    if (empty) empty.remove();
  }
  for (const kind of ["contradiction", "stale", "pattern", "issue_filed", "issue_linked", "action_pending", "reply"]) {
    source.addEventListener(kind, show);
  }
  source.onopen = function () { if (status) status.textContent = "Live: connected"; };
  source.onerror = function () { if (status) status.textContent = "Live: reconnecting"; };
})();
