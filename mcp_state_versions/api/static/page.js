// The timeline page: a store's threads, and for one thread every key over its turns.
// Plain script, no build step: it reads the same HTTP API a script would (the same answers
// as inspect_state), relative to the page's <base>, so it works wherever the app is mounted.
"use strict";

const main = document.getElementById("main");
const where = document.getElementById("where");
const tokenForm = document.getElementById("token");
const TOKEN = "mcp-state-versions-token";

// -- the API ---------------------------------------------------------------------------------

class Unauthorized extends Error {}

async function api(path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN);
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(path, { headers });
  if (response.status === 401) throw new Unauthorized();
  const body = await response.json().catch(() => ({}));
  return { status: response.status, body };
}

// A path segment as the API reads it: "/" encoded, and a segment of dots (which the browser
// would resolve as "." or "..") behind a "~" the API takes off (see api/paths.py).
const segment = (s) => (/^~*\.{1,2}$/.test(s) ? `~${s}` : encodeURIComponent(s));
const threadPath = (id) => `threads/${segment(id)}`;
const keyPath = (key) => key.split("/").map(segment).join("/");

// -- small DOM helpers -----------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== false && value != null) node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child != null) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(...nodes) {
  main.replaceChildren(...nodes.filter((node) => node != null));
}

// "3 min ago", from an ISO time; the exact time goes in the element's title.
function ago(iso) {
  const seconds = (Date.now() - Date.parse(iso)) / 1000;
  if (!Number.isFinite(seconds)) return "";
  for (const [unit, size] of [["day", 86400], ["h", 3600], ["min", 60]]) {
    if (seconds >= size) {
      const count = Math.floor(seconds / size);
      return unit === "day" ? `${count} day${count === 1 ? "" : "s"} ago` : `${count} ${unit} ago`;
    }
  }
  return "just now";
}

const SOURCES = { ring: "read from the key's recent versions", history: "read from the thread's history" };

function bytes(count) {
  for (const [unit, size] of [["GB", 2 ** 30], ["MB", 2 ** 20], ["KB", 2 ** 10]]) {
    if (count >= size) return `${(count / size).toFixed(1)} ${unit}`;
  }
  return `${count} bytes`;
}

// Answers the API sends as 404/410 that say what a turn held (pruned, not set yet ...): told as
// a note, as the tool tells the model; anything else is a failure, told as an alert.
const ANSWERS = new Set(["turn_not_retained", "no_turn_history", "value_evicted", "key_not_set_yet",
  "turn_never_happened"]);

function problem(body) {
  if (ANSWERS.has(body.code)) return el("p", { class: "note answer" }, body.detail);
  return el("p", { class: "problem", role: "alert" }, body.detail || body.title || "The request failed.");
}

// -- pages -----------------------------------------------------------------------------------

async function route() {
  tokenForm.hidden = true;
  const hash = decodeURIComponent(location.hash.slice(1));
  try {
    if (hash.startsWith("/thread/")) await threadPage(hash.slice("/thread/".length));
    else await threadsPage();
  } catch (error) {
    if (!(error instanceof Unauthorized)) throw error;
    show(el("p", {}, "Sign in to read this server's threads."));
    tokenForm.hidden = false;
    document.getElementById("token-input").focus();
  }
}

async function threadsPage(contains = "", before = null, rows = []) {
  where.textContent = "threads, newest first";
  const query = new URLSearchParams({ limit: "50" });
  if (contains) query.set("contains", contains);
  if (before) query.set("before", before);
  const { status, body } = await api(`threads?${query}`);
  if (status !== 200) return show(problem(body));
  rows = rows.concat(body.threads);
  const filter = el("input", { type: "search", value: contains, "aria-label": "Thread id contains",
    placeholder: "thread id contains…" });
  const form = el("form", { class: "bar", onsubmit: (event) => {
    event.preventDefault();
    threadsPage(filter.value.trim());
  } }, filter, el("button", { type: "submit" }, "Filter"));
  const table = el("table", { class: "threads" },
    el("thead", {}, el("tr", {}, ["thread", "turns", "last write", "stored"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.map((t) => el("tr", {},
      el("td", {}, el("a", { href: `#/thread/${encodeURIComponent(t.thread_id)}` }, t.thread_id)),
      el("td", { title: t.damage || "" }, t.turns ?? "damaged"), el("td", { title: t.last_write || "" }, t.last_write ? ago(t.last_write) : ""), el("td", {}, bytes(t.stored_bytes))))));
  const more = body.next
    ? el("button", { type: "button", onclick: () => threadsPage(contains, body.next, rows) }, "More threads")
    : null;
  show(form, rows.length ? table : el("p", {}, contains ? "No thread id contains that." : "No threads yet."), more);
}

// A tool call as it was made: its name and its arguments.
const callText = (call) => `${call.tool}(${JSON.stringify(call.args)})`;

// What each cell's colour means, in words (cells' labels and titles).
const WORDS = {
  written: "written", rewritten: "rewritten", held: "held", unset: "not set yet", evicted: "evicted",
  pruned: "pruned: no longer retained",
  "pruned-known": "pruned, the key's recent versions still hold its value",
};

// The grid shows a window of turns; the keyboard moves a cursor over it (roving tabindex).
const WINDOW = 40;

async function threadPage(threadId) {
  where.textContent = `thread ${threadId}`;
  const { status, body } = await api(`${threadPath(threadId)}/timeline`);
  if (status !== 200) return show(el("h2", {}, threadId), problem(body));
  const view = new Timeline(threadId, body);
  view.render();
}

class Timeline {
  constructor(threadId, body) {
    this.threadId = threadId;
    this.total = body.total;
    this.first = body.retained ? body.retained.first : body.total + 1;
    this.keys = body.keys.map((row) => ({ ...row, startSet: new Set(row.starts), evictedSet: new Set(row.evicted) }));
    this.end = Math.max(1, this.total);  // the last turn shown
    this.row = 0;
    this.turn = this.total;
    this.turns = new Map();  // each turn's conversation, read once (a promise of the answer)
  }

  status(row, turn) {
    if (turn < this.first) return row.known_from != null && turn >= row.known_from ? "pruned-known" : "pruned";
    if (turn < row.set_from) return "unset";
    if (row.evictedSet.has(turn)) return "evicted";
    if (row.startSet.has(turn)) return turn === row.first_written ? "written" : "rewritten";
    return "held";
  }

  render() {
    const start = Math.max(1, this.end - WINDOW + 1);
    const turns = [];
    for (let turn = start; turn <= this.end; turn++) turns.push(turn);
    const heading = el("h2", {}, `${this.threadId} · ${this.total} turns · ${this.keys.length} keys`);
    const retained = this.first <= this.total ? `turns ${this.first}–${this.total} retained` : "no turn retained";
    const bar = el("div", { class: "bar" },
      el("button", { type: "button", disabled: start <= 1, onclick: () => this.shift(-WINDOW) }, "◀ Earlier turns"),
      el("span", {}, `turns ${start}–${this.end} of ${this.total} (${retained})`),
      el("button", { type: "button", disabled: this.end >= this.total, onclick: () => this.shift(WINDOW) }, "Later turns ▶"));
    const legend = el("div", { class: "legend" },
      el("span", { class: "written" }, "written"), el("span", { class: "rewritten" }, "rewritten"),
      el("span", { class: "held" }, "held"),
      el("span", { class: "pruned-known" }, "pruned, value still known"),
      el("span", { class: "pruned" }, "pruned"),
      el("span", { class: "unset" }, "not set yet"),
      el("span", { class: "evicted" }, "evicted"));
    if (!this.keys.length) {
      return show(heading, bar, el("p", {}, "No key has been published in the retained turns."));
    }
    this.row = Math.min(this.row, this.keys.length - 1);
    this.turn = Math.min(Math.max(this.turn, start), this.end);
    const grid = el("table", { class: "grid", role: "grid", "aria-label": "Keys by turn",
      onkeydown: (event) => this.key(event),
      // one listener for every cell and heading: pointing at a turn shows what it was
      onmouseover: (event) => {
        const turn = event.target.closest("[data-turn]")?.dataset.turn;
        if (turn && Number(turn) !== this.shownTurn) this.showTurn(Number(turn));
      } },
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "key \\ turn"),
        turns.map((turn) => el("th", { scope: "col", "aria-label": `turn ${turn}`, "data-turn": turn }, turn)))),
      el("tbody", {}, this.keys.map((row, index) => el("tr", {},
        el("th", { scope: "row", class: "key" }, row.key),
        turns.map((turn) => {
          const status = this.status(row, turn);
          const chosen = index === this.row && turn === this.turn;
          // the cursor (tabindex) is where the keyboard is; selected is the cell opened
          const opened = this.selected && this.selected.index === index && this.selected.turn === turn;
          return el("td", { class: status, role: "gridcell", tabindex: chosen ? "0" : "-1",
            "aria-selected": opened ? "true" : "false", "data-row": index, "data-turn": turn,
            "aria-label": `${row.key}, turn ${turn}: ${WORDS[status]}`, title: `${row.key} · turn ${turn} · ${WORDS[status]}`,
            onclick: (event) => event.shiftKey ? this.compare(index, turn) : this.open(index, turn) });
        })))));
    this.detail = el("section", { id: "detail", "aria-live": "polite" },
      el("p", { class: "note" }, "Choose a cell (click, or arrows and Enter) to see the value at that turn; " +
        "shift-click another turn of the same key to compare the two."));
    this.turnPanel = el("aside", { id: "turn", "aria-live": "polite", "aria-label": "The turn" },
      el("p", { class: "note" }, "Point at a turn to see what it was about."));
    show(heading, bar, legend, el("div", { class: "grid-wrap" }, grid),
      el("div", { class: "panels" }, this.detail, this.turnPanel));
  }

  // What a turn was: the user's message that opened it, its calls, the reply that ended it.
  async conversation(turn) {
    if (!this.turns.has(turn)) this.turns.set(turn, api(`${threadPath(this.threadId)}/turns/${turn}`));
    return this.turns.get(turn);
  }

  async showTurn(turn) {
    this.shownTurn = turn;
    const { status, body } = await this.conversation(turn);
    if (this.shownTurn !== turn || !this.turnPanel) return;
    const title = el("h2", {}, `Turn ${turn}`);
    if (status !== 200) return this.turnPanel.replaceChildren(title, problem(body));
    const calls = body.calls.map((call) => el("li", {}, el("code", {}, callText(call)),
      call.keys.length ? ` wrote ${call.keys.join(", ")}` : ""));
    // (replaceChildren writes a null as the text "null": the parts a turn lacks are left out)
    this.turnPanel.replaceChildren(...[title,
      el("p", { class: "said user" }, el("strong", {}, "User: "), body.user ?? "(no longer in the messages)"),
      calls.length ? el("ul", { class: "calls" }, calls) : null,
      body.summary ? el("p", { class: "said summary" }, el("strong", {}, "Summary written in this turn: "),
        body.summary.length > 300 ? `${body.summary.slice(0, 300)}…` : body.summary) : null,
      el("p", { class: "said reply" }, el("strong", {}, "Reply: "),
        body.reply ?? (body.open ? "(still to come: the turn waits for a person)" : "(no reply)"))]
      .filter((part) => part !== null));
  }

  cell() {
    return main.querySelector(`td[data-row="${this.row}"][data-turn="${this.turn}"]`);
  }

  shift(by) {
    this.end = Math.min(this.total, Math.max(Math.min(WINDOW, this.total), this.end + by));
    this.turn = Math.min(Math.max(this.turn + by, 1), this.total);
    this.render();
  }

  move(row, turn) {
    const start = Math.max(1, this.end - WINDOW + 1);
    this.row = Math.min(Math.max(row, 0), this.keys.length - 1);
    turn = Math.min(Math.max(turn, 1), this.total);
    const old = main.querySelector('td[tabindex="0"]');
    if (turn < start || turn > this.end) {
      this.turn = turn;
      this.end = turn < start ? Math.min(this.total, turn + WINDOW - 1) : turn;
      this.render();
    } else {
      this.turn = turn;
      if (old) old.tabIndex = -1;
    }
    const cell = this.cell();
    cell.tabIndex = 0;
    cell.focus();
  }

  key(event) {
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0],
      PageUp: [0, -WINDOW], PageDown: [0, WINDOW] };
    if (event.key in moves) {
      const [rows, turns] = moves[event.key];
      this.move(this.row + rows, this.turn + turns);
    } else if (event.key === "Home") {
      this.move(this.row, event.ctrlKey ? 1 : Math.max(1, this.end - WINDOW + 1));
    } else if (event.key === "End") {
      this.move(this.row, event.ctrlKey ? this.total : this.end);
    } else if (event.key === "Enter" || event.key === " ") {
      this.open(this.row, this.turn);
    } else {
      return;
    }
    event.preventDefault();
  }

  // The call that wrote the version begun in turn `since`, from that turn's conversation.
  async writer(key, since) {
    const { status, body } = await this.conversation(since);
    if (status !== 200) return el("p", { class: "note" }, `Written in turn ${since}; that turn is no longer retained.`);
    const call = [...body.calls].reverse().find((c) => c.keys.includes(key));
    if (!call) return el("p", { class: "note" }, `Written in turn ${since}, not by a tool call (an edit, or state handed in).`);
    return el("div", { class: "writer" },
      el("p", {}, `Written in turn ${since} by `, el("code", {}, callText(call)), ", which returned:"),
      el("pre", {}, call.result ?? ""));
  }

  // Any two versions: the selected cell's and one shift-clicked in the same key's row.
  async compare(index, turn) {
    const first = this.selected;
    if (!first || first.index !== index) return this.open(index, turn);
    this.move(index, turn);
    const row = this.keys[index];
    const base = `${threadPath(this.threadId)}/state/${keyPath(row.key)}`;
    const [a, b] = [first.turn, turn].sort((x, y) => x - y);
    const title = el("h2", {}, `${row.key}: turn ${a} against turn ${b}`);
    const [older, newer] = await Promise.all([api(`${base}?turn=${a}`), api(`${base}?turn=${b}`)]);
    for (const answer of [older, newer]) {
      if (answer.status !== 200) return this.detail.replaceChildren(title, problem(answer.body));
    }
    this.detail.replaceChildren(title, el("h2", {}, `Changes from turn ${a} to turn ${b}`),
      diff(JSON.stringify(older.body.value, null, 2), JSON.stringify(newer.body.value, null, 2)));
  }

  // The version in place at the end of `turn` began at the latest start at or before it.
  versionStart(row, turn) {
    let found = null;
    for (const start of row.starts) if (start <= turn) found = start;
    return found;
  }

  async open(index, turn) {
    this.move(index, turn);
    const row = this.keys[index];
    const base = `${threadPath(this.threadId)}/state/${keyPath(row.key)}`;
    const title = el("h2", {}, `${row.key} at the end of turn ${turn}`);
    this.detail.replaceChildren(title, el("p", { class: "note" }, "Reading…"));
    this.selected = { index, turn };
    for (const other of main.querySelectorAll('td[aria-selected="true"]')) other.setAttribute("aria-selected", "false");
    this.cell().setAttribute("aria-selected", "true");
    this.showTurn(turn);
    const now = await api(`${base}?turn=${turn}`);
    if (now.status !== 200) return this.detail.replaceChildren(title, problem(now.body));
    const value = JSON.stringify(now.body.value, null, 2);
    const held = now.body.until == null
      ? `held from turn ${now.body.since ?? "?"}${now.body.since != null && now.body.until == null ? " on" : ""}`
      : now.body.since === now.body.until ? `held turn ${now.body.since}` : `held turns ${now.body.since}–${now.body.until}`;
    const parts = [title, el("p", { class: "note" }, `${held}; ${SOURCES[now.body.source] || now.body.source}`), el("pre", {}, value)];
    const since = now.body.since ?? this.versionStart(row, turn);
    if (since != null) {  // filled in when it arrives: the value and its diff do not wait for it
      const slot = el("div", {}, el("p", { class: "note" }, "Finding the call that wrote it…"));
      parts.push(slot);
      this.writer(row.key, since).then((found) => slot.replaceChildren(found));
    }
    if (since == null || since <= 1) {
      parts.push(el("p", { class: "note" }, "The first version of this key: nothing to compare with."));
      return this.detail.replaceChildren(...parts);
    }
    const before = await api(`${base}?turn=${since - 1}`);
    if (before.status === 200) {
      parts.push(el("h2", {}, `Changes from the version at turn ${since - 1}`),
        diff(JSON.stringify(before.body.value, null, 2), value));
    } else if (before.body.code === "key_not_set_yet") {
      parts.push(el("p", { class: "note" }, "The first version of this key: nothing to compare with."));
    } else {
      parts.push(el("p", { class: "note" }, `The previous version cannot be shown: ${before.body.detail}`));
    }
    this.detail.replaceChildren(...parts);
  }
}

// A line diff of two texts (longest common subsequence), for values of up to 2,000 lines.
function diff(oldText, newText) {
  const a = oldText.split("\n"), b = newText.split("\n");
  if (a.length > 2000 || b.length > 2000) {
    return el("p", { class: "note" }, "The values are too long to compare line by line here.");
  }
  const lcs = Array.from({ length: a.length + 1 }, () => new Uint16Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const lines = [];
  let i = 0, j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { lines.push(el("span", { class: "same" }, `  ${a[i]}`)); i++; j++; }
    else if (i < a.length && (j >= b.length || lcs[i + 1][j] >= lcs[i][j + 1])) { lines.push(el("del", { class: "del" }, `- ${a[i]}`)); i++; }
    else { lines.push(el("ins", { class: "add" }, `+ ${b[j]}`)); j++; }
  }
  return el("pre", { class: "diff", "aria-label": "Changes from the previous version" }, lines);
}

tokenForm.addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN, document.getElementById("token-input").value);
  route();
});
window.addEventListener("hashchange", route);
route();
