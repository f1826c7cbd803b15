// Charts on an answer card, drawn from the tool results stored with the message (each tool
// step's `charts`: kind, title, labels, values), never from the model's text. Chart.js is the
// vendored, pinned build in vendor/ (see vendor/README.md), loaded on the first chart.
// Each chart has a text alternative: a summary as the canvas's label and every figure in a
// table under "Figures".

import { h } from "./dom.js";

const MAX_CHARTS = 3; // an answer with more tool steps shows the first three
const number = new Intl.NumberFormat("en-US");
let library = null; // the Chart constructor, once loaded

function loadChartJs() {
  library ??= import("./vendor/chart.umd.min.js").then(() => globalThis.Chart);
  return library;
}

/** The charts of a message's tool steps (duplicates once), or null when there are none. */
export function answerCharts(steps) {
  const seen = new Set();
  const charts = [];
  for (const step of steps) {
    for (const chart of Array.isArray(step?.charts) ? step.charts : []) {
      const key = JSON.stringify([chart.title, chart.labels, chart.values]);
      if (!valid(chart) || seen.has(key)) continue;
      seen.add(key);
      charts.push(chart);
    }
  }
  if (!charts.length) return null;
  return h("div", { class: "charts" }, ...charts.slice(0, MAX_CHARTS).map(figure));
}

function valid(chart) {
  return (
    chart &&
    (chart.kind === "bar" || chart.kind === "line") &&
    Array.isArray(chart.labels) &&
    Array.isArray(chart.values) &&
    chart.labels.length === chart.values.length &&
    chart.values.length > 0 &&
    chart.values.every((v) => typeof v === "number" && Number.isFinite(v))
  );
}

/** In words: every figure of a short chart; the range, peak and total of a long one. */
export function describe(chart) {
  const unit = chart.unit || "interactions";
  const pairs = chart.labels.map((label, i) => [String(label), chart.values[i]]);
  if (chart.kind === "bar" || pairs.length <= 6) {
    return `${chart.title}: ${pairs.map(([l, v]) => `${l} ${number.format(v)}`).join(", ")}.`;
  }
  const [low, high] = [Math.min(...chart.values), Math.max(...chart.values)];
  const peak = pairs.find(([, v]) => v === high)[0];
  const total = chart.values.reduce((a, b) => a + b, 0);
  return (
    `${chart.title}, ${pairs[0][0]} to ${pairs.at(-1)[0]}: between ${number.format(low)} and ` +
    `${number.format(high)} ${unit} (most on ${peak}), ${number.format(total)} in all.`
  );
}

function figure(chart) {
  const canvas = h("canvas", { role: "img", "aria-label": describe(chart) });
  const table = h(
    "table",
    {},
    h("thead", {}, h("tr", {}, h("th", { scope: "col", text: chart.kind === "line" ? "Date" : "Name" }),
      h("th", { scope: "col", text: capitalized(chart.unit || "interactions") }))),
    h(
      "tbody",
      {},
      ...chart.labels.map((label, i) =>
        h("tr", {}, h("td", { text: String(label) }), h("td", { text: number.format(chart.values[i]) })),
      ),
    ),
  );
  const node = h(
    "figure",
    { class: `chart chart-${chart.kind}` },
    h("figcaption", { text: chart.title }),
    h("div", { class: "chart-box" }, canvas),
    h("details", { class: "chart-figures" }, h("summary", { text: "Figures" }), table),
  );
  loadChartJs()
    .then((Chart) => draw(Chart, canvas, chart))
    .catch(() => node.classList.add("chart-unavailable")); // the table still says it all
  return node;
}

function capitalized(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function draw(Chart, canvas, chart) {
  const css = getComputedStyle(document.documentElement);
  const accent = css.getPropertyValue("--accent").trim() || "#2b59c3";
  const muted = css.getPropertyValue("--muted").trim() || "#4f5a70";
  const line = chart.kind === "line";
  const sideways = !line && chart.labels.some((l) => String(l).length > 12); // product names
  new Chart(canvas, {
    type: chart.kind,
    data: {
      labels: chart.labels.map(String),
      datasets: [
        {
          label: capitalized(chart.unit || "interactions"),
          data: chart.values,
          backgroundColor: line ? `${accent}22` : accent,
          borderColor: accent,
          borderWidth: line ? 2 : 0,
          pointRadius: chart.values.length > 30 ? 0 : 2,
          fill: line,
          tension: 0.2,
          maxBarThickness: 36,
        },
      ],
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      indexAxis: sideways ? "y" : "x",
      plugins: { legend: { display: false }, tooltip: { intersect: false } },
      scales: {
        x: { ticks: { color: muted, maxRotation: 0 }, grid: { display: sideways }, beginAtZero: true },
        y: { ticks: { color: muted }, grid: { display: !sideways }, beginAtZero: true },
      },
    },
  });
}
