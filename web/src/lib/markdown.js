// Model-written Markdown (a run's report) to HTML that is safe to insert. marked renders it with raw
// HTML turned into text (a report's <script> shows as the characters it is, never as markup) and
// images as their alt text; DOMPurify then keeps only inert markup (defence in depth: no media, forms,
// frames, styles, scripts or handlers; links carry rel="noopener noreferrer nofollow" and only
// http(s), mailto and in-page targets).
import { Marked } from "marked";
import DOMPurify from "dompurify";

const escapeHtml = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const marked = new Marked({
  gfm: true,
  breaks: true, // a report's "Artifacts: …" and "Evidence: …" lines stay lines, never one paragraph
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ text }) => escapeHtml(text),
  },
});

const FORBID_TAGS = ["style", "img", "picture", "source", "video", "audio", "iframe", "object", "embed",
  "form", "input", "button", "textarea", "select", "svg", "math", "link", "meta", "base"];

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("rel", "noopener noreferrer nofollow");
    const target = node.getAttribute("href") || "";
    if (!/^(https?:|mailto:|#)/i.test(target)) node.removeAttribute("href");
  }
});

export function renderMarkdown(text) {
  const html = marked.parse(String(text || ""), { async: false });
  return DOMPurify.sanitize(html, { FORBID_TAGS, FORBID_ATTR: ["style", "class", "id"], ALLOW_DATA_ATTR: false });
}

/** Highlighted code (highlight.js output, already escaped) cleaned to <span class="hljs-…"> only. */
export function cleanHighlight(html) {
  return DOMPurify.sanitize(html, { ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] });
}
