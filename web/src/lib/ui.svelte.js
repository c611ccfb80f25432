// App-wide state: the notice under the header, the one aria-live status line, the theme.

export const ui = $state({ notice: "", status: "", theme: "system" });

export function notice(text) {
  ui.notice = text || "";
}

/** The status line is the page's only live region: short news ("12 events received", "PASSED"). */
export function status(text) {
  ui.status = text || "";
}

export function setTheme(theme) {
  ui.theme = theme;
  if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
  try {
    if (theme === "system") localStorage.removeItem("pse-theme");
    else localStorage.setItem("pse-theme", theme);
  } catch { /* storage unavailable: the choice lasts this page */ }
}

export function initialTheme() {
  const t = document.documentElement.dataset.theme;
  ui.theme = t === "light" || t === "dark" ? t : "system";
}
