// The live job board: polls GET /board about once a second and renders its columns.
// Each card's status, attempt label and column come from the API (workflows/jobstatus.py,
// the one rule): nothing here decides a status or counts attempts. The event log is derived
// here, in the browser, by diffing successive snapshots: it covers the cards the board shows
// (each column's 50 newest), not every job on the server.
"use strict";
(() => {
  const TOKEN_KEY = "jobs.board.token";
  const POLL_MS = 1000;
  const MAX_EVENTS = 300;
  const MEMORY = 5000; // jobs remembered for the diff, so one that leaves and returns is no newcomer
  const COLUMNS = ["scheduled", "pending", "running", "retrying", "dead", "done", "cancelled"];

  const $ = (selector, root = document) => root.querySelector(selector);
  let skew = 0; // the server's clock minus ours, in ms
  let snapshot = null;
  let seen = null; // job id -> what it looked like last time (column, attempt, ...)
  let openapi = null; // Promise of the API's OpenAPI document (to see which actions take a note)
  let polling = false;
  let again = false;
  let timer = 0;
  const cards = new Map(); // job id -> {sig, node}: unchanged cards keep their DOM node

  // -- HTTP -------------------------------------------------------------------------------

  const token = () => localStorage.getItem(TOKEN_KEY) || "";

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (token()) headers.Authorization = `Bearer ${token()}`;
    const init = { method, headers };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = text;
    }
    if (response.status === 401) {
      banner("This API needs a bearer token: enter it above (it stays in this browser's localStorage).");
      $("#token").focus();
    }
    return { status: response.status, ok: response.ok, data };
  }

  function problem(answer) {
    const detail = answer.data && answer.data.detail;
    if (Array.isArray(detail)) return detail.map((p) => `${p.field}: ${p.reason}`).join("; ");
    if (typeof detail === "string") return detail;
    return `HTTP ${answer.status}`;
  }

  function banner(text) {
    const node = $("#banner");
    node.textContent = text || "";
    node.hidden = !text;
  }

  function say(text, error = false) {
    const node = $("#form-message");
    node.textContent = text;
    node.className = error ? "error" : "";
  }

  // -- time -------------------------------------------------------------------------------

  const serverNow = () => Date.now() + skew;

  function span(ms) {
    const s = Math.abs(ms) / 1000;
    if (s < 10) return `${s.toFixed(1)}s`;
    if (s < 120) return `${Math.round(s)}s`;
    if (s < 7200) return `${Math.round(s / 60)}m`;
    if (s < 172800) return `${Math.round(s / 3600)}h`;
    return `${Math.round(s / 86400)}d`;
  }

  function relative(iso, mode) {
    const delta = Date.parse(iso) - serverNow();
    if (mode === "in") return delta > 0 ? `in ${span(delta)}` : "now";
    if (mode === "ago") return delta < 0 ? `${span(delta)} ago` : "just now";
    return delta >= 0 ? `in ${span(delta)}` : `${span(delta)} ago`;
  }

  const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });

  function tick() {
    for (const node of document.querySelectorAll("[data-at]")) {
      node.textContent = relative(node.dataset.at, node.dataset.mode);
    }
  }

  // -- DOM helpers (text only: job names never become markup) ------------------------------

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  const when = (iso, mode) =>
    el("span", { class: "t", "data-at": iso, "data-mode": mode, text: relative(iso, mode) });

  const of = (card) => card.attempt_label || "";

  function progressText(progress) {
    if (progress === undefined || progress === null) return "";
    if (typeof progress === "object" && "slept" in progress && "of" in progress) {
      return `progress ${progress.slept}/${progress.of}s`;
    }
    const text = JSON.stringify(progress);
    return `progress ${text.length > 60 ? `${text.slice(0, 59)}…` : text}`;
  }

  // -- cards ------------------------------------------------------------------------------

  const ACTIONS = {
    pause: { method: "POST", path: (id) => `/jobs/${id}/pause`, spec: "/jobs/{job_id}/pause" },
    resume: { method: "POST", path: (id) => `/jobs/${id}/resume`, spec: "/jobs/{job_id}/resume" },
    trigger: { method: "POST", path: (id) => `/jobs/${id}/trigger`, spec: "/jobs/{job_id}/trigger" },
    cancel: { method: "DELETE", path: (id) => `/jobs/${id}`, spec: "/jobs/{job_id}", confirm: true },
    requeue: { method: "POST", path: (id) => `/dlq/${id}/requeue`, spec: "/dlq/{job_id}/requeue" },
    discard: {
      method: "POST",
      path: (id) => `/dlq/${id}/discard`,
      spec: "/dlq/{job_id}/discard",
      confirm: true,
    },
  };

  function actionsFor(card) {
    switch (card.status) {
      case "scheduled":
        return ["pause", "trigger", "cancel"];
      case "paused":
        return ["resume", "trigger", "cancel"];
      case "pending":
      case "running":
      case "retrying":
        return ["cancel"];
      case "dead":
        return card.closed_at ? [] : ["requeue", "discard"];
      default:
        return [];
    }
  }

  function lines(card) {
    const out = [];
    const line = (...parts) => out.push(el("div", { class: "line" }, ...parts));
    const badge = (text) => el("span", { class: `badge ${text}`, text });
    switch (card.status) {
      case "paused":
        line(badge("paused"), " ", card.run_at ? (card.kind === "cron" ? "next slot " : "due ") : "",
          card.run_at ? when(card.run_at, "rel") : "");
        break;
      case "scheduled":
        if (card.run_at) line(card.kind === "cron" ? "next slot " : "runs ", when(card.run_at, "in"));
        break;
      case "pending":
        line(card.run_at ? "due " : "", card.run_at ? when(card.run_at, "ago") : "",
          of(card) ? ` · ${of(card)}` : "");
        line(el("span", { class: "muted", text: "waiting for a worker" }));
        break;
      case "running": {
        line(of(card) || "running", card.worker ? ` · ${card.worker}` : "");
        if (card.last_heartbeat_at) {
          line(el("span", { class: card.heartbeat_late ? "late" : "" }, "♥ ",
            when(card.last_heartbeat_at, "ago")), card.lease ? ` · lease ${card.lease}s` : "");
        }
        const progress = progressText(card.progress);
        if (progress) line(el("span", { class: "muted", text: progress }));
        break;
      }
      case "retrying":
        line(of(card), " ", card.next_attempt_at ? when(card.next_attempt_at, "in") : "");
        break;
      case "dead":
        line(card.attempts ? `${card.attempts} attempt(s)` : "",
          card.round && card.round > 1 ? ` · round ${card.round}` : "",
          card.parked_at ? " · parked " : "", card.parked_at ? when(card.parked_at, "ago") : "");
        break;
      case "done":
        if (card.closed_at) line("finished ", when(card.closed_at, "ago"));
        break;
      case "cancelling":
        if (of(card) || card.worker) line(of(card), card.worker ? ` · ${card.worker}` : "");
        line(badge("cancelling"), " ",
          card.cancel_within ? `reaches the handler within ~${card.cancel_within}s` : "settles shortly");
        break;
      case "cancelled":
      case "discarded":
        line(badge(card.status), card.closed_at ? " " : "", card.closed_at ? when(card.closed_at, "ago") : "");
        break;
      default:
        break;
    }
    if (card.detail) line(el("span", { class: "muted", text: card.detail }));
    if (card.last_error && card.status !== "done") {
      line(el("span", { class: "error", text: card.last_error }));
    }
    return out;
  }

  function webUi(card) {
    const ns = encodeURIComponent(snapshot.namespace);
    return `${snapshot.web_ui}/namespaces/${ns}/workflows/${encodeURIComponent(card.job_id)}`;
  }

  function buildCard(card) {
    const buttons = actionsFor(card).map((name) =>
      el("button", {
        type: "button",
        class: ACTIONS[name].confirm ? "danger" : "",
        "data-action": name,
        text: name[0].toUpperCase() + name.slice(1),
      }),
    );
    const node = el(
      "li",
      { class: "card", "data-job-id": card.job_id, "data-name": card.name, "data-status": card.status },
      el("div", { class: "title" },
        el("b", { text: card.name, title: card.name }),
        card.kind === "cron" ? el("span", { class: "badge", text: "cron" }) : null,
        el("a", { href: webUi(card), target: "_blank", rel: "noopener", title: "open in the Temporal Web UI", text: "Web UI ↗" })),
      el("div", { class: "id mono", text: card.job_id, title: card.job_id }),
      ...lines(card),
      buttons.length ? el("div", { class: "actions" }, ...buttons) : null,
    );
    node.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-action]");
      if (button) act(button.dataset.action, card);
    });
    return node;
  }

  function renderColumn(column, data) {
    const section = $(`.column[data-column="${column}"]`);
    section.querySelector(".count").textContent =
      `${data.exact === false ? "≥" : ""}${data.count.toLocaleString()}`;
    const list = section.querySelector(".cards");
    const nodes = data.cards.map((card) => {
      const sig = column + JSON.stringify(card);
      let hit = cards.get(card.job_id);
      if (!hit || hit.sig !== sig) {
        hit = { sig, node: buildCard(card) };
        cards.set(card.job_id, hit);
      }
      return hit.node;
    });
    const same =
      nodes.length === list.children.length && nodes.every((node, i) => list.children[i] === node);
    if (!same) list.replaceChildren(...nodes);
    let more = section.querySelector(".more");
    if (!more) {
      more = el("p", { class: "more" });
      section.append(more);
    }
    const hidden = data.count - data.cards.length;
    more.textContent = hidden > 0 ? `showing the ${data.cards.length} newest of ${data.count.toLocaleString()}` : "";
    more.hidden = hidden <= 0;
  }

  function render(board) {
    snapshot = board;
    for (const column of COLUMNS) renderColumn(column, board.columns[column]);
    const shown = new Set(COLUMNS.flatMap((c) => board.columns[c].cards.map((card) => card.job_id)));
    for (const id of cards.keys()) if (!shown.has(id)) cards.delete(id);
    $("#stat-done").textContent = board.columns.done.count.toLocaleString();
    $("#stat-dead").textContent = board.columns.dead.count.toLocaleString();
    $("#stat-flight").textContent = board.in_flight.toLocaleString();
    const cost = board.cost;
    $("#refresh").textContent =
      `updated ${clock(Date.parse(board.at))} · ${cost.rpcs} Temporal RPCs, ${Math.round(cost.ms)} ms` +
      (cost.cached ? " (shared snapshot)" : "");
  }

  // -- events: diff of successive snapshots ------------------------------------------------

  function logEvent(kind, card, text) {
    const item = el("li", {},
      el("span", { class: "time", text: clock(serverNow()) }),
      el("span", { class: `kind k-${kind.split(" ")[0]}`, text: kind }),
      card ? el("b", { text: card.name }) : null,
      card ? el("span", { class: "muted", text: ` ${card.job_id}` }) : null,
      text ? ` — ${text}` : "");
    item.dataset.kind = kind;
    if (card) item.dataset.jobId = card.job_id;
    const list = $("#events");
    list.prepend(item);
    while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  }

  const inText = (iso) => (iso ? relative(iso, "in") : "");

  // An attempt ended: named by the number and label the API gave it while it ran (or was
  // due); ``was`` is that earlier state (absent when this browser never saw it).
  function failed(card, was) {
    const error = card.last_error || "";
    const which = (was && was.label) || "an attempt";
    if (/heartbeat/i.test(error)) {
      logEvent("heartbeat lost", card, `${which}: no heartbeat within the lease`);
    } else {
      const kind = was && was.attempt ? `failed attempt ${was.attempt}` : "attempt failed";
      logEvent(kind, card, `${which}${error ? `: ${error}` : ""}`);
    }
  }

  function backingOff(card) {
    logEvent("backing off", card, `${of(card)} ${inText(card.next_attempt_at)}`.trim());
  }

  function arrived(card, was) {
    switch (card.status) {
      case "scheduled":
        logEvent("scheduled", card, card.run_at ? `${card.kind === "cron" ? "next slot" : "runs"} ${inText(card.run_at)}` : "");
        break;
      case "pending":
        logEvent("due", card, "waiting for a worker");
        break;
      case "running":
        logEvent("started", card, [of(card), card.worker].filter(Boolean).join(" on "));
        break;
      case "retrying":
        failed(card, was);
        backingOff(card);
        break;
      case "dead":
        logEvent("parked", card, `after ${card.attempts || "?"} attempt(s)${card.last_error ? `: ${card.last_error}` : ""}`);
        break;
      case "cancelling":
      case "cancelled":
      case "discarded":
      case "paused":
      case "done":
        logEvent(card.status, card, card.detail || "");
        break;
      default:
        break;
    }
  }

  function moved(was, card) {
    if (was.status === "dead" && card.status !== "discarded" && card.status !== "cancelled") {
      logEvent("requeued", card, "a fresh budget of attempts");
    }
    if (card.status === "retrying") {
      if (was.status !== "retrying") failed(card, was);
      backingOff(card);
      return;
    }
    if (was.status === "running" && (card.status === "dead" || card.status === "pending")) {
      failed(card, was);
    }
    if (was.status === "paused" && card.status === "scheduled") {
      logEvent("resumed", card, "");
      return;
    }
    arrived(card, was);
  }

  function diff(board) {
    const now = new Map();
    for (const column of COLUMNS) {
      for (const card of board.columns[column].cards) {
        now.set(card.job_id, {
          status: card.status,
          attempt: card.attempt || 0,
          label: card.attempt_label || "",
          late: !!card.heartbeat_late,
          round: card.round || 1,
          card,
        });
      }
    }
    if (seen === null) {
      seen = new Map(now);
      const total = COLUMNS.reduce((sum, c) => sum + board.columns[c].count, 0);
      logEvent("board", null, `${total.toLocaleString()} jobs; events below are what changes from now on`);
      return;
    }
    for (const [id, state] of now) {
      const was = seen.get(id);
      const card = state.card;
      const next = state.attempt !== was?.attempt && state.attempt > 0 && was?.attempt > 0;
      if (!was) arrived(card, null);
      else if (was.status !== state.status) moved(was, card);
      else if (state.status === "running" && next) {
        failed(card, was);
        arrived(card, was);
      } else if (state.status === "retrying" && next) {
        failed(card, was);
        backingOff(card);
      } else if (state.status === "dead" && state.round !== was.round) {
        logEvent("requeued", card, "");
        arrived(card, null);
      } else if (state.status === "running" && state.late && !was.late) {
        logEvent("heartbeat late", card, `nothing for over ${card.lease}s: the lease is running out`);
      }
      seen.delete(id);
      seen.set(id, state);
    }
    while (seen.size > MEMORY) seen.delete(seen.keys().next().value);
  }

  // -- actions ----------------------------------------------------------------------------

  function resolve(schema, doc, depth = 0) {
    if (!schema || typeof schema !== "object" || depth > 8) return false;
    if (schema.$ref) {
      const target = schema.$ref.replace(/^#\//, "").split("/").reduce((node, key) => node && node[key], doc);
      return resolve(target, doc, depth + 1);
    }
    if (schema.properties && "note" in schema.properties) return true;
    return ["anyOf", "oneOf", "allOf"].some((key) =>
      (schema[key] || []).some((part) => resolve(part, doc, depth + 1)));
  }

  async function takesNote(action) {
    if (!openapi) {
      openapi = api("GET", "/openapi.json").then((answer) => (answer.ok ? answer.data : null));
    }
    const doc = await openapi;
    if (!doc) {
      openapi = null; // try again next time (e.g. once a token is entered)
      return false;
    }
    const operation = ((doc.paths || {})[action.spec] || {})[action.method.toLowerCase()];
    const content = operation && operation.requestBody && operation.requestBody.content;
    const schema = content && content["application/json"] && content["application/json"].schema;
    return resolve(schema, doc);
  }

  async function act(name, card) {
    const action = ACTIONS[name];
    let body;
    if (await takesNote(action)) {
      const note = window.prompt(`${name} ${card.job_id}\nNote for the audit trail (optional):`, "");
      if (note === null) return;
      if (note.trim()) body = { note: note.trim() };
    } else if (action.confirm && !window.confirm(`${name} ${card.job_id}?`)) {
      return;
    }
    const answer = await api(action.method, action.path(encodeURIComponent(card.job_id)), body);
    if (answer.ok) {
      say(`${name}: ${card.job_id}`);
      logEvent(`you: ${name}`, card, body ? `note: ${body.note}` : "");
      refresh();
    } else {
      say(`${name} ${card.job_id} refused: ${problem(answer)}`, true);
    }
  }

  // -- the form ---------------------------------------------------------------------------

  const form = $("#job-form");
  const PRESETS = {
    poison: { name: "poison pill", kind: "delay", delay: 3, seconds: 1, failure: "poison", max_attempts: 5, backoff_base: 2 },
    flaky: { name: "flaky upload", kind: "delay", delay: 3, seconds: 1, failure: "flaky", fail_times: 2, max_attempts: 5, backoff_base: 2 },
    cron: { name: "heartbeat", kind: "cron", cron: "*/8 * * * * *", seconds: 0, failure: "succeed", max_attempts: 5, backoff_base: 2 },
  };

  function syncForm() {
    const kind = form.elements.kind.value;
    const failure = form.elements.failure.value;
    for (const node of form.querySelectorAll("[data-for]")) {
      const key = node.dataset.for;
      node.hidden = key === "flaky" ? failure !== "flaky" : key !== kind;
    }
  }

  function number(name) {
    const raw = form.elements[name].value.trim();
    return raw === "" ? undefined : Number(raw);
  }

  function spec() {
    const payload = { seconds: number("seconds") ?? 0 };
    const failure = form.elements.failure.value;
    if (failure === "flaky") payload.fail_times = number("fail_times") ?? 1;
    if (failure === "poison") payload.always_fail = true;
    const body = { name: form.elements.name.value.trim(), handler: "demo.sleep", payload };
    const maxAttempts = number("max_attempts");
    if (maxAttempts !== undefined) body.max_attempts = maxAttempts;
    const base = number("backoff_base");
    if (base !== undefined) {
      body.backoff_base = base;
      body.backoff_max = Math.max(300, base);
    }
    if (form.elements.kind.value === "cron") {
      body.cron = form.elements.cron.value.trim();
      body.timezone = form.elements.timezone.value.trim() || "UTC";
    } else {
      body.delay = number("delay") ?? 0;
    }
    return body;
  }

  form.addEventListener("change", syncForm);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = spec();
    const answer = await api("POST", "/jobs", body);
    if (answer.ok) {
      const id = answer.data.job_id;
      const next = answer.data.next_run_at;
      say(`scheduled ${id}${next ? `, next run ${clock(Date.parse(next))}` : ""}`);
      logEvent("you: add", { name: body.name, job_id: id }, body.cron ? `cron ${body.cron}` : `in ${body.delay}s`);
      refresh();
    } else {
      say(`not scheduled: ${problem(answer)}`, true);
    }
  });
  for (const button of form.querySelectorAll("[data-preset]")) {
    button.addEventListener("click", () => {
      for (const [key, value] of Object.entries(PRESETS[button.dataset.preset])) {
        form.elements[key].value = value;
      }
      syncForm();
    });
  }

  $("#token").value = token();
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("#token").value.trim();
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
    openapi = null;
    banner("");
    refresh();
  });

  // -- polling ----------------------------------------------------------------------------

  async function poll() {
    clearTimeout(timer);
    if (polling) {
      again = true;
      return;
    }
    polling = true;
    try {
      if (!document.hidden) {
        const answer = await api("GET", "/board");
        if (answer.ok) {
          skew = Date.parse(answer.data.at) - Date.now();
          banner("");
          diff(answer.data);
          render(answer.data);
        } else if (answer.status !== 401) {
          banner(`board unavailable: ${problem(answer)}; retrying…`);
        }
      }
    } catch (err) {
      banner(`API unreachable (${err.message}); retrying…`);
    } finally {
      polling = false;
      timer = setTimeout(poll, again ? 0 : POLL_MS);
      again = false;
    }
  }

  const refresh = () => poll();

  if (form.elements.timezone.value === "UTC") {
    try {
      form.elements.timezone.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    } catch {
      // keep UTC
    }
  }
  syncForm();
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) refresh();
  });
  setInterval(tick, 250);
  poll();
})();
