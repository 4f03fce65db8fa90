/* agent-tune view: the page's script. Plain JavaScript, no dependencies, nothing fetched but the page's own
 * server's updates (--serve).
 *
 * Data (written by agent_tune/view/page.py):
 *   #meta     kind, title, columns, curves {rows, stages}, report {summary, text}, live, poll_ms
 *   #summary  one row per episode (meta.columns): what the list shows, filters, sorts and groups on
 *   #details  gzip + base64 of JSON lines: line 0 the shared prompt messages, then one detail per episode,
 *             each parsed only when its episode is opened (a 10,000-episode run renders from #summary alone)
 */
(function () {
  "use strict";

  // ------------------------------------------------------------------------------------------- helpers
  const $ = (sel, root) => (root || document).querySelector(sel);
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "html") node.innerHTML = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }

  // One way to show a GRPO group id (the Episodes and Groups lists, the titles): a long hex id (verl's uid) cut to
  // its first 8 characters, any other id whole; a curriculum stage's prefix kept. The full id is the tooltip.
  function groupLabel(name) {
    const s = String(name);
    const cut = s.lastIndexOf("/") + 1;
    const id = s.slice(cut);
    const hex = id.replace(/-/g, "");
    return s.slice(0, cut) + (/^[0-9a-f]{16,}$/i.test(hex) ? hex.slice(0, 8) : id);
  }

  function listHead(box, columns) {
    box.innerHTML = columns.map(([cls, text, title]) => `<span class="${cls}" title="${esc(title || text)}">${esc(text)}</span>`).join("");
  }

  let showEnv = true;
  const EP_COLUMNS = [["c-step", "step"], ["c-grp", "group/sample", "GRPO group id / sample number"],
    ["c-env", "env · category"], ["c-task", "task", "test or task id"], ["c-rew", "reward"], ["c-acc", "acc", "accuracy"],
    ["c-adv", "adv", "GRPO advantage"], ["c-stop", "stop", "stop reason"], ["c-fmt", "fmt", "format errors"]];
  const GROUP_COLUMNS = [["c-step", "step"], ["c-grp", "group", "GRPO group id"], ["c-task", "task", "test or task id"],
    ["c-n", "n", "samples"], ["c-bars", "rewards"], ["c-rew", "mean"], ["c-acc", "σ", "standard deviation"],
    ["c-sig", "signal", "rewards not all equal"]];

  const fmtNum = (x, d) => (x === null || x === undefined ? "–" : Number(x).toFixed(d === undefined ? 2 : d));
  const fmtSigned = (x) => (x === null || x === undefined ? "–" : (x >= 0 ? "+" : "") + x.toFixed(2));

  // -------------------------------------------------------------------------------------------- data
  const META = JSON.parse($("#meta").textContent);
  const COLS = META.columns;
  const C = {};
  COLS.forEach((c, i) => { C[c] = i; });
  let rows = JSON.parse($("#summary").textContent);
  let shared = [];
  let details = [];
  const app = $("#app");

  async function gunzipBase64(b64) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return await new Response(stream).text();
  }

  // the details decompress after the first render: the list never waits for them
  const detailsReady = (async () => {
    const b64 = $("#details").textContent.trim();
    if (b64) {
      const lines = (await gunzipBase64(b64)).split("\n");
      shared = JSON.parse(lines[0]);
      details = lines.slice(1);
    }
    app.dataset.detailsMs = performance.now().toFixed(0); // since navigation: when an episode can open
  })();

  function detailOf(i) { return JSON.parse(details[i]); }

  // ------------------------------------------------------------------------------------------ groups
  // GRPO groups: the samples of one prompt at one step (stage, step, group id). A group's advantage per sample
  // is verl's GRPO rule, (r - mean) / (std + 1e-6) with the unbiased std (one sample: mean 0, std 1), unless the
  // record holds its own; eval groups (the samples of one entry) carry no advantage.
  let groups = [];
  let groupOf = [];
  let adv = [];

  function computeGroups() {
    const map = new Map();
    groups = [];
    groupOf = new Array(rows.length);
    rows.forEach((r, i) => {
      const key = (r[C.stage] || "") + "\u0001" + (r[C.step] === null ? "" : r[C.step]) + "\u0001" + r[C.group];
      let g = map.get(key);
      if (!g) {
        g = { id: groups.length, step: r[C.step], stage: r[C.stage], name: r[C.group], task: r[C.task], members: [] };
        map.set(key, g);
        groups.push(g);
      }
      g.members.push(i);
      groupOf[i] = g.id;
    });
    adv = new Array(rows.length).fill(null);
    for (const g of groups) {
      g.members.sort((a, b) => (rows[a][C.sample] ?? a) - (rows[b][C.sample] ?? b));
      const rs = g.members.map((i) => rows[i][C.reward]);
      const n = rs.length;
      const mean = rs.reduce((a, b) => a + b, 0) / n;
      const std = n > 1 ? Math.sqrt(rs.reduce((a, b) => a + (b - mean) * (b - mean), 0) / (n - 1)) : 0;
      g.mean = mean;
      g.std = std;
      g.signal = new Set(rs).size > 1;
      g.correct = g.members.filter((i) => rows[i][C.acc] === 1).length;
      const m = n > 1 ? mean : 0;
      const s = n > 1 ? std : 1;
      for (const i of g.members) {
        const recorded = rows[i][C.adv];
        if (recorded !== null) adv[i] = recorded;
        else if (META.kind !== "eval") adv[i] = (rows[i][C.reward] - m) / (s + 1e-6);
      }
    }
  }

  // ----------------------------------------------------------------------------------------- filters
  const filters = { step: "", stage: "", env: "", cat: "", task: "", rmin: "", rmax: "", stop: "", fmt: "", tok: "",
                    sort: "order" };
  let view = [];
  let rewardRange = [0, 1];

  function distinct(col) {
    const seen = new Set();
    for (const r of rows) if (r[C[col]] !== null && r[C[col]] !== undefined) seen.add(r[C[col]]);
    return [...seen].sort((a, b) => (typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b))));
  }

  function matches(r) {
    const f = filters;
    if (f.step !== "" && String(r[C.step]) !== f.step) return false;
    if (f.stage !== "" && r[C.stage] !== f.stage) return false;
    if (f.env !== "" && r[C.env] !== f.env) return false;
    if (f.cat !== "" && r[C.category] !== f.cat) return false;
    if (f.stop !== "" && r[C.stop] !== f.stop) return false;
    if (f.task !== "" && !String(r[C.task] ?? "").toLowerCase().includes(f.task.toLowerCase())) return false;
    if (f.rmin !== "" && !(r[C.reward] >= Number(f.rmin))) return false;
    if (f.rmax !== "" && !(r[C.reward] <= Number(f.rmax))) return false;
    if (f.fmt === "with" && !(r[C.fmt] > 0)) return false;
    if (f.fmt === "without" && r[C.fmt] > 0) return false;
    if (f.tok === "with" && !r[C.tok]) return false;
    return true;
  }

  const SORTS = {
    order: null,
    "reward-desc": (a, b) => rows[b][C.reward] - rows[a][C.reward] || a - b,
    "reward-asc": (a, b) => rows[a][C.reward] - rows[b][C.reward] || a - b,
    "step-asc": (a, b) => (rows[a][C.step] ?? 0) - (rows[b][C.step] ?? 0) || a - b,
    "step-desc": (a, b) => (rows[b][C.step] ?? 0) - (rows[a][C.step] ?? 0) || a - b,
    "adv-desc": (a, b) => (adv[b] ?? -Infinity) - (adv[a] ?? -Infinity) || a - b,
  };

  function applyFilters() {
    view = [];
    for (let i = 0; i < rows.length; i++) if (matches(rows[i])) view.push(i);
    const sort = SORTS[filters.sort];
    if (sort) view.sort(sort);
    app.dataset.episodes = String(view.length);
    app.dataset.total = String(rows.length);
    $("#ep-count").textContent = view.length === rows.length ? `${rows.length} episodes`
      : `${view.length} of ${rows.length} episodes`;
    episodeList.setCount(view.length);
    groupsChanged();
  }

  function select(id, label, values, key, fmt) {
    const s = el("select", { id, onchange: (e) => { filters[key] = e.target.value; applyFilters(); } },
      el("option", { value: "", text: "all" }));
    for (const v of values) s.append(el("option", { value: String(v), text: fmt ? fmt(v) : String(v) }));
    s.value = filters[key];
    return el("label", {}, label, s);
  }

  function input(id, label, type, key, attrs) {
    const i = el("input", Object.assign({ id, type, value: filters[key],
      oninput: (e) => { filters[key] = e.target.value; applyFilters(); } }, attrs || {}));
    return el("label", {}, label, i);
  }

  function buildFilters() {
    const bar = $("#filters");
    bar.replaceChildren();
    const steps = distinct("step");
    if (steps.length) bar.append(select("f-step", "step", steps, "step"));
    const stages = distinct("stage");
    if (stages.length) bar.append(select("f-stage", "stage", stages, "stage"));
    const envs = distinct("env");
    showEnv = envs.length > 1; // one env: the column shows the category alone
    EP_COLUMNS[2][1] = showEnv ? "env · category" : "category";
    listHead($("#ep-head"), EP_COLUMNS);
    if (envs.length > 1) bar.append(select("f-env", "env", envs, "env"));
    const cats = distinct("category");
    if (cats.length) bar.append(select("f-cat", "category", cats, "cat"));
    bar.append(input("f-task", "task", "text", "task", { placeholder: "id contains…" }));
    bar.append(input("f-rmin", "reward ≥", "number", "rmin", { step: "any" }));
    bar.append(input("f-rmax", "≤", "number", "rmax", { step: "any" }));
    bar.append(select("f-stop", "stop", distinct("stop"), "stop"));
    bar.append(select("f-fmt", "format errors", ["with", "without"], "fmt"));
    if (rows.some((r) => r[C.tok])) bar.append(select("f-tok", "tokens", ["with"], "tok", () => "recorded"));
    const sort = el("select", { id: "f-sort", onchange: (e) => { filters.sort = e.target.value; applyFilters(); } });
    for (const [v, t] of [["order", "as recorded"], ["reward-desc", "reward ↓"], ["reward-asc", "reward ↑"],
      ["step-asc", "step ↑"], ["step-desc", "step ↓"], ["adv-desc", "advantage ↓"]]) sort.append(el("option", { value: v, text: t }));
    sort.value = filters.sort;
    bar.append(el("label", {}, "sort", sort));
    bar.append(el("span", { id: "ep-count", class: "count" }));
    let lo = 0, hi = 1e-9; // loops, not Math.min(...rows): spreading 100,000 arguments overflows the stack
    for (const r of rows) { lo = Math.min(lo, r[C.reward]); hi = Math.max(hi, r[C.reward]); }
    rewardRange = [lo, hi];
  }

  // ---------------------------------------------------------------------------------- virtual lists
  // Only the rows in sight are in the page; a 10,000-episode list costs what 40 rows cost.
  function VList(container, renderRow, onPick) {
    const rowH = parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--row")) || 26;
    const spacer = el("div", { class: "vspacer" });
    container.replaceChildren(spacer);
    let count = 0;
    let selected = -1;
    let queued = false;
    function draw() {
      queued = false;
      const top = container.scrollTop;
      const height = container.clientHeight || 600;
      const first = Math.max(0, Math.floor(top / rowH) - 8);
      const last = Math.min(count, Math.ceil((top + height) / rowH) + 8);
      const frag = document.createDocumentFragment();
      for (let k = first; k < last; k++) {
        const node = renderRow(k);
        node.classList.add("vrow");
        if (k === selected) node.classList.add("sel");
        node.style.top = `${k * rowH}px`;
        node.addEventListener("click", () => { selected = k; draw(); onPick(k); });
        frag.append(node);
      }
      spacer.replaceChildren(frag);
    }
    container.addEventListener("scroll", () => { if (!queued) { queued = true; requestAnimationFrame(draw); } });
    return {
      setCount(n) { count = n; selected = -1; spacer.style.height = `${n * rowH}px`; draw(); },
      redraw: draw,
      select(k) { selected = k; container.scrollTop = Math.max(0, k * rowH - 3 * rowH); draw(); },
    };
  }

  function episodeRow(k) {
    const i = view[k];
    const r = rows[i];
    const [lo, hi] = rewardRange;
    const width = Math.max(0, Math.min(100, ((r[C.reward] - lo) / (hi - lo || 1)) * 100));
    const where = [showEnv ? r[C.env] : null, r[C.category]].filter((x) => x !== null).join(" · ");
    const node = el("div", { class: "ep-row", "data-index": i, "data-reward": r[C.reward],
      "data-step": r[C.step] === null ? "" : r[C.step], title: `episode ${i}` });
    node.innerHTML =
      `<span class="c-step">${r[C.step] === null ? "" : "s" + r[C.step]}</span>` +
      `<span class="c-grp" title="${esc(r[C.group])}"><span class="gid">${esc(groupLabel(r[C.group]))}</span>${r[C.sample] === null ? "" : "/" + r[C.sample]}</span>` +
      `<span class="c-env" title="${esc(where)}">${esc(where)}</span>` +
      `<span class="c-task" title="${esc(r[C.task] ?? "")}">${esc(r[C.task] ?? "")}</span>` +
      `<span class="c-rew"><i style="width:${width.toFixed(0)}%"></i>${fmtNum(r[C.reward])}</span>` +
      `<span class="c-acc">${r[C.acc] === null ? "" : fmtNum(r[C.acc], r[C.acc] % 1 ? 2 : 0)}</span>` +
      `<span class="c-adv">${adv[i] === null ? "" : fmtSigned(adv[i])}</span>` +
      `<span class="c-stop" title="${esc(r[C.stop] ?? "")}">${esc(r[C.stop] ?? "")}</span>` +
      `<span class="c-fmt">${r[C.fmt] > 0 ? r[C.fmt] : ""}</span>`;
    return node;
  }

  // ---------------------------------------------------------------------------------- an episode
  let detailTab = "conv";

  function badges(i) {
    const r = rows[i];
    const out = el("div", { class: "badges" });
    const add = (text, cls) => out.append(el("span", { class: "badge " + (cls || ""), text }));
    add(`reward ${fmtNum(r[C.reward], 3)}`, r[C.reward] > 0 ? "good" : "bad");
    if (r[C.acc] !== null) add(`acc ${fmtNum(r[C.acc], 3)}`, r[C.acc] >= 1 ? "good" : "");
    if (adv[i] !== null) add(`advantage ${fmtSigned(adv[i])} (GRPO, from the group)`);
    if (r[C.stop]) add(`stop: ${r[C.stop]}`, r[C.stop] === "done" ? "" : "bad");
    if (r[C.fmt] !== null) add(`format errors ${r[C.fmt]}`, r[C.fmt] > 0 ? "bad" : "");
    if (r[C.gens] !== null) add(`${r[C.gens]} generations`);
    if (r[C.tokens] !== null) add(`${r[C.tokens]} tokens`);
    return out;
  }

  async function showEpisode(i) {
    const box = $("#ep-detail");
    const r = rows[i];
    box.replaceChildren(el("p", { class: "hint", text: "loading…" }));
    await detailsReady;
    const d = detailOf(i);
    const head = el("h2", { id: "ep-title", "data-index": i,
      text: [`episode ${i}`, r[C.stage] && `stage ${r[C.stage]}`, r[C.step] !== null && `step ${r[C.step]}`,
        `group ${groupLabel(r[C.group])}`, r[C.sample] !== null && `sample ${r[C.sample]}`, r[C.env], r[C.category], r[C.task]]
        .filter(Boolean).join(" · ") });
    const tabs = el("div", { class: "subtabs" });
    const body = el("div", { id: "ep-body" });
    const pages = { conv: ["Conversation", () => conversation(d)], tok: ["Tokens", () => tokenView(d, r)],
      rec: ["Record", () => recordView(d)] };
    const open = (key) => {
      detailTab = key;
      for (const b of tabs.children) b.classList.toggle("on", b.dataset.key === key);
      body.replaceChildren(pages[key][1]());
    };
    for (const [key, [label]] of Object.entries(pages)) {
      tabs.append(el("button", { id: "dt-" + key, "data-key": key, text: label, onclick: () => open(key) }));
    }
    const toGroup = el("button", { text: "its group →", onclick: () => { showTab("groups"); pickGroup(groupOf[i]); } });
    tabs.append(toGroup);
    box.replaceChildren(head, badges(i), tabs, body);
    open(detailTab);
  }

  function prettyContent(text, role) {
    if (role === "tool" && typeof text === "string") {
      try { return JSON.stringify(JSON.parse(text), null, 1); } catch (e) { /* not JSON: as written */ }
    }
    return typeof text === "string" ? text : JSON.stringify(text, null, 1);
  }

  function message(m, where) {
    const role = m.role || "?";
    const cls = where === "prompt" ? "prompt" : role === "assistant" ? "policy" : "env";
    const tag = where === "prompt" ? (role === "assistant" || role === "tool" ? "prompt · worked example" : "prompt")
      : role === "assistant" ? "generated by the policy" : "from the env";
    const node = el("div", { class: `msg ${cls}`, "data-role": role },
      el("div", { class: "who", html: `<b>${esc(role)}</b><span>${esc(tag)}</span>` + (m.name ? `<span>${esc(m.name)}</span>` : "") }),
      el("pre", { text: prettyContent(m.content ?? "", role) }));
    const calls = m.calls || [];
    const errors = m.call_errors || [];
    const structured = m.tool_calls || [];
    if (calls.length || errors.length || structured.length) {
      const box = el("div", { class: "calls" });
      for (const c of calls) box.append(el("div", { class: "call", html: `→ <b>${esc(c.name)}</b>(${esc(JSON.stringify(c.arguments))})` }));
      for (const c of structured) box.append(el("div", { class: "call", text: "→ " + JSON.stringify(c.function || c) }));
      for (const e of errors) box.append(el("div", { class: "call-error", text: "✗ undecodable call: " + e }));
      node.append(box);
    }
    return node;
  }

  function conversation(d) {
    const out = el("div", { class: "conversation" });
    if (d.prompt) {
      const prompt = d.prompt.map((k) => shared[k]);
      const examples = prompt.filter((m) => m.role === "assistant").length;
      const last = prompt.length && prompt[prompt.length - 1].role === "user" ? prompt.length - 1 : prompt.length;
      const block = el("details", { class: "prompt-block" },
        el("summary", { text: `prompt: ${prompt.length} messages` + (examples ? ` (${examples} worked-example assistant turns: not the policy's)` : "") + (d.tools ? ` · tools: ${d.tools.join(", ")}` : "") }));
      prompt.slice(0, last).forEach((m) => block.append(message(m, "prompt")));
      out.append(block);
      prompt.slice(last).forEach((m) => out.append(message(m, "prompt")));
      (d.messages || []).forEach((m) => out.append(message(m, "generated")));
    } else {
      out.append(el("p", { class: "note", text: "This record has no conversation (an older dump): its prompt and loss-mask segments." }));
      if (d.prompt_text) out.append(el("div", { class: "msg prompt" }, el("div", { class: "who", html: "<b>prompt</b>" }), el("pre", { text: d.prompt_text })));
      out.append(segmentView(d));
    }
    return out;
  }

  function segmentView(d) {
    const box = el("div", { class: "tokens segments" });
    let html = "";
    for (const [policy, text, n, lp] of d.segments || []) {
      const title = `${policy ? "policy (mask 1)" : "env (mask 0)"} · ${n} tokens` + (lp === null || lp === undefined ? "" : ` · mean log-prob ${lp}`);
      html += `<span class="seg tok ${policy ? "tok-policy" : "tok-env"}" title="${esc(title)}">${esc(text)}</span>`;
    }
    box.innerHTML = html;
    return box;
  }

  function legend() {
    return el("div", { class: "legend", html:
      '<span class="tok tok-policy">policy</span> generated, trained on (mask 1); darker: less likely when sampled' +
      '<span class="tok tok-env">env</span> observations and template glue (mask 0)' +
      '<span class="tok-prompt">prompt</span> click to show' });
  }

  function tokenView(d, r) {
    const out = el("div", {});
    out.append(legend());
    const truncated = r[C.stop] === "token_budget";
    if (!d.tokens) {
      out.append(el("p", { class: "note", text: "Token lists were not recorded for this episode (agent_tune.episodes.tokens_every samples whole groups): its spans by loss mask." }));
      out.append(segmentView(d));
      if (truncated) out.append(el("span", { class: "trunc", text: "✂ truncated: token budget" }));
      return out;
    }
    const t = d.tokens;
    const box = el("div", { class: "tokens", id: "tokens" });
    const parts = [`<span class="tok-prompt" id="prompt-mark" title="the prompt: ${t.prompt_len} tokens (not trained on)">⟦prompt · ${t.prompt_len} tokens⟧</span>`];
    for (let k = 0; k < t.ids.length; k++) {
      const policy = t.mask[k] === 1;
      const lp = t.lps[k];
      const piece = t.pieces ? t.pieces[k] : `#${t.ids[k]}`;
      let style = "";
      let tip = `#${k} · id ${t.ids[k]} · ${JSON.stringify(piece)} · ${policy ? "policy" : "env"}`;
      if (policy && lp !== null && lp !== undefined) {
        const p = Math.exp(lp);
        style = ` style="background:rgba(var(--policy),${(0.12 + 0.6 * (1 - p)).toFixed(2)})"`;
        tip += ` · log-prob ${lp} (p ${p.toFixed(3)})`;
      }
      const shown = piece.replace(/\n/g, "⏎\n");
      parts.push(`<span class="tok ${policy ? "tok-policy" : "tok-env"}" data-i="${k}" data-mask="${t.mask[k]}"${style} title="${esc(tip)}">${esc(shown)}</span>`);
    }
    if (truncated) parts.push('<span class="trunc" id="trunc-mark">✂ truncated: token budget</span>');
    box.innerHTML = parts.join("");
    const promptText = el("pre", { class: "msg prompt", hidden: true, text: d.prompt_text || "(the prompt's text was not recorded)" });
    box.querySelector("#prompt-mark").addEventListener("click", () => { promptText.hidden = !promptText.hidden; });
    const policyCount = t.mask.reduce((a, b) => a + b, 0);
    out.append(el("p", { class: "note", text: `${t.ids.length} response tokens: ${policyCount} policy, ${t.ids.length - policyCount} env; prompt ${t.prompt_len} tokens.` }));
    out.append(promptText, box);
    return out;
  }

  function recordView(d) {
    const out = el("div", {});
    if (d.finish_reasons) out.append(el("p", { class: "note", text: "finish reasons per generation: " + d.finish_reasons.join(", ") }));
    if (d.tools) out.append(el("p", { class: "note", text: "tools offered: " + d.tools.join(", ") }));
    out.append(el("pre", { id: "record-json", text: JSON.stringify(d.extras || {}, null, 1) }));
    return out;
  }

  // --------------------------------------------------------------------------------------- groups
  const groupFilters = { signal: "" };
  let groupView = [];

  function groupsChanged() {
    const inView = new Set(view.map((i) => groupOf[i]));
    groupView = groups.filter((g) => inView.has(g.id) &&
      (groupFilters.signal === "" || (groupFilters.signal === "no") === !g.signal)).map((g) => g.id);
    const sized = groups.filter((g) => g.members.length > 1);
    const noSignal = sized.filter((g) => !g.signal).length;
    $("#group-count").textContent = `${groupView.length} groups` +
      (sized.length ? ` · ${noSignal} of ${sized.length} without signal (all rewards equal)` : "");
    groupList.setCount(groupView.length);
  }

  function buildGroupFilters() {
    const bar = $("#group-filters");
    const s = el("select", { id: "g-signal", onchange: (e) => { groupFilters.signal = e.target.value; groupsChanged(); } },
      el("option", { value: "", text: "all groups" }), el("option", { value: "no", text: "without signal" }),
      el("option", { value: "yes", text: "with signal" }));
    bar.replaceChildren(el("label", {}, "show", s),
      el("span", { class: "note", text: "(the episode filters apply too)" }), el("span", { id: "group-count", class: "count" }));
  }

  function minibar(g) {
    const [lo, hi] = rewardRange;
    return '<span class="minibar c-bars">' + g.members.map((i) => {
      const x = (rows[i][C.reward] - lo) / (hi - lo || 1);
      return `<i style="background:rgba(var(--policy),${(0.15 + 0.85 * x).toFixed(2)})" title="${fmtNum(rows[i][C.reward])}"></i>`;
    }).join("") + "</span>";
  }

  function groupRow(k) {
    const g = groups[groupView[k]];
    const node = el("div", { class: "grp-row", "data-signal": g.signal ? 1 : 0, "data-step": g.step === null ? "" : g.step });
    const signal = g.members.length < 2 ? "" : g.signal ? '<span class="c-sig signal-yes">signal</span>' : '<span class="c-sig signal-no">no signal</span>';
    node.innerHTML = `<span class="c-step">${g.step === null ? "" : "s" + g.step}</span>` +
      `<span class="c-grp" title="${esc(g.name)}"><span class="gid">${esc(groupLabel(g.name))}</span></span>` +
      `<span class="c-task" title="${esc(g.task ?? "")}">${esc(g.task ?? "")}</span>` +
      `<span class="c-n">${g.members.length}×</span>${minibar(g)}` +
      `<span class="c-rew">${fmtNum(g.mean)}</span><span class="c-acc">${fmtNum(g.std)}</span>${signal}`;
    return node;
  }

  async function pickGroup(id) {
    const g = groups[id];
    const box = $("#group-detail");
    const k = groupView.indexOf(id);
    if (k >= 0) groupList.select(k);
    box.replaceChildren(el("p", { class: "hint", text: "loading…" }));
    await detailsReady;
    const head = el("h2", { id: "group-title", title: g.name, text: `group ${groupLabel(g.name)}` + (g.step !== null ? ` · step ${g.step}` : "") +
      (g.task ? ` · ${g.task}` : "") +
      ` · ${g.members.length} samples · mean reward ${fmtNum(g.mean, 3)} · std ${fmtNum(g.std, 3)}` });
    const verdict = g.members.length < 2 ? "" : g.signal ? "rewards differ: this group carries a policy gradient"
      : "all rewards equal: no signal, every advantage is 0";
    const cards = el("div", { class: "cards" });
    for (const i of g.members) {
      const r = rows[i];
      const d = detailOf(i);
      const last = (d.messages || []).filter((m) => m.role === "assistant").pop();
      const card = el("div", { class: "card", "data-index": i, "data-reward": r[C.reward] },
        el("h4", { text: `sample ${r[C.sample] ?? "?"} · reward ${fmtNum(r[C.reward], 3)}` +
          (adv[i] === null ? "" : ` · advantage ${fmtSigned(adv[i])}`) }),
        el("div", { class: "note", text: [r[C.acc] !== null && `acc ${fmtNum(r[C.acc], 2)}`, r[C.stop], r[C.fmt] > 0 && `${r[C.fmt]} format errors`,
          r[C.gens] !== null && `${r[C.gens]} generations`].filter(Boolean).join(" · ") }),
        el("pre", { class: "excerpt", text: last ? last.content : "(no generated message recorded)" }),
        el("button", { text: "open episode", onclick: () => openEpisode(i) }));
      cards.append(card);
    }
    box.replaceChildren(head, el("p", { class: g.signal ? "signal-yes" : "signal-no", text: verdict }), cards);
  }

  function openEpisode(i) {
    showTab("episodes");
    let k = view.indexOf(i);
    if (k < 0) { // filtered out: clear the filters so it shows
      for (const key of Object.keys(filters)) if (key !== "sort") filters[key] = "";
      buildFilters();
      applyFilters();
      k = view.indexOf(i);
    }
    episodeList.select(k);
    showEpisode(i);
  }

  // --------------------------------------------------------------------------------------- curves
  const DEFAULT_CURVES = ["reward", "acc", "groups_with_signal", "format_error_rate", "response_length", "pg_loss"];
  let chosenCurves = null;

  function curveKeys() {
    const keys = new Set();
    for (const r of META.curves.rows) for (const k of Object.keys(r)) if (!["step", "stage", "val"].includes(k)) keys.add(k);
    return [...keys].sort();
  }

  function chart(key) {
    const pts = META.curves.rows.filter((r) => typeof r[key] === "number").map((r) => [r.step, r[key], !!r.val]);
    const W = 640, H = 200, L = 56, R = 10, T = 10, B = 34;
    const stages = META.curves.stages || [];
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const [x, y] of pts) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
    for (const st of stages) x0 = Math.min(x0, st.first);
    x1 = Math.max(x1, x0 + 1);
    if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
    const sx = (x) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - R);
    const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    let svg = `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(key)}">`;
    for (const f of [0, 0.5, 1]) {
      const y = y0 + f * (y1 - y0);
      svg += `<line class="grid" x1="${L}" x2="${W - R}" y1="${sy(y)}" y2="${sy(y)}"/><text x="${L - 4}" y="${sy(y) + 3}" text-anchor="end">${esc(Number(y.toPrecision(3)))}</text>`;
    }
    svg += `<line class="axis" x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}"/>`;
    const span = x1 - x0;
    const every = span <= 12 ? 1 : Math.ceil(span / 8);
    const ticks = [];
    for (let t = x0; t <= x1; t += every) ticks.push(t);
    for (const t of ticks) svg += `<text x="${sx(t)}" y="${H - B + 13}" text-anchor="middle">${t}</text>`;
    // the axes named: the trainer step across, the metric up
    svg += `<text class="axis-label x-label" x="${(L + W - R) / 2}" y="${H - 4}" text-anchor="middle">step</text>`;
    svg += `<text class="axis-label y-label" text-anchor="middle" transform="translate(11 ${(T + H - B) / 2}) rotate(-90)">${esc(key)}</text>`;
    for (const s of stages.slice(1)) {
      const x = sx(s.first - 0.5);
      svg += `<line class="stage" x1="${x}" x2="${x}" y1="${T}" y2="${H - B}"/>`;
    }
    for (const s of stages) svg += `<text class="stage-label" x="${sx(s.first) + 2}" y="${T + 9}">${esc(s.name)}</text>`;
    for (const val of [false, true]) {
      const series = pts.filter((p) => p[2] === val);
      if (!series.length) continue;
      svg += `<polyline class="line ${val ? "val" : ""}" points="${series.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" ")}"/>`;
      for (const p of series) svg += `<circle class="${val ? "val" : ""}" cx="${sx(p[0]).toFixed(1)}" cy="${sy(p[1]).toFixed(1)}" r="2.2"><title>step ${p[0]}: ${esc(key)} = ${p[1]}</title></circle>`;
    }
    svg += "</svg>";
    const last = pts.length ? pts[pts.length - 1][1] : null;
    return el("div", { class: "chart", "data-key": key },
      el("h3", { text: `${key}` + (last === null ? "" : ` (last ${Number(last.toPrecision(4))})`) }), el("div", { html: svg }));
  }

  function renderCurves() {
    const box = $("#tab-curves");
    const keys = curveKeys();
    if (!keys.length) {
      box.replaceChildren(el("p", { class: "hint", text: "No per-step metrics here (metrics.jsonl) yet." }));
      return;
    }
    if (!chosenCurves) {
      const valKeys = new Set();
      for (const r of META.curves.rows) if (r.val) Object.keys(r).forEach((k) => valKeys.add(k));
      ["step", "stage", "val"].forEach((k) => valKeys.delete(k));
      chosenCurves = new Set(DEFAULT_CURVES.filter((k) => keys.includes(k)).concat([...valKeys].slice(0, 2)));
    }
    if (!chosenCurves.size) keys.slice(0, 4).forEach((k) => chosenCurves.add(k));
    const picker = el("div", { class: "picker", id: "curve-picker" });
    for (const k of keys) {
      const cb = el("input", { type: "checkbox", value: k, checked: chosenCurves.has(k),
        onchange: (e) => { if (e.target.checked) chosenCurves.add(k); else chosenCurves.delete(k); renderCurves(); } });
      picker.append(el("label", {}, cb, " " + k));
    }
    const charts = el("div", { class: "charts", id: "charts" });
    for (const k of keys) if (chosenCurves.has(k)) charts.append(chart(k));
    const stages = META.curves.stages || [];
    const steps = META.curves.rows.filter((r) => !r.val).length;
    box.replaceChildren(el("p", { class: "note", text: `${steps} steps` + (stages.length ? ` in ${stages.length} curriculum stages (${stages.map((s) => `${s.name}: steps ${s.first}-${s.last}`).join(", ")})` : "") + ". Choose the metrics to draw:" }), picker, charts);
  }

  // --------------------------------------------------------------------------------------- report
  function renderReport() {
    const box = $("#tab-report");
    const rep = META.report;
    if (!rep) { box.replaceChildren(); return; }
    const s = rep.summary || {};
    const parts = [];
    const cats = s.categories || {};
    const ks = (s.k || [1]).filter((k) => k > 1);
    parts.push(el("h2", { text: "accuracy per category" }));
    const bars = el("div", { id: "category-bars" });
    const addBar = (name, acc) => bars.append(el("div", { class: "hbar", "data-category": name },
      el("span", { text: name }), el("div", { class: "track" }, el("div", { class: "fill", style: `width:${(100 * (acc || 0)).toFixed(1)}%` })),
      el("span", { text: acc === null || acc === undefined ? "–" : (100 * acc).toFixed(1) + "%" })));
    for (const [name, c] of Object.entries(cats)) addBar(name, c.accuracy);
    if (s.overall) addBar("all entries", s.overall.accuracy);
    parts.push(bars);
    const table = el("table", { class: "report", id: "passk" });
    const head = el("tr", {}, el("th", { text: "category" }), el("th", { text: "entries" }), el("th", { text: "samples" }), el("th", { text: "pass@1 (acc)" }));
    for (const k of ks) head.append(el("th", { text: `pass@${k}` }));
    table.append(head);
    const line = (name, c) => {
      const tr = el("tr", {}, el("td", { text: name }), el("td", { text: c.entries ?? "" }), el("td", { text: c.samples ?? "" }),
        el("td", { text: c.accuracy === undefined ? "–" : (100 * c.accuracy).toFixed(1) }));
      for (const k of ks) tr.append(el("td", { text: c[`pass@${k}`] === undefined ? "–" : (100 * c[`pass@${k}`]).toFixed(1) }));
      table.append(tr);
    };
    for (const [name, c] of Object.entries(cats)) line(name, c);
    if (s.overall) line("all entries", s.overall);
    parts.push(el("h2", { text: "pass@k (%)" }), table);
    parts.push(el("h2", { text: "the report (agent-tune eval report, the env's own lines included)" }), el("pre", { id: "report-text", class: "msg", text: rep.text || "" }));
    box.replaceChildren(...parts);
  }

  // ----------------------------------------------------------------------------------------- tabs
  const TABS = [];
  function showTab(name) {
    for (const t of TABS) {
      $(`#tab-${t}`).hidden = t !== name;
      $(`#tabbtn-${t}`).classList.toggle("on", t === name);
    }
    if (name === "episodes") episodeList.redraw();
    if (name === "groups") groupList.redraw();
  }

  function buildTabs() {
    const nav = $("#tabs");
    if (META.curves.rows.length || META.kind === "train" || META.kind === "curriculum") TABS.push("curves");
    if (META.report) TABS.push("report");
    TABS.push("episodes", "groups");
    const names = { curves: "Curves", report: "Report", episodes: "Episodes", groups: "Groups" };
    for (const t of TABS) nav.append(el("button", { id: `tabbtn-${t}`, text: names[t], onclick: () => showTab(t) }));
  }

  // ----------------------------------------------------------------------------------------- live
  async function poll() {
    try {
      await detailsReady;
      const res = await fetch(`updates?rows=${rows.length}&shared=${shared.length}`, { cache: "no-store" });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const u = await res.json();
      shared.push(...u.shared);
      details.push(...u.details);
      rows.push(...u.rows);
      META.curves = u.curves;
      META.report = u.report;
      if (u.rows.length) {
        computeGroups();
        // new steps, stop reasons, ... join the filters' choices, unless the user is typing in one of them
        if (!$("#filters").contains(document.activeElement)) buildFilters();
        applyFilters();
      }
      if (u.rows.length || !$("#tab-curves").hidden) renderCurves();
      if (META.report) renderReport();
      $("#status").textContent = `live · ${rows.length} episodes · updated ${new Date().toLocaleTimeString()}` + (u.rows.length ? ` (+${u.rows.length})` : "");
    } catch (e) {
      $("#status").textContent = `live · not updated: ${e.message}`;
    }
  }

  // ----------------------------------------------------------------------------------------- start
  const episodeList = VList($("#ep-list"), episodeRow, (k) => showEpisode(view[k]));
  const groupList = VList($("#group-list"), groupRow, (k) => pickGroup(groupView[k]));

  function start() {
    app.dataset.kind = META.kind;
    listHead($("#group-head"), GROUP_COLUMNS);
    $("#title").textContent = META.title;
    document.title = `agent-tune view · ${META.title}`;
    buildTabs();
    computeGroups();
    buildFilters();
    buildGroupFilters();
    applyFilters();
    renderCurves();
    renderReport();
    showTab(TABS[0]);
    $("#status").textContent = `${rows.length} episodes` + (META.live ? " · live" : "") + (META.built ? ` · built ${META.built}` : "");
    detailsReady.catch((e) => { $("#status").textContent = "episode details could not be read: " + e.message; });
    if (META.live) setInterval(poll, META.poll_ms || 3000);
    requestAnimationFrame(() => setTimeout(() => { // after the first frame is painted
      app.dataset.renderMs = performance.now().toFixed(0); // since navigation: the list and curves shown
      app.dataset.ready = "1";
    }, 0));
  }

  start();
})();
