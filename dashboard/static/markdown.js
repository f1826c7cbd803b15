// A small, safe markdown renderer for CROW's answers.
//
// Safety: every character of the input is HTML-escaped before any markup is added, and the
// only markup added is a fixed set of tags whose attributes are built from escaped text
// (links: http, https and mailto only). `toFragment` then parses the result in an inert
// <template> and drops any element or attribute outside an allowlist, so even a bug here
// cannot let model output or data run script or inject markup.
//
// Supported: paragraphs, line breaks, # headings, **bold**, *italic*, `code`, ``` fences,
// - / * / 1. lists (nested by indentation), > quotes, --- rules, | tables |, [links](url),
// and [n] citations turned into buttons when n names one of the answer's sources.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function safeHref(escapedUrl) {
  const url = escapedUrl.trim();
  return /^(https?:\/\/|mailto:)/i.test(url) ? url : null;
}

// Inline markup of one line of raw text. Code spans are cut out first so nothing inside
// them is interpreted.
function inline(raw, opts) {
  const parts = String(raw).split(/(`+[^`]*?`+)/g);
  return parts
    .map((part, i) => {
      if (i % 2 === 1) {
        const code = part.replace(/^`+|`+$/g, "");
        return `<code>${escapeHtml(code)}</code>`;
      }
      // Links become placeholders so emphasis never reaches into an href.
      const links = [];
      let s = escapeHtml(part).replace(/\u0000/g, "");
      s = s.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (m, label, url) => {
        const href = safeHref(url);
        if (!href) return m;
        links.push([href, label]);
        return `\u0000${links.length - 1}\u0000`;
      });
      s = s.replace(/\*\*(?=\S)(.+?)\*\*/g, "<strong>$1</strong>");
      s = s.replace(/(^|[^\w])__(?=\S)(.+?)(?<=\S)__(?!\w)/g, "$1<strong>$2</strong>");
      s = s.replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]+?)\*(?!\*)/g, "$1<em>$2</em>");
      s = s.replace(/(^|[^_\w])_(?=[^\s_])([^_\n]+?)_(?![_\w])/g, "$1<em>$2</em>");
      s = s.replace(/~~(?=\S)(.+?)~~/g, "<del>$1</del>");
      if (opts.sources > 0) {
        s = s.replace(/\[(\d{1,2})\](?!\()/g, (m, n) => {
          const k = Number(n);
          return k >= 1 && k <= opts.sources
            ? `<button type="button" class="cite" data-source="${k}" aria-label="Source ${k}">${k}</button>`
            : m;
        });
      }
      return s.replace(/\u0000(\d+)\u0000/g, (_, k) => {
        const [href, label] = links[Number(k)];
        return `<a href="${href}" target="_blank" rel="noopener noreferrer nofollow">${label}</a>`;
      });
    })
    .join("");
}

const FENCE = /^\s{0,3}(```|~~~)\s*([\w+-]*)\s*$/;
const HEADING_OPEN = /^\s{0,3}(#{1,6})\s+/;
const LINE_BREAK = /[\n\r\u2028\u2029]/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
// Each run of spaces belongs to one \s* (`\s*\|?\s*` split a run between two: quadratic).
const TABLE_SEP = /^\s*(?:\|\s*)?:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*(?:\|\s*)?$/;

// `# Title ##` -> [level, "Title"], or null: what /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/ matched,
// found by trimming instead: that pattern backtracked cubically over a long run of spaces
// (one line of 4,000 spaces froze the tab for 19 s).
function matchHeading(line) {
  const open = HEADING_OPEN.exec(line);
  if (!open) return null;
  let text = line.slice(open[0].length).trimEnd();
  let end = text.length;
  while (end > 0 && text[end - 1] === "#") end -= 1;
  text = text.slice(0, end).trimEnd();
  return LINE_BREAK.test(text) ? null : [open[1].length, text];
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function isTableStart(lines, i) {
  return (
    i + 1 < lines.length &&
    lines[i].includes("|") &&
    TABLE_SEP.test(lines[i + 1]) &&
    lines[i + 1].includes("-")
  );
}

function startsBlock(lines, i) {
  const line = lines[i];
  return (
    FENCE.test(line) ||
    matchHeading(line) !== null ||
    RULE.test(line) ||
    LIST_ITEM.test(line) ||
    QUOTE.test(line) ||
    isTableStart(lines, i)
  );
}

function renderTable(lines, i, opts) {
  const head = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map((c) =>
    c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : "",
  );
  const cell = (tag, text, k) => {
    const cls = aligns[k] ? ` class="align-${aligns[k]}"` : "";
    return `<${tag}${cls}>${inline(text, opts)}</${tag}>`;
  };
  let html = `<div class="table-wrap"><table><thead><tr>${head.map((c, k) => cell("th", c, k)).join("")}</tr></thead><tbody>`;
  let j = i + 2;
  while (j < lines.length && lines[j].trim() && lines[j].includes("|")) {
    const row = splitRow(lines[j]);
    html += `<tr>${head.map((_, k) => cell("td", row[k] ?? "", k)).join("")}</tr>`;
    j += 1;
  }
  return [`${html}</tbody></table></div>`, j];
}

function renderList(lines, i, opts) {
  const first = LIST_ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const start = ordered ? Number.parseInt(first[2], 10) : 1;
  const items = [];
  let j = i;
  while (j < lines.length) {
    const m = LIST_ITEM.exec(lines[j]);
    if (m && m[1].length === indent && /\d/.test(m[2]) === ordered) {
      items.push([m[3]]);
      j += 1;
      continue;
    }
    if (!items.length) break;
    const line = lines[j];
    const lead = line.match(/^\s*/)[0].length;
    if (line.trim() && lead > indent) {
      items[items.length - 1].push(line.slice(Math.min(lead, indent + 2)));
      j += 1;
      continue;
    }
    // a blank line inside a list continues it when the next line is an item or indented
    if (!line.trim() && j + 1 < lines.length) {
      const next = lines[j + 1];
      const nm = LIST_ITEM.exec(next);
      const nextLead = next.match(/^\s*/)[0].length;
      if ((nm && nm[1].length >= indent && next.trim()) || (next.trim() && nextLead > indent)) {
        j += 1;
        continue;
      }
    }
    break;
  }
  const tag = ordered ? "ol" : "ul";
  const startAttr = ordered && start !== 1 ? ` start="${start}"` : "";
  const body = items
    .map(([head, ...rest]) => {
      const nested = rest.length ? renderBlocks(rest, opts) : "";
      return `<li>${inline(head, opts)}${nested}</li>`;
    })
    .join("");
  return [`<${tag}${startAttr}>${body}</${tag}>`, j];
}

function renderBlocks(lines, opts) {
  let html = "";
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const code = [];
      i += 1;
      while (i < lines.length && !new RegExp(`^\\s{0,3}${fence[1]}\\s*$`).test(lines[i])) {
        code.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end)
      const lang = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : "";
      html += `<pre><code${lang}>${escapeHtml(code.join("\n"))}</code></pre>`;
      continue;
    }
    const heading = matchHeading(line);
    if (heading) {
      const level = Math.min(6, heading[0] + 2);
      html += `<h${level}>${inline(heading[1], opts)}</h${level}>`;
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      html += "<hr>";
      i += 1;
      continue;
    }
    if (isTableStart(lines, i)) {
      const [table, next] = renderTable(lines, i, opts);
      html += table;
      i = next;
      continue;
    }
    if (LIST_ITEM.test(line)) {
      const [list, next] = renderList(lines, i, opts);
      html += list;
      i = next;
      continue;
    }
    if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && QUOTE.test(lines[i])) {
        quoted.push(QUOTE.exec(lines[i])[1]);
        i += 1;
      }
      html += `<blockquote>${renderBlocks(quoted, opts)}</blockquote>`;
      continue;
    }
    const para = [line.trim()];
    i += 1;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) {
      para.push(lines[i].trim());
      i += 1;
    }
    html += `<p>${para.map((l) => inline(l, opts)).join("<br>")}</p>`;
  }
  return html;
}

/** Markdown text to an HTML string in which every input character was escaped. */
export function renderMarkdown(text, { sources = 0 } = {}) {
  const lines = String(text ?? "")
    .replace(/\r\n?/g, "\n")
    .split("\n");
  return renderBlocks(lines, { sources });
}

const ALLOWED = {
  P: [], BR: [], STRONG: [], EM: [], DEL: [], CODE: ["class"], PRE: [], BLOCKQUOTE: [],
  H3: [], H4: [], H5: [], H6: [], HR: [], UL: [], OL: ["start"], LI: [],
  DIV: ["class"], TABLE: [], THEAD: [], TBODY: [], TR: [], TH: ["class"], TD: ["class"],
  A: ["href", "target", "rel"], BUTTON: ["type", "class", "data-source", "aria-label"],
};

function sanitize(node) {
  for (const child of [...node.childNodes]) {
    if (child.nodeType === Node.TEXT_NODE) continue;
    if (child.nodeType !== Node.ELEMENT_NODE || !(child.tagName in ALLOWED)) {
      child.remove();
      continue;
    }
    const allowed = ALLOWED[child.tagName];
    for (const attr of [...child.attributes]) {
      if (!allowed.includes(attr.name)) child.removeAttribute(attr.name);
    }
    if (child.tagName === "A" && !/^(https?:|mailto:)/i.test(child.getAttribute("href") || "")) {
      child.removeAttribute("href");
    }
    sanitize(child);
  }
}

/** Rendered, allowlist-checked nodes for `text`, ready to append to the page. */
export function toFragment(text, opts) {
  const template = document.createElement("template"); // inert: nothing in it loads or runs
  template.innerHTML = renderMarkdown(text, opts);
  sanitize(template.content);
  return document.importNode(template.content, true);
}
