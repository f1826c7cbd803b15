// Thumbs up / down on an answer. A rating is saved at once (pressing the same thumb again takes it
// back); after a rating, an optional comment and correction can be sent with it. A rating
// down with a correction becomes an evaluation question (GET /api/v1/feedback).

import { h, icon } from "./dom.js";

const LABELS = { up: "Good answer", down: "Bad answer" };
// Thumbs up and down, drawn (an emoji font is not everywhere).
const ICONS = {
  up: "M7 11v9H4v-9h3zm0 0l4-7c1.5 0 2.5 1 2.2 2.6L12.6 10H18a2 2 0 0 1 2 2.3l-1.2 6A2 2 0 0 1 16.8 20H7",
  down: "M17 13V4h3v9h-3zm0 0l-4 7c-1.5 0-2.5-1-2.2-2.6l.6-3.4H6a2 2 0 0 1-2-2.3l1.2-6A2 2 0 0 1 7.2 4H17",
};
let formIds = 0;

/**
 * The rating controls of one answer. `initial`: the answer's stored feedback (or none);
 * `save(body)` stores {rating, comment?, correction?}, `clear()` takes the rating back (both
 * return promises); `done(text)` and `failed(err)` report to the user.
 */
export function ratingControls(initial, { save, clear, done, failed }) {
  let current = initial?.rating ?? null;
  const id = `feedback-${++formIds}`;
  const buttons = {};
  const comment = h("textarea", { name: "comment", rows: "2", maxlength: "2000", id: `${id}-comment` });
  const correction = h("textarea", { name: "correction", rows: "2", maxlength: "2000", id: `${id}-correction` });
  comment.value = initial?.comment ?? "";
  correction.value = initial?.correction ?? "";
  const form = h(
    "form",
    { class: "feedback-form", id, hidden: true, "aria-label": "Feedback on this answer" },
    h("label", { for: `${id}-comment`, text: "What was good or wrong? (optional)" }),
    comment,
    h("label", { for: `${id}-correction`, text: "What should the answer have said? (optional)" }),
    correction,
    h(
      "div",
      { class: "feedback-actions" },
      h("button", { type: "button", class: "btn", text: "Close", onclick: () => showForm(false) }),
      h("button", { type: "submit", class: "btn btn-primary", text: "Send feedback" }),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!current) return;
    try {
      await save({ rating: current, comment: comment.value, correction: correction.value });
      showForm(false);
      done("Thanks: your feedback was saved.");
    } catch (err) {
      failed(err);
    }
  });

  function showForm(visible) {
    form.hidden = !visible;
    for (const button of Object.values(buttons)) button.setAttribute("aria-expanded", String(visible));
    if (visible) comment.focus();
  }

  function sync() {
    for (const [rating, button] of Object.entries(buttons)) {
      button.setAttribute("aria-pressed", String(current === rating));
    }
  }

  async function choose(rating) {
    const next = current === rating ? null : rating;
    try {
      if (next) await save({ rating: next, comment: comment.value, correction: correction.value });
      else await clear();
    } catch (err) {
      failed(err);
      return;
    }
    current = next;
    sync();
    showForm(next !== null);
  }

  for (const rating of ["up", "down"]) {
    buttons[rating] = h(
      "button",
      {
        type: "button",
        class: `action rate rate-${rating}`,
        "aria-label": LABELS[rating],
        "aria-pressed": String(current === rating),
        "aria-controls": id,
        "aria-expanded": "false",
        title: LABELS[rating],
        onclick: () => choose(rating),
      },
      icon(ICONS[rating]),
    );
  }
  return { buttons: [buttons.up, buttons.down], form };
}
