// The Tasks screen: the caller's ListTasks with its filters and paging; one task's history,
// artifacts and push configs (deletable); cancel, subscribe or reply from here.

import { h, $, append, clear, show, stateBadge, stateLabel, time, renderMessage, renderArtifact, rawDetails, STATES, TERMINAL, PAUSED } from "./dom.js";
import { rpc, describeError } from "./rpc.js";

const paging = { tokens: [""], index: 0, query: null };
let onWatch = () => {};
let onSubscribe = () => {};

function fail(error) {
  const box = $("#tasks-error");
  box.textContent = describeError(error);
  show(box, true);
}

function filters() {
  const query = { pageSize: Number($("#f-size").value) || 20, historyLength: 0 };
  const context = $("#f-context").value.trim();
  if (context) query.contextId = context;
  const state = $("#f-state").value;
  if (state) query.status = state;
  const after = $("#f-after").value;
  if (after) query.statusTimestampAfter = new Date(after).toISOString();
  return query;
}

async function loadPage() {
  show($("#tasks-error"), false);
  const params = { ...paging.query };
  const token = paging.tokens[paging.index];
  if (token) params.pageToken = token;
  let page;
  try {
    page = await rpc("ListTasks", params);
  } catch (error) {
    fail(error);
    return;
  }
  const body = clear($("#tasks-table tbody"));
  for (const task of page.tasks || []) {
    body.append(h("tr", { "data-task-id": task.id },
      h("td", null, h("button", { type: "button", class: "link mono", onclick: () => openTask(task.id), "aria-label": `Open task ${task.id}` }, task.id.slice(0, 8))),
      h("td", null, stateBadge(task.status && task.status.state)),
      h("td", null, time(task.status && task.status.timestamp)),
      h("td", { class: "mono" }, (task.contextId || "").slice(0, 8))));
  }
  const first = paging.index * paging.query.pageSize;
  const count = (page.tasks || []).length;
  $("#tasks-caption").textContent = count
    ? `Page ${paging.index + 1}: tasks ${first + 1}–${first + count} of ${page.totalSize}`
    : `No tasks match (${page.totalSize} in all).`;
  paging.tokens[paging.index + 1] = page.nextPageToken || "";
  paging.tokens.length = paging.index + 2;
  $("#page-prev").disabled = paging.index === 0;
  $("#page-next").disabled = !page.nextPageToken;
}

function list(event) {
  if (event) event.preventDefault();
  paging.query = filters();
  paging.tokens = [""];
  paging.index = 0;
  return loadPage();
}

function pushConfigs(task) {
  const box = h("div", { class: "push" }, h("h4", null, "Push configs"), h("p", { class: "muted" }, "Loading…"));
  rpc("ListTaskPushNotificationConfigs", { taskId: task.id }).then((found) => {
    const configs = found.configs || [];
    box.replaceChildren(h("h4", null, `Push configs (${configs.length})`));
    if (!configs.length) {
      box.append(h("p", { class: "muted" }, "None."));
      return;
    }
    box.append(h("ul", { class: "configs" }, configs.map((config) =>
      h("li", null, h("span", { class: "mono" }, config.url), ` (id ${config.id}) `,
        h("button", {
          type: "button", class: "small danger", "aria-label": `Delete push config ${config.id}`,
          onclick: async () => {
            try {
              await rpc("DeleteTaskPushNotificationConfig", { taskId: task.id, id: config.id });
              box.replaceWith(pushConfigs(task));
            } catch (error) {
              fail(error);
            }
          },
        }, "Delete")))));
  }, (error) => box.replaceChildren(h("h4", null, "Push configs"), h("p", { class: "muted" }, describeError(error))));
  return box;
}

function renderDetail(task) {
  const state = task.status && task.status.state;
  const body = clear($("#detail-body"));
  $("#detail-title").textContent = `Task ${task.id}`;
  const statusParts = (task.status && task.status.message && task.status.message.parts) || [];
  append(body, [
    h("dl", { class: "facts" },
      h("div", null, h("dt", null, "State"), h("dd", null, stateBadge(state))),
      h("div", null, h("dt", null, "Updated"), h("dd", null, time(task.status && task.status.timestamp))),
      h("div", null, h("dt", null, "Context"), h("dd", { class: "mono" }, task.contextId || ""))),
    statusParts.length ? h("p", { class: "status-text" }, statusParts.map((p) => p.text || JSON.stringify(p.data ?? p)).join(" ")) : null,
    h("div", { class: "actions" },
      h("button", { type: "button", onclick: () => onWatch(task.id) }, PAUSED.has(state) ? "Reply in Watch" : "Watch"),
      TERMINAL.has(state) ? null : h("button", { type: "button", onclick: () => onSubscribe(task.id) }, "Subscribe"),
      TERMINAL.has(state) ? null : h("button", {
        type: "button", class: "danger", onclick: async () => {
          try {
            renderDetail(await rpc("CancelTask", { id: task.id }));
          } catch (error) {
            fail(error);
          }
        },
      }, "Cancel task")),
    h("h4", null, `History (${(task.history || []).length})`),
    h("div", { class: "history" }, (task.history || []).map(renderMessage)),
    h("h4", null, `Artifacts (${(task.artifacts || []).length})`),
    h("div", { class: "artifacts" }, (task.artifacts || []).map(renderArtifact)),
    pushConfigs(task),
    rawDetails("Raw task JSON", task)]);
  show($("#task-detail"), true);
}

export async function openTask(id) {
  show($("#tasks-error"), false);
  try {
    renderDetail(await rpc("GetTask", { id }));
    $("#detail-title").focus();
  } catch (error) {
    show($("#task-detail"), false);
    fail(error);
  }
}

export function initTasks(watch, subscribe) {
  onWatch = watch;
  onSubscribe = subscribe;
  const select = $("#f-state");
  for (const state of STATES) select.append(h("option", { value: state }, stateLabel(state)));
  $("#detail-title").setAttribute("tabindex", "-1");
  $("#tasks-filter").addEventListener("submit", list);
  $("#task-open").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("#open-id").value.trim();
    if (id) openTask(id);
  });
  $("#page-next").addEventListener("click", () => { paging.index += 1; loadPage(); });
  $("#page-prev").addEventListener("click", () => { paging.index = Math.max(0, paging.index - 1); loadPage(); });
}

export { list as listTasks };
