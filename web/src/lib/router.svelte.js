// Hash routes (#/, #/run/<id>, #/metrics, #/compare?a=&b=, #/evals, #/eval/<id>); the query after "?"
// holds a page's search, filters and paging, so a URL shows the same list again.

export const route = $state({ name: "runs", id: "", query: {} });

const PAGES = { "": "runs", metrics: "metrics", evals: "evals", compare: "compare" };

export function parse(hash) {
  const text = (hash || "#/").replace(/^#/, "");
  const cut = text.indexOf("?");
  const path = (cut >= 0 ? text.slice(0, cut) : text).replace(/^\/+|\/+$/g, "");
  const query = Object.fromEntries(new URLSearchParams(cut >= 0 ? text.slice(cut + 1) : ""));
  const [head, ...rest] = path.split("/");
  let name = PAGES[head] && !rest.length ? PAGES[head] : "notfound";
  let id = "";
  if ((head === "run" || head === "eval") && rest.length) {
    name = head;
    id = decodeURIComponent(rest.join("/"));
  }
  return { name, id, query };
}

function apply() {
  Object.assign(route, parse(location.hash));
}

export function startRouter() {
  apply();
  window.addEventListener("hashchange", apply);
}

export function href(path, query) {
  const q = new URLSearchParams(Object.entries(query || {}).filter(([, v]) => v !== "" && v !== null && v !== undefined && v !== 0));
  const s = q.toString();
  return `#${path}${s ? `?${s}` : ""}`;
}

/** Change the query of the current page without a history entry per keystroke (replace: true). */
export function setQuery(query, { replace = true } = {}) {
  const path = (location.hash || "#/").replace(/^#/, "").split("?")[0] || "/";
  const next = href(path, query);
  if (replace) history.replaceState(null, "", next);
  else history.pushState(null, "", next);
  apply();
}
