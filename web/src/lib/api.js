// Calls to the dashboard API. Every state-changing call carries X-PSE-Request: a cross-site page cannot
// send a custom header without a CORS preflight, which the server never grants (docs/web.md, Security).
// The token lives in sessionStorage (this tab only) and goes in the Authorization header, never a URL.
import { notice } from "./ui.svelte.js";

export const token = () => sessionStorage.getItem("pse-token") || "";

export function setToken(value) {
  if (value) sessionStorage.setItem("pse-token", value);
  else sessionStorage.removeItem("pse-token");
}

export function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  if (token()) headers.Authorization = `Bearer ${token()}`;
  return headers;
}

export class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

async function request(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = authHeaders(opts.headers);
  if (opts.method && opts.method !== "GET") opts.headers["X-PSE-Request"] = "1";
  const res = await fetch(path, opts);
  if (res.status === 401) {
    notice("This server needs an access token: paste PSE_WEB_TOKEN into the field at the top right.");
    throw new ApiError(401, "unauthorized");
  }
  return res;
}

async function failure(res) {
  const text = await res.text();
  let detail = res.statusText;
  try {
    const data = JSON.parse(text);
    if (data && data.detail) detail = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
  } catch { /* not JSON: keep the status text */ }
  return new ApiError(res.status, detail);
}

/** JSON from `path`; throws ApiError (with .status) when the answer is not 2xx. */
export async function api(path, options) {
  const res = await request(path, options);
  if (!res.ok) throw await failure(res);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

/** A POST with a JSON body. */
export const post = (path, body) => api(path, body === undefined ? { method: "POST" }
  : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });

/** Text from `path`, or null on 404. */
export async function apiText(path) {
  const res = await request(path);
  if (res.status === 404) return null;
  if (!res.ok) throw await failure(res);
  return res.text();
}

export const runPath = (id, rest) => `/api/runs/${encodeURIComponent(id)}${rest || ""}`;
export const filePath = (id, path) => runPath(id, `/files/${path.split("/").map(encodeURIComponent).join("/")}`);

/** Server-sent events over fetch (EventSource cannot send the Authorization header, and a token in a
 * URL leaks into logs): calls onEvent(kind, data) per event until the stream ends or `signal` aborts. */
export async function streamEvents(runId, onEvent, signal) {
  // ?said=true: messages and tool calls come with the line the terminal prints for them
  const res = await fetch(runPath(runId, "/events?said=true"), { headers: authHeaders(), signal });
  if (!res.ok) throw new ApiError(res.status, "events");
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
