// Searching the organization's chats from the sidebar: results replace the history list
// while the box holds 2 or more characters; Escape (or clearing the box) brings it back.

import { h } from "./dom.js";

const DEBOUNCE_MS = 250;

/**
 * `input`: the search box; `results`: the list the hits go to; `note`: status text;
 * `history`: what the results replace; `search(q, offset)`: the API call; `open(id)`:
 * open a chat; `href(id)`: its address.
 */
export function chatSearch({ input, results, note, history, search, open, href }) {
  let timer = null;
  let asked = 0; // a later query wins over an earlier one that answers late
  let hits = [];

  function show(searching) {
    history.hidden = searching;
    results.hidden = !searching;
    note.hidden = !searching;
  }

  function render(q, total) {
    results.replaceChildren(
      ...hits.map((hit) =>
        h(
          "li",
          { class: "session search-hit", "data-session-id": hit.session_id },
          h(
            "a",
            {
              class: "session-link",
              href: href(hit.session_id),
              onclick: (event) => {
                if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
                event.preventDefault();
                open(hit.session_id);
              },
            },
            h("span", { class: "hit-title", text: hit.title || "New chat" }),
            h("span", { class: "hit-snippet", text: hit.snippet }),
          ),
        ),
      ),
    );
    note.replaceChildren(
      document.createTextNode(
        total
          ? `${total} chat${total > 1 ? "s" : ""} contain “${q}”.`
          : `No chats contain “${q}”.`,
      ),
    );
    if (hits.length < total) {
      note.append(
        " ",
        h("button", { type: "button", class: "link-btn", text: "More results", onclick: () => run(q, hits.length) }),
      );
    }
  }

  async function run(q, offset = 0) {
    const mine = ++asked;
    try {
      const page = await search(q, offset);
      if (mine !== asked) return;
      hits = offset ? [...hits, ...page.results] : page.results;
      render(page.q, page.total);
    } catch (err) {
      if (mine !== asked) return;
      note.textContent = `Search failed: ${err.message}`;
    }
  }

  function reset() {
    asked++;
    hits = [];
    results.replaceChildren();
    show(false);
  }

  input.addEventListener("input", () => {
    clearTimeout(timer);
    const q = input.value.trim();
    if (q.length < 2) {
      reset();
      return;
    }
    show(true);
    note.textContent = "Searching…";
    timer = setTimeout(() => run(q), DEBOUNCE_MS);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && input.value) {
      event.preventDefault();
      input.value = "";
      reset();
    }
  });
  return { reset: () => { input.value = ""; reset(); } };
}
