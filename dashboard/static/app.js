// Ask CROW: the chat page. Plain ES module, no framework. All model output and data reach
// the page as text (textContent) or through markdown.js, which escapes everything first.
// The API wants a key per organization (keys.js): without one the page asks for it; a link
// may carry it (#key=…); the organization picker lists the organizations this tab has keys for.

import { api, ApiError, downloadChat, onUnauthorized, streamMessage, streamRegenerate } from "./api.js";
import { forgetKey, keyedOrgs, keyFor, rememberKey, takeKeyFromUrl } from "./keys.js";
import { toFragment } from "./markdown.js";
import { h, icon } from "./dom.js";
import { ratingControls } from "./feedback.js";
import { chatSearch } from "./chatsearch.js";
import { answerCharts } from "./charts.js";

const SUGGESTIONS = [
  "How many interactions do we have?",
  "What are our top products?",
  "Show me recent web interactions",
  "What behavioral patterns have been detected?",
  "What trends are emerging in CCTV data?",
  "Tell me about our company",
  "What is our target market?",
];

const TOOL_LABELS = {
  get_interaction_summary: "Counting interactions",
  search_products: "Searching products",
  search_interactions: "Searching interactions",
  search_patterns: "Looking at behavioral patterns",
  search_org_context: "Reading the knowledge base",
};

const SOURCE_KINDS = {
  product: ["Product", "Category"],
  interaction: ["Interaction", "Channel"],
  pattern: ["Behavioral pattern", "Pattern type"],
  org_context: ["Knowledge base", "Context type"],
};

const TITLE_WORDS = 6;
const TITLE_CHARS = 40;
const ORG_KEY = "crow.org";
const ADD_KEY = "+add-key"; // the picker's "Add a key…" entry (no organization id starts with +)

const $ = (id) => document.getElementById(id);
const el = {
  app: $("app"),
  sidebar: $("sidebar"),
  scrim: $("scrim"),
  sessionList: $("session-list"),
  historyNote: $("history-note"),
  historyToggle: $("history-toggle"),
  historyBody: $("history-body"),
  orgSelect: $("org-select"),
  landing: $("landing"),
  thread: $("thread"),
  scroller: $("scroller"),
  suggestions: $("suggestions"),
  composer: $("composer"),
  input: $("input"),
  send: $("send"),
  stop: $("stop"),
  title: $("topbar-title"),
  confirm: $("confirm-delete"),
  confirmName: $("confirm-name"),
  sourceDialog: $("source-dialog"),
  toast: $("toast"),
  forgetKey: $("forget-key"),
  indexing: $("indexing"),
  searchInput: $("chat-search-input"),
  searchResults: $("search-results"),
  searchNote: $("search-note"),
  history: $("history"),
  exportMenu: $("export-menu"),
  signin: $("signin"),
  signinForm: $("signin-form"),
  signinNote: $("signin-note"),
  keyInput: $("key-input"),
  keyError: $("signin-error"),
  signinCancel: $("signin-cancel"),
  signinSubmit: $("signin-submit"),
};

const state = {
  orgs: [], // the organizations this tab may use: those it has keys for (all, without keys)
  names: new Map(), // org id -> name, as the API last named it
  keyless: false, // the server answers without keys (auth.mode 'off', local development)
  pending: null, // an organization asked for (by the URL) that this tab has no key for
  org: null,
  sessionId: null,
  server: [], // the org's sessions as the server last listed them
  local: new Map(), // org -> Map(id -> session) created on this page, not yet listed
  busy: false, // an answer is being generated
  stop: null, // the answer in flight's AbortController (the Stop button aborts it)
  search: null, // the sidebar's chat search (chatsearch.js)
  follow: true, // keep the end of the thread in view while an answer arrives
  view: 0, // bumped on every navigation, so late answers never land in the wrong view
};

// ---------------------------------------------------------------- small helpers

function trashIcon() {
  return icon("M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13M10 11v6M14 11v6");
}

function sessionTitle(text) {
  const title = text.split(/\s+/).filter(Boolean).slice(0, TITLE_WORDS).join(" ");
  return title.length <= TITLE_CHARS ? title : `${title.slice(0, TITLE_CHARS - 1).trimEnd()}…`;
}

function newMessageId() {
  const rand = crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
  return `web-${rand.replace(/[^A-Za-z0-9]/g, "").slice(0, 40)}`;
}

let toastTimer;
function toast(message) {
  el.toast.textContent = message;
  el.toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    el.toast.hidden = true;
  }, 3500);
}

function scrollToEnd() {
  el.scroller.scrollTo({ top: el.scroller.scrollHeight, behavior: "smooth" });
}

// While an answer arrives the thread follows it, unless the reader scrolls up to read
// something else; scrolling back to the end follows again.
function followAnswer() {
  if (state.follow) scrollToEnd();
}

function nearEnd() {
  return el.scroller.scrollHeight - el.scroller.scrollTop - el.scroller.clientHeight < 48;
}

function orgName(id) {
  return state.names.get(id) || id;
}

function canUse(org) {
  return Boolean(org) && (state.keyless || Boolean(keyFor(org)));
}

// ---------------------------------------------------------------- URL <-> state

function urlFor(org, sessionId) {
  const params = new URLSearchParams();
  if (org) params.set("org", org);
  if (sessionId) params.set("session", sessionId);
  return `/?${params}`;
}

function syncUrl({ replace = false } = {}) {
  el.exportMenu.hidden = !state.sessionId;
  el.exportMenu.open = false;
  const url = urlFor(state.org, state.sessionId);
  if (`${location.pathname}${location.search}` === url) return;
  history[replace ? "replaceState" : "pushState"]({}, "", url);
}

// ---------------------------------------------------------------- sidebar

function localSessions(org) {
  if (!state.local.has(org)) state.local.set(org, new Map());
  return state.local.get(org);
}

function mergedSessions() {
  const local = localSessions(state.org);
  const listed = new Set(state.server.map((s) => s.id));
  for (const id of [...local.keys()]) if (listed.has(id)) local.delete(id);
  const all = [...local.values(), ...state.server];
  return all.sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)));
}

function renderSidebar() {
  const sessions = mergedSessions();
  el.sessionList.replaceChildren(
    ...sessions.map((s) => {
      const active = s.id === state.sessionId;
      const title = s.title || "New chat";
      return h(
        "li",
        { class: `session${active ? " active" : ""}`, "data-session-id": s.id },
        h("a", {
          class: "session-link",
          href: urlFor(state.org, s.id),
          "aria-current": active ? "page" : null,
          title,
          text: title,
          onclick: (event) => {
            if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
            event.preventDefault();
            openSession(s.id);
            closeDrawer();
          },
        }),
        h("button", {
          type: "button",
          class: "icon-btn session-delete",
          "aria-label": `Delete chat “${title}”`,
          title: "Delete chat",
          onclick: () => confirmDelete(s),
        }, trashIcon()),
      );
    }),
  );
  if (!sessions.length && el.historyNote.dataset.kind !== "error") {
    el.historyNote.textContent = "No chats yet. Ask a question to start one.";
    el.historyNote.hidden = false;
    el.historyNote.dataset.kind = "empty";
  } else if (sessions.length && el.historyNote.dataset.kind === "empty") {
    el.historyNote.hidden = true;
    el.historyNote.dataset.kind = "";
  }
}

async function refreshSessions() {
  const org = state.org;
  if (!canUse(org)) return;
  try {
    const page = await api.sessions(org);
    if (org !== state.org) return;
    state.server = page.sessions;
    el.historyNote.hidden = true;
    el.historyNote.dataset.kind = "";
  } catch (err) {
    if (org !== state.org) return;
    el.historyNote.replaceChildren(
      document.createTextNode(`Could not load chats: ${err.message} `),
      h("button", { type: "button", class: "link-btn", text: "Retry", onclick: refreshSessions }),
    );
    el.historyNote.hidden = false;
    el.historyNote.dataset.kind = "error";
  }
  renderSidebar();
}

function rememberLocal(session) {
  localSessions(state.org).set(session.id, session);
  renderSidebar();
}

async function confirmDelete(session) {
  el.confirmName.textContent = session.title || "New chat";
  el.confirm.returnValue = "";
  el.confirm.showModal();
  const choice = await new Promise((resolve) =>
    el.confirm.addEventListener("close", () => resolve(el.confirm.returnValue), { once: true }),
  );
  if (choice !== "delete") return;
  const org = state.org;
  try {
    await api.deleteSession(org, session.id);
  } catch (err) {
    if (err.code !== "session_not_found") {
      toast(`Could not delete the chat: ${err.message}`);
      return;
    }
  }
  localSessions(org).delete(session.id);
  state.server = state.server.filter((s) => s.id !== session.id);
  if (state.sessionId === session.id) newChat({ replace: true });
  renderSidebar();
  toast("Chat deleted");
}

function setHistoryExpanded(expanded) {
  el.historyToggle.setAttribute("aria-expanded", String(expanded));
  el.historyBody.hidden = !expanded;
}

function openDrawer() {
  el.app.classList.add("drawer-open");
  el.scrim.hidden = false;
}

function closeDrawer() {
  el.app.classList.remove("drawer-open");
  el.scrim.hidden = true;
}

// ---------------------------------------------------------------- thread rendering

function showLanding() {
  el.exportMenu.hidden = true; // nothing to export until a chat is open
  el.thread.hidden = true;
  el.thread.replaceChildren();
  el.landing.hidden = false;
  el.title.textContent = "Ask CROW";
}

function showThread() {
  if (!el.thread.hidden) return;
  el.landing.hidden = true;
  el.thread.hidden = false;
}

function avatar() {
  return h("img", { class: "avatar", src: "/static/crow.svg", alt: "CROW", width: 32, height: 32 });
}

function userBubble(text) {
  return h("div", { class: "msg msg-user" }, h("div", { class: "bubble", text }));
}

// The answer's footnote lines are shown as chips instead of text.
function bodyWithoutFootnotes(content, sources) {
  if (!sources.length) return content;
  const lines = content.replace(/\s+$/, "").split("\n");
  let end = lines.length;
  while (end > 0 && /^\s*\[\d+\]\s/.test(lines[end - 1])) end -= 1;
  return lines.slice(0, end).join("\n").replace(/\s+$/, "");
}

function openSource(source, number) {
  const [kind, detailLabel] = SOURCE_KINDS[source.type] || [source.type, "Detail"];
  $("source-kind").textContent = `Source ${number} · ${kind}`;
  $("source-title").textContent = source.title || source.id;
  $("source-id").textContent = source.id;
  $("source-detail-label").textContent = detailLabel;
  $("source-detail").textContent = source.detail || "—";
  el.sourceDialog.showModal();
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = h("textarea", { class: "offscreen", readonly: true });
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

function assistantMessage(message) {
  const sources = Array.isArray(message.sources) ? message.sources : [];
  const content = String(message.content ?? "");
  const body = h("div", { class: "markdown" });
  body.append(toFragment(bodyWithoutFootnotes(content, sources), { sources: sources.length }));
  body.addEventListener("click", (event) => {
    const cite = event.target.closest("button.cite");
    if (!cite) return;
    const n = Number(cite.dataset.source);
    if (sources[n - 1]) openSource(sources[n - 1], n);
  });
  const chips = sources.length
    ? h(
        "div",
        { class: "sources", "aria-label": "Sources" },
        h("span", { class: "sources-label", text: "Sources" }),
        ...sources.map((s, i) =>
          h(
            "button",
            {
              type: "button",
              class: `chip chip-${s.type}`,
              title: `${(SOURCE_KINDS[s.type] || [s.type])[0]}: ${s.title || s.id}`,
              onclick: () => openSource(s, i + 1),
            },
            h("span", { class: "chip-n", text: String(i + 1) }),
            h("span", { class: "chip-title", text: s.title || s.id }),
          ),
        ),
      )
    : null;
  const copy = h("button", {
    type: "button",
    class: "action copy-btn",
    "aria-label": "Copy answer",
    text: "Copy",
    onclick: async () => {
      const ok = await copyText(content);
      copy.textContent = ok ? "Copied" : "Copy failed";
      copy.classList.toggle("done", ok);
      setTimeout(() => {
        copy.textContent = "Copy";
        copy.classList.remove("done");
      }, 2000);
    },
  });
  const steps = Array.isArray(message.tool_steps) ? message.tool_steps : [];
  const total = message.timings?.total_s;
  const metaText = [
    message.regenerated_from ? "Regenerated" : null,
    steps.length ? `${steps.length} tool step${steps.length > 1 ? "s" : ""}` : null,
    typeof total === "number" ? `${total.toFixed(1)} s` : null,
  ]
    .filter(Boolean)
    .join(" · ");
  // An answer composed from the data (the model's own failed the checks twice) says so.
  const composed =
    message.timings?.fallback === "composed"
      ? h("p", {
          class: "composed-note",
          role: "note",
          text: "Composed from the data: the model's own answer did not match the tool results.",
        })
      : null;
  const stopped = message.stopped
    ? h("p", { class: "stopped-note", role: "note", text: "Stopped: this answer is incomplete." })
    : null;
  // Shown on the thread's last answer only (style.css); the API answers 409 for another.
  const regen = message.id
    ? h(
        "button",
        { type: "button", class: "action regen-btn", "aria-label": "Regenerate answer", title: "Ask the same question again; both answers are kept", onclick: () => regenerate(message) },
        icon("M20 11a8 8 0 1 0-2.3 5.7M20 5v6h-6"),
        h("span", { text: "Regenerate" }),
      )
    : null;
  const { org, sessionId } = state;
  const rating = message.id
    ? ratingControls(message.feedback, {
        save: (body) => api.rate(org, sessionId, message.id, body),
        clear: () => api.unrate(org, sessionId, message.id),
        done: toast,
        failed: (err) => toast(`Feedback not saved: ${err.message}`),
      })
    : { buttons: [], form: null };
  return h(
    "div",
    { class: "msg msg-assistant", "data-message-id": message.id },
    avatar(),
    h(
      "div",
      { class: "assistant-body" },
      composed,
      body,
      stopped,
      answerCharts(steps),
      chips,
      h(
        "div",
        { class: "actions" },
        copy,
        regen,
        ...rating.buttons,
        metaText ? h("span", { class: "meta", text: metaText }) : null,
      ),
      rating.form,
    ),
  );
}

// The answer in progress: "CROW is thinking" with the live tool steps, then the answer's
// text as it streams in, rendered as markdown. The final answer replaces it on `done`.
function thinkingIndicator() {
  const title = document.createTextNode("CROW is thinking");
  const subtitle = h("p", { class: "thinking-sub", text: "Understanding your question…" });
  const steps = h("ul", { class: "thinking-steps" });
  // Not announced piece by piece: the live region is the status line above.
  const partial = h("div", { class: "markdown partial", "aria-live": "off", hidden: true });
  const node = h(
    "div",
    { class: "msg msg-assistant thinking", role: "status", "aria-live": "polite" },
    avatar(),
    h(
      "div",
      { class: "assistant-body" },
      h(
        "p",
        { class: "thinking-title" },
        title,
        h("span", { class: "dots", "aria-hidden": "true" }, h("i"), h("i"), h("i")),
      ),
      subtitle,
      steps,
      partial,
    ),
  );
  const stepNodes = [];
  let text = ""; // the answer so far
  let frame = 0; // a pending render: at most one per animation frame, however many pieces
  const render = () => {
    frame = 0;
    const streaming = text.trim() !== "";
    // Citations stay plain text until the final answer knows its sources.
    partial.replaceChildren(streaming ? toFragment(text) : "");
    partial.hidden = !streaming;
    subtitle.hidden = streaming;
    node.classList.toggle("streaming", streaming);
    title.textContent = streaming ? "CROW is writing" : "CROW is thinking";
    if (state.follow) el.scroller.scrollTop = el.scroller.scrollHeight;
  };
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(render);
  };
  return {
    node,
    /** The answer as written so far. */
    get text() {
      return text;
    },
    /** The next piece of the answer. */
    append(piece) {
      text += String(piece ?? "");
      schedule();
    },
    /** Everything so far is replaced by `full` (later pieces append to it). */
    replace(full) {
      text = String(full ?? "");
      schedule();
    },
    stop() {
      if (frame) cancelAnimationFrame(frame);
      frame = 0;
    },
    started(name, args) {
      const label = TOOL_LABELS[name] || `Running ${name}`;
      const what = args && typeof args.query === "string" && args.query ? ` for “${args.query}”` : "";
      const item = h("li", { class: "step running", "data-tool": name, text: `${label}${what}…` });
      stepNodes.push([name, item]);
      steps.append(item);
      subtitle.textContent = `${label}${what}…`;
    },
    finished(step) {
      const entry = stepNodes.find(([name, item]) => name === step.name && item.classList.contains("running"));
      const label = TOOL_LABELS[step.name] || step.name;
      const result = step.ok
        ? `${label}: ${step.results} result${step.results === 1 ? "" : "s"}`
        : `${label} failed`;
      if (entry) {
        entry[1].classList.remove("running");
        entry[1].classList.add(step.ok ? "ok" : "failed");
        entry[1].textContent = `${result}${typeof step.ms === "number" ? ` (${Math.round(step.ms)} ms)` : ""}`;
      }
      subtitle.textContent = step.ok ? `${result}. Writing the answer…` : `${result}. Trying to answer anyway…`;
    },
  };
}

function errorBox(err, onRetry) {
  const box = h(
    "div",
    { class: "msg msg-assistant msg-error", role: "alert" },
    avatar(),
    h(
      "div",
      { class: "assistant-body" },
      h("p", { class: "error-title", text: "CROW could not answer this time." }),
      h("p", { class: "error-detail", text: err.message || String(err) }),
      h("button", { type: "button", class: "btn retry-btn", text: "Retry", onclick: () => onRetry(box) }),
    ),
  );
  return box;
}

function setBusy(busy) {
  state.busy = busy;
  el.send.disabled = busy;
  el.send.hidden = busy;
  el.stop.hidden = !busy;
  el.composer.classList.toggle("busy", busy);
  if (!busy) state.stop = null;
}

function stopAnswer() {
  if (!state.stop) return;
  state.stop.abort();
  el.input.focus(); // the Stop button goes away: keyboard focus goes back to the question box
}

// ---------------------------------------------------------------- actions

async function ask(text, retry = null) {
  text = text.trim();
  // Before the organization is loaded a question has nowhere to go (the start would reset it).
  if (!text || state.busy || document.body.dataset.ready !== "true") return;
  const org = state.org;
  const view = state.view;
  const messageId = retry?.messageId ?? newMessageId();
  setBusy(true);
  showThread();
  if (!retry) {
    el.thread.append(userBubble(text));
    if (!state.sessionId) el.title.textContent = sessionTitle(text);
  }
  let sessionId = state.sessionId;
  await answerInThread(
    org,
    view,
    async (onEvent, signal) => {
      if (!sessionId) {
        const session = await api.createSession(org);
        sessionId = session.id;
        rememberLocal({ ...session, title: sessionTitle(text) });
        if (view === state.view) {
          state.sessionId = sessionId;
          syncUrl();
          renderSidebar();
        }
      }
      return streamMessage(org, sessionId, { content: text, message_id: messageId }, onEvent, signal);
    },
    () => ask(text, { messageId }),
    () => sessionId,
  );
}

/** The session's latest answer, asked again: the new answer goes below it, both are kept. */
async function regenerate(message) {
  if (state.busy || !state.sessionId) return;
  const { org, view, sessionId } = state;
  setBusy(true);
  await answerInThread(
    org,
    view,
    (onEvent, signal) => streamRegenerate(org, sessionId, message.id, onEvent, signal),
    () => regenerate(message),
    () => sessionId,
  );
}

// An answer streamed into the thread: the thinking indicator, then the stored answer; an
// error box with Retry; or, when the user presses Stop, what was written, marked stopped
// (then the stored partial answer, once the server has it).
async function answerInThread(org, view, start, retry, session) {
  const thinking = thinkingIndicator();
  el.thread.append(thinking.node);
  state.follow = true;
  scrollToEnd();
  const controller = new AbortController();
  state.stop = controller;
  try {
    const answer = await start((type, data) => {
      if (view !== state.view) return;
      if (type === "text_delta") thinking.append(data.text);
      else if (type === "text_replaced") thinking.replace(data.text);
      else if (type === "tool_call_started") thinking.started(data.name, data.arguments);
      else if (type === "tool_call_finished") thinking.finished(data);
      else return;
      if (type.startsWith("tool_call")) followAnswer();
    }, controller.signal);
    thinking.stop();
    if (view === state.view) {
      thinking.node.replaceWith(assistantMessage(answer));
      followAnswer();
    }
  } catch (err) {
    thinking.stop();
    if (view !== state.view) return;
    if (err.name === "AbortError") {
      const card = assistantMessage({ content: thinking.text, stopped: true });
      thinking.node.replaceWith(card);
      showStoredStop(org, view, session(), card);
    } else {
      thinking.node.replaceWith(
        errorBox(err, (box) => {
          box.remove();
          retry();
        }),
      );
      scrollToEnd();
    }
  } finally {
    if (state.stop === controller || !state.stop) setBusy(false);
    if (org === state.org) refreshSessions();
  }
}

// The stopped answer as the server stored it (with its id: rating and Regenerate work on
// it); the server stores it a moment after the stream closed.
async function showStoredStop(org, view, sessionId, card) {
  if (!sessionId) return;
  for (let attempt = 0; attempt < 10; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    if (view !== state.view || !card.isConnected) return;
    try {
      const page = await api.messages(org, sessionId);
      const last = page.messages.at(-1);
      if (last?.role === "assistant" && last.stopped) {
        card.replaceWith(assistantMessage(last));
        return;
      }
    } catch {
      return; // the partial card stays as it is
    }
  }
}

function newChat({ replace = false } = {}) {
  state.view += 1;
  state.sessionId = null;
  showLanding();
  syncUrl({ replace });
  renderSidebar();
  setBusy(false);
  el.input.focus();
}

async function openSession(sessionId, { push = true } = {}) {
  state.view += 1;
  const view = state.view;
  state.sessionId = sessionId;
  setBusy(false);
  if (push) syncUrl();
  renderSidebar();
  el.landing.hidden = true;
  el.thread.hidden = false;
  el.thread.replaceChildren(h("p", { class: "loading", text: "Loading the conversation…" }));
  const known = mergedSessions().find((s) => s.id === sessionId);
  el.title.textContent = known?.title || "Ask CROW";
  try {
    const page = await api.messages(state.org, sessionId);
    if (view !== state.view) return;
    el.thread.replaceChildren(
      ...page.messages.map((m) => (m.role === "user" ? userBubble(m.content) : assistantMessage(m))),
    );
    if (!page.messages.length) showLanding();
    const title = page.messages.find((m) => m.role === "user")?.content;
    if (!known?.title && title) el.title.textContent = sessionTitle(title);
    el.scroller.scrollTop = el.scroller.scrollHeight;
  } catch (err) {
    if (view !== state.view) return;
    if (err.code === "session_not_found") {
      toast("That chat does not exist in this organization any more.");
      localSessions(state.org).delete(sessionId);
      newChat({ replace: true });
      return;
    }
    el.thread.replaceChildren(
      errorBox(err, () => openSession(sessionId, { push: false })),
    );
  }
}

// Open `org` (its sessions, or `sessionId`); an organization this tab has no key for asks for
// one instead (false). `reload`: list the sessions again even if `org` is the one open.
async function switchOrg(org, { push = true, sessionId = null, reload = false } = {}) {
  if (!state.orgs.some((o) => o.id === org)) {
    if (!state.keyless && org) {
      askKeyFor(org);
      return false;
    }
    org = state.orgs[0]?.id;
    if (!org) return false;
  }
  if (!el.signin.hidden) hideSignIn();
  const changed = reload || org !== state.org;
  state.org = org;
  renderOrgOptions();
  localStorage.setItem(ORG_KEY, org);
  document.title = `Ask CROW · ${orgName(org)}`;
  if (changed) {
    state.server = [];
    state.search?.reset(); // results of another organization's chats
    renderSidebar();
  }
  const sessionsLoaded = changed ? refreshSessions() : Promise.resolve();
  if (changed) checkIndexing(org);
  if (sessionId) await openSession(sessionId, { push });
  else {
    state.view += 1;
    state.sessionId = null;
    showLanding();
    if (push) syncUrl();
    renderSidebar();
  }
  await sessionsLoaded;
  document.body.dataset.ready = "true";
  return true;
}

// ---------------------------------------------------------------- indexing banner

const INDEXING_POLL_MS = 3000;
let indexingTimer = null;

function indexingText({ job }) {
  const running = job && (job.state === "pending" || job.state === "running");
  const n = (value) => Number(value || 0).toLocaleString("en-US");
  if (running && job.rows_total) {
    return `Indexing your data: ${n(job.rows_done)} of ${n(job.rows_total)} rows. ` +
      "Searches and answers that need it will work when it is done.";
  }
  if (running) return "Indexing your data is starting…";
  return "Your data is not searchable yet: it is waiting to be indexed.";
}

/** Show the banner while the org's data is being indexed (or not searchable yet). */
async function checkIndexing(org = state.org) {
  clearTimeout(indexingTimer);
  if (!canUse(org)) return;
  let status = null;
  try {
    status = await api.indexing(org);
  } catch {
    status = null; // no banner for a status that could not be read
  }
  if (org !== state.org) return;
  const job = status?.job;
  const running = job && (job.state === "pending" || job.state === "running");
  const show = Boolean(status) && (running || !status.searchable);
  el.indexing.hidden = !show;
  if (show) {
    el.indexing.textContent = indexingText(status);
    indexingTimer = setTimeout(() => checkIndexing(org), INDEXING_POLL_MS);
  }
}

// ---------------------------------------------------------------- keys and sign-in

function renderOrgOptions() {
  const options = state.orgs.map((o) => h("option", { value: o.id, text: o.name || o.id }));
  if (!state.keyless) options.push(h("option", { value: ADD_KEY, text: "Add a key…" }));
  el.orgSelect.replaceChildren(...options);
  if (state.org) el.orgSelect.value = state.org;
  el.forgetKey.hidden = state.keyless || !keyFor(state.org);
  el.forgetKey.title = `Forget the API key of ${orgName(state.org)} in this tab`;
}

function knowOrg(org) {
  state.names.set(org.id, org.name || org.id);
  state.orgs = [...state.orgs.filter((o) => o.id !== org.id), org].sort((a, b) =>
    (a.name || a.id).localeCompare(b.name || b.id),
  );
}

function dropOrg(org) {
  state.orgs = state.orgs.filter((o) => o.id !== org);
  state.local.delete(org);
}

/** The one organization `key` belongs to, as the API names it (ApiError otherwise). */
async function orgOfKey(key) {
  const orgs = (await api.organizations(key)).organizations;
  if (orgs.length === 1) return orgs[0];
  throw new ApiError(
    "not_an_organization_key",
    orgs.length
      ? "This key is not an organization's key (an operator token?). Use your organization's API key."
      : "This key's organization has no data here.",
  );
}

function setKeyError(message) {
  el.keyError.textContent = message;
  if (message) el.keyInput.setAttribute("aria-invalid", "true");
  else el.keyInput.removeAttribute("aria-invalid");
}

// The key form instead of the chat: `error` (the server's word on a key) in the alert line.
function showSignIn({ error = "", note = "" } = {}) {
  delete document.body.dataset.ready;
  el.signinNote.textContent = note;
  el.signinNote.hidden = !note;
  setKeyError(error);
  el.signinCancel.hidden = !state.orgs.some((o) => canUse(o.id));
  el.keyInput.value = "";
  closeDrawer();
  el.app.hidden = true;
  el.signin.hidden = false;
  document.title = "Sign in · Ask CROW";
  el.keyInput.focus();
}

function hideSignIn() {
  state.pending = null;
  el.signin.hidden = true;
  el.app.hidden = false;
}

function askKeyFor(org) {
  state.pending = org;
  showSignIn({ note: `This tab has no key for the organization “${orgName(org)}”. Enter its API key.` });
}

/** Check `key`, keep it for its organization and open that organization. */
async function signIn(key) {
  const org = await orgOfKey(key);
  rememberKey(org.id, key);
  knowOrg(org);
  const params = new URLSearchParams(location.search);
  const stay = !state.org || org.id === state.org || org.id === state.pending;
  let sessionId = null;
  if (org.id === state.org) sessionId = state.sessionId;
  else if (params.get("org") === org.id || (!state.org && !params.get("org"))) sessionId = params.get("session");
  el.keyInput.value = "";
  await switchOrg(org.id, { push: !stay, sessionId, reload: true });
  if (stay) syncUrl({ replace: true });
}

async function submitKey(event) {
  event.preventDefault();
  const key = el.keyInput.value.trim();
  if (!key) {
    setKeyError("Enter an API key.");
    el.keyInput.focus();
    return;
  }
  setKeyError("");
  el.signinSubmit.disabled = true;
  try {
    await signIn(key);
    el.input.focus();
  } catch (err) {
    setKeyError(err.message);
    el.keyInput.focus();
    el.keyInput.select();
  } finally {
    el.signinSubmit.disabled = false;
  }
}

// Back from the key form to the organization open before (or any this tab has a key for).
function cancelSignIn() {
  const back = canUse(state.org) ? state.org : state.orgs.find((o) => canUse(o.id))?.id;
  if (!back) return;
  if (back !== state.org) {
    switchOrg(back, { push: false }).then(() => syncUrl({ replace: true }));
    return;
  }
  hideSignIn();
  renderOrgOptions();
  document.title = `Ask CROW · ${orgName(back)}`;
  syncUrl({ replace: true });
  document.body.dataset.ready = "true";
  el.input.focus();
}

function forgetCurrentKey() {
  const org = state.org;
  forgetKey(org);
  dropOrg(org);
  const next = state.orgs[0]?.id;
  if (next) {
    switchOrg(next);
    toast(`Forgot the key of ${orgName(org)}.`);
    return;
  }
  state.view += 1;
  renderOrgOptions();
  showSignIn({ note: `Forgot the key of ${orgName(org)}.` });
}

// A request made with a stored key got 401 (unknown, revoked or expired): the key is dropped
// and, if it was the open organization's, the page asks for a new one with the server's word.
function keyRefused(org, key, err) {
  if (!forgetKey(org, key)) return; // already dropped, or replaced by a newer key
  dropOrg(org);
  renderOrgOptions();
  if (org !== state.org) return;
  state.view += 1; // late answers under the old key land nowhere
  setBusy(false);
  showSignIn({ error: err.message, note: `Sign in to ${orgName(org)} again.` });
}

// ---------------------------------------------------------------- wiring

function autosize() {
  el.input.style.height = "auto";
  el.input.style.height = `${Math.min(el.input.scrollHeight, 200)}px`;
}

function wire() {
  el.suggestions.replaceChildren(
    ...SUGGESTIONS.map((q) =>
      h("li", {}, h("button", { type: "button", class: "suggestion", text: q, onclick: () => ask(q) })),
    ),
  );
  el.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = el.input.value;
    if (!text.trim() || state.busy || document.body.dataset.ready !== "true") return; // kept in the box
    el.input.value = "";
    autosize();
    ask(text);
  });
  el.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      el.composer.requestSubmit();
    }
  });
  el.input.addEventListener("input", autosize);
  el.stop.addEventListener("click", stopAnswer);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && state.busy && state.stop && !document.querySelector("dialog[open]")) {
      stopAnswer();
    }
  });
  $("new-chat").addEventListener("click", () => {
    newChat();
    closeDrawer();
  });
  el.historyToggle.addEventListener("click", () =>
    setHistoryExpanded(el.historyToggle.getAttribute("aria-expanded") !== "true"),
  );
  $("sidebar-open").addEventListener("click", () => {
    if (window.matchMedia("(max-width: 760px)").matches) openDrawer();
    else el.app.classList.toggle("sidebar-collapsed");
  });
  $("sidebar-close").addEventListener("click", closeDrawer);
  el.scrim.addEventListener("click", closeDrawer);
  el.scroller.addEventListener("wheel", (event) => {
    if (event.deltaY < 0) state.follow = false;
  }, { passive: true });
  el.scroller.addEventListener("touchmove", () => {
    state.follow = nearEnd();
  }, { passive: true });
  el.scroller.addEventListener("keydown", (event) => {
    if (["ArrowUp", "PageUp", "Home"].includes(event.key)) state.follow = false;
  });
  el.scroller.addEventListener("scroll", () => {
    if (nearEnd()) state.follow = true;
  }, { passive: true });
  el.orgSelect.addEventListener("change", () => {
    if (el.orgSelect.value !== ADD_KEY) {
      switchOrg(el.orgSelect.value);
      return;
    }
    el.orgSelect.value = state.org;
    showSignIn({ note: "Add the API key of another organization." });
  });
  state.search = chatSearch({
    input: el.searchInput,
    results: el.searchResults,
    note: el.searchNote,
    history: el.history,
    search: (q, offset) => api.searchChats(state.org, q, offset),
    open: (id) => {
      openSession(id);
      closeDrawer();
    },
    href: (id) => urlFor(state.org, id),
  });
  for (const button of el.exportMenu.querySelectorAll("button[data-format]")) {
    button.addEventListener("click", () => exportChat(button.dataset.format));
  }
  el.forgetKey.addEventListener("click", forgetCurrentKey);
  el.signinForm.addEventListener("submit", submitKey);
  el.signinCancel.addEventListener("click", cancelSignIn);
  el.signinForm.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !el.signinCancel.hidden) cancelSignIn();
  });
  onUnauthorized(keyRefused);
  // a sign-in link opened in a tab that already shows the page changes only the fragment
  window.addEventListener("hashchange", () => {
    const key = takeKeyFromUrl();
    if (key) signIn(key).catch((err) => showSignIn({ error: err.message }));
  });
  window.addEventListener("popstate", () => {
    const params = new URLSearchParams(location.search);
    const org = params.get("org") || state.org;
    const sessionId = params.get("session");
    if (!org) return;
    if (org !== state.org || !canUse(org) || !el.signin.hidden) switchOrg(org, { push: false, sessionId });
    else if (sessionId && sessionId !== state.sessionId) openSession(sessionId, { push: false });
    else if (!sessionId && state.sessionId) {
      state.view += 1;
      state.sessionId = null;
      showLanding();
      renderSidebar();
    }
  });
}

async function exportChat(format) {
  el.exportMenu.open = false;
  if (!state.sessionId) return;
  try {
    const { blob, name } = await downloadChat(state.org, state.sessionId, format);
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (err) {
    toast(`Could not export the chat: ${err.message}`);
  }
}

function loadFailed(err) {
  el.landing.replaceChildren(
    h("p", { class: "error-detail", text: `Could not load the organizations: ${err.message}` }),
    h("button", { type: "button", class: "btn", text: "Retry", onclick: () => location.reload() }),
  );
}

// The organizations of the keys this tab keeps, each key checked: one the server refuses is
// dropped (its error is returned), one not checked for another reason is kept for later.
async function loadKeyedOrgs() {
  let refused = null;
  let failed = null;
  await Promise.all(
    keyedOrgs().map(async (id) => {
      const key = keyFor(id);
      try {
        const org = await orgOfKey(key);
        if (org.id !== id) {
          forgetKey(id, key);
          rememberKey(org.id, key);
        }
        knowOrg(org);
      } catch (err) {
        if (err.status === 401 || err.code === "not_an_organization_key") {
          forgetKey(id, key);
          refused = err;
        } else failed = err;
      }
    }),
  );
  return { refused, failed };
}

async function start() {
  wire();
  const linked = takeKeyFromUrl(); // out of the address bar before anything else happens
  const params = new URLSearchParams(location.search);
  const urlOrg = params.get("org");
  if (!linked && !keyedOrgs().length) {
    showSignIn();
    try {
      // auth.mode 'off' (local development): the API answers without a key
      state.orgs = (await api.organizations()).organizations;
      state.keyless = true;
      for (const o of state.orgs) state.names.set(o.id, o.name || o.id);
    } catch (err) {
      if (err.status !== 401) setKeyError(err.message);
      return;
    }
    hideSignIn();
    if (!state.orgs.length) {
      el.landing.append(h("p", { class: "error-detail", text: "There are no organizations yet." }));
      return;
    }
  } else {
    const { refused, failed } = await loadKeyedOrgs();
    if (linked) {
      try {
        await signIn(linked);
      } catch (err) {
        renderOrgOptions();
        showSignIn({ error: err.message });
      }
      return;
    }
    if (!state.orgs.length) {
      if (failed) loadFailed(failed);
      else showSignIn({ error: refused?.message || "" });
      return;
    }
    if (urlOrg && !state.orgs.some((o) => o.id === urlOrg)) {
      renderOrgOptions();
      askKeyFor(urlOrg);
      return;
    }
  }
  const wanted = urlOrg || localStorage.getItem(ORG_KEY);
  const org = state.orgs.some((o) => o.id === wanted) ? wanted : state.orgs[0].id;
  const sessionId = !urlOrg || urlOrg === org ? params.get("session") : null;
  await switchOrg(org, { push: false, sessionId });
  syncUrl({ replace: true });
}

// exposed for tests and the console; nothing on the page reads it
window.crow = { state, ApiError };
start();
