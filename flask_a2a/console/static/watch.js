// The Watch screen: one task, live. A stream's events are applied as they arrive (status
// changes, artifact chunks appended in place, the final state); a paused task offers the
// reply box; a running one can be cancelled.

import { h, $, clear, show, stateLabel, pretty, renderPart, renderArtifact, renderMessage, uuid, TERMINAL, PAUSED } from "./dom.js";
import { rpc, stream, describeError } from "./rpc.js";

const view = {
  task: null,
  controller: null,
  streaming: false,
  delivery: "blocking",
  historyLength: null,
};

let onNotice = () => {};
export function setNotice(fn) { onNotice = fn; }

function summarize(result) {
  if (result.task) return `task ${stateLabel(result.task.status && result.task.status.state)}`;
  if (result.statusUpdate) return `status ${stateLabel(result.statusUpdate.status.state)}`;
  if (result.artifactUpdate) {
    const a = result.artifactUpdate;
    const text = (a.artifact.parts || []).map((p) => (typeof p.text === "string" ? p.text : "")).join("");
    return `artifact ${a.artifact.name || a.artifact.artifactId}${a.append ? " (append)" : ""}${a.lastChunk ? " (last chunk)" : ""}${text ? `: ${text.slice(0, 60)}` : ""}`;
  }
  if (result.message) return "message from the agent";
  return "event";
}

function logEvent(kind, label, raw) {
  const log = $("#watch-events");
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 8;
  const stamp = new Date();
  log.append(h("li", { class: "event", "data-kind": kind, "data-t": String(performance.now()) },
    h("span", { class: "event-time mono" }, stamp.toLocaleTimeString()), " ",
    h("span", { class: "event-kind" }, kind), " ",
    h("span", { class: "event-label" }, label),
    h("details", { class: "raw" }, h("summary", null, "raw JSON"), h("pre", { class: "code" }, pretty(raw)))));
  if (atBottom) log.scrollTop = log.scrollHeight;
}

function statusText(status) {
  const parts = (status && status.message && status.message.parts) || [];
  return parts.map((p) => (typeof p.text === "string" ? p.text : JSON.stringify(p.data ?? p))).join(" ");
}

function renderState() {
  const task = view.task;
  const state = task && task.status ? task.status.state : "";
  const badge = $("#watch-state");
  badge.textContent = stateLabel(state);
  badge.dataset.state = state;
  $("#watch-link").textContent = view.streaming ? "· streaming" : "";
  $("#watch-status").textContent = task ? statusText(task.status) : "";
  $("#watch-cancel").disabled = !task || TERMINAL.has(state);
  $("#watch-subscribe").disabled = !task || TERMINAL.has(state) || view.streaming;
  const paused = PAUSED.has(state);
  show($("#reply"), paused);
  if (paused) {
    $("#reply-label").textContent = state === "TASK_STATE_AUTH_REQUIRED"
      ? `The agent asks for authorization${statusText(task.status) ? `: ${statusText(task.status)}` : ""}`
      : `The agent asks: ${statusText(task.status) || "input required"}`;
  }
  $("#watch-raw").textContent = task ? pretty(task) : "";
}

function renderAllArtifacts() {
  const box = clear($("#watch-artifacts"));
  for (const artifact of (view.task && view.task.artifacts) || []) box.append(renderArtifact(artifact));
  if (!box.children.length) box.append(h("p", { class: "muted empty" }, "No artifacts yet."));
}

function applyArtifact(update) {
  const task = view.task;
  const incoming = update.artifact;
  task.artifacts = task.artifacts || [];
  const box = $("#watch-artifacts");
  const empty = box.querySelector(".empty");
  if (empty) empty.remove();
  const known = task.artifacts.find((a) => a.artifactId === incoming.artifactId);
  const section = [...box.querySelectorAll(".artifact")].find((el) => el.dataset.artifactId === incoming.artifactId);
  if (known && update.append && section) {
    known.parts = [...(known.parts || []), ...(incoming.parts || [])];
    const parts = section.querySelector(".parts");
    for (const part of incoming.parts || []) {
      const last = parts.lastElementChild;
      if (typeof part.text === "string" && last && last.classList.contains("text")) {
        last.textContent += part.text; // the chunk appended in place
      } else {
        parts.append(renderPart(part));
      }
    }
    return;
  }
  if (known) Object.assign(known, incoming);
  else task.artifacts.push({ ...incoming });
  const fresh = renderArtifact(known || incoming);
  if (section) section.replaceWith(fresh);
  else box.append(fresh);
}

function apply(result) {
  if (result.task) {
    view.task = result.task;
    renderAllArtifacts();
  } else if (result.statusUpdate && view.task) {
    view.task.status = result.statusUpdate.status;
  } else if (result.artifactUpdate && view.task) {
    applyArtifact(result.artifactUpdate);
  } else if (result.message) {
    $("#watch-artifacts").append(renderMessage(result.message));
  }
  if (view.task) {
    $("#watch-task").textContent = view.task.id;
    $("#watch-context").textContent = view.task.contextId || "";
  }
  renderState();
}

function open() {
  show($("#watch-empty"), false);
  show($("#watch"), true);
}

function reset() {
  if (view.controller) view.controller.abort();
  view.controller = null;
  view.streaming = false;
  view.task = null;
  clear($("#watch-events"));
  clear($("#watch-artifacts"));
  $("#watch-task").textContent = "";
  $("#watch-context").textContent = "";
  open();
}

// A result of SendMessage / GetTask / CancelTask: {task} or {message} or a bare Task.
export function showResult(result, kind = "result") {
  const wrapped = result && (result.task || result.message) ? result : { task: result };
  logEvent(kind, summarize(wrapped), result);
  apply(wrapped);
}

export function startFresh(delivery, historyLength) {
  reset();
  view.delivery = delivery;
  view.historyLength = historyLength;
}

export async function runStream(method, params) {
  const controller = new AbortController();
  view.controller = controller;
  view.streaming = true;
  renderState();
  try {
    for await (const response of stream(method, params, controller.signal)) {
      if (response.error) {
        logEvent("error", describeError(response.error), response);
        onNotice(`Stream error: ${response.error.message} (${response.error.code})`);
        continue;
      }
      const result = response.result || {};
      const kind = Object.keys(result)[0] || "event";
      logEvent(kind, summarize(result), response);
      apply(result);
    }
  } catch (error) {
    if (error.name !== "AbortError") {
      logEvent("error", describeError(error), { message: describeError(error) });
      onNotice(describeError(error));
    }
  } finally {
    if (view.controller === controller) {
      view.controller = null;
      view.streaming = false;
      logEvent("closed", "stream closed", {});
      renderState();
    }
  }
}

export async function watchTaskById(id) {
  reset();
  try {
    const task = await rpc("GetTask", { id });
    showResult(task, "snapshot");
  } catch (error) {
    onNotice(describeError(error));
  }
}

async function cancel() {
  if (!view.task) return;
  try {
    showResult(await rpc("CancelTask", { id: view.task.id }), "cancel");
  } catch (error) {
    onNotice(describeError(error));
  }
}

async function subscribe() {
  if (!view.task || view.streaming) return;
  await runStream("SubscribeToTask", { id: view.task.id });
}

async function refresh() {
  if (!view.task) return;
  try {
    showResult(await rpc("GetTask", { id: view.task.id }), "snapshot");
  } catch (error) {
    onNotice(describeError(error));
  }
}

async function reply(event) {
  event.preventDefault();
  const task = view.task;
  if (!task) return;
  const text = $("#reply-text").value;
  const params = {
    message: {
      messageId: uuid(), role: "ROLE_USER", parts: [{ text }],
      taskId: task.id, contextId: task.contextId,
    },
  };
  $("#reply-text").value = "";
  logEvent("reply", `you: ${text.slice(0, 60)}`, params);
  if (view.delivery === "stream") {
    await runStream("SendStreamingMessage", params);
    return;
  }
  try {
    showResult(await rpc("SendMessage", params));
  } catch (error) {
    onNotice(describeError(error));
  }
}

export function initWatch() {
  $("#watch-cancel").addEventListener("click", cancel);
  $("#watch-subscribe").addEventListener("click", subscribe);
  $("#watch-refresh").addEventListener("click", refresh);
  $("#reply").addEventListener("submit", reply);
}
