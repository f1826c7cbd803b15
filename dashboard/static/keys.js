// API keys in this browser tab: one per organization, kept in session storage (so they go
// when the tab closes) as {org: key}, never in the URL. A key arrives typed into the sign-in
// form or in a link's fragment (`#key=…`, which browsers never send to a server); which
// organization it belongs to is what the API answers for it (GET /api/v1/organizations).

const STORE = "crow.keys";
let memory = {}; // used where session storage is unavailable (blocked storage)

function load() {
  let map;
  try {
    map = JSON.parse(sessionStorage.getItem(STORE) || "{}");
  } catch {
    map = memory;
  }
  if (!map || typeof map !== "object" || Array.isArray(map)) return {};
  return Object.fromEntries(Object.entries(map).filter(([, key]) => typeof key === "string" && key));
}

function save(map) {
  memory = map;
  try {
    if (Object.keys(map).length) sessionStorage.setItem(STORE, JSON.stringify(map));
    else sessionStorage.removeItem(STORE);
  } catch {
    // storage blocked: the keys live as long as the page
  }
}

/** The stored key of `org`, or null. */
export function keyFor(org) {
  return (org && load()[org]) || null;
}

/** The organizations this tab has a key for, in the order they were added. */
export function keyedOrgs() {
  return Object.keys(load());
}

export function rememberKey(org, key) {
  save({ ...load(), [org]: key });
}

/** Forget `org`'s key; with `onlyIf`, only while that is still the key stored for it. */
export function forgetKey(org, onlyIf = null) {
  const map = load();
  if (!(org in map) || (onlyIf !== null && map[org] !== onlyIf)) return false;
  delete map[org];
  save(map);
  return true;
}

/** The key a link carried in its fragment (`#key=…`), taken out of the address bar and the
 * history entry at once; null when there is none. */
export function takeKeyFromUrl() {
  if (!location.hash.includes("key=")) return null;
  const params = new URLSearchParams(location.hash.slice(1));
  const key = params.get("key");
  params.delete("key");
  const rest = params.toString();
  history.replaceState(history.state, "", `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`);
  return key?.trim() || null;
}
