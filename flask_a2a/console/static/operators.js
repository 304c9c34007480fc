// The Operators screen (admins only): live runs, stream seats, push queues and drops, store
// and bus health, as this process's exchange and metrics hold them.

import { h, $, clear } from "./dom.js";
import { consoleGet } from "./rpc.js";

function value(v) {
  if (v === null || v === undefined) return h("span", { class: "muted" }, "n/a");
  if (typeof v === "object") {
    const entries = Object.entries(v);
    if (!entries.length) return h("span", { class: "muted" }, "none");
    return h("dl", { class: "facts nested" }, entries.map(([k, item]) => h("div", null, h("dt", null, k), h("dd", null, value(item)))));
  }
  return String(v);
}

const LABELS = {
  runs: "Runs in flight", streams: "Stream seats", push: "Push deliveries in progress",
  health: "Store and bus health", metrics: "Counters (Prometheus, this process)",
  pid: "Process", closing: "Shutting down",
};

export async function loadOperators() {
  const body = clear($("#ops-body"));
  try {
    const figures = await consoleGet("operators");
    body.append(h("div", { class: "figures" }, Object.entries(figures).map(([key, item]) =>
      h("section", { class: "figure panel", "data-figure": key },
        h("h3", null, LABELS[key] || key), value(item)))));
    body.append(h("p", { class: "muted" }, `Read at ${new Date().toLocaleTimeString()}.`));
  } catch (error) {
    body.append(h("p", { class: "error" }, error.message));
  }
}

export function initOperators() {
  $("#ops-refresh").addEventListener("click", loadOperators);
}
