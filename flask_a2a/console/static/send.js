// The Send screen: the form follows the skill. An entity skill gets an operation picker and a
// JSON editor seeded from the operation's tool schema; any other skill gets text, optional
// JSON data and file parts. Blocking, returnImmediately or streaming; history length.

import { h, $, clear, show, uuid, bytesToB64, pretty } from "./dom.js";
import { rpc, describeError } from "./rpc.js";
import { startFresh, showResult, runStream } from "./watch.js";

let skills = [];
let tools = {};
let onSent = () => {};

function typeOf(schema) {
  if (!schema) return "any";
  const kind = Array.isArray(schema.type) ? schema.type.join(" | ") : schema.type || (schema.enum ? "enum" : "any");
  const extra = schema.format ? ` (${schema.format})` : schema.enum ? ` (${schema.enum.join(", ")})` : "";
  return `${kind}${kind === "array" && schema.items && schema.items.type ? ` of ${schema.items.type}` : ""}${extra}`;
}

// A starting value of the schema's type, for the editor: the user replaces it.
export function sampleValue(schema) {
  if (!schema) return null;
  if ("default" in schema) return schema.default;
  if (schema.enum && schema.enum.length) return schema.enum[0];
  const kind = Array.isArray(schema.type) ? schema.type.find((k) => k !== "null") : schema.type;
  switch (kind) {
    case "integer":
    case "number": return typeof schema.minimum === "number" ? schema.minimum : 1;
    case "boolean": return false;
    case "array": return [];
    case "object": return {};
    case "string":
      if (schema.format === "date-time") return new Date().toISOString();
      if (schema.format === "date") return new Date().toISOString().slice(0, 10);
      if (schema.format === "decimal") return "0.00";
      return "";
    default: return null;
  }
}

// An optional string is left out: sent as "", it would be a filter matching nothing.
function seedArguments(schema) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const out = {};
  for (const [name, prop] of Object.entries(props)) {
    const value = sampleValue(prop);
    if (value !== "" || required.has(name)) out[name] = value;
  }
  return out;
}

function currentSkill() {
  return skills.find((s) => s.id === $("#skill").value);
}

function renderOperation() {
  const skill = currentSkill();
  const operations = (skill && tools[skill.id]) || {};
  const schema = operations[$("#operation").value];
  $("#arguments").value = pretty(seedArguments(schema));
  const required = new Set((schema && schema.required) || []);
  const body = clear($("#argument-table tbody"));
  for (const [name, prop] of Object.entries((schema && schema.properties) || {})) {
    body.append(h("tr", null, h("td", { class: "mono" }, name), h("td", null, typeOf(prop)),
      h("td", null, required.has(name) ? "yes" : "no")));
  }
  if (!body.children.length) body.append(h("tr", null, h("td", { colspan: "3", class: "muted" }, "none")));
}

function renderSkill() {
  const skill = currentSkill();
  $("#skill-about").textContent = skill ? skill.description : "";
  const operations = skill ? tools[skill.id] : null;
  show($("#entity-fields"), Boolean(operations));
  show($("#text-fields"), !operations);
  if (operations) {
    const select = clear($("#operation"));
    for (const name of Object.keys(operations)) select.append(h("option", { value: name }, name));
    renderOperation();
  } else {
    const box = clear($("#examples"));
    const examples = (skill && skill.examples) || [];
    if (examples.length) {
      box.append(h("span", { class: "muted" }, "Examples: "));
      for (const example of examples) {
        box.append(h("button", { type: "button", class: "small", onclick: () => useExample(example) }, example));
      }
    }
  }
}

function useExample(example) {
  let parsed = null;
  try { parsed = JSON.parse(example); } catch { /* plain text */ }
  if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
    const skill = currentSkill();
    if (skill && tools[skill.id] && parsed.operation) {
      $("#operation").value = parsed.operation;
      renderOperation();
      if (parsed.arguments) $("#arguments").value = pretty(parsed.arguments);
      return;
    }
    $("#data").value = pretty(parsed);
    return;
  }
  $("#text").value = example;
}

export function chooseSkill(id, example) {
  $("#skill").value = id;
  renderSkill();
  if (example) useExample(example);
}

export function setSkills(list, toolMap) {
  skills = list;
  tools = toolMap || {};
  const select = clear($("#skill"));
  for (const skill of skills) select.append(h("option", { value: skill.id }, `${skill.name} (${skill.id})`));
  renderSkill();
}

function parseJson(text, label) {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${label} is not valid JSON: ${error.message}`);
  }
}

async function fileParts() {
  const parts = [];
  for (const file of $("#files").files) {
    const bytes = new Uint8Array(await file.arrayBuffer());
    parts.push({ raw: bytesToB64(bytes), filename: file.name, mediaType: file.type || "application/octet-stream" });
  }
  return parts;
}

async function buildParams() {
  const skill = currentSkill();
  if (!skill) throw new Error("pick a skill first");
  const parts = [];
  if (tools[skill.id]) {
    const args = parseJson($("#arguments").value, "Arguments");
    if (args !== undefined && (args === null || typeof args !== "object" || Array.isArray(args))) {
      throw new Error("Arguments must be a JSON object");
    }
    const data = { skill: skill.id, operation: $("#operation").value };
    if (args !== undefined) data.arguments = args;
    parts.push({ data });
  } else {
    const text = $("#text").value;
    if (text) parts.push({ text });
    const data = parseJson($("#data").value, "Data");
    if (data !== undefined) parts.push({ data });
  }
  parts.push(...(await fileParts()));
  if (!parts.length) parts.push({ text: "" });
  const message = { messageId: uuid(), role: "ROLE_USER", parts, metadata: { skill: skill.id } };
  const context = $("#context-id").value.trim();
  if (context) message.contextId = context;
  const configuration = {};
  const delivery = new FormData($("#send-form")).get("delivery");
  if (delivery === "immediate") configuration.returnImmediately = true;
  const history = $("#history-length").value.trim();
  if (history !== "") configuration.historyLength = Number(history);
  return { params: { message, configuration }, delivery, history: history === "" ? null : Number(history) };
}

async function send(event) {
  event.preventDefault();
  const error = $("#send-error");
  show(error, false);
  let built;
  try {
    built = await buildParams();
  } catch (failure) {
    error.textContent = failure.message;
    show(error, true);
    return;
  }
  startFresh(built.delivery, built.history);
  onSent();
  if (built.delivery === "stream") {
    await runStream("SendStreamingMessage", built.params);
    return;
  }
  const button = $("#send-button");
  button.disabled = true;
  try {
    showResult(await rpc("SendMessage", built.params), "response");
  } catch (failure) {
    showResult({ message: { role: "ROLE_AGENT", parts: [{ text: `Error: ${describeError(failure)}` }] } }, "error");
  } finally {
    button.disabled = false;
  }
}

export function initSend(sent) {
  onSent = sent;
  $("#skill").addEventListener("change", renderSkill);
  $("#operation").addEventListener("change", renderOperation);
  $("#send-form").addEventListener("submit", send);
}
