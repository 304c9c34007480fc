// DOM helpers: every value is set as text or an attribute, never parsed as HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function show(el, visible) {
  el.hidden = !visible;
}

// "TASK_STATE_INPUT_REQUIRED" -> "input required"
export function stateLabel(state) {
  return String(state || "unknown").replace(/^TASK_STATE_/, "").replaceAll("_", " ").toLowerCase();
}

export const TERMINAL = new Set([
  "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
]);
export const PAUSED = new Set(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]);
export const STATES = [
  "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED",
  "TASK_STATE_AUTH_REQUIRED", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
];

export function stateBadge(state) {
  const el = h("span", { class: "state", "data-state": state || "" }, stateLabel(state));
  return el;
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

export function rawDetails(summary, value) {
  return h("details", { class: "raw" }, h("summary", null, summary), h("pre", { class: "code" }, pretty(value)));
}

export function time(stamp) {
  if (!stamp) return "";
  const date = new Date(stamp);
  return Number.isNaN(date.getTime()) ? String(stamp) : date.toLocaleString();
}

// A random UUID without crypto.randomUUID (absent outside secure contexts, e.g. plain http
// on a LAN address); getRandomValues is available everywhere.
export function uuid() {
  if (globalThis.crypto && crypto.randomUUID) {
    try { return crypto.randomUUID(); } catch { /* insecure context */ }
  }
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function b64ToBytes(text) {
  const clean = String(text).replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(clean + "=".repeat((4 - (clean.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}
export { b64ToBytes };

export function bytesToB64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function safeUrl(url) {
  try {
    const parsed = new URL(url, location.href);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}
export { safeUrl };

// The type of every file part's blob: a download, never a page (the part's own type is shown).
const DOWNLOAD_TYPE = "application/octet-stream";

// One part, rendered: text as text, data as pretty JSON, files downloadable, URLs as links.
export function renderPart(part) {
  if (typeof part.text === "string") {
    return h("pre", { class: "part text" }, part.text);
  }
  if ("data" in part) {
    return h("pre", { class: "part json code" }, pretty(part.data));
  }
  if (typeof part.raw === "string") {
    const bytes = b64ToBytes(part.raw);
    const type = part.mediaType || "application/octet-stream";
    // Bytes, whatever the part says it is: a blob: URL is of this origin, so a text/html or
    // SVG blob opened in a tab would run its script as the console, with the user's session.
    const href = URL.createObjectURL(new Blob([bytes], { type: DOWNLOAD_TYPE }));
    const name = part.filename || "file";
    return h("p", { class: "part file" },
      h("a", { href, download: name }, `Download ${name}`), ` (${type}, ${bytes.length} bytes)`);
  }
  if (typeof part.url === "string") {
    const href = safeUrl(part.url);
    const label = part.filename || part.url;
    return h("p", { class: "part file" },
      href ? h("a", { href, rel: "noopener noreferrer", target: "_blank" }, label) : label);
  }
  return h("pre", { class: "part json code" }, pretty(part));
}

export function renderMessage(message) {
  const role = message.role === "ROLE_AGENT" ? "agent" : "user";
  return h("article", { class: `message ${role}` },
    h("p", { class: "message-role" }, role),
    (message.parts || []).map(renderPart));
}

export function renderArtifact(artifact) {
  const el = h("section", { class: "artifact", "data-artifact-id": artifact.artifactId },
    h("h4", null, artifact.name || artifact.artifactId));
  if (artifact.description) el.append(h("p", { class: "muted" }, artifact.description));
  const parts = h("div", { class: "parts" });
  for (const part of artifact.parts || []) parts.append(renderPart(part));
  el.append(parts);
  return el;
}
