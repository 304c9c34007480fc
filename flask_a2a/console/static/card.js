// The Card screen: what the agent says about itself, and whether its signature verifies
// against the JWKS the app serves (WebCrypto in the browser; the server's own check where
// WebCrypto is unavailable, outside a secure context).

import { h, append, clear, b64ToBytes, safeUrl, rawDetails } from "./dom.js";
import { paths, consoleGet, rpc, describeError } from "./rpc.js";

// The payload a signature covers, as flask_a2a.card.signing.canonical_payload builds it:
// the card minus "signatures", proto default flags and empty values dropped, then RFC 8785.
function dropDefaultFlags(card) {
  for (const ext of (card.capabilities && card.capabilities.extensions) || []) {
    if (ext && typeof ext === "object" && ext.required === false) delete ext.required;
  }
  for (const scheme of Object.values(card.securitySchemes || {})) {
    const flow = scheme && scheme.oauth2SecurityScheme && scheme.oauth2SecurityScheme.flows
      && scheme.oauth2SecurityScheme.flows.authorizationCode;
    if (flow && typeof flow === "object" && flow.pkceRequired === false) delete flow.pkceRequired;
  }
}

function cleanEmpty(value) {
  if (Array.isArray(value)) {
    const items = value.map(cleanEmpty).filter((v) => v !== undefined);
    return items.length ? items : undefined;
  }
  if (value && typeof value === "object") {
    const kept = {};
    for (const [key, item] of Object.entries(value)) {
      const cleaned = cleanEmpty(item);
      if (cleaned !== undefined) kept[key] = cleaned;
    }
    return Object.keys(kept).length ? kept : undefined;
  }
  if (value === "" || value === null) return undefined; // dropped, as in Python (None)
  return value;
}

// RFC 8785: keys sorted by UTF-16 code units (Array.prototype.sort's default), numbers and
// strings as ECMAScript's JSON.stringify writes them.
export function canonicalize(value) {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalize).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalize(value[k])}`).join(",")}}`;
}

function b64url(bytes) {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function canonicalPayload(card) {
  const body = JSON.parse(JSON.stringify(card));
  delete body.signatures;
  dropDefaultFlags(body);
  return canonicalize(cleanEmpty(body) || {});
}

const ALGORITHMS = {
  ES256: {
    importAs: { name: "ECDSA", namedCurve: "P-256" },
    verifyAs: { name: "ECDSA", hash: "SHA-256" },
    jwk: (k) => ({ kty: "EC", crv: k.crv, x: k.x, y: k.y }),
    fits: (k) => k.kty === "EC" && k.crv === "P-256",
  },
  RS256: {
    importAs: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    verifyAs: { name: "RSASSA-PKCS1-v1_5" },
    jwk: (k) => ({ kty: "RSA", n: k.n, e: k.e }),
    fits: (k) => k.kty === "RSA",
  },
};

// {verified, by, kid, alg, reason}
export async function verifyInBrowser(card) {
  const signatures = card.signatures || [];
  if (!signatures.length) return { signed: false, verified: false };
  if (!paths.jwks) return { signed: true, verified: false, reason: "the app serves no JWKS" };
  const response = await fetch(paths.jwks, { cache: "no-store" });
  const jwks = await response.json();
  const byKid = new Map((jwks.keys || []).map((k) => [k.kid, k]));
  const payload = b64url(new TextEncoder().encode(canonicalPayload(card)));
  for (const entry of signatures) {
    let header;
    try {
      header = JSON.parse(new TextDecoder().decode(b64ToBytes(entry.protected)));
    } catch {
      continue;
    }
    const algorithm = ALGORITHMS[header.alg];
    const jwk = byKid.get(header.kid);
    if (!algorithm || !jwk || (jwk.alg && jwk.alg !== header.alg) || !algorithm.fits(jwk)) continue;
    try {
      const key = await crypto.subtle.importKey("jwk", algorithm.jwk(jwk), algorithm.importAs, false, ["verify"]);
      const ok = await crypto.subtle.verify(
        algorithm.verifyAs, key, b64ToBytes(entry.signature),
        new TextEncoder().encode(`${entry.protected}.${payload}`),
      );
      if (ok) return { signed: true, verified: true, kid: header.kid, alg: header.alg, by: "browser" };
    } catch {
      continue;
    }
  }
  return { signed: true, verified: false, by: "browser", reason: "no signature verifies against the served JWKS" };
}

async function verify(card) {
  if (globalThis.crypto && crypto.subtle) return verifyInBrowser(card);
  const found = await consoleGet("card-signature");
  return { ...found, by: "server" };
}

function signatureLine(result) {
  if (!result.signed) return h("p", { class: "sig unsigned", id: "card-signature" }, "Not signed.");
  if (result.verified) {
    const where = result.by === "server" ? "by the server (this page cannot run WebCrypto)" : "in your browser";
    return h("p", { class: "sig ok", id: "card-signature" },
      `Signature verified ${where} against the served JWKS`,
      result.kid ? ` (key ${result.kid}${result.alg ? `, ${result.alg}` : ""}).` : ".");
  }
  return h("p", { class: "sig bad", id: "card-signature" },
    `Signature does NOT verify: ${result.reason || "unknown reason"}.`);
}

function yesNo(value) {
  return value ? "yes" : "no";
}

function skillCard(skill, onTry) {
  const examples = (skill.examples || []).map((example) =>
    h("li", null, h("code", null, example), " ",
      h("button", { type: "button", class: "small", onclick: () => onTry(skill.id, example) }, "Try")));
  return h("article", { class: "skill", "data-skill": skill.id },
    h("h4", null, skill.name, " ", h("span", { class: "mono muted" }, skill.id)),
    h("p", null, skill.description),
    h("p", { class: "muted" },
      `Tags: ${(skill.tags || []).join(", ") || "none"} · In: ${(skill.inputModes || ["default"]).join(", ")}`
      + ` · Out: ${(skill.outputModes || ["default"]).join(", ")}`),
    examples.length ? h("div", null, h("p", { class: "muted" }, "Examples"), h("ul", { class: "examples-list" }, examples)) : null,
    h("div", { class: "actions" },
      h("button", { type: "button", class: "small", onclick: () => onTry(skill.id, null) }, `Send to ${skill.name}`)));
}

// GetExtendedAgentCard, as the signed-in caller: what this agent tells them beyond the card.
function extendedCard(onTry) {
  const box = h("div", { class: "extended", id: "extended-card" });
  const button = h("button", {
    type: "button", class: "small",
    onclick: async () => {
      try {
        const found = await rpc("GetExtendedAgentCard", {});
        box.replaceChildren(
          h("h3", null, `Extended card: ${found.name || ""}`),
          found.description ? h("p", null, found.description) : null,
          h("div", { class: "skills" }, (found.skills || []).map((s) => skillCard(s, onTry))),
          rawDetails("Raw extended card JSON", found));
      } catch (error) {
        box.replaceChildren(button, h("p", { class: "error" }, describeError(error)));
      }
    },
  }, "Show the extended card (as you)");
  box.append(button);
  return box;
}

export async function loadCard() {
  const response = await fetch(paths.card, { cache: "no-store" });
  if (!response.ok) throw new Error(`the card answered HTTP ${response.status}`);
  return response.json();
}

export function renderCard(card, onTry) {
  const body = clear(document.getElementById("card-body"));
  const caps = card.capabilities || {};
  const docs = card.documentationUrl && safeUrl(card.documentationUrl);
  append(body, [
    h("p", { class: "lead" }, card.description),
    h("dl", { class: "facts" },
      h("div", null, h("dt", null, "Name"), h("dd", null, card.name)),
      h("div", null, h("dt", null, "Version"), h("dd", null, card.version || "")),
      card.provider ? h("div", null, h("dt", null, "Provider"), h("dd", null, card.provider.organization)) : null,
      docs ? h("div", null, h("dt", null, "Documentation"), h("dd", null, h("a", { href: docs, rel: "noopener noreferrer" }, docs))) : null,
      h("div", null, h("dt", null, "Streaming"), h("dd", null, yesNo(caps.streaming))),
      h("div", null, h("dt", null, "Push notifications"), h("dd", null, yesNo(caps.pushNotifications))),
      h("div", null, h("dt", null, "Extended card"), h("dd", null, yesNo(caps.extendedAgentCard))),
      h("div", null, h("dt", null, "Security"), h("dd", null, Object.keys(card.securitySchemes || {}).join(", ") || "none"))),
    h("p", { class: "sig pending", id: "card-signature" }, "Checking the signature…"),
    h("h3", null, "Interfaces"),
    h("div", { class: "table-wrap" }, h("table", { class: "compact" },
      h("thead", null, h("tr", null, h("th", { scope: "col" }, "Binding"), h("th", { scope: "col" }, "URL"), h("th", { scope: "col" }, "Version"))),
      h("tbody", null, (card.supportedInterfaces || []).map((i) =>
        h("tr", null, h("td", null, i.protocolBinding), h("td", { class: "mono" }, i.url), h("td", null, i.protocolVersion)))))),
    (caps.extensions || []).length ? [
      h("h3", null, "Extensions"),
      h("ul", null, caps.extensions.map((e) =>
        h("li", null, h("span", { class: "mono" }, e.uri), e.required ? " (required)" : "", e.description ? ` — ${e.description}` : ""))),
    ] : null,
    caps.extendedAgentCard ? extendedCard(onTry) : null,
    h("h3", null, `Skills (${(card.skills || []).length})`),
    h("div", { class: "skills" }, (card.skills || []).map((s) => skillCard(s, onTry))),
    rawDetails("Raw card JSON", card),
  ]);
  verify(card).then(
    (result) => document.getElementById("card-signature").replaceWith(signatureLine(result)),
    (error) => document.getElementById("card-signature").replaceWith(
      signatureLine({ signed: true, verified: false, reason: error.message })),
  );
}
