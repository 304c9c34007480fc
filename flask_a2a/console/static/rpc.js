// The app's own A2A endpoint, called from the browser: JSON-RPC over fetch(), streams read
// from fetch()'s ReadableStream (EventSource cannot POST). The caller is whoever the app's
// auth says: the browser's cookie, or the bearer token pasted into the page.

const settings = document.body.dataset;
let token = "";
let nextId = 1;

export const paths = {
  a2a: settings.a2aPath,
  console: settings.consolePath,
  card: settings.cardPath,
  jwks: settings.jwksPath,
  principal: settings.principal,
};

export function setToken(value) {
  token = String(value || "").trim();
}

export function hasToken() {
  return token !== "";
}

// A pasted token is sent as a bearer token; a value that names its own scheme
// ("Token abc", "Basic …") is sent as it is.
function authorization() {
  return /^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]* \S+$/.test(token) ? token : `Bearer ${token}`;
}

// Every request says it is a JSON API client: apps that read a token only from JSON requests
// (request.is_json) then see it on the console's GETs too.
function headers(extra) {
  const out = {
    "Content-Type": "application/json", Accept: "application/json", "A2A-Version": "1.0", ...extra,
  };
  if (token) out.Authorization = authorization();
  return out;
}

export class RpcError extends Error {
  constructor(error, status) {
    super(error && error.message ? error.message : `HTTP ${status}`);
    this.code = error && error.code;
    this.data = error && error.data;
    this.status = status;
  }
}

function envelope(method, params) {
  return JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params });
}

export async function rpc(method, params = {}) {
  const response = await fetch(paths.a2a, {
    method: "POST", headers: headers(), body: envelope(method, params),
    credentials: "same-origin", cache: "no-store",
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    throw new RpcError(null, response.status);
  }
  if (body && body.error) throw new RpcError(body.error, response.status);
  if (!response.ok) throw new RpcError(null, response.status);
  return body.result;
}

// Yields each SSE event's JSON-RPC response ({result} or {error}) as it arrives.
export async function* stream(method, params, signal) {
  const response = await fetch(paths.a2a, {
    method: "POST", headers: headers({ Accept: "text/event-stream" }),
    body: envelope(method, params), credentials: "same-origin", cache: "no-store", signal,
  });
  const type = response.headers.get("Content-Type") || "";
  if (!type.startsWith("text/event-stream")) {
    let body = null;
    try { body = await response.json(); } catch { /* not JSON */ }
    throw new RpcError(body && body.error, response.status);
  }
  for await (const event of sseEvents(response.body)) {
    let parsed;
    try {
      parsed = JSON.parse(event.data);
    } catch {
      continue;
    }
    yield parsed;
  }
}

// text/event-stream framing: lines end in CRLF, LF or CR; a blank line ends an event;
// "data:" lines are joined with "\n"; comment lines (": keep-alive") are skipped.
export async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let name = "";
  const line = (text) => {
    if (text === "") {
      const event = data.length ? { event: name || "message", data: data.join("\n") } : null;
      data = [];
      name = "";
      return event;
    }
    if (text.startsWith(":")) return null;
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") name = value;
    return null;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      for (;;) {
        const at = buffer.search(/[\r\n]/);
        if (at < 0) break;
        if (buffer[at] === "\r" && at === buffer.length - 1) break; // its "\n" may follow
        const width = buffer[at] === "\r" && buffer[at + 1] === "\n" ? 2 : 1;
        const event = line(buffer.slice(0, at));
        buffer = buffer.slice(at + width);
        if (event) yield event;
      }
    }
    if (buffer) line(buffer);
    const last = line("");
    if (last) yield last;
  } finally {
    reader.releaseLock();
  }
}

// The console's own JSON reads (who am I, tools, operators, the server's card check).
export async function consoleGet(name) {
  const response = await fetch(`${paths.console}/api/${name}`, {
    headers: headers(),
    credentials: "same-origin", cache: "no-store",
  });
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  if (!response.ok) {
    const error = new Error((body && body.error) || `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

export function describeError(error) {
  if (error instanceof RpcError && error.code !== undefined && error.code !== null) {
    return `${error.message} (${error.code})`;
  }
  return error && error.message ? error.message : String(error);
}
