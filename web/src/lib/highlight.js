// Syntax colouring for diffs and files: highlight.js core with the languages tasks write.
import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import ini from "highlight.js/lib/languages/ini";
import yaml from "highlight.js/lib/languages/yaml";
import bash from "highlight.js/lib/languages/bash";
import xml from "highlight.js/lib/languages/xml";
import { cleanHighlight } from "./markdown.js";

for (const [name, lang] of Object.entries({ python, javascript, json, markdown, ini, yaml, bash, xml })) {
  hljs.registerLanguage(name, lang);
}

const BY_EXTENSION = { py: "python", js: "javascript", mjs: "javascript", ts: "javascript", json: "json", md: "markdown",
  toml: "ini", ini: "ini", cfg: "ini", yaml: "yaml", yml: "yaml", sh: "bash", html: "xml", xml: "xml", svg: "xml" };

export const languageOf = (path) => BY_EXTENSION[String(path || "").split(".").pop().toLowerCase()] || null;

const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** The file's lines as highlighted HTML, one string per line: the whole text is highlighted at once
 * (a docstring spans lines), then split, closing and reopening the spans a line break cuts. */
export function highlightLines(text, path) {
  const lang = languageOf(path);
  const source = String(text ?? "");
  if (!lang || source.length > 400_000) return source.split("\n").map(escape);
  const html = cleanHighlight(hljs.highlight(source, { language: lang, ignoreIllegals: true }).value);
  const lines = [];
  let open = [], current = "";
  for (const token of html.split(/(<span class="[^"]*">|<\/span>|\n)/)) {
    if (!token) continue;
    if (token === "\n") {
      lines.push(current + "</span>".repeat(open.length));
      current = open.join("");
    } else if (token.startsWith("<span")) { open.push(token); current += token; }
    else if (token === "</span>") { open.pop(); current += token; }
    else current += token;
  }
  lines.push(current + "</span>".repeat(open.length));
  return lines;
}
