// Ariane dashboard: confirmations, select-all, export of the chosen rows, charts.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  for (const box of document.querySelectorAll("input[data-select-all]")) {
    box.addEventListener("change", () => {
      for (const other of document.querySelectorAll(`input[type=checkbox][name="${box.dataset.selectAll}"]`)) {
        other.checked = box.checked;
      }
    });
  }
  for (const form of document.querySelectorAll("form[data-collect]")) {
    form.addEventListener("submit", () => {
      for (const old of form.querySelectorAll("input[data-collected]")) old.remove();
      for (const box of document.querySelectorAll(`input[type=checkbox][name="${form.dataset.collect}"]:checked`)) {
        const hidden = document.createElement("input");
        hidden.type = "hidden";
        hidden.name = form.dataset.collect;
        hidden.value = box.value;
        hidden.dataset.collected = "1";
        form.appendChild(hidden);
      }
    });
  }
  for (const link of document.querySelectorAll("a[data-back]")) {
    link.addEventListener("click", (event) => {
      if (window.history.length > 1) { event.preventDefault(); window.history.back(); }
    });
  }
  drawCharts();
});

function readJson(id) {
  const el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : null;
}

function clock(ms) {
  const d = new Date(ms);
  return d.toTimeString().slice(0, 8);
}

const PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"];

function lineChart(canvasId, labels, datasets) {
  const canvas = document.getElementById(canvasId);
  if (!canvas || typeof Chart === "undefined") return;
  new Chart(canvas, {
    type: "line",
    data: { labels, datasets },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, spanGaps: true,
      interaction: { mode: "index", intersect: false },
      scales: { y: { beginAtZero: true } },
      plugins: { legend: { position: "bottom" } },
    },
  });
}

function drawCharts() {
  const series = readJson("series");
  if (series) {
    const labels = series.times.map(clock);
    const tps = [], total = [];
    Object.keys(series.brokers).forEach((name, i) => {
      const b = series.brokers[name];
      const color = PALETTE[(2 * i) % PALETTE.length], color2 = PALETTE[(2 * i + 1) % PALETTE.length];
      tps.push({ label: `${name} put`, data: b.putTps, borderColor: color, pointRadius: 0 });
      tps.push({ label: `${name} get`, data: b.getTps, borderColor: color2, pointRadius: 0, borderDash: [4, 3] });
      total.push({ label: `${name} put`, data: b.putToday, borderColor: color, pointRadius: 0 });
      total.push({ label: `${name} get`, data: b.getToday, borderColor: color2, pointRadius: 0, borderDash: [4, 3] });
    });
    lineChart("chart-tps", labels, tps);
    lineChart("chart-total", labels, total);
  }
  const topics = readJson("top-topics"), values = readJson("top-values");
  const top = document.getElementById("chart-top");
  if (topics && values && top && typeof Chart !== "undefined") {
    new Chart(top, {
      type: "bar",
      data: { labels: topics, datasets: [{ label: "messages in 24 h", data: values, backgroundColor: PALETTE[0], maxBarThickness: 26 }] },
      options: { animation: false, indexAxis: "y", responsive: true, maintainAspectRatio: false, plugins: { legend: { display: false } } },
    });
  }
  const trace = readJson("trace-data");
  const traceCanvas = document.getElementById("chart-trace");
  if (trace && trace.length && traceCanvas && typeof Chart !== "undefined") {
    const stamps = trace.map((r) => r.timestampMs).filter((t) => t > 0);
    const start = stamps.length ? Math.min(...stamps) : 0;
    new Chart(traceCanvas, {
      type: "bar",
      data: {
        labels: trace.map((r) => `${r.traceType} ${r.group || ""}`),
        datasets: [{
          label: "ms after the first record",
          data: trace.map((r) => {
            const at = (r.timestampMs || start) - start;
            return [at, at + Math.max(1, r.costMs || 0)];
          }),
          backgroundColor: trace.map((r) => (r.success === false ? "#dc2626" : "#2563eb")),
        }],
      },
      options: { animation: false, indexAxis: "y", responsive: true, maintainAspectRatio: false, plugins: { legend: { display: false } } },
    });
  }
}
