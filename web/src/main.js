// The dashboard's entry: mounts the app, starts the hash router. `window.pseDebug` exposes the run
// model's pure functions to the browser tests (nothing secret: the same code any visitor downloads).
import { mount, flushSync } from "svelte";
import "./app.css";
import App from "./App.svelte";
import { emptyRun, applyEvent, eventLine, causalChain, causalLine, timelineOf, writesOf } from "./lib/run.js";
import { initialTheme } from "./lib/ui.svelte.js";
import { startRouter } from "./lib/router.svelte.js";

initialTheme();
startRouter();
mount(App, { target: document.getElementById("app") });

/** The Steps panel of `run` drawn into a detached element (a test renders a run it built by hand). */
async function stepsPanel(run) {
  const { default: StepsPanel } = await import("./components/StepsPanel.svelte");
  const box = document.createElement("div");
  mount(StepsPanel, { target: box, props: { run } });
  flushSync();
  return box.querySelector("#steps-panel") || box;
}

window.pseDebug = { emptyRun, applyEvent, eventLine, causalChain, causalLine, timelineOf, writesOf, stepsPanel };
