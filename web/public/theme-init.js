// The theme a person chose (System, Light, Dark) applies before the first paint; "system" follows
// prefers-color-scheme through CSS alone.
(function () {
  try {
    var theme = localStorage.getItem("pse-theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch (e) { /* storage unavailable: follow the system */ }
})();
