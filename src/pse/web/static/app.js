// PSE dashboard: runs, a run's trace (live over SSE), metrics, evaluations. Plain DOM; model text only via textContent.
"use strict";

const OUTCOMES = ["PASSED", "ESCALATED", "ACCEPTED_BY_HUMAN", "TIMEOUT", "ERROR", "RUNNING"];
const ROLES = ["Planner", "Specialist", "Evaluator", "ToolAgent"];
const OUTCOME_COLOR = { PASSED: "#1a7f37", ESCALATED: "#b26a00", ACCEPTED_BY_HUMAN: "#0b6e99", TIMEOUT: "#7c3aed", ERROR: "#c62828" };
const view = document.getElementById("view");
let stopStream = null; // aborts the SSE fetch of the page being left
const roleShown = Object.fromEntries(ROLES.map((r) => [r, true]));

// ---- helpers ------------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  return node;
}
const badge = (text, cls) => h("span", { class: `badge ${cls || text}` }, text);
const fmtInt = (n) => Number(n || 0).toLocaleString("en-US");
const fmtCost = (n, cur) => `${Number(n || 0).toFixed(4)} ${cur || "USD"}`;
const fmtTime = (s) => (s ? new Date(s).toLocaleString() : "");

function notice(text) {
  const box = document.getElementById("notice");
  box.textContent = text || "";
  box.hidden = !text;
}

function token() { return sessionStorage.getItem("pse-token") || ""; }
function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  if (token()) headers.Authorization = `Bearer ${token()}`;
  return headers;
}

// Every state-changing call carries X-PSE-Request: a cross-site page cannot send a custom header
// without a CORS preflight, which the server never grants (see docs/web.md, Security).
async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = authHeaders(opts.headers);
  if (opts.method && opts.method !== "GET") opts.headers["X-PSE-Request"] = "1";
  const res = await fetch(path, opts);
  if (res.status === 401) {
    notice("This server needs an access token: paste PSE_WEB_TOKEN into the field at the top right.");
    throw new Error("unauthorized");
  }
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const detail = data && data.detail ? (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)) : res.statusText;
    throw new Error(`${res.status}: ${detail}`);
  }
  return data;
}

// SSE over fetch (EventSource cannot send the Authorization header, and a token in a URL leaks into logs).
async function streamEvents(runId, onEvent, signal) {
  const res = await fetch(`/api/runs/${encodeURIComponent(runId)}/events`, { headers: authHeaders(), signal });
  if (!res.ok) throw new Error(`events: HTTP ${res.status}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) onEvent(kind, JSON.parse(data));
    }
  }
}

// ---- runs page ---------------------------------------------------------------------------------

const listState = { offset: 0, limit: 25, task: "", outcome: "" };

async function showRuns() {
  const [tasks, held] = await Promise.all([api("/api/tasks"), api("/api/approvals")]);
  const form = startForm(tasks);
  const listPanel = h("section", { class: "panel", id: "runs-panel" });
  const parts = [h("h1", {}, "Runs"), pendingApprovalsPanel(held), h("div", { class: "grid2" }, form, listPanel)];
  view.replaceChildren(...parts.filter(Boolean));
  await renderRunList(listPanel, tasks);
}

// Held tool calls of every run that waits for a person (GET /api/approvals), each linked to its run.
function pendingApprovalsPanel(items) {
  if (!items || !items.length) return null;
  return h("section", { class: "panel", id: "approvals-pending" }, h("h2", {}, `Pending approvals (${items.length})`),
    h("div", { class: "scroll" }, h("table", {},
      h("thead", {}, h("tr", {}, ["run", "task", "held call", "held because", "since"].map((c) => h("th", {}, c)))),
      h("tbody", {}, items.map((a) => h("tr", { class: "approval-row", "data-approval": a.id },
        h("td", {}, h("a", { href: `#/run/${encodeURIComponent(a.run_id)}` }, a.run_id)),
        h("td", {}, a.task),
        h("td", {}, h("b", {}, a.id), ` ${a.requester} → ${a.tool}`),
        h("td", { class: "text" }, a.fired),
        h("td", {}, fmtTime(a.requested_at))))))));
}

function startForm(tasks) {
  const valid = tasks.filter((t) => t.valid);
  const taskSel = h("select", { id: "start-task", name: "task" }, valid.map((t) => h("option", { value: t.name }, t.name)));
  const desc = h("p", { class: "muted" });
  const inputsBox = h("div");
  const cassetteSel = h("select", { id: "start-cassette" });
  const provider = h("select", { id: "start-provider" },
    h("option", { value: "" }, "server default"), ["scripted", "openai", "ollama"].map((p) => h("option", { value: p }, p)));
  const model = h("input", { id: "start-model", placeholder: "server default" });
  const baseUrl = h("input", { id: "start-base-url", placeholder: "http://127.0.0.1:8000/v1 (loopback only)" });
  const status = h("p", { class: "muted", id: "start-status" });
  const refresh = () => {
    const t = valid.find((x) => x.name === taskSel.value);
    desc.textContent = t ? t.description : "";
    inputsBox.replaceChildren(...(t ? t.inputs : []).map((i) =>
      h("div", {}, h("label", { for: `in-${i.name}` }, `${i.name}${i.required ? " *" : ""}`),
        h("input", { id: `in-${i.name}`, "data-input": i.name, value: i.default || "", placeholder: i.description }))));
    cassetteSel.replaceChildren(h("option", { value: "" }, "task default"), ...(t ? t.cassettes : []).map((c) => h("option", { value: c }, c)));
  };
  taskSel.addEventListener("change", refresh);
  refresh();
  const submit = h("button", { type: "submit", id: "start-button" }, "Start run");
  const form = h("form", { class: "panel start", id: "start-form" },
    h("h2", {}, "Start a run"),
    h("label", { for: "start-task" }, "Task"), taskSel, desc, inputsBox,
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "start-provider" }, "Provider"), provider),
      h("div", {}, h("label", { for: "start-model" }, "Model"), model)),
    h("label", { for: "start-base-url" }, "Base URL"), baseUrl,
    h("label", { for: "start-cassette" }, "Cassette (scripted provider)"), cassetteSel,
    h("p", {}, submit), status);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const inputs = {};
    for (const field of inputsBox.querySelectorAll("[data-input]")) if (field.value) inputs[field.dataset.input] = field.value;
    const body = { task: taskSel.value, inputs };
    if (provider.value) body.provider = provider.value;
    if (model.value.trim()) body.model = model.value.trim();
    if (baseUrl.value.trim()) body.base_url = baseUrl.value.trim();
    if (cassetteSel.value) body.cassette = cassetteSel.value;
    submit.disabled = true;
    status.textContent = "starting…";
    try {
      const started = await api("/api/runs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      location.hash = `#/run/${encodeURIComponent(started.run_id)}`;
    } catch (err) {
      status.textContent = `could not start: ${err.message}`;
      submit.disabled = false;
    }
  });
  return form;
}

async function renderRunList(panel, tasks) {
  const q = new URLSearchParams({ offset: listState.offset, limit: listState.limit });
  if (listState.task) q.set("task", listState.task);
  if (listState.outcome) q.set("outcome", listState.outcome);
  const page = await api(`/api/runs?${q}`);
  const taskFilter = h("select", { id: "filter-task" }, h("option", { value: "" }, "all tasks"), tasks.map((t) => h("option", { value: t.name, selected: t.name === listState.task }, t.name)));
  const outcomeFilter = h("select", { id: "filter-outcome" }, h("option", { value: "" }, "all outcomes"), OUTCOMES.map((o) => h("option", { value: o, selected: o === listState.outcome }, o)));
  const onFilter = () => { listState.task = taskFilter.value; listState.outcome = outcomeFilter.value; listState.offset = 0; renderRunList(panel, tasks); };
  taskFilter.addEventListener("change", onFilter);
  outcomeFilter.addEventListener("change", onFilter);
  const rows = page.runs.map((r) => {
    const outcome = r.outcome || (r.state === "AWAITING_APPROVAL" ? "AWAITING_APPROVAL" : "RUNNING");
    return h("tr", { class: `run-row outcome-${outcome}` },
      h("td", {}, h("a", { href: `#/run/${encodeURIComponent(r.run_id)}` }, r.run_id)),
      h("td", {}, r.task),
      h("td", {}, badge(r.outcome || (r.state === "AWAITING_APPROVAL" ? "waiting for approval" : r.live ? "RUNNING" : r.state === "AWAITING_ANSWER" ? "waiting for answers" : "interrupted"), outcome)),
      h("td", { class: "num" }, r.cycles),
      h("td", { class: "num" }, fmtInt(r.tokens)),
      h("td", { class: "num" }, fmtCost(r.cost, r.currency)),
      h("td", {}, fmtTime(r.started_at)));
  });
  const last = Math.min(page.offset + page.limit, page.total);
  const prev = h("button", { class: "secondary", disabled: page.offset === 0, onclick: () => { listState.offset = Math.max(0, page.offset - page.limit); renderRunList(panel, tasks); } }, "‹ Newer");
  const next = h("button", { class: "secondary", disabled: last >= page.total, onclick: () => { listState.offset = page.offset + page.limit; renderRunList(panel, tasks); } }, "Older ›");
  panel.replaceChildren(
    h("h2", {}, "History"),
    h("div", { class: "filters" }, taskFilter, outcomeFilter, h("span", { class: "muted" }, `${page.total} run(s)`)),
    h("table", { id: "runs-table" },
      h("thead", {}, h("tr", {}, ["run", "task", "outcome", "cycles", "tokens", "cost", "started"].map((c) => h("th", { class: ["cycles", "tokens", "cost"].includes(c) ? "num" : null }, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "no runs yet: start one")))),
    h("div", { class: "pager" }, h("span", { class: "muted" }, page.total ? `${page.offset + 1}–${last} of ${page.total}` : ""), prev, next));
}

// ---- run page ----------------------------------------------------------------------------------

function emptyRun(trace) {
  return { run_id: trace.run_id, task: trace.task, started_at: trace.started_at, state: "START", outcome: null,
    outcome_reason: "", plan: null, cycles: [], tokens: null, cost: null, live: true, events: [], sandbox: trace.sandbox, approvals: [] };
}

function applyEvent(run, ev) {
  const cycle = () => run.cycles.find((c) => c.index === ev.cycle) || run.cycles[run.cycles.length - 1];
  switch (ev.kind) {
    case "cycle_start":
      run.cycles.push({ index: ev.cycle, kind: ev.cycle_kind, first_speaker: ev.first_speaker, messages: [], tool_calls: [], retrievals: [], verdict: null, gate: null, review_error: null, result: "RUNNING", result_reason: "" });
      break;
    case "message": cycle().messages.push(ev.message); break;
    case "tool_call": cycle().tool_calls.push(ev.call); break;
    case "retrieval": (cycle().retrievals ||= []).push(ev); break;
    case "drift": (cycle().drifts ||= []).push(ev.drift); break;
    case "format_repair": (cycle().repairs ||= []).push(ev.repair); break;
    case "verdict": {
      const c = cycle();
      Object.assign(c, { verdict: ev.verdict, gate: ev.gate, review_error: ev.error, stopped: ev.stopped, result: ev.verdict ? ev.verdict.status : "ERROR" });
      break;
    }
    case "transition": run.state = ev.transition.to; break;
    case "step": { // begun (result ""), then ended: the later record replaces the earlier
      const list = (cycle().steps ||= []);
      const at = list.findIndex((a) => a.step === ev.attempt.step && a.attempt === ev.attempt.attempt);
      if (at >= 0) list[at] = ev.attempt; else list.push(ev.attempt);
      break;
    }
    case "approval": { // held (no decision yet), then decided: the later record replaces the earlier
      const list = (run.approvals ||= []);
      const at = list.findIndex((a) => a.id === ev.approval.id);
      if (at >= 0) list[at] = ev.approval; else list.push(ev.approval);
      break;
    }
    case "outcome":
      Object.assign(run, { outcome: ev.outcome, outcome_reason: ev.reason, state: ev.outcome, cost: { amount: ev.cost, currency: ev.currency } });
      break;
  }
}

function eventLine(ev) {
  switch (ev.kind) {
    case "cycle_start": return `cycle ${ev.cycle} (${ev.cycle_kind}) starts with ${ev.first_speaker}`;
    case "message": return `${ev.message.source}: ${ev.message.content.replace(/\s+/g, " ").slice(0, 110)}`;
    case "tool_call": return `${ev.call.requester} → ${ev.call.tool}: ${ev.call.decision} ${ev.call.status} ${ev.call.ms}ms`;
    case "verdict": return ev.verdict ? `verdict ${ev.verdict.status} (${ev.verdict.reason_code})${ev.gate.passed ? "" : "; gate: " + ev.gate.failures.join("; ")}` : ev.stopped ? `no review: ${ev.stopped}` : `review error: ${ev.error}`;
    case "format_repair": return `format repair: ${ev.repair.role} asked again (attempt ${ev.repair.attempt}): ${ev.repair.error}`;
    case "retrieval": return `knowledge "${ev.query}": ${ev.results.length} result(s)${ev.results.length ? ", top " + citation(ev.results[0]) : ""}`;
    case "drift": return `replay drift: ${ev.drift.role} turn ${ev.drift.turn}, message ${ev.drift.message} (${ev.drift.speaker}): tool output differs from the recording`;
    case "transition": return `${ev.transition.from} → ${ev.transition.to} ${ev.transition.reason || ""}`;
    case "step": {
      const a = ev.attempt;
      return a.result ? `step ${a.step} attempt ${a.attempt}: ${a.result} (${a.result_reason})` : `step ${a.step} attempt ${a.attempt} started`;
    }
    case "approval": {
      const a = ev.approval;
      return a.decision ? `approval ${a.id} ${a.decision} by ${a.by} (${a.via})${a.reason ? ": " + a.reason : ""}`
        : `approval ${a.id} needed: ${a.requester} → ${a.tool} (${a.fired})`;
    }
    case "outcome": return `${ev.outcome}: ${ev.reason}`;
    default: return ev.kind;
  }
}

async function showRun(runId) {
  let trace = await api(`/api/runs/${encodeURIComponent(runId)}`);
  if (trace.outcome) {
    renderRun(Object.assign(trace, { live: false }), null);
    return;
  }
  const run = emptyRun(trace);
  const log = [];
  // A redraw is queued for the next frame; once the stream is over (or the page left) a frame that
  // fires late must not draw the streamed state over the final one (or over another page).
  let pending = false, over = false;
  const redraw = () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; if (!over) renderRun(run, log); }); } };
  // Events carry no plan: when a cycle's steps begin, the plan they follow is read once from the live
  // trace (a cycle's plan is in force as soon as the Planner gave it), so the Steps panel draws the graph.
  let planOf = null;
  const fetchPlan = (index) => {
    planOf = index;
    api(`/api/runs/${encodeURIComponent(runId)}`).then((t) => {
      const c = (t.cycles || []).find((x) => x.index === index);
      const plan = (c && c.plan) || t.plan;
      if (plan) { run.plan = plan; redraw(); }
    }).catch(() => {});
  };
  renderRun(run, log);
  const controller = new AbortController();
  stopStream = () => { over = true; controller.abort(); };
  try {
    await streamEvents(runId, (kind, data) => {
      if (kind === "end") { if (data.error) log.push({ kind: "end", text: data.error }); return; }
      applyEvent(run, data);
      if (kind === "step" && data.cycle !== planOf) fetchPlan(data.cycle);
      log.push({ kind, text: eventLine(data) });
      redraw();
    }, controller.signal);
  } catch (err) {
    if (controller.signal.aborted) return;
    notice(`live stream stopped: ${err.message}`);
  }
  over = true;
  trace = await api(`/api/runs/${encodeURIComponent(runId)}`);
  renderRun(Object.assign(trace, { live: false }), log);
}

function roleTokens(run) {
  if (run.tokens && run.tokens.by_role) return run.tokens.by_role;
  const out = {};
  for (const c of run.cycles) for (const m of c.messages) {
    if (m.source === "ToolAgent") continue;
    const t = (out[m.source] = out[m.source] || { prompt: 0, completion: 0, calls: 0 });
    t.prompt += m.prompt_tokens; t.completion += m.completion_tokens; t.calls += 1;
  }
  return out;
}

// Who wrote the tests a pytest run held, and how they ended: "Evaluator 3 passed · Specialist 1 failed".
function testAuthors(t) {
  const byAuthor = (t.facts || {}).by_author;
  if (!byAuthor || !Object.keys(byAuthor).length) return null;
  const parts = Object.entries(byAuthor).map(([who, n]) =>
    `${who} ${["passed", "failed", "errors", "skipped"].filter((k) => n[k]).map((k) => `${n[k]} ${k}`).join(", ") || "0 tests"}`);
  return h("div", { class: "muted test-authors" }, `tests by author: ${parts.join(" · ")}`);
}

function renderRun(run, log) {
  // A run held for approval waits in AWAITING_APPROVAL, whether it executes here (its transition
  // events say so) or waits on disk with no process.
  const held = !run.outcome && run.state === "AWAITING_APPROVAL" ? (run.approvals || []).filter((a) => !a.decision) : [];
  const outcome = run.outcome || (run.state === "AWAITING_APPROVAL" ? "AWAITING_APPROVAL"
    : !run.live && run.state === "AWAITING_ANSWER" ? "AWAITING_ANSWER" : "RUNNING");
  const byRole = roleTokens(run);
  const total = Object.values(byRole).reduce((a, t) => a + t.prompt + t.completion, 0);
  const cancel = run.live ? h("button", { class: "danger", id: "cancel-button", onclick: async (e) => {
    e.target.disabled = true;
    try { await api(`/api/runs/${encodeURIComponent(run.run_id)}/cancel`, { method: "POST" }); } catch (err) { notice(err.message); }
  } }, "Cancel run") : null;
  const resumable = !run.live && (!run.outcome || (run.outcome_reason || "").startsWith("CANCELLED"));
  const resume = resumable ? h("button", { id: "resume-button", onclick: async (e) => {
    e.target.disabled = true;
    try {
      await api(`/api/runs/${encodeURIComponent(run.run_id)}/resume`, { method: "POST" });
      await showRun(run.run_id);
    } catch (err) { notice(err.message); e.target.disabled = false; }
  } }, "Resume run") : null;
  const parts = [
    h("h1", {}, `${run.task} `, h("span", { class: "muted" }, run.run_id)),
    h("section", { class: "panel summary", id: "run-summary" },
      h("div", { class: "kv" }, h("b", { id: "run-outcome" }, badge(outcome)), h("span", {}, run.outcome_reason || `state ${run.state}`)),
      h("div", { class: "kv" }, h("b", {}, run.cycles.length), h("span", {}, "cycles")),
      h("div", { class: "kv" }, h("b", {}, fmtInt(total)), h("span", {}, "tokens")),
      h("div", { class: "kv" }, h("b", {}, run.cost ? fmtCost(run.cost.amount, run.cost.currency) : "–"), h("span", {}, "cost")),
      h("div", { class: "kv" }, h("b", {}, fmtTime(run.started_at)), h("span", {}, "started")),
      cancel, resume),
  ];
  held.forEach((a, i) => parts.push(approvalPanel(run, a, i ? `-${i + 1}` : "")));
  const answers = run.answers || [];
  const closed = answers.length && answers[answers.length - 1].decision === "reject";
  if (!run.live && run.outcome === "ESCALATED" && !closed) parts.push(answerPanel(run));
  if (!run.live && !run.outcome && run.state === "AWAITING_ANSWER") parts.push(questionsPanel(run));
  if (run.sandbox && run.sandbox.warning) parts.push(h("p", { class: "sandbox-warning", id: "sandbox-warning", role: "note" }, run.sandbox.warning));
  if (log) parts.push(h("section", { class: "panel" }, h("h2", {}, `Live events `, h("span", { class: "muted", id: "event-count" }, `${log.length} received`)),
    h("div", { class: "live-log", id: "live-log" }, log.slice(-200).map((l) => h("div", {}, h("span", { class: "k" }, l.kind), l.text)))));
  parts.push(h("section", { class: "panel" }, h("h2", {}, "Cycle timeline"),
    h("div", { class: "timeline", id: "timeline" }, run.cycles.map((c) =>
      h("a", { class: `cycle-chip ${c.result || "RUNNING"}`, href: `#/run/${encodeURIComponent(run.run_id)}`, onclick: (e) => { e.preventDefault(); document.getElementById(`cycle-${c.index}`).scrollIntoView(); } },
        h("b", {}, `Cycle ${c.index}`), h("small", {}, `${c.kind} · first: ${c.first_speaker}`), badge(c.result || "RUNNING"),
        h("small", {}, `${c.messages.length} msgs · ${c.tool_calls.length} tool calls`))))));
  parts.push(stepsPanel(run));
  parts.push(approvalsAudit(run));
  parts.push(tokenPanel(byRole, run));
  if (run.plan) parts.push(planPanel(run.plan));
  const filter = h("div", { class: "role-filter", id: "role-filter" }, h("b", {}, "Show messages of:"), ROLES.map((r) =>
    h("label", {}, h("input", { type: "checkbox", "data-role": r, checked: roleShown[r], onchange: (e) => { roleShown[r] = e.target.checked; renderRun(run, log); } }), ` ${r}`)));
  parts.push(h("section", { class: "panel" }, h("h2", {}, "Cycles"), filter, run.cycles.map((c) => cyclePanel(c))));
  if (!run.live) parts.push(filesPanel(run.run_id));
  view.replaceChildren(...parts.filter(Boolean));
}

// A person's answers to the Planner's questions (the same endpoint, with `text`).
function questionsPanel(run) {
  const last = run.cycles[run.cycles.length - 1] || {};
  const asked = (last.clarification || {}).questions || [];
  const text = h("textarea", { id: "questions-text", rows: 4, maxlength: 2000, "aria-label": "Your answers" });
  const send = async (e) => {
    e.target.disabled = true;
    try {
      await api(`/api/runs/${encodeURIComponent(run.run_id)}/answer`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: text.value }) });
      await showRun(run.run_id);
    } catch (err) { notice(err.message); e.target.disabled = false; }
  };
  return h("section", { class: "panel", id: "questions-panel" }, h("h2", {}, "The Planner asks"),
    h("ol", {}, asked.map((q) => h("li", {}, h("b", {}, `${q.id} `), q.text))),
    h("label", {}, "Your answers ", text),
    h("button", { id: "questions-send", onclick: send }, "Send the answers"));
}

// A person's answer to an escalation (POST /api/runs/{id}/answer; the server takes it only with a token).
function answerPanel(run) {
  const note = h("textarea", { id: "answer-note", rows: 3, maxlength: 2000, "aria-label": "Note for the next cycle" });
  const retries = h("input", { id: "answer-retries", type: "number", min: 1, max: 20, value: 1, "aria-label": "Cycles allowed" });
  const replan = h("input", { id: "answer-replan", type: "checkbox" });
  const send = (decision) => async (e) => {
    e.target.disabled = true;
    const body = decision === "resume"
      ? { decision, note: note.value || null, retries: Number(retries.value || 1), replan: replan.checked }
      : { decision };
    try {
      await api(`/api/runs/${encodeURIComponent(run.run_id)}/answer`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      await showRun(run.run_id);
    } catch (err) { notice(err.message); e.target.disabled = false; }
  };
  return h("section", { class: "panel", id: "answer-panel" }, h("h2", {}, "Answer this escalation"),
    h("p", { class: "muted" }, "Take the run on with a note and more cycles, accept its last artifacts (ACCEPTED_BY_HUMAN, never a pass), or close it. The same as pse answer; the server needs PSE_WEB_TOKEN."),
    h("label", {}, "Note for the next cycle ", note),
    h("div", { class: "answer-row" },
      h("label", {}, "Cycles ", retries), h("label", {}, replan, " start at the Planner"),
      h("button", { id: "answer-resume", onclick: send("resume") }, "Take it on"),
      h("button", { id: "answer-accept", onclick: send("accept") }, "Accept the artifacts"),
      h("button", { class: "danger", id: "answer-reject", onclick: send("reject") }, "Close")));
}

// What a person has typed as the reason for a held call, kept while the live page redraws.
const approvalDrafts = {};

// The preview is model-written: it is shown as text only (textContent through h()), one span per line;
// for write_file it is a unified diff, its added and removed lines coloured by class.
function approvalPreview(a, id) {
  const lines = (a.preview || "").split("\n");
  const diff = a.tool === "write_file";
  const kind = (line) => !diff ? null : line.startsWith("+++") || line.startsWith("---") ? "diff-file"
    : line.startsWith("+") ? "diff-add" : line.startsWith("-") ? "diff-del" : line.startsWith("@@") ? "diff-hunk" : null;
  return h("pre", { class: "out approval-preview", id }, lines.map((line, i) =>
    h("span", { class: kind(line) }, i < lines.length - 1 ? `${line}\n` : line)));
}

// A tool call held for a person (POST /api/runs/{id}/approvals/{approval}; the server takes it only with
// a token). After the decision the page follows the run live: it resumes in this server when no process had it.
function approvalPanel(run, a, suffix) {
  const reason = h("input", { id: `approval-reason${suffix}`, maxlength: 2000, value: approvalDrafts[a.id] || "",
    placeholder: "why (a denial's reason goes back to the role)", "aria-label": "Reason",
    oninput: (e) => { approvalDrafts[a.id] = e.target.value; } });
  const buttons = [];
  const send = (decision, all) => async () => {
    for (const b of buttons) b.disabled = true;
    try {
      const done = await api(`/api/runs/${encodeURIComponent(run.run_id)}/approvals/${encodeURIComponent(a.id)}`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ decision, reason: reason.value, all }) });
      delete approvalDrafts[a.id];
      if (stopStream) { stopStream(); stopStream = null; }
      if (!done.events) { // another process executes the run: it picks the decision up within moments
        notice(`${a.id} ${done.decision}: the process that executes this run goes on with it`);
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      await showRun(run.run_id);
    } catch (err) { notice(err.message); for (const b of buttons) b.disabled = false; }
  };
  buttons.push(
    h("button", { id: `approval-approve${suffix}`, onclick: send("approve", false) }, "Approve"),
    h("button", { class: "danger", id: `approval-deny${suffix}`, onclick: send("deny", false) }, "Deny"),
    h("button", { class: "secondary", id: `approval-approve-all${suffix}`, onclick: send("approve", true) }, "Approve all such calls for this run"));
  return h("section", { class: "panel approval", id: `approval-panel${suffix}`, "data-approval": a.id },
    h("h2", {}, "Approval needed ", h("span", { class: "muted" }, a.id)),
    h("p", {}, h("b", {}, `${a.requester} → ${a.tool}`), " held by ", h("code", {}, a.rule), ": ", a.fired),
    approvalPreview(a, `approval-preview${suffix}`),
    h("label", { class: "approval-reason" }, "Reason ", reason),
    h("div", { class: "approval-row" }, buttons),
    h("p", { class: "muted" }, `The same as pse approve ${run.run_id} ${a.id} (--deny, --all); the server needs PSE_WEB_TOKEN.`));
}

// Who decided each held call, how, and why (the audit of trace.approvals).
function approvalsAudit(run) {
  const decided = (run.approvals || []).filter((a) => a.decision);
  if (!decided.length) return null;
  return h("section", { class: "panel", id: "approvals-audit" }, h("h2", {}, `Approvals (${decided.length})`),
    h("ul", {}, decided.map((a) => h("li", { "data-approval": a.id },
      h("b", {}, a.id), ` ${a.requester} → ${a.tool} `, badge(a.decision),
      ` by ${a.by || "?"} via ${a.via || "?"}${a.scope === "run" ? " (all such calls for this run)" : ""} · ${fmtTime(a.decided_at)}`,
      a.reason ? h("div", { class: "muted" }, `reason: ${a.reason}`) : null))));
}

function tokenPanel(byRole, run) {
  const rows = Object.entries(byRole).map(([role, t]) => h("tr", {}, h("td", {}, role), h("td", { class: "num" }, t.calls),
    h("td", { class: "num" }, fmtInt(t.prompt)), h("td", { class: "num" }, fmtInt(t.cached || 0)), h("td", { class: "num" }, fmtInt(t.completion)), h("td", { class: "num" }, fmtInt(t.prompt + t.completion))));
  const unpriced = run.cost && run.cost.unpriced_models && run.cost.unpriced_models.length ? ` (unpriced models count as 0: ${run.cost.unpriced_models.join(", ")})` : "";
  return h("section", { class: "panel", id: "tokens-panel" }, h("h2", {}, "Tokens and cost per role"),
    h("table", {}, h("thead", {}, h("tr", {}, ["role", "calls", "prompt", "of which cached", "completion", "total"].map((c, i) => h("th", { class: i ? "num" : null }, c)))), h("tbody", {}, rows)),
    h("p", { class: "muted" }, run.cost ? `cost ${fmtCost(run.cost.amount, run.cost.currency)}${unpriced}` : "cost known at the end of the run"));
}

// ---- steps (execution = "steps") -----------------------------------------------------------------
// The plan as a graph: one node per step, in columns by dependency depth, coloured by its latest
// attempt; a node opens the step's attempts, reviews, messages and tool calls. Plan text is
// model-written: it goes in through h() (textContent and attributes), never as HTML.

const STEP_STATUS = { PASS: "pass", PARTIAL: "warn", BLOCKED: "warn", FAIL: "fail", ERROR: "fail", RUNNING: "running" };
const stepShown = { run: null, step: null }; // the step whose details are open, kept across redraws

// The plan the steps follow: the latest cycle's that has steps, else the run's.
function stepsPlan(run) {
  for (let i = run.cycles.length - 1; i >= 0; i--) {
    const p = run.cycles[i].plan;
    if (p && p.steps && p.steps.length) return p;
  }
  return run.plan;
}

function hasStepGraph(run) {
  const plan = stepsPlan(run);
  const shaped = plan && ((plan.steps || []).some((s) => (s.depends_on || []).length) || (plan.criteria || []).some((c) => c.step));
  return Boolean(shaped || run.cycles.some((c) => (c.steps || []).length));
}

// Every attempt of every cycle, in order, each with its cycle's index.
function stepAttempts(run) {
  return run.cycles.flatMap((c) => (c.steps || []).map((a) => Object.assign({ cycle: c.index }, a)));
}

// Depth 0 for a step with no dependencies, else one more than its deepest dependency (unknown ids and
// a loop, which the engine refuses anyway, count as no dependency).
function stepDepths(steps) {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const depth = new Map();
  const visit = (id, seen) => {
    if (depth.has(id)) return depth.get(id);
    const s = byId.get(id);
    if (!s || seen.has(id)) return -1;
    seen.add(id);
    const d = 1 + Math.max(-1, ...(s.depends_on || []).map((dep) => visit(dep, seen)));
    seen.delete(id);
    depth.set(id, d);
    return d;
  };
  for (const s of steps) visit(s.id, new Set());
  return depth;
}

function stepStatus(run, attempts) {
  const last = attempts[attempts.length - 1];
  if (!last) return { label: "not started", cls: "idle" };
  if (!last.result) return run.live ? { label: "running", cls: "running" } : { label: "unfinished", cls: "idle" };
  return { label: last.result, cls: STEP_STATUS[last.result] || "idle" };
}

const shorten = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);
const plural = (n, one) => `${n} ${one}${n === 1 ? "" : "s"}`;

function stepsPanel(run) {
  if (!hasStepGraph(run)) return null;
  const plan = stepsPlan(run) || { steps: [], criteria: [], output_steps: {} };
  const attempts = stepAttempts(run);
  const steps = (plan.steps || []).map((s) => ({ id: s.id, text: s.text, depends_on: s.depends_on || [] }));
  for (const a of attempts) { // attempts at a step the plan no longer has (a re-plan), or before the plan is known
    if (!steps.some((s) => s.id === a.step)) steps.push({ id: a.step, text: plan.steps && plan.steps.length ? "(not in the current plan)" : "", depends_on: [] });
  }
  const depths = stepDepths(steps);
  const columns = [];
  for (const s of steps) (columns[depths.get(s.id)] ||= []).push(s);
  if (stepShown.run !== run.run_id) Object.assign(stepShown, { run: run.run_id, step: null });
  const panel = h("section", { class: "panel", id: "steps-panel" });
  const draw = (focus) => {
    const graph = h("div", { class: "step-graph", id: "step-graph" });
    columns.filter(Boolean).forEach((col, i) => {
      if (i) graph.appendChild(h("div", { class: "step-arrow", "aria-hidden": "true" }, "→"));
      graph.appendChild(h("div", { class: "step-col", "data-depth": i + 1 }, col.map((s) => {
        const mine = attempts.filter((a) => a.step === s.id);
        const status = stepStatus(run, mine);
        const open = stepShown.step === s.id;
        return h("button", { type: "button", class: `step-node st-${status.cls}${open ? " open" : ""}`, "data-step": s.id,
          "aria-expanded": open ? "true" : "false", "aria-controls": "step-details", title: s.text || null,
          onclick: () => { stepShown.step = open ? null : s.id; draw(s.id); } },
          h("span", { class: "step-head" }, h("b", { class: "step-id" }, s.id), h("span", { class: `step-status st-${status.cls}` }, status.label)),
          s.text ? h("span", { class: "step-text" }, shorten(s.text, 90)) : null,
          h("span", { class: "step-meta" }, s.depends_on.length ? `after ${s.depends_on.join(", ")}` : "no dependencies",
            " · ", mine.length ? plural(mine.length, "attempt") : "no attempts yet"));
      })));
    });
    const chosen = steps.find((s) => s.id === stepShown.step);
    panel.replaceChildren(h("h2", {}, "Steps ", h("span", { class: "muted" }, `${plural(steps.length, "step")} · ${plural(attempts.length, "attempt")}`)),
      graph, chosen ? stepDetails(run, plan, chosen, attempts.filter((a) => a.step === chosen.id))
        : h("p", { class: "muted", id: "step-details-hint" }, "Choose a step to see its attempts, reviews, messages and tool calls."));
    if (focus) { const node = panel.querySelector(`.step-node[data-step="${CSS.escape(focus)}"]`); if (node) node.focus(); }
  };
  draw(null);
  return panel;
}

// One step: its criteria and outputs, then each attempt with what it was given, its review, and the
// messages and tool calls of its step that fall in it (an attempt owns what came after it began,
// until the next attempt of the step began: attempts at one step never overlap).
function stepDetails(run, plan, step, attempts) {
  const criteria = (plan.criteria || []).filter((c) => c.step === step.id);
  const outputs = Object.entries(plan.output_steps || {}).filter(([, id]) => id === step.id).map(([path]) => path);
  const cycles = new Set(attempts.map((a) => a.cycle));
  const owner = (cycle, at) => {
    const mine = attempts.filter((a) => a.cycle === cycle);
    let found = mine[0];
    for (const a of mine) if (Date.parse(a.started_at) <= Date.parse(at)) found = a;
    return found;
  };
  const items = new Map(attempts.map((a) => [a, { messages: [], calls: [] }]));
  const loose = { messages: [], calls: [] }; // of a cycle where the step has no attempt on record
  for (const c of run.cycles) {
    for (const m of c.messages) if (m.step === step.id) (items.get(owner(c.index, m.at)) || loose).messages.push(m);
    for (const t of c.tool_calls) if (t.step === step.id) (items.get(owner(c.index, t.at)) || loose).calls.push(t);
  }
  const activity = (x) => [
    h("h4", {}, `Tool calls (${x.calls.length})`), x.calls.length ? h("div", { class: "scroll-x" }, toolCallsTable(x.calls)) : null,
    h("h4", {}, `Messages (${x.messages.length})`), ...x.messages.map(messageView)];
  return h("div", { id: "step-details", class: "step-details", "data-step": step.id },
    h("h3", {}, `${step.id}${step.text ? " · " : ""}`, step.text || ""),
    h("p", { class: "muted" }, [step.depends_on.length ? `after ${step.depends_on.join(", ")}` : "depends on no other step",
      outputs.length ? `writes ${outputs.join(", ")}` : null].filter(Boolean).join(" · ")),
    criteria.length ? h("ul", { class: "step-criteria" }, criteria.map((c) => h("li", {}, h("b", {}, c.id), ` ${c.text}`))) : null,
    attempts.length ? null : h("p", { class: "muted" }, "No attempt yet."),
    attempts.map((a) => {
      const v = a.verdict;
      const result = a.result || (run.live ? "RUNNING" : "unfinished");
      const took = a.ended_at ? ` (${((Date.parse(a.ended_at) - Date.parse(a.started_at)) / 1000).toFixed(2)} s)` : "";
      return h("article", { class: "step-attempt", "data-attempt": a.attempt, "data-cycle": a.cycle },
        h("h3", {}, `Attempt ${a.attempt}${cycles.size > 1 ? ` · cycle ${a.cycle}` : ""} `, badge(result), a.result_reason ? h("span", { class: "muted" }, ` ${a.result_reason}`) : null),
        h("p", { class: "muted" }, `started ${fmtTime(a.started_at)}${a.ended_at ? ` · ended ${fmtTime(a.ended_at)}${took}` : ""}`),
        a.step_buffer ? h("details", { class: "step-buffer" }, h("summary", {}, `the step buffer it got (${fmtInt(a.step_buffer_tokens)} tokens)`), h("pre", { class: "out" }, a.step_buffer)) : null,
        v ? h("div", { class: "verdict" }, h("h4", {}, "Review"), badge(v.status), ` ${v.reason_code}`, v.summary ? h("p", {}, v.summary) : null, criteriaTable(v)) : null,
        gateView(a.gate),
        activity(items.get(a)));
    }),
    loose.messages.length || loose.calls.length ? h("article", { class: "step-attempt" }, h("h3", {}, "Outside any recorded attempt"), activity(loose)) : null);
}

function planPanel(plan) {
  return h("section", { class: "panel" }, h("h2", {}, "Plan"), h("p", {}, plan.goal),
    h("ul", {}, plan.criteria.map((c) => h("li", {}, h("b", {}, c.id), ` ${c.text}`))));
}

function citation(r) { return `${r.file}:${r.start_line}-${r.end_line}`; }

function retrievalPanel(retrievals) {
  if (!retrievals || !retrievals.length) return null;
  return h("div", { class: "retrievals" }, h("h3", {}, `Knowledge retrievals (${retrievals.length})`),
    h("ul", {}, retrievals.map((r) => h("li", {}, h("b", {}, `"${r.query}"`), " → ",
      r.results.length ? r.results.map((x) => `${citation(x)} (${Number(x.score).toFixed(3)})`).join(", ") : "no results"))));
}

function repairPanel(c) {
  const repairs = c.repairs || [], drifts = c.drifts || [];
  if (!repairs.length && !drifts.length) return null;
  return h("div", { class: "repairs" },
    repairs.length ? [h("h3", {}, `Format repairs (${repairs.length})`), h("ul", {}, repairs.map((r) =>
      h("li", {}, h("b", {}, r.role), ` (attempt ${r.attempt}) was told: `, h("code", {}, r.error))))] : null,
    drifts.length ? [h("h3", {}, `Replay drift (${drifts.length})`), h("ul", {}, drifts.map((d) =>
      h("li", {}, h("b", {}, d.role), ` turn ${d.turn}, message ${d.message} (${d.speaker}): ${d.recorded_chars} → ${d.chars} chars`,
        d.diff ? h("details", {}, h("summary", {}, "diff"), h("pre", { class: "out" }, d.diff)) : null)))] : null);
}

function criteriaTable(v) {
  return h("table", { class: "criteria" }, h("tbody", {}, v.criteria.map((k) => h("tr", {},
    h("td", { class: k.met ? "crit-met" : "crit-unmet" }, k.met ? "✓ met" : "✗ unmet"), h("td", {}, h("b", {}, k.id)), h("td", {}, k.finding)))));
}

function gateView(gate) {
  if (!gate) return null;
  return gate.passed ? h("p", { class: "gate-ok" }, "✓ every hard gate passed")
    : h("div", {}, h("b", { class: "gate-fail" }, "Hard gate failures"), h("ul", {}, gate.failures.map((f) => h("li", { class: "gate-fail" }, f))));
}

function messageView(m) {
  const long = m.content.length > 700;
  const body = h("pre", {}, long ? m.content.slice(0, 700) + "…" : m.content);
  return h("div", { class: `msg ${m.source}` }, h("header", {}, h("b", {}, m.source), m.step ? ` · step ${m.step}` : "", ` · ${fmtTime(m.at)}`,
    m.prompt_tokens || m.completion_tokens ? ` · ${fmtInt(m.prompt_tokens)} prompt + ${fmtInt(m.completion_tokens)} completion tokens` : ""),
    m.thought ? h("details", { class: "thought" }, h("summary", {}, `thought (${fmtInt(m.thought_tokens)} tokens, never parsed or passed on)`), h("pre", {}, m.thought)) : null,
    long ? h("details", {}, h("summary", {}, body), h("pre", {}, m.content)) : body);
}

function toolCallsTable(toolCalls) {
  return h("table", { class: "tool-calls" },
    h("thead", {}, h("tr", {}, ["requester", "tool", "arguments", "decision", "status", "ms", "output"].map((x) => h("th", {}, x)))),
    h("tbody", {}, toolCalls.map((t) => h("tr", {},
      h("td", {}, t.requester, t.step ? h("div", { class: "muted" }, `step ${t.step}`) : null), h("td", {}, t.tool),
      h("td", {}, Object.entries(t.arguments).map(([k, val]) => `${k}=${val.length > 60 ? val.slice(0, 60) + "…" : val}`).join(", ")),
      h("td", {}, badge(t.decision), t.decision === "denied" ? h("div", { class: "muted" }, t.rule) : null),
      h("td", {}, badge(t.status), testAuthors(t)), h("td", { class: "num" }, t.ms),
      h("td", {}, h("details", {}, h("summary", {}, `${t.output.length} chars${t.truncated ? " (truncated)" : ""}`), h("pre", { class: "out" }, t.output)))))));
}

function cyclePanel(c) {
  const v = c.verdict;
  const verdictBox = h("div", { class: "verdict" }, h("h3", {}, "Verdict"),
    v ? h("div", {}, badge(v.status), ` ${v.reason_code}`, v.summary ? h("p", {}, v.summary) : null, criteriaTable(v))
      : h("p", { class: c.review_error ? "gate-fail" : "muted" }, c.stopped ? `no review: ${c.stopped}` : c.review_error ? `review error: ${c.review_error}` : "no verdict yet"),
    gateView(c.gate));
  const messages = c.messages.filter((m) => roleShown[m.source] !== false).map(messageView);
  return h("article", { class: "panel cycle", id: `cycle-${c.index}` },
    h("h2", {}, `Cycle ${c.index} · ${c.kind} `, badge(c.result || "RUNNING"), h("span", { class: "muted" }, ` ${c.result_reason || ""}`)),
    verdictBox, repairPanel(c), retrievalPanel(c.retrievals), h("h3", {}, `Tool calls (${c.tool_calls.length})`), toolCallsTable(c.tool_calls),
    h("h3", {}, `Messages (${c.messages.length})`), messages);
}

function filesPanel(runId) {
  const list = h("ul", { id: "files" });
  const viewer = h("div", { class: "file-view" });
  const panel = h("section", { class: "panel" }, h("h2", {}, "Workspace files"), list, viewer);
  api(`/api/runs/${encodeURIComponent(runId)}/files`).then((files) => {
    list.replaceChildren(...files.map((f) => h("li", {}, h("a", { href: "#", onclick: async (e) => {
      e.preventDefault();
      const res = await fetch(`/api/runs/${encodeURIComponent(runId)}/files/${f.path.split("/").map(encodeURIComponent).join("/")}`, { headers: authHeaders() });
      viewer.replaceChildren(h("h3", {}, f.path), h("pre", { class: "out" }, await res.text()));
    } }, f.path), h("span", { class: "muted" }, ` ${fmtInt(f.size)} bytes`))));
    if (!files.length) list.replaceChildren(h("li", { class: "muted" }, "no files"));
  }).catch((err) => notice(err.message));
  return panel;
}

// ---- metrics page ------------------------------------------------------------------------------

async function showMetrics() {
  const s = await api("/api/stats");
  const pct = (v) => (v === null ? "–" : `${(v * 100).toFixed(1)}%`);
  const card = (value, label) => h("div", { class: "card" }, h("b", {}, value), h("span", {}, label));
  const points = (pick) => s.series.map((r) => ({ t: new Date(r.started_at), y: pick(r), color: OUTCOME_COLOR[r.outcome] || "#8b949e", label: `${r.run_id} (${r.outcome})` }));
  const cyclesKeys = Object.keys(s.cycles_to_pass).map(Number).sort((a, b) => a - b);
  const firstPasses = s.outcomes.PASSED ? Math.round((s.first_cycle_pass_rate || 0) * s.runs) : 0;
  view.replaceChildren(
    h("h1", {}, "Metrics"),
    h("div", { class: "cards", id: "metric-cards" },
      card(s.runs, "finished runs"), card(pct(s.first_cycle_pass_rate), "first-cycle pass rate"),
      card(s.mean_cycles_to_pass ?? "–", "mean cycles to pass"), card(pct(s.denied_tool_call_rate), "denied tool calls"),
      card(s.tokens_per_passed_run === null ? "–" : fmtInt(s.tokens_per_passed_run), "tokens per passed run"),
      card(s.cost_per_passed_run === null ? "–" : fmtCost(s.cost_per_passed_run, s.currency), "cost per passed run"),
      card(pct(s.cached_prompt_share), "prompt tokens served from cache"),
      card(pct(s.reusable_prefix_share), "prompt tokens a prefix cache could serve")),
    h("div", { class: "charts", id: "charts" },
      h("div", { class: "panel" }, PSECharts.timeSeries("Tokens per run over time", points((r) => r.tokens), { format: (v) => fmtInt(Math.round(v)) })),
      h("div", { class: "panel" }, PSECharts.timeSeries("Cost per run over time", points((r) => r.cost), { format: (v) => v.toFixed(4) })),
      h("div", { class: "panel" }, PSECharts.bars("Outcome distribution", ["PASSED", "ESCALATED", "ACCEPTED_BY_HUMAN", "TIMEOUT", "ERROR"].map((o) => ({ label: o, value: s.outcomes[o] || 0, color: OUTCOME_COLOR[o] })))),
      h("div", { class: "panel" }, PSECharts.bars("Cycles to pass (passed runs)", cyclesKeys.map((k) => ({ label: `${k} cycle${k > 1 ? "s" : ""}`, value: s.cycles_to_pass[String(k)], color: "#1f6feb" })))),
      h("div", { class: "panel" }, PSECharts.rate("First-cycle pass rate", s.first_cycle_pass_rate, `${firstPasses} of ${s.runs} finished runs passed in their first cycle`))));
}

// ---- evaluations ---------------------------------------------------------------------------------
// The figures and their formats are the HTML report's (src/pse/evals/_report.py, ARM_FIGURES).

const DASH = "—";
const fmtFixed = (v, digits) => (v === null || v === undefined ? DASH : Number(v).toFixed(digits));
const fmtRate = (v, ci) => (v === null || v === undefined ? DASH
  : ci ? `${v.toFixed(2)} (${ci[0].toFixed(2)}–${ci[1].toFixed(2)})` : v.toFixed(2));
const rateOf = (field) => (a) => fmtRate(a[field], a[`${field}_ci95`]);
const fmtMoney = (v, cur) => (v === null || v === undefined ? DASH : `${Number(v).toFixed(4)} ${cur}`);
const fmtP = (p) => (p < 0.001 ? "< 0.001" : p.toFixed(3));
const OUTCOME_TEXT = { PASSED: "pass", ESCALATED: "warn", ACCEPTED_BY_HUMAN: "warn", TIMEOUT: "warn", ERROR: "fail" };
const EVAL_FIGURES = [
  ["instances", "instances", (a) => String(a.instances)],
  ["claimed_pass_rate", "claimed pass rate", rateOf("claimed_pass_rate")],
  ["true_pass_rate", "true pass rate", rateOf("true_pass_rate")],
  ["false_pass_rate", "false pass rate (of claimed)", rateOf("false_pass_rate")],
  ["escaped_defects", "escaped defects", (a) => String(a.escaped_defects)],
  ["first_pass_rate", "first pass rate", rateOf("first_pass_rate")],
  ["mean_rework_cycles", "mean rework cycles", (a) => fmtFixed(a.mean_rework_cycles, 2)],
  ["handoff_failure_rate", "handoff failure rate", rateOf("handoff_failure_rate")],
  ["unauthorized_call_rate", "unauthorized call rate", rateOf("unauthorized_call_rate")],
  ["tokens", "tokens", (a) => fmtInt(a.tokens)],
  ["tokens_per_true_pass", "tokens per true pass", (a) => (a.tokens_per_true_pass === null ? DASH : fmtInt(Math.round(a.tokens_per_true_pass)))],
  ["cost", "cost", (a) => fmtMoney(a.cost, a.currency)],
  ["cost_per_true_pass", "cost per true pass", (a) => fmtMoney(a.cost_per_true_pass, a.currency)],
  ["wall_s_per_instance", "wall s per instance", (a) => fmtFixed(a.wall_s_per_instance, 1)],
  ["outcomes", "outcomes", (a) => Object.entries(a.outcomes).map(([k, n]) => `${k} ${n}`).join(" · ") || DASH],
  ["hidden_check_errors", "hidden checks that could not run", (a) => String(a.hidden_check_errors)],
];
const scroll = (table) => h("div", { class: "scroll" }, table);
const headRow = (cols) => h("thead", {}, h("tr", {}, cols.map(([name, num]) => h("th", { class: num ? "num" : null, scope: "col" }, name))));

async function showEvals() {
  const evals = await api("/api/evals");
  const rows = evals.map((e) => h("tr", { class: "eval-row" },
    h("td", {}, h("a", { href: `#/eval/${encodeURIComponent(e.eval_id)}` }, e.eval_id)),
    h("td", {}, e.suite), h("td", {}, e.task),
    h("td", { class: "num" }, `${e.finished_instances} / ${e.instances}`),
    h("td", {}, e.arms.filter((arm) => e.rates[arm]).map((arm) => h("div", { class: "arm-rates" }, h("b", {}, arm),
      ` true ${fmtRate(e.rates[arm].true_pass_rate, e.rates[arm].true_pass_rate_ci95)}`,
      ` · false ${fmtRate(e.rates[arm].false_pass_rate, e.rates[arm].false_pass_rate_ci95)}`))),
    h("td", {}, fmtTime(e.updated_at))));
  view.replaceChildren(h("h1", {}, "Evaluations"), h("section", { class: "panel" },
    scroll(h("table", { id: "evals-table" },
      headRow([["evaluation"], ["suite"], ["task"], ["instances", true], ["true / false pass rate per arm (95% CI)"], ["updated"]]),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "no evaluations yet: `pse eval` writes them into the evaluations directory (PSE_EVALS_DIR)")))))));
}

// With a token the report cannot be a plain link (a navigation sends no Authorization header): it is
// fetched and saved as a file instead, never rendered in the dashboard's origin.
async function downloadReport(evalId) {
  const res = await fetch(`/api/evals/${encodeURIComponent(evalId)}/report`, { headers: authHeaders() });
  if (!res.ok) throw new Error(`report: HTTP ${res.status}`);
  const url = URL.createObjectURL(await res.blob());
  const link = h("a", { href: url, download: `${evalId}-report.html` });
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

async function showEval(evalId) {
  const { meta, summary, rows } = await api(`/api/evals/${encodeURIComponent(evalId)}`);
  const arms = summary.arm_order.filter((name) => summary.arms[name]).map((name) => summary.arms[name]);
  const report = h("a", { id: "eval-report", href: `/api/evals/${encodeURIComponent(evalId)}/report`, target: "_blank", rel: "noopener",
    onclick: (ev) => { if (token()) { ev.preventDefault(); downloadReport(evalId).catch((err) => notice(err.message)); } } }, "HTML report");
  const fields = [["suite", summary.suite], ["task", summary.task], ["description", meta.description], ["evaluation", summary.eval_id],
    ["arms", summary.arm_order.join(", ")], ["instances", `${summary.instances} with results, of ${(meta.instances || []).length} planned`],
    ["created", fmtTime(meta.created_at)], ["updated", fmtTime(summary.updated_at)]];
  view.replaceChildren(
    h("h1", {}, "Evaluation ", h("span", { class: "muted" }, summary.eval_id)),
    h("section", { class: "panel", id: "eval-meta" },
      h("dl", { class: "meta" }, fields.filter(([, v]) => v).flatMap(([k, v]) => [h("dt", {}, k), h("dd", { id: `eval-meta-${k}` }, v)])),
      h("p", {}, report, h("span", { class: "muted" }, " — one self-contained page, for sharing"))),
    h("section", { class: "panel" }, h("h2", {}, "Arms side by side"), scroll(h("table", { id: "eval-arms" },
      headRow([["figure"], ...arms.map((a) => [a.arm, true])]),
      h("tbody", {}, EVAL_FIGURES.map(([key, label, fmt]) => h("tr", {}, h("th", { scope: "row" }, label),
        arms.map((a) => h("td", { class: "num", "data-arm": a.arm, "data-figure": key }, fmt(a))))))))),
    pairedPanel(summary.paired),
    instancesPanel(meta, summary, rows));
}

function pairedPanel(paired) {
  if (!paired.length) return null;
  return h("section", { class: "panel" }, h("h2", {}, "Paired comparisons (true pass, shared instances)"), scroll(h("table", { id: "eval-paired" },
    headRow([["arm A"], ["arm B"], ["shared instances", true], ["both pass", true], ["only A", true], ["only B", true], ["neither", true], ["McNemar p", true]]),
    h("tbody", {}, paired.map((t) => h("tr", {}, h("td", {}, t.a), h("td", {}, t.b),
      [t.instances, t.both, t.only_a, t.only_b, t.neither, fmtP(t.mcnemar_p)].map((v) => h("td", { class: "num" }, v))))))),
    h("p", { class: "muted" }, "McNemar: exact two-sided test on the instances only one arm passed."));
}

function hiddenCell(r) {
  const c = r.hidden;
  const notes = [];
  if (r.false_pass) notes.push("escaped defect: claimed PASS");
  if (c.timed_out) notes.push("timed out");
  if (c.error !== null) notes.push(`could not run: ${c.error}`);
  else if (c.exit_code !== null) notes.push(`exit ${c.exit_code}`);
  return h("td", { class: "text" }, h("span", { class: c.passed ? "pass" : "fail" }, c.passed ? "pass" : "fail"),
    notes.length ? h("small", {}, notes.join("; ")) : null,
    c.output ? h("details", {}, h("summary", {}, "output"), h("pre", { class: "out" }, c.output)) : null);
}

function instancesPanel(meta, summary, rows) {
  const byKey = new Map(rows.map((r) => [`${r.instance}\u0000${r.arm}`, r]));
  const order = [...new Set([...(meta.instances || []), ...rows.map((r) => r.instance)])];
  const arms = summary.arm_order;
  const body = [];
  for (const instance of order) arms.forEach((arm, i) => {
    const r = byKey.get(`${instance}\u0000${arm}`);
    const lead = i === 0 ? h("th", { scope: "rowgroup", rowspan: arms.length, class: "text instance" }, instance) : null;
    const cells = r ? [
      h("td", {}, arm),
      h("td", { class: "text" }, h("span", { class: OUTCOME_TEXT[r.claimed_outcome] || "muted" }, r.claimed_outcome || DASH),
        r.outcome_reason ? h("small", {}, r.outcome_reason) : null),
      hiddenCell(r), h("td", { class: "num" }, r.cycles), h("td", { class: "num" }, fmtInt(r.tokens)),
      h("td", { class: "num" }, Number(r.wall_s).toFixed(1)),
      h("td", {}, h("a", { href: `#/run/${encodeURIComponent(r.run_id)}` }, r.run_id)),
    ] : [h("td", {}, arm), h("td", { class: "muted", colspan: 6 }, "not run yet")];
    body.push(h("tr", { class: i === 0 ? "first" : null }, lead, cells));
  });
  return h("section", { class: "panel" }, h("h2", {}, "Per instance"), scroll(h("table", { id: "eval-instances" },
    headRow([["instance"], ["arm"], ["claimed outcome"], ["hidden check"], ["cycles", true], ["tokens", true], ["wall s", true], ["run"]]),
    h("tbody", {}, body))));
}

// ---- router ------------------------------------------------------------------------------------

async function route() {
  if (stopStream) { stopStream(); stopStream = null; }
  notice("");
  const hash = location.hash || "#/";
  const section = hash.startsWith("#/metrics") ? "metrics" : hash.startsWith("#/eval") ? "evals" : "runs";
  for (const name of ["runs", "metrics", "evals"]) document.getElementById(`nav-${name}`).classList.toggle("active", name === section);
  try {
    if (hash.startsWith("#/run/")) await showRun(decodeURIComponent(hash.slice(6)));
    else if (hash.startsWith("#/eval/")) await showEval(decodeURIComponent(hash.slice(7)));
    else if (hash.startsWith("#/evals")) await showEvals();
    else if (hash.startsWith("#/metrics")) await showMetrics();
    else await showRuns();
  } catch (err) {
    if (err.message !== "unauthorized") notice(err.message);
  }
}

document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const field = document.getElementById("token");
  if (field.value) sessionStorage.setItem("pse-token", field.value); else sessionStorage.removeItem("pse-token");
  field.value = "";
  document.getElementById("token-state").textContent = token() ? "token set for this tab" : "";
  route();
});
document.getElementById("token-state").textContent = token() ? "token set for this tab" : "";
window.addEventListener("hashchange", route);
route();
