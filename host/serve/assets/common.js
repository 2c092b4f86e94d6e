// What both pages share: signing in, calling the API, turning a problem
// into words, building elements from text, and following the change feed.
// Nothing here ever writes HTML from a string: every piece of task text
// becomes a text node, and every piece of a user's text sits in an element
// of its own that keeps its direction to itself (a right-to-left override
// in a task's kind must not reorder the words around it). The token lives
// in sessionStorage (this tab only, gone when it closes) and travels only
// in the Authorization header.
'use strict';

const Leasehold = (() => {
  const TOKEN_KEY = 'leasehold.token';
  let token = sessionStorage.getItem(TOKEN_KEY);
  // True when the server answered us without a token of ours: a proxy in
  // front adds the credential, and there is nothing to sign out of here.
  let proxied = false;

  // ---- Elements, always from text -------------------------------------
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else if (k === 'dataset') Object.assign(node.dataset, v);
      else if (k === 'on') for (const [ev, f] of Object.entries(v)) node.addEventListener(ev, f);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const $ = (id) => document.getElementById(id);

  // One piece of text that came from a user (a kind, an id, an actor, a
  // role): isolated from its neighbours' direction, as <bdi> does.
  function user(text, props) {
    return el('bdi', props, text === null || text === undefined ? '' : String(text));
  }

  // A message as nodes, for a template literal: `msg\`${user(a)} took it\``.
  // Values may be nodes, strings or arrays of them (another message).
  function msg(strings, ...values) {
    const parts = [];
    strings.forEach((s, i) => {
      if (s) parts.push(s);
      if (i < values.length) parts.push(values[i]);
    });
    return parts.flat(Infinity).filter((p) => p !== null && p !== undefined && p !== false && p !== '');
  }

  // A list of user texts, each isolated, separated by commas.
  function users(list) {
    return list.flatMap((x, i) => (i ? [', ', user(x)] : [user(x)]));
  }

  // JSON for people to read, with every bidirectional control character
  // written as its escape: shown as itself it would reorder what follows.
  function readableJson(value) {
    return JSON.stringify(value, null, 2)
      .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  }

  // ---- Messages ---------------------------------------------------------
  // `say` is for news (polite), `warn` for what went wrong (an alert). A
  // message stays until the next one, so it can be read at leisure. Either
  // takes a string or a message of nodes (`msg`).
  function say(message) { show('notice', message); }
  function warn(message) { show('alert', message); }
  function show(id, message) {
    const box = $(id);
    if (!box) return;
    box.replaceChildren(...[message].flat(Infinity).filter((p) => p !== null && p !== undefined));
    box.hidden = !box.textContent;
  }

  // ---- Times, in the browser's own zone ----------------------------------
  const when = new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit',
    timeZoneName: 'short',
  });
  function formatTime(ms) { return ms === null || ms === undefined ? '—' : when.format(new Date(ms)); }
  function isoTime(ms) { return new Date(ms).toISOString(); }
  function formatAge(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return 'under a minute';
    const m = Math.floor(s / 60);
    if (m < 60) return m === 1 ? '1 minute' : `${m} minutes`;
    const h = Math.floor(m / 60);
    if (h < 48) return h === 1 ? '1 hour' : `${h} hours`;
    return `${Math.floor(h / 24)} days`;
  }
  function formatLeft(ms) {
    const s = Math.max(0, Math.ceil(ms / 1000));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    const two = (n) => String(n).padStart(2, '0');
    return h ? `${h}:${two(m)}:${two(r)}` : `${m}:${two(r)}`;
  }

  // A justification in one short line, as nodes: a string as it is, an
  // object's plain fields as `name: value`, anything else as compact JSON,
  // cut to `max` characters. Each name and value is isolated, so that one
  // field's text cannot reorder the next.
  function shortJustification(j, max = 120) {
    let pieces; // [text, from a user]
    if (typeof j === 'string') pieces = [[j, true]];
    else if (j && typeof j === 'object' && !Array.isArray(j)) {
      pieces = Object.entries(j).flatMap(([k, v], i) => [
        ...(i ? [[', ', false]] : []),
        [k, true], [': ', false],
        [v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v), true],
      ]);
    } else pieces = [[JSON.stringify(j) ?? '', true]];
    const total = pieces.reduce((n, [t]) => n + t.length, 0);
    if (!total) return '—';
    let room = total > max ? max - 1 : total;
    const out = [];
    for (const [t, fromUser] of pieces) {
      if (room <= 0) break;
      const cut = t.slice(0, room);
      room -= cut.length;
      out.push(fromUser ? user(cut) : cut);
    }
    if (total > max) out.push('…');
    return out;
  }

  // ---- The API ------------------------------------------------------------
  function headers(extra) {
    const h = Object.assign({}, extra);
    if (token) h.Authorization = `Bearer ${token}`;
    return h;
  }

  // Answers {ok, status, data, problem}; never throws. A network failure
  // is a problem of its own kind, `network`. A 401 to a call made with our
  // token ends the session, unless `probe` (asking whether a token works).
  // `revision`: the task's revision as it was shown, sent as `If-Match`
  // so that a change is made only to the task as the user saw it.
  async function api(method, path, body, { probe = false, revision } = {}) {
    const init = { method, headers: headers({ Accept: 'application/json' }), cache: 'no-store' };
    if (revision !== undefined) init.headers['If-Match'] = `"${revision}"`;
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, problem: { type: 'network' } };
    }
    let data = null;
    try {
      data = res.status === 204 ? null : await res.json();
    } catch (e) {
      data = null;
    }
    if (res.ok) return { ok: true, status: res.status, data };
    const problem = data && typeof data.type === 'string' ? data : { type: `http-${res.status}` };
    problem.name = String(problem.type).replace('urn:leasehold:problem:', '');
    if (problem.name === 'unauthorized' && token && !proxied && !probe) {
      signedOut('Your sign-in is no longer accepted. Sign in again.');
    }
    return { ok: false, status: res.status, problem };
  }

  const path = (...parts) => parts.map((p, i) => (i % 2 ? encodeURIComponent(p) : p)).join('');

  // A refusal in words, as a message (`msg`), so that the names in it
  // stay apart from the words around them. `me` is the signed-in actor.
  function explain(problem, me) {
    const who = (a) => (a && a === me ? 'you' : a);
    switch (problem.name || problem.type) {
      case 'already-claimed':
        return problem.holder === me
          ? msg`You already hold this task.`
          : msg`${problem.holder ? user(problem.holder) : 'Someone else'} took it a moment ago.`;
      case 'excluded':
        return problem.actor && problem.actor !== me
          ? msg`${user(problem.actor)} raised this, so someone else must approve it.`
          : msg`You raised this, so someone else must approve it.`;
      case 'wrong-role':
        return who(problem.actor) === 'you'
          ? msg`This task is not offered to your roles.`
          : msg`This task is not offered to ${user(problem.actor)}'s roles.`;
      case 'not-pending':
        return msg`This task is already settled${problem.state ? msg` (${problem.state})` : ''}.`;
      case 'not-held':
        return problem.actor && problem.actor !== me
          ? msg`${user(problem.actor)} does not hold this task.`
          : msg`This task is no longer yours.`;
      case 'not-found':
        return 'This task no longer exists, or is not yours to see.';
      case 'stale':
        return 'This task changed since it was shown to you. Nothing was done: look at it again and decide again.';
      case 'unauthorized':
        return 'Your sign-in is no longer accepted. Sign in again.';
      case 'forbidden':
        return 'Your token does not allow this.';
      case 'acting-as-another':
        return 'Your token acts only as you.';
      case 'invalid':
        return `The server refused the request: ${problem.detail || 'invalid input'}.`;
      case 'busy':
      case 'overloaded':
      case 'storage-unavailable':
      case 'timeout':
        return 'The server is busy right now. Nothing was done; try again in a moment.';
      case 'index-building':
        return 'The search index is still being built. Nothing was done; try again in a moment.';
      case 'outcome-unknown':
        return 'The server could not tell whether that went through. Look at the task again before retrying.';
      case 'network':
        return 'The server could not be reached. Check the connection and try again.';
      default:
        return `That did not work (${problem.title || problem.status || 'an unexpected answer'}).`;
    }
  }

  // ---- Signing in -----------------------------------------------------------
  let onSignedOut = () => {};

  function signedOut(why) {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    onSignedOut(why);
  }

  // Who the server says we are, or null. First without a token of our own
  // (an authenticating proxy may add one), then with the stored token.
  async function whoami() {
    const saved = token;
    token = null;
    const direct = await api('GET', '/v1/whoami', undefined, { probe: true });
    if (direct.ok) {
      proxied = true;
      if (saved) sessionStorage.removeItem(TOKEN_KEY);
      return { who: direct.data };
    }
    token = saved;
    if (!token) return { who: null, why: direct.problem.name === 'unauthorized' ? '' : explain(direct.problem) };
    const mine = await api('GET', '/v1/whoami', undefined, { probe: true });
    if (mine.ok) return { who: mine.data };
    if (mine.problem.name === 'unauthorized') {
      token = null;
      sessionStorage.removeItem(TOKEN_KEY);
    }
    return { who: null, why: explain(mine.problem) };
  }

  // Shows the sign-in form until a token the server accepts is given, then
  // calls `ready(who)`. `out(why)` runs when the session ends.
  async function signIn({ ready, out }) {
    onSignedOut = (why) => {
      stopFollowing();
      showSignIn(why);
      out();
    };
    const form = $('signin-form');
    const input = $('token');
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const given = input.value.trim();
      if (!given) {
        warn('Paste your token first.');
        input.focus();
        return;
      }
      token = given;
      const res = await api('GET', '/v1/whoami', undefined, { probe: true });
      if (!res.ok) {
        token = null;
        warn(res.problem.name === 'unauthorized' ? 'That token was not accepted.' : explain(res.problem));
        input.focus();
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, given);
      input.value = '';
      start(res.data);
    });
    $('sign-out').addEventListener('click', () => {
      signedOut('');
      say('Signed out. Your token was removed from this tab.');
    });
    const start = (who) => {
      warn('');
      $('signin').hidden = true;
      $('sign-out').hidden = proxied;
      $('who').replaceChildren(...msg`Signed in as ${user(who.actor)}${
        who.roles && who.roles.length ? msg` (${users(who.roles)})` : ''} · ${who.scope}`);
      ready(who);
    };
    const { who, why } = await whoami();
    if (who) start(who);
    else showSignIn(why);
  }

  function showSignIn(why) {
    $('who').textContent = '';
    $('sign-out').hidden = true;
    $('signin').hidden = false;
    warn(why || '');
    $('token').focus();
  }

  // ---- Following the change feed ---------------------------------------------
  // Server-sent events read from fetch(), because EventSource cannot send
  // the Authorization header. Resumes from the last id it saw; `onReady`
  // is told whether the page must read its state again (a first start, or
  // the server said the position was trimmed).
  let following = null;

  function setLive(text, state) {
    const live = $('live');
    live.textContent = text;
    live.dataset.state = state;
  }

  function stopFollowing() {
    if (following) following.abort();
    following = null;
    setLive('', 'off');
  }

  function follow(handlers) {
    stopFollowing();
    const control = new AbortController();
    following = control;
    run(control.signal, handlers);
  }

  async function run(signal, { onReady, onEvent }) {
    let last = null;
    let delay = 1000;
    const pause = (ms) => new Promise((r) => setTimeout(r, ms));
    while (!signal.aborted) {
      setLive(last ? 'Reconnecting…' : 'Connecting…', 'connecting');
      // Resumed from a position, the stream brings exactly what was missed;
      // started afresh, the page reads its state again once it is ready.
      const resuming = last !== null;
      let res;
      try {
        const h = headers({ Accept: 'text/event-stream' });
        if (last) h['Last-Event-ID'] = last;
        res = await fetch('/v1/events', { headers: h, signal, cache: 'no-store' });
      } catch (e) {
        res = null;
      }
      if (signal.aborted) return;
      if (res && res.status === 401 && !proxied) {
        signedOut('Your sign-in is no longer accepted. Sign in again.');
        return;
      }
      const type = (res && res.headers.get('content-type')) || '';
      if (res && res.ok && !type.startsWith('text/event-stream')) {
        // A server without the event stream: say so, and do not pretend.
        setLive('Live updates are not available from this server; use Refresh.', 'unavailable');
        return;
      }
      if (res && res.ok) {
        try {
          const dropped = await read(res.body, signal, {
            id: (id) => { last = id; },
            ready: (data) => {
              delay = 1000;
              setLive('Live', 'live');
              last = data.position || last;
              onReady(!resuming);
            },
            refresh: () => onReady(true),
            event: onEvent,
          });
          if (dropped) delay = 1000;
        } catch (e) {
          // The connection broke; reconnect below.
        }
      }
      if (signal.aborted) return;
      setLive('Reconnecting…', 'connecting');
      await pause(delay);
      delay = Math.min(delay * 2, 15000);
    }
  }

  // Reads one event stream to its end. Answers true if the server said it
  // dropped us (reconnect at once), false if the stream just ended.
  async function read(body, signal, on) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    signal.addEventListener('abort', () => reader.cancel().catch(() => {}));
    let buf = '';
    let ev = { type: '', data: [], id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buf += value;
      let m;
      while ((m = /\r\n|\n|\r(?=[^\n])/.exec(buf))) {
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === '') {
          // An event ends. An id alone moves the position and nothing else.
          if (ev.id !== null) on.id(ev.id);
          if (ev.data.length) {
            let data = null;
            try { data = JSON.parse(ev.data.join('\n')); } catch (e) { data = null; }
            const type = ev.type || 'message';
            if (type === 'ready' && data) on.ready(data);
            else if (type === 'refresh') on.refresh();
            else if (type === 'dropped') return true;
            else if (data) on.event(type, data);
          } else if (ev.type === 'dropped') {
            return true;
          } else if (ev.type === 'refresh') {
            on.refresh();
          }
          ev = { type: '', data: [], id: null };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'event') ev.type = val;
        else if (field === 'data') ev.data.push(val);
        else if (field === 'id' && !val.includes('\0')) ev.id = val;
      }
    }
  }

  // ---- Reminders and escalation chains -------------------------------------
  // A span of milliseconds as a person reads it: "1 h", "1 d 4 h", "90 s".
  function formatSpan(ms) {
    const units = [[86400000, 'd'], [3600000, 'h'], [60000, 'min'], [1000, 's'], [1, 'ms']];
    if (!ms) return '0 s';
    const parts = [];
    let left = ms;
    for (const [size, name] of units) {
      if (left >= size) {
        parts.push(`${Math.floor(left / size)} ${name}`);
        left %= size;
      }
    }
    return parts.join(' ');
  }

  const atDue = (after) => (after ? `at due + ${formatSpan(after)}` : 'at due');

  // A task's reminders and chain in one sentence ("reminds 1 h before due;
  // at due escalates to leads; at due + 1 d expires"); null when it has
  // neither.
  function timeline(t) {
    const remind = t.remind_before || [];
    const chain = t.escalation || [];
    if (!remind.length && !chain.length) return null;
    const said = [];
    if (remind.length) said.push(msg`reminds ${remind.map(formatSpan).join(', ')} before due`);
    chain.forEach((s, i) => {
      const first = i === 0 || !s.action.escalate || !chain[i - 1].action.escalate;
      if (s.action === 'expire') said.push(`${atDue(s.after_due_ms)} expires`);
      else said.push(msg`${atDue(s.after_due_ms)} ${first ? 'escalates ' : ''}to ${users(s.action.escalate)}`);
    });
    return said.flatMap((x, i) => (i ? ['; ', x] : [x])).flat();
  }

  // A fired step (a history entry's `step`) in words: "Reminder: due in
  // 1 h", "Escalated to directors (chain step 2)", "Expired (chain step
  // 3)". `t`, the task when known, numbers the chain's steps.
  function firedStep(step, t) {
    if (step.reminder !== undefined) return [`Reminder: due in ${formatSpan(step.reminder)}`];
    const s = step.escalation;
    const chain = (t && t.escalation) || [];
    const i = chain.findIndex((c) => c.after_due_ms === s.after_due_ms
      && JSON.stringify(c.action) === JSON.stringify(s.action));
    const n = i < 0 ? '' : ` (chain step ${i + 1})`;
    if (s.action === 'expire') return [`Expired${n}`];
    return msg`Escalated to ${users(s.action.escalate)}${n}`;
  }

  return {
    el, $, user, users, msg, say, warn, api, path, explain, signIn, follow, stopFollowing,
    formatTime, isoTime, formatAge, formatLeft, shortJustification, readableJson,
    formatSpan, timeline, firedStep,
  };
})();
