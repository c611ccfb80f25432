// Builds the dashboard into the Python package (src/pse/web/static), which the FastAPI app serves at
// /static and the wheel ships. The output is never committed (see .gitignore); `make setup` builds it.
import { defineConfig } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";

export default defineConfig({
  base: "/static/",
  plugins: [svelte()],
  build: {
    outDir: "../src/pse/web/static",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // no inline polyfill script: the CSP allows scripts from 'self' only
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
    rollupOptions: {
      output: {
        // the libraries behind diffs, syntax colours and Markdown, and the charts' scales: one chunk
        // each, loaded by the pages that need them
        manualChunks(id) {
          if (/node_modules\/(highlight\.js|diff|marked|dompurify)\//.test(id)) return "text";
          if (/node_modules\/d3-/.test(id)) return "scales";
          if (/node_modules\/svelte\//.test(id)) return "svelte";
          return undefined;
        },
      },
    },
  },
});
