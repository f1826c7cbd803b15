// The chat API as the page uses it. Every request carries the API key of the organization in
// use (Authorization: Bearer, from keys.js) and names that organization in X-Organization-Id;
// errors come back as ApiError with the API's {error: {code, message}}. A 401 (the key is
// unknown, revoked or expired) is also reported to the handler set with onUnauthorized.

import { keyFor } from "./keys.js";

export class ApiError extends Error {
  constructor(code, message, status = 0) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

async function errorFrom(response) {
  let code = `http_${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}`.trim();
  try {
    const body = await response.json();
    if (body?.error?.message) ({ code, message } = body.error);
  } catch {
    // not the API's error shape: keep the status line
  }
  return new ApiError(code, message, response.status);
}

let unauthorized = () => {};

/** `handler(org, key, error)` runs when a request made with `org`'s stored key gets a 401. */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

function headersFor(org, key, extra) {
  const headers = { ...extra };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (org) headers["X-Organization-Id"] = org;
  return headers;
}

// A failed response as ApiError; a 401 on an organization's stored key is reported first.
async function failure(response, org, key) {
  const err = await errorFrom(response);
  if (response.status === 401 && org) unauthorized(org, key, err);
  return err;
}

/** `key` defaults to the stored key of `org`; with neither, no Authorization is sent. */
export async function request(method, path, { org, key, body, signal } = {}) {
  const stored = key === undefined;
  if (stored) key = keyFor(org);
  const headers = headersFor(org, key, { Accept: "application/json" });
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError("network_error", "Could not reach the server. Check the connection.");
  }
  if (!response.ok) throw await failure(response, stored ? org : null, key);
  return response.status === 204 ? null : response.json();
}

const enc = encodeURIComponent;

export const api = {
  /** The organization of `key` (a list of one); without a key, as the server allows. */
  organizations: (key = null) => request("GET", "/api/v1/organizations", { key }),
  sessions: (org) => request("GET", `/api/v1/chat/sessions/organization/${enc(org)}?limit=100`, { org }),
  createSession: (org) => request("POST", "/api/v1/chat/sessions", { org, body: {} }),
  deleteSession: (org, id) => request("DELETE", `/api/v1/chat/sessions/${enc(id)}`, { org }),
  messages: (org, id) => request("GET", `/api/v1/chat/sessions/${enc(id)}/messages?limit=100`, { org }),
  /** What of the org's data is searchable yet, and its latest reindex job. */
  indexing: (org) => request("GET", "/api/v1/qna/indexing", { org }),
  /** Rate an answer: `body` is {rating: "up" | "down", comment?, correction?}. */
  rate: (org, id, messageId, body) =>
    request("PUT", `/api/v1/chat/sessions/${enc(id)}/messages/${enc(messageId)}/feedback`, { org, body }),
  unrate: (org, id, messageId) =>
    request("DELETE", `/api/v1/chat/sessions/${enc(id)}/messages/${enc(messageId)}/feedback`, { org }),
  /** The org's chats with a message containing `q`, newest first. */
  searchChats: (org, q, offset = 0) =>
    request("GET", `/api/v1/chat/search?q=${enc(q)}&limit=20&offset=${offset}`, { org }),
};

/** A chat as a file: {blob, name} (the name from Content-Disposition). */
export async function downloadChat(org, id, format) {
  const key = keyFor(org);
  let response;
  try {
    response = await fetch(`/api/v1/chat/sessions/${enc(id)}/export?format=${enc(format)}`, {
      headers: headersFor(org, key, {}),
    });
  } catch {
    throw new ApiError("network_error", "Could not reach the server. Check the connection.");
  }
  if (!response.ok) throw await failure(response, org, key);
  const disposition = response.headers.get("Content-Disposition") || "";
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] || `ask-crow-chat.${format === "json" ? "json" : "md"}`;
  return { blob: await response.blob(), name };
}

/**
 * Send a message and follow the answer's server-sent events: `onEvent(type, data)` for
 * user_message, tool_call_started, tool_call_finished, text_delta (the answer's next piece),
 * text_replaced (everything streamed so far replaced by `data.text`), sources and done. An
 * `error` event is thrown as ApiError. Resolves with the stored answer (the done message).
 * Aborting `signal` stops the answer: the server stores what it wrote so far, marked stopped.
 */
export function streamMessage(org, sessionId, body, onEvent, signal) {
  return followAnswer(org, `/api/v1/chat/sessions/${enc(sessionId)}/messages/stream`, body, onEvent, signal);
}

/** Answer the question of the session's latest answer `messageId` again, as streamMessage
 * (the first event is `regenerating` instead of `user_message`). */
export function streamRegenerate(org, sessionId, messageId, onEvent, signal) {
  const path = `/api/v1/chat/sessions/${enc(sessionId)}/messages/${enc(messageId)}/regenerate/stream`;
  return followAnswer(org, path, null, onEvent, signal);
}

async function followAnswer(org, path, body, onEvent, signal) {
  const key = keyFor(org);
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: headersFor(org, key, { "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: body === null ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError("network_error", "Could not reach the server. Check the connection.");
  }
  if (!response.ok) throw await failure(response, org, key);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let answer = null;
  const dispatch = (chunk) => {
    let type = "message";
    const data = [];
    for (const line of chunk.split("\n")) {
      if (line.startsWith("event:")) type = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (!data.length) return;
    const payload = JSON.parse(data.join("\n"));
    if (type === "error") {
      const e = payload.error || {};
      throw new ApiError(e.code || "stream_error", e.message || "The answer failed.");
    }
    if (type === "done") answer = payload.message;
    onEvent(type, payload);
  };
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ApiError("network_error", "The connection was lost while CROW was answering.");
    }
    if (chunk.done) break;
    buffer += chunk.value.replace(/\r\n?/g, "\n");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      dispatch(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
    }
  }
  if (buffer.trim()) dispatch(buffer);
  if (!answer) throw new ApiError("incomplete_answer", "The answer stopped before it was complete.");
  return answer;
}
