// Our own SVG charts for the metrics page: a time series (dots joined by a line) and a bar chart.
// Text goes in through textContent only; nothing here parses HTML.
"use strict";

const PSECharts = (() => {
  const NS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function frame(title, width, height) {
    const svg = el("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img" });
    svg.appendChild(el("title", {}, title));
    svg.appendChild(el("text", { x: 8, y: 16, class: "title" }, title));
    return svg;
  }

  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function empty(svg, width, height) {
    svg.appendChild(el("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "no finished runs yet"));
    return svg;
  }

  // points: [{t: Date, y: number, color: string, label: string}]
  function timeSeries(title, points, { width = 560, height = 240, format = (v) => String(v) } = {}) {
    const svg = frame(title, width, height);
    if (!points.length) return empty(svg, width, height);
    const left = 64, right = 14, top = 30, bottom = 34;
    const w = width - left - right, h = height - top - bottom;
    const ts = points.map((p) => p.t.getTime());
    const t0 = Math.min(...ts), t1 = Math.max(...ts);
    const yMax = niceMax(Math.max(...points.map((p) => p.y)));
    const x = (t) => left + (t1 === t0 ? w / 2 : ((t - t0) / (t1 - t0)) * w);
    const y = (v) => top + h - (v / yMax) * h;
    for (let i = 0; i <= 4; i++) {
      const v = (yMax * i) / 4;
      svg.appendChild(el("line", { x1: left, x2: left + w, y1: y(v), y2: y(v), class: "axis" }));
      svg.appendChild(el("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, format(v)));
    }
    svg.appendChild(el("text", { x: left, y: height - 10 }, new Date(t0).toLocaleString()));
    svg.appendChild(el("text", { x: left + w, y: height - 10, "text-anchor": "end" }, new Date(t1).toLocaleString()));
    const path = points.map((p, i) => `${i ? "L" : "M"}${x(p.t.getTime()).toFixed(1)},${y(p.y).toFixed(1)}`).join(" ");
    svg.appendChild(el("path", { d: path, fill: "none", stroke: "#94a3b8", "stroke-width": 1.2 }));
    for (const p of points) {
      const dot = el("circle", { cx: x(p.t.getTime()), cy: y(p.y), r: 3.5, fill: p.color });
      dot.appendChild(el("title", {}, `${p.label}: ${format(p.y)}`));
      svg.appendChild(dot);
    }
    return svg;
  }

  // bars: [{label: string, value: number, color: string}]
  function bars(title, items, { width = 560, height = 240, format = (v) => String(v) } = {}) {
    const svg = frame(title, width, height);
    if (!items.length || items.every((b) => !b.value)) return empty(svg, width, height);
    const left = 40, right = 14, top = 44, bottom = 34;
    const w = width - left - right, h = height - top - bottom;
    const yMax = niceMax(Math.max(...items.map((b) => b.value)));
    const slot = w / items.length, bw = Math.min(70, slot * 0.6);
    svg.appendChild(el("line", { x1: left, x2: left + w, y1: top + h, y2: top + h, class: "axis" }));
    items.forEach((b, i) => {
      const bh = (b.value / yMax) * h, cx = left + slot * i + slot / 2;
      const rect = el("rect", { x: cx - bw / 2, y: top + h - bh, width: bw, height: Math.max(bh, 0.5), fill: b.color, rx: 3 });
      rect.appendChild(el("title", {}, `${b.label}: ${format(b.value)}`));
      svg.appendChild(rect);
      svg.appendChild(el("text", { x: cx, y: top + h - bh - 4, "text-anchor": "middle" }, format(b.value)));
      svg.appendChild(el("text", { x: cx, y: height - 12, "text-anchor": "middle" }, b.label));
    });
    return svg;
  }

  // A part-of-whole bar: rate in [0, 1] (or null when there is nothing to measure).
  function rate(title, value, caption, { width = 560, height = 110 } = {}) {
    const svg = frame(title, width, height);
    const left = 14, w = width - 28, top = 34, h = 26;
    svg.appendChild(el("rect", { x: left, y: top, width: w, height: h, fill: "#e5e7eb", rx: 4 }));
    if (value === null || value === undefined) {
      svg.appendChild(el("text", { x: left + 8, y: top + 18 }, "no finished runs yet"));
      return svg;
    }
    svg.appendChild(el("rect", { x: left, y: top, width: Math.max(w * value, 1), height: h, fill: "#1a7f37", rx: 4 }));
    svg.appendChild(el("text", { x: left + 8, y: top + 18, class: value >= 0.15 ? "on-bar" : "" }, `${(value * 100).toFixed(1)}%`));
    svg.appendChild(el("text", { x: left, y: top + h + 22 }, caption));
    return svg;
  }

  return { timeSeries, bars, rate };
})();
