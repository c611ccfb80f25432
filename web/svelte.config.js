// Svelte's compiler options for the dashboard (the defaults: runes mode is inferred per component).
export default {};
