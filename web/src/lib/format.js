// Number, money, time and duration formats shared by every page.

export const DASH = "—";

/** An integer with thousands separators ("25,651"); counts are never shown with decimals. */
export const fmtInt = (n) => Math.round(Number(n || 0)).toLocaleString("en-US");

/** Money with 4 decimals; "unpriced" when the run's models have no price; a dash when no model call was
 * counted (`tokens` 0: nothing was spent, priced or not). The one rule of every list, as `pse trace list`. */
export function fmtCost(amount, currency, unpriced, tokens) {
  if (!amount && tokens === 0) return DASH;
  if (unpriced && unpriced.length && !amount) return "unpriced";
  return `${Number(amount || 0).toFixed(4)} ${currency || "USD"}`;
}

export const fmtTime = (s) => (s ? new Date(s).toLocaleString() : "");

/** A start time a run list scans: "Dec 3, 10:52" this year, "Dec 3 2025, 10:52" before (fmtTime in full). */
export function fmtShortTime(s) {
  if (!s) return "";
  const d = new Date(s);
  const day = d.toLocaleDateString("en-US", d.getFullYear() === new Date().getFullYear()
    ? { month: "short", day: "numeric" } : { month: "short", day: "numeric", year: "numeric" });
  return `${day}, ${d.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" })}`;
}

export const fmtPct = (v) => (v === null || v === undefined ? DASH : `${(v * 100).toFixed(1)}%`);

/** Seconds as "850 ms", "12.4 s", "3 min 05 s", "1 h 02 min". */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return DASH;
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60), s = Math.round(seconds % 60);
  if (m < 60) return `${m} min ${String(s).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

export const seconds = (from, to) => (from && to ? Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000) : null);

export const plural = (n, one, many) => `${fmtInt(n)} ${n === 1 ? one : many || `${one}s`}`;

export const shorten = (text, n) => (text && text.length > n ? `${text.slice(0, n - 1)}…` : text || "");

/** The file name of a path (a server path in settings is nobody's business on screen). */
export const baseName = (path) => (path ? String(path).split(/[\\/]/).pop() : "");
