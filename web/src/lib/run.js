// A run as the page holds it: built from a trace, or from an empty one plus the engine's events
// (applyEvent appends in place, so a live page only ever adds to what it shows). Pure functions only.

export const ROLES = ["Planner", "Specialist", "Evaluator", "ToolAgent"];
export const OUTCOMES = ["PASSED", "ESCALATED", "ACCEPTED_BY_HUMAN", "TIMEOUT", "ERROR", "RUNNING"];

export function emptyRun(trace) {
  return { run_id: trace.run_id, task: trace.task, started_at: trace.started_at, ended_at: null, state: "START",
    outcome: null, outcome_reason: "", plan: null, cycles: [], tokens: null, cost: null, live: true,
    sandbox: trace.sandbox || null, settings: trace.settings || {}, approvals: [], answers: [], tags: trace.tags || {},
    repository: trace.repository || null, probes: trace.probes || [] };
}

function newCycle(ev) {
  return { index: ev.cycle, kind: ev.cycle_kind, first_speaker: ev.first_speaker, started_at: ev.at, ended_at: null,
    messages: [], tool_calls: [], retrievals: [], repairs: [], drifts: [], steps: [], verdict: null, gate: null,
    review_error: null, stopped: null, result: "RUNNING", result_reason: "", plan: null, tokens: {} };
}

/** Apply one engine event to `run` in place (the SSE stream's order is the engine's). */
export function applyEvent(run, ev) {
  const cycle = () => run.cycles.find((c) => c.index === ev.cycle) || run.cycles[run.cycles.length - 1];
  switch (ev.kind) {
    case "cycle_start":
      if (!run.cycles.some((c) => c.index === ev.cycle)) run.cycles.push(newCycle(ev));
      break;
    case "message": {
      const c = cycle();
      c.messages.push(ev.message);
      const m = ev.message;
      if (m.source !== "ToolAgent" && (m.prompt_tokens || m.completion_tokens)) {
        const t = (c.tokens[m.source] ||= { prompt: 0, completion: 0, calls: 0, cached: 0 });
        t.prompt += m.prompt_tokens; t.completion += m.completion_tokens; t.calls += 1;
      }
      break;
    }
    case "tool_call": cycle().tool_calls.push(ev.call); break;
    case "retrieval": (cycle().retrievals ||= []).push(ev); break;
    case "drift": (cycle().drifts ||= []).push(ev.drift); break;
    case "format_repair": (cycle().repairs ||= []).push(ev.repair); break;
    case "verdict": // the engine's decision of the cycle's result (pse.engine._judge), shown as it is sent
      Object.assign(cycle(), { verdict: ev.verdict, gate: ev.gate, review_error: ev.error, stopped: ev.stopped,
        ended_at: ev.at, result: ev.result, result_reason: ev.result_reason });
      break;
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
      Object.assign(run, { outcome: ev.outcome, outcome_reason: ev.reason, state: ev.outcome, ended_at: ev.at,
        cost: Object.assign({}, run.cost || {}, { amount: ev.cost, currency: ev.currency }) });
      break;
  }
}

/** Fold a freshly read trace into the page's run, in place: what events do not carry (the plan, the
 * tokens per cycle, the cost, cycle results) arrives, and nothing the page shows is replaced wholesale. */
export function mergeTrace(run, trace, live) {
  for (const key of ["outcome", "outcome_reason", "state", "ended_at", "plan", "tokens", "cost", "approvals",
    "answers", "settings", "sandbox", "report", "escalation", "task_message", "inputs", "tags", "resumed", "rate_limit",
    "repository", "probes"]) {
    if (trace[key] !== undefined) run[key] = trace[key];
  }
  for (const c of trace.cycles || []) {
    const mine = run.cycles.find((x) => x.index === c.index);
    if (!mine) { run.cycles.push(c); continue; }
    for (const [key, value] of Object.entries(c)) {
      const list = mine[key];
      if (key !== "steps" && Array.isArray(list) && Array.isArray(value)) {
        for (let i = list.length; i < value.length; i++) list.push(value[i]); // append what events missed
      } else mine[key] = value;
    }
  }
  run.live = live;
}

/** A message without its protocol XML, when the server did not say what it amounts to (`said`). */
function prose(text) {
  const bare = String(text || "").replace(/<(tool_calls|tool_results|plan|verdict|report|blocked|clarification|think)\b[\s\S]*?(<\/\1>|$)/g, " ")
    .replace(/<\/?[a-z_]+\b[^>]*>/g, " ");
  const flat = bare.split(/\s+/).filter(Boolean).join(" ");
  return flat ? (flat.length > 110 ? `${flat.slice(0, 109)}…` : flat) : "(protocol message)";
}

/** One line of the live log, as the terminal's live view prints it (the server's `said`); null: none. */
export function eventLine(ev) {
  switch (ev.kind) {
    case "cycle_start": return `cycle ${ev.cycle} (${ev.cycle_kind}) starts with ${ev.first_speaker}`;
    case "message": // the ToolAgent's results are shown call by call, as in the terminal
      if (ev.message.source === "ToolAgent") return null;
      return `${ev.message.source}: ${ev.said !== undefined ? ev.said : prose(ev.message.content)}`;
    case "tool_call": return `${ev.call.requester} ↳ ${ev.said !== undefined ? ev.said : `${ev.call.tool} ${ev.call.decision === "denied" ? "denied" : ev.call.status}`}`;
    case "verdict": return ev.verdict ? `verdict ${ev.verdict.status} (${ev.verdict.reason_code})${ev.gate.passed ? "" : "; gate: " + ev.gate.failures.join("; ")}`
        + (ev.result && ev.result !== ev.verdict.status ? ` → ${ev.result}` : "")
      : ev.stopped ? `no review: ${ev.stopped}` : `review error: ${ev.error}`;
    case "format_repair": return `format repair: ${ev.repair.role} asked again (attempt ${ev.repair.attempt}): ${ev.repair.error}`;
    case "drift": return `replay drift: ${ev.drift.role} turn ${ev.drift.turn}: ${ev.drift.recorded_chars} → ${ev.drift.chars} chars`;
    case "retrieval": return `knowledge "${ev.query}" → ${ev.results.length ? ev.results.map((r) => `${r.file}:${r.start_line}-${r.end_line}`).join(", ") : "no results"}`;
    case "transition": return `${ev.transition.from} → ${ev.transition.to}${ev.transition.reason ? ": " + ev.transition.reason : ""}`;
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

/** What the run's badge says: its outcome, or what it waits for, or RUNNING. */
export function outcomeLabel(run) {
  if (run.outcome) return run.outcome;
  if (run.state === "AWAITING_APPROVAL") return "AWAITING_APPROVAL";
  if (!run.live && run.state === "AWAITING_ANSWER") return "AWAITING_ANSWER";
  return run.live ? "RUNNING" : "INTERRUPTED";
}

/** Tokens per role: the trace's totals, or (live) summed from the messages so far. */
export function roleTokens(run) {
  if (run.tokens && run.tokens.by_role && Object.keys(run.tokens.by_role).length) return run.tokens.by_role;
  const out = {};
  for (const c of run.cycles) for (const [role, t] of Object.entries(c.tokens || {})) {
    const sum = (out[role] ||= { prompt: 0, completion: 0, calls: 0, cached: 0 });
    sum.prompt += t.prompt; sum.completion += t.completion; sum.calls += t.calls; sum.cached += t.cached || 0;
  }
  return out;
}

export const tokensOf = (t) => (t ? (t.prompt || 0) + (t.completion || 0) : 0);

// Why the run ended, one link per cycle, told as `pse trace show` tells it (src/pse/_causal.py):
// "cycle 1: Evaluator PARTIAL → gate `check:pytest` failed → PARTIAL · cycle 2: Evaluator PASS → PASSED".
// An ERROR run's story is its root cause: the gates a stopped cycle failed are consequences. The error
// comes first; then, "set off by", what led to it with its gate's detail: a cycle whose PASS a gate
// overruled, or, when the error is an exhaustion (a cassette that ran out), the first cycle that did not pass.
const WAITING = { AWAITING_ANSWER: "waiting for answers", AWAITING_APPROVAL: "waiting for approval" };
const EXHAUSTIONS = ["CassetteExhaustedError"];

/** The cause without its advice: "X failed. Check that …" → "X failed." (at most 300 characters). */
function firstSentence(text) {
  const flat = String(text || "").split(/\s+/).filter(Boolean).join(" ");
  const head = flat.split(/(?<=[.!?])\s+(?=[A-Z(`])/)[0];
  return head.length <= 300 ? head : `${head.slice(0, 299)}…`;
}

function rootCause(run) {
  for (const c of [...run.cycles].reverse()) {
    if (c.result === "ERROR") {
      const cause = c.stopped || c.review_error || c.result_reason;
      if (cause) return firstSentence(cause);
    }
  }
  return firstSentence(run.outcome_reason || "");
}

/** The failed gates of a cycle, each with what it found: [[name, detail], …]. */
export function failedGates(gate) {
  if (!gate) return [];
  if ((gate.results || []).length) return gate.results.filter((r) => !r.passed).map((r) => [r.name, r.detail || ""]);
  return (gate.failures || []).map((f) => { const text = String(f); const at = text.indexOf(": ");
    return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + 2)]; });
}

/** "missing: summary.md", or for several gates "a: …; b: …". */
function gateDetails(failed) {
  if (failed.length === 1) return firstSentence(failed[0][1]);
  return failed.map(([name, detail]) => `${name}: ${firstSentence(detail)}`).join("; ");
}

// A PASS the engine judged PARTIAL: only enforced failed gates do that (pse.engine._judge).
const overruled = (c) => !!c.verdict && c.verdict.status === "PASS" && c.result === "PARTIAL";

/** The cycle that set an ERROR run's error off, or null (as pse._causal.first_cause). */
export function firstCause(run) {
  if (run.outcome !== "ERROR") return null;
  let last = -1;
  run.cycles.forEach((c, i) => { if (c.result === "ERROR") last = i; });
  if (last < 0) return null;
  const exhausted = EXHAUSTIONS.some((name) => rootCause(run).startsWith(name));
  return run.cycles.slice(0, last).find((c) => overruled(c) || (exhausted && ["PARTIAL", "FAIL"].includes(c.result))) || null;
}

function said(c, reviewer) {
  if (c.verdict) return [`${reviewer} ${c.verdict.status}`, c.verdict.status];
  if (c.blocked) return [`${c.blocked.role} blocked (${c.blocked.reason_code})`, "BLOCKED"];
  if (c.clarification) return [`Planner asked ${(c.clarification.questions || []).length} question(s)`, "QUESTIONS"];
  if ((c.steps || []).length) {
    const last = new Map();
    for (const a of c.steps) last.set(a.step, a.result || "running");
    return [`steps ${[...last].map(([step, result]) => `${step} ${result}`).join(", ")}`, ""];
  }
  if (c.stopped) return [`stopped: ${firstSentence(c.stopped)}`, ""];
  if (c.review_error) return [`no verdict: ${firstSentence(c.review_error)}`, ""];
  return [c.ended_at ? "no verdict" : "running", ""];
}

function runEnd(run) {
  if (run.outcome) return run.outcome;
  return WAITING[run.state] || (run.cycles.length ? "running" : String(run.state || "").toLowerCase() || "not started");
}

function answered(run, after) {
  const found = (run.answers || []).filter((a) => a.after_cycle === after);
  if (!found.length) return [];
  const what = found.map((a) => (a.decision === "answer" ? "answered the questions" : a.decision)).join(", ");
  return [found[0].outcome_before || "", `a person: ${what}`];
}

const TOOL_DOING = { write_file: "writing", read_file: "reading", list_files: "looking at files", run_pytest: "running pytest",
  run_ruff: "running ruff", run_check: "running a check", bash: "running a command", search_knowledge: "searching knowledge" };
const ROLE_DOING = { Planner: "planning", Specialist: "working", Evaluator: "reviewing", Agent: "working" };

/** What a live cycle is doing now: "cycle 1 · Specialist writing quicksort.py · 3 tool calls". */
export function nowLine(c) {
  const last = [...c.messages.map((m) => ({ at: m.at, role: m.source, call: null })),
    ...c.tool_calls.map((t) => ({ at: t.at, role: t.requester, call: t }))]
    .filter((x) => x.role !== "ToolAgent").sort((a, b) => Date.parse(a.at) - Date.parse(b.at)).pop();
  const role = last ? last.role : c.first_speaker || "";
  let doing = ROLE_DOING[role] || "working";
  if (last && last.call) {
    const path = last.call.arguments && last.call.arguments.path;
    doing = (TOOL_DOING[last.call.tool] || `calling ${last.call.tool}`) + (last.call.tool === "write_file" && path ? ` ${path}` : "");
  }
  const calls = c.tool_calls.length;
  return [`cycle ${c.index}`, `${role} ${doing}`.trim(), `${calls} tool call${calls === 1 ? "" : "s"}`].join(" · ");
}

/** The links of one cycle: [{text} | {code} | {text, end: true}]; `details`: each failed gate's finding. */
function linkParts(c, reviewer, then, isLast, details) {
  const [text, status] = said(c, reviewer);
  const parts = [{ text }];
  let last = text;
  const failed = c.verdict ? failedGates(c.gate) : [];
  if (failed.length) {
    parts.push({ text: ` → gate${failed.length > 1 ? "s" : ""} ` });
    failed.forEach(([g], i) => { if (i) parts.push({ text: ", " }); parts.push({ code: g }); });
    parts.push({ text: (c.gate.enforced === false ? " failed (not enforced)" : " failed")
      + (details ? ` (${gateDetails(failed)})` : "") });
    last = "gate";
  }
  const result = c.result === "RUNNING" ? "" : c.result; // a cycle not yet reviewed has no result to say
  if (result && (failed.length || result !== status)) { parts.push({ text: ` → ${result}` }); last = result; }
  for (const step of then) { // as CycleLink.text(): each compared with the part before them
    if (step !== last) parts.push({ text: " → " }, { text: step, end: isLast });
  }
  return parts;
}

/** The links of the story: [{cycle, parts: [{text} | {code} | {text, end: true}]}]; cycle 0 is an
 * ERROR before the first cycle; `cause: true` marks what set an ERROR off (told after it, "set off by").
 * Concatenated (code in backticks), a link reads as CycleLink.text().
 * A live run's open cycle says what is happening now instead ({cycle, now: true, parts}). */
export function causalChain(run) {
  const reviewer = (run.settings || {}).team === "single" ? "Agent" : "Evaluator";
  if (run.outcome === "ERROR") {
    const failing = run.cycles.filter((c) => c.result === "ERROR");
    const where = failing.length ? failing[failing.length - 1] : run.cycles[run.cycles.length - 1];
    const cause = rootCause(run);
    const error = { cycle: where ? where.index : 0, parts: [{ text: cause ? "ERROR: " : "ERROR", end: !cause }, { text: cause }] };
    const first = where ? firstCause(run) : null;
    return first ? [error, { cycle: first.index, cause: true, parts: linkParts(first, reviewer, [], false, true) }] : [error];
  }
  const end = runEnd(run);
  if (!run.cycles.length) return [{ cycle: 0, parts: [{ text: end, end: true }] }];
  return run.cycles.map((c, position) => {
    const isLast = position === run.cycles.length - 1;
    if (isLast && run.live && !run.outcome && !c.ended_at && !WAITING[run.state]) {
      return { cycle: c.index, now: true, parts: [{ text: nowLine(c).replace(/^cycle \d+ · /, "") }] };
    }
    return { cycle: c.index, parts: linkParts(c, reviewer, isLast ? [end] : answered(run, c.index), isLast, false) };
  });
}

/** The story as one line of text, cycles joined by " · " (what `pse trace show` prints). */
export function causalLine(run) {
  return causalChain(run).map((link) => {
    const body = link.parts.map((p) => (p.code ? `\`${p.code}\`` : p.text)).join("");
    if (link.now) return `cycle ${link.cycle} · ${body}`;
    return link.cycle ? `${link.cause ? "set off by " : ""}cycle ${link.cycle}: ${body}` : body;
  }).join(" · ");
}

const ms = (iso) => Date.parse(iso);

/** A cycle's waterfall: every message and tool call in time order, with start, end, tokens and role;
 * the review closes it. The trace records when a message arrived, not when its model call began: a
 * message's bar runs from the event before it. A tool call's runs `ms` back from its record. */
export function timelineOf(c, now) {
  const messages = c.messages.map((m, i) => ({ kind: "message", key: `m${c.index}.${i}`, index: i, role: m.source, at: ms(m.at), record: m }));
  const calls = c.tool_calls.map((t, i) => ({ kind: "tool", key: `t${c.index}.${i}`, index: i, role: t.requester, at: ms(t.at), record: t }));
  // Both lists are in the engine's order; merged by time. In one millisecond a role's message comes
  // before the calls it asked for, and the ToolAgent's message after the calls it reports.
  const items = [];
  let i = 0, j = 0;
  while (i < messages.length || j < calls.length) {
    const m = messages[i], t = calls[j];
    const message = t === undefined || (m !== undefined && (m.at < t.at || (m.at === t.at && m.role !== "ToolAgent")));
    items.push(message ? messages[i++] : calls[j++]);
  }
  const t0 = ms(c.started_at) || (items.length ? items[0].at : now);
  let previous = t0;
  for (const item of items) {
    if (item.kind === "tool") item.start = Math.max(t0, item.at - (item.record.ms || 0));
    else if (item.record.model_ms != null) item.start = Math.max(t0, item.at - item.record.model_ms); // the model's own time
    else item.start = Math.min(previous, item.at);
    item.end = item.at;
    item.tokens = item.kind === "message" ? (item.record.prompt_tokens || 0) + (item.record.completion_tokens || 0) : 0;
    previous = Math.max(previous, item.end);
  }
  if (c.ended_at && (c.verdict || c.gate)) {
    const end = ms(c.ended_at);
    items.push({ kind: "verdict", key: `v${c.index}`, role: "Evaluator", start: Math.min(previous, end), end, at: end, tokens: 0, record: c });
  }
  const t1 = Math.max(c.ended_at ? ms(c.ended_at) : now, previous, t0 + 1);
  return { t0, t1, items };
}

/** The calls one message asked for: its requester's calls after it and before its next message. */
export function callsOf(c, message) {
  const later = c.messages.filter((m) => m.source === message.source && ms(m.at) > ms(message.at)).map((m) => ms(m.at));
  const until = later.length ? Math.min(...later) : Infinity;
  return c.tool_calls.filter((t) => t.requester === message.source && ms(t.at) >= ms(message.at) && ms(t.at) < until);
}

/** Every write_file that ran, in order, with the content the file had before it (the previous write
 * of the same path in this run; null for the first, whose earlier content the trace does not hold). */
export function writesOf(run) {
  const latest = new Map();
  const writes = [];
  for (const c of run.cycles) c.tool_calls.forEach((t, index) => {
    if (t.tool !== "write_file" || t.decision !== "allowed" || t.status !== "ok") return;
    const path = (t.facts && t.facts.path) || t.arguments.path;
    const area = (t.facts && t.facts.area) || "workspace";
    const key = `${area}:${path}`;
    const before = latest.has(key) ? latest.get(key) : null;
    const after = t.arguments.content ?? "";
    writes.push({ cycle: c.index, index, key: `t${c.index}.${index}`, path, area, before, after, call: t });
    latest.set(key, after);
  });
  return writes;
}

/** Per cycle, each file it changed: its content at the start of the cycle and at its end. */
export function changesByCycle(run) {
  const writes = writesOf(run);
  return run.cycles.map((c) => {
    const files = new Map();
    for (const w of writes.filter((x) => x.cycle === c.index)) {
      const id = `${w.area}:${w.path}`;
      if (!files.has(id)) files.set(id, { path: w.path, area: w.area, before: w.before, after: w.after, writes: 0 });
      Object.assign(files.get(id), { after: w.after, writes: files.get(id).writes + 1 });
    }
    return { cycle: c.index, files: [...files.values()].filter((f) => f.before !== f.after) };
  });
}

/** The files each run ended with, from its writes (path → content), for comparing two runs. */
export function finalFiles(run) {
  const out = new Map();
  for (const w of writesOf(run)) if (w.area === "workspace") out.set(w.path, w.after);
  return out;
}
