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

// ==== The entity graph (issue 36, entities) ==========================================================
// Nodes and edges from the page's graph.json, laid out by a force simulation whose repulsion only
// looks at neighbouring grid cells (linear in the nodes, so thousands stay smooth), drawn on a canvas
// fitted to the nodes' bounding box (refitted on resize until the person pans or zooms). Labels are
// drawn as text (fillText) and listed with textContent only. Colours come from the page's CSS
// variables (dark mode). Keyboard: arrow keys move the selection to the nearest node that way, Enter
// opens it, + and - zoom, 0 fits again. Each node's place on the canvas (CSS pixels) is kept on its
// item of the text list (data-x, data-y) and the selection on the canvas (data-selected).
(function () {
  const canvas = document.getElementById("graph");
  if (!canvas) return;
  const status = document.getElementById("graph-status");
  const list = document.getElementById("graph-list");
  const edgeList = document.getElementById("graph-edges");
  const namespace = canvas.dataset.namespace;
  const ctx = canvas.getContext("2d");
  const PAD = 24, LABEL = 28;  // px kept free at the edges; characters of a label drawn
  let nodes = [], edges = [], byId = new Map(), items = new Map();
  let view = { x: 0, y: 0, k: 1 }, fitted = true, hover = null, selected = null, ticks = 0;

  function colour(name, fallback) {
    const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return value || fallback;
  }
  function palette() {
    return {
      edge: colour("--graph-edge", "rgba(90,100,110,0.35)"), center: colour("--graph-center", "#b3261e"),
      entity: colour("--graph-entity", "#0b5cad"), memory: colour("--graph-memory", "#8a96a0"),
      label: colour("--graph-label", colour("--fg", "#1d2327")), focus: colour("--accent", "#0b5cad"),
    };
  }
  function short(text) {  // a label as drawn: shorter on a narrow canvas
    const most = canvas.clientWidth < 500 ? LABEL / 2 : LABEL;
    return text.length > most ? text.slice(0, most - 1) + "…" : text;
  }
  function href(node) {
    return node.kind === "entity"
      ? "/console/entity?namespace=" + encodeURIComponent(namespace) + "&name=" + encodeURIComponent(node.ref)
      : "/console/memories/" + encodeURIComponent(node.ref);
  }
  function screen(n) {
    return { x: canvas.clientWidth / 2 + view.x + n.x * view.k, y: canvas.clientHeight / 2 + view.y + n.y * view.k };
  }

  function resize() {
    const ratio = window.devicePixelRatio || 1;
    canvas.width = canvas.clientWidth * ratio;
    canvas.height = canvas.clientHeight * ratio;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }

  function fit() {  // every node and its label inside the canvas, the entity itself in the middle
    if (!nodes.length) return;
    let left = 1, right = 1, up = 1, room = 0;
    ctx.font = "600 12px system-ui, sans-serif";
    for (const n of nodes) {
      left = Math.max(left, -n.x); right = Math.max(right, n.x); up = Math.max(up, Math.abs(n.y));
      room = Math.max(room, ctx.measureText(short(n.label)).width + 12);
    }
    const halfW = canvas.clientWidth / 2 - PAD, halfH = canvas.clientHeight / 2 - PAD;
    room = Math.min(room, halfW * 0.6);
    view.k = Math.max(0.02, Math.min(3, (halfW - room) / right, halfW / left, halfH / up));
    view.x = view.y = 0;
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
          const ex = n.x - m.x, ey = n.y - m.y, d2 = ex * ex + ey * ey || 0.01;
          if (d2 > cell * cell) continue;
          const f = 120 / d2;
          n.vx += ex * f; n.vy += ey * f;
        }
      }
      n.vx -= n.x * 0.002; n.vy -= n.y * 0.002;  // a little gravity to the middle
    }
    for (const e of edges) {
      const a = e.a, b = e.b, ex = b.x - a.x, ey = b.y - a.y;
      const d = Math.sqrt(ex * ex + ey * ey) || 0.01, f = (d - (e.together ? 90 : 50)) * (e.together ? 0.005 : 0.02);
      a.vx += ex / d * f; a.vy += ey / d * f; b.vx -= ex / d * f; b.vy -= ey / d * f;
    }
    for (const n of nodes) {
      if (n.fixed) { n.vx = n.vy = 0; continue; }
      n.vx *= 0.6; n.vy *= 0.6;
      n.x += Math.max(-20, Math.min(20, n.vx)); n.y += Math.max(-20, Math.min(20, n.vy));
    }
  }

  function draw() {
    const w = canvas.clientWidth, h = canvas.clientHeight, c = palette();
    if (fitted) fit();
    ctx.clearRect(0, 0, w, h);
    ctx.save();
    ctx.translate(w / 2 + view.x, h / 2 + view.y);
    ctx.scale(view.k, view.k);
    ctx.strokeStyle = c.edge;
    for (const e of edges) {
      ctx.lineWidth = (e.together ? 1.5 + Math.min(6, Math.log2(1 + e.weight)) : 1) / view.k;
      ctx.beginPath(); ctx.moveTo(e.a.x, e.a.y); ctx.lineTo(e.b.x, e.b.y); ctx.stroke();
    }
    for (const n of nodes) {
      ctx.fillStyle = n.center ? c.center : n.kind === "entity" ? c.entity : c.memory;
      ctx.beginPath();
      if (n.kind === "entity") ctx.arc(n.x, n.y, 7 / view.k, 0, 2 * Math.PI);
      else ctx.rect(n.x - 4 / view.k, n.y - 4 / view.k, 8 / view.k, 8 / view.k);
      ctx.fill();
      if (n === selected) {
        ctx.strokeStyle = c.focus; ctx.lineWidth = 3 / view.k;
        ctx.beginPath(); ctx.arc(n.x, n.y, 12 / view.k, 0, 2 * Math.PI); ctx.stroke();
        ctx.strokeStyle = c.edge;
      }
    }
    ctx.fillStyle = c.label;
    // Labels, the most telling first (the entity, the selection, the hovered node, the most linked
    // entities, other entities, memories), each cut to end inside the canvas and left out where it would
    // cover one already placed: a thousand-node graph stays readable.
    const labels = new Map();  // node -> [text, where it ends on screen]
    const placed = [], memories = nodes.length < 150 || view.k > 1.5;  // a big graph's memories: zoom in
    for (const n of ranked()) {
      if (n.kind !== "entity" && !memories && n !== selected && n !== hover) continue;
      ctx.font = (n.kind === "entity" ? "600 " : "") + "12px system-ui, sans-serif";
      const p = screen(n), start = p.x + 10, room = w - 4 - start;
      let text = n === hover || n === selected ? n.label.slice(0, 120) : short(n.label);
      while (text.length > 1 && ctx.measureText(text).width > room) text = text.slice(0, -2) + "…";
      const width = ctx.measureText(text).width;
      if (width > room) continue;
      const box = [start, p.y - 9, start + width, p.y + 5];
      const must = n.center || n === selected || n === hover;
      if (!must && placed.some((b) => box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3])) continue;
      placed.push(box);
      labels.set(n, [text, start + width]);
    }
    for (const [n, [text]] of labels) {
      ctx.font = (n.kind === "entity" ? "600 " : "") + (12 / view.k) + "px system-ui, sans-serif";
      ctx.fillText(text, n.x + 10 / view.k, n.y + 4 / view.k);
    }
    ctx.restore();
    canvas.dataset.labels = String(labels.size);
    if (ticks < 400) return;  // settled: where each node (and its label's end) is on the canvas, in CSS px
    for (const n of nodes) {
      const p = screen(n), li = items.get(n.id);
      if (!li) continue;
      li.dataset.x = p.x.toFixed(1); li.dataset.y = p.y.toFixed(1);
      li.dataset.right = labels.has(n) ? labels.get(n)[1].toFixed(1) : li.dataset.x;
    }
  }

  function ranked() {  // the nodes by how much their label tells
    const rank = (n) => (n.center || n === selected || n === hover ? 0 : n.kind === "entity" ? 1 : 2);
    return nodes.slice().sort((a, b) => rank(a) - rank(b) || b.degree - a.degree);
  }

  function animate() {
    for (let i = 0; i < 5 && ticks < 400; i++, ticks++) step();
    draw();
    if (ticks < 400) requestAnimationFrame(animate);
    else canvas.dataset.settled = "true";
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

  function select(n) {
    selected = n;
    canvas.dataset.selected = n ? n.id : "";
    if (n) status.textContent = (n.kind === "entity" ? "Entity: " : "Memory: ") + n.label.slice(0, 200) + " (Enter opens it)";
    draw();
  }

  function nearest(dx, dy) {  // the closest node in the direction (dx, dy) on screen from the selection
    if (!selected) return byId.get(canvas.dataset.center) || nodes[0];
    const from = screen(selected);
    let best = null, bestScore = Infinity;
    for (const n of nodes) {
      if (n === selected) continue;
      const p = screen(n), ex = p.x - from.x, ey = p.y - from.y, along = ex * dx + ey * dy;
      if (along <= 0) continue;
      const across = Math.abs(ex * dy - ey * dx), score = along + 2 * across;
      if (score < bestScore) { best = n; bestScore = score; }
    }
    return best || selected;
  }

  function zoom(factor) {
    fitted = false;
    view.k = Math.max(0.1, Math.min(8, view.k * factor));
    draw();
  }

  canvas.addEventListener("keydown", (e) => {
    const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    if (moves[e.key]) { e.preventDefault(); select(nearest(moves[e.key][0], moves[e.key][1])); }
    else if (e.key === "Enter" && selected) { e.preventDefault(); window.location.href = href(selected); }
    else if (e.key === "+" || e.key === "=") { e.preventDefault(); zoom(1.25); }
    else if (e.key === "-") { e.preventDefault(); zoom(1 / 1.25); }
    else if (e.key === "0") { e.preventDefault(); fitted = true; draw(); }
  });
  canvas.addEventListener("focus", () => { if (!selected && nodes.length) select(nearest(0, 0)); });

  let drag = null, moved = false;
  canvas.addEventListener("pointerdown", (e) => { drag = { x: e.clientX, y: e.clientY }; moved = false; canvas.setPointerCapture(e.pointerId); });
  canvas.addEventListener("pointermove", (e) => {
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 2) { moved = true; fitted = false; }
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
  canvas.addEventListener("wheel", (e) => { e.preventDefault(); zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15); }, { passive: false });
  window.addEventListener("resize", () => { resize(); draw(); });
  if (window.matchMedia) window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", draw);

  fetch(canvas.dataset.src, { credentials: "same-origin" })
    .then((r) => r.ok ? r.json() : Promise.reject(new Error("the graph could not be loaded (" + r.status + ")")))
    .then((data) => {
      nodes = data.nodes.map((n, i) => {
        const angle = i * 2.399963, radius = 10 * Math.sqrt(i);  // a sunflower: even and deterministic
        return Object.assign({}, n, { x: radius * Math.cos(angle), y: radius * Math.sin(angle), vx: 0, vy: 0 });
      });
      byId = new Map(nodes.map((n) => [n.id, n]));
      canvas.dataset.center = data.center;
      const center = byId.get(data.center);
      if (center) { center.center = true; center.fixed = true; center.x = center.y = 0; }
      edges = data.edges.map((e) => ({ a: byId.get(e.source), b: byId.get(e.target), together: e.kind !== "mentions", weight: e.weight || 1 }))
        .filter((e) => e.a && e.b);
      for (const n of nodes) n.degree = 0;
      for (const e of edges) { e.a.degree++; e.b.degree++; }
      const entities = nodes.filter((n) => n.kind === "entity").length, together = edges.filter((e) => e.together);
      status.textContent = entities + " entities, " + (nodes.length - entities) + " memories, " + edges.length + " links";
      canvas.dataset.nodes = String(nodes.length);
      const mentions = new Map();  // memory -> the entities it mentions (its edges, said in words)
      for (const e of edges) if (!e.together) mentions.set(e.a.id, (mentions.get(e.a.id) || []).concat([e.b.label]));
      for (const n of nodes) {
        const li = document.createElement("li"), a = document.createElement("a");
        a.href = href(n); a.textContent = (n.kind === "entity" ? "entity: " : "memory: ") + n.label;
        a.dir = "auto"; li.dataset.id = n.id; li.appendChild(a); list.appendChild(li); items.set(n.id, li);
        if (mentions.has(n.id)) li.appendChild(document.createTextNode(" (mentions " + mentions.get(n.id).join(", ") + ")"));
      }
      for (const e of together) {
        const li = document.createElement("li");
        li.className = "together";
        li.textContent = e.a.label + " and " + e.b.label + ": mentioned together " + e.weight + " time" + (e.weight === 1 ? "" : "s");
        edgeList.appendChild(li);
      }
      resize();
      animate();
    })
    .catch((error) => { status.textContent = error.message; });
})();
// ==== end of the entity graph ========================================================================

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

// --- Import/export (the transfer page): the upload sent with XMLHttpRequest, its progress drawn
// from the upload's events; the server is asked for the import's progress too (one JSON event a
// line as it runs: a count's "what", "done", "total" and "unit"), drawn on the same bar, and its
// last line is the page the form would have answered, whose main part (the summary, or the refusal
// with the form as it was sent) replaces the page's. A refusal before the import starts comes back
// as that page itself. Without this script the form posts as it is. The answer is parsed with
// DOMParser, which runs none of it.
(function () {
  const STREAM = "application/x-ndjson";
  function wire() {
    const form = document.getElementById("import-form");
    if (!form || !window.FormData || !window.XMLHttpRequest || !window.DOMParser) return;
    const box = document.getElementById("upload-progress");
    const bar = document.getElementById("upload-bar");
    const status = document.getElementById("upload-status");
    const button = form.querySelector("button[type=submit]");
    function failed(message) {
      status.textContent = "The import failed: " + message;
      bar.value = 0;
      button.disabled = false;
    }
    function showPage(html) {
      const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
      const main = document.getElementById("main");
      if (!fresh || !main) return false;
      main.replaceWith(document.importNode(fresh, true));
      wire();
      const said = document.getElementById("import-summary") || document.getElementById("transfer-error");
      if (said) { said.tabIndex = -1; said.focus(); }
      return true;
    }
    function showEvent(event) {
      if (typeof event.done === "number") {
        const unit = event.unit || "items";
        if (typeof event.total === "number" && event.total > 0) {
          bar.max = event.total;
          bar.value = Math.min(event.done, event.total);
          status.textContent = event.what + ": " + event.done.toLocaleString() + " of " +
            event.total.toLocaleString() + " " + unit;
        } else {
          bar.removeAttribute("value");
          status.textContent = event.what + ": " + event.done.toLocaleString() + " " + unit;
        }
      } else if (typeof event.line === "string") {
        status.textContent = event.line;
      }
    }
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", STREAM + ", text/html");
      xhr.responseType = "text";
      box.hidden = false;
      bar.max = 100;
      bar.value = 0;
      status.textContent = "Uploading…";
      button.disabled = true;
      let read = 0;  // how much of the answer's text is read as events
      let last = null;  // the answer's last event: the page, or why it failed
      function readEvents() {
        if (!(xhr.getResponseHeader("Content-Type") || "").startsWith(STREAM)) return;
        const text = xhr.responseText;
        let end;
        while ((end = text.indexOf("\n", read)) !== -1) {
          const line = text.slice(read, end);
          read = end + 1;
          if (!line) continue;
          let parsed;
          try { parsed = JSON.parse(line); } catch (_) { continue; }
          if ("status" in parsed) last = parsed; else showEvent(parsed);
        }
      }
      xhr.upload.addEventListener("progress", (e) => {
        if (!e.lengthComputable) return;
        bar.value = Math.round((100 * e.loaded) / e.total);
        status.textContent = "Uploading… " + bar.value + "%";
      });
      xhr.upload.addEventListener("load", () => {
        bar.removeAttribute("value");  // indeterminate until the server says how far the import is
        status.textContent = "Uploaded; importing…";
      });
      xhr.addEventListener("progress", readEvents);
      xhr.addEventListener("load", () => {
        const type = xhr.getResponseHeader("Content-Type") || "";
        if (type.startsWith(STREAM)) {
          readEvents();
          if (last && last.html && showPage(last.html)) return;
          failed(last && last.message ? last.message : "the server's answer ended early");
          return;
        }
        if (type.startsWith("text/html") && showPage(xhr.responseText)) return;
        let message = "the server answered " + xhr.status;
        try { message = JSON.parse(xhr.responseText).error.message || message; } catch (_) { /* not JSON */ }
        failed(message);
      });
      xhr.addEventListener("error", () => {
        status.textContent = "The upload failed: the connection to the server was lost.";
        bar.value = 0;
        button.disabled = false;
      });
      xhr.send(new FormData(form));
    });
  }
  wire();
})();
// --- end of import/export ---
