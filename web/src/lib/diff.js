// Diffs of workspace files (jsdiff): unified hunks and side-by-side rows, each line with its number
// in the old and new file, so the page can show the highlighted line for either side.
import { structuredPatch, diffLines } from "diff";

const CONTEXT = 3;

/** Unified hunks: [{header, lines: [{kind: "add"|"del"|"ctx", old, new, text}]}]. */
export function unifiedHunks(before, after) {
  const patch = structuredPatch("a", "b", before ?? "", after ?? "", "", "", { context: CONTEXT });
  return patch.hunks.map((h) => {
    let o = h.oldStart, n = h.newStart;
    const lines = [];
    for (const raw of h.lines) {
      if (raw.startsWith("\\")) continue; // "\ No newline at end of file"
      const kind = raw[0] === "+" ? "add" : raw[0] === "-" ? "del" : "ctx";
      lines.push({ kind, old: kind === "add" ? null : o, new: kind === "del" ? null : n, text: raw.slice(1) });
      if (kind !== "add") o++;
      if (kind !== "del") n++;
    }
    return { header: `@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`, lines };
  });
}

/** Side-by-side rows of the changed regions (with context): [{left: {n, text, kind}|null, right: …}]. */
export function sideBySide(before, after) {
  const rows = [];
  let o = 1, n = 1;
  const parts = diffLines(before ?? "", after ?? "");
  const split = (value) => value.replace(/\n$/, "").split("\n");
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (!part.added && !part.removed) {
      for (const text of split(part.value)) rows.push({ left: { n: o++, text, kind: "ctx" }, right: { n: n++, text, kind: "ctx" } });
      continue;
    }
    const removed = part.removed ? split(part.value) : [];
    const next = parts[i + 1];
    const added = part.added ? split(part.value) : next && next.added ? (i++, split(next.value)) : [];
    for (let k = 0; k < Math.max(removed.length, added.length); k++) {
      rows.push({ left: k < removed.length ? { n: o++, text: removed[k], kind: "del" } : null,
        right: k < added.length ? { n: n++, text: added[k], kind: "add" } : null });
    }
  }
  // keep the changes and CONTEXT lines around them; fold the rest into gaps
  const changed = rows.map((r) => r.left?.kind !== "ctx" || r.right?.kind !== "ctx");
  const keep = rows.map((_, i) => changed.slice(Math.max(0, i - CONTEXT), i + CONTEXT + 1).some(Boolean));
  const out = [];
  rows.forEach((r, i) => {
    if (keep[i]) out.push(r);
    else if (out.length && !out[out.length - 1].gap) out.push({ gap: true });
    else if (!out.length) out.push({ gap: true });
  });
  return out;
}

/** Lines added and removed. */
export function diffStat(before, after) {
  let add = 0, del = 0;
  for (const part of diffLines(before ?? "", after ?? "")) {
    const count = part.count ?? part.value.split("\n").length - 1;
    if (part.added) add += count;
    else if (part.removed) del += count;
  }
  return { add, del };
}
