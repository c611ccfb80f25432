// The diff view a page starts with: the remembered choice, else side by side on a wide screen.
export function initialDiffMode() {
  try {
    const saved = localStorage.getItem("pse-diff-mode");
    if (saved === "unified" || saved === "split") return saved;
  } catch { /* storage unavailable */ }
  return window.innerWidth >= 1000 ? "split" : "unified";
}
