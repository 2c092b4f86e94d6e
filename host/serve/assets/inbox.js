// The reviewer's inbox: my queue (what I may take, in queue order), my
// tasks (what I hold, with the time left on each lease), and the actions
// on both. The server decides everything; the page shows what it answers
// and follows the change feed, so another reviewer's claim or a lapsed
// lease shows up without a reload. "My tasks" is read from the server
// (`GET /v1/me/tasks`), so a second browser, or tomorrow, shows the same;
// the feed keeps it current. A decision is made on the task as it was
// shown: its revision goes with it (`If-Match`).
'use strict';

(() => {
  const { el, $, user, msg, say, warn, api, path, explain } = Leasehold;
  const LEASE_KEY = 'leasehold.lease-seconds';
  const QUEUED = new Set(['open', 'escalated']);
  const PAGE = 100;

  let me = null;
  const queue = new Map(); // id → {task, row}
  let order = []; // queue order, ids
  const mine = new Map(); // id → {task, card}
  let generation = 0;
  let ticker = null;

  // ---- Settings ----------------------------------------------------------
  const leaseInput = $('lease-seconds');
  leaseInput.value = sessionStorage.getItem(LEASE_KEY) || leaseInput.value;
  leaseInput.addEventListener('change', () => {
    if (leaseInput.checkValidity()) sessionStorage.setItem(LEASE_KEY, leaseInput.value);
  });
  function leaseMs() {
    const s = Number(leaseInput.value);
    return Number.isInteger(s) && s >= 1 && s <= 604800 ? s * 1000 : 600000;
  }

  const label = (t) => msg`“${user(t.kind)}” (${user(t.id)})`;

  // ---- My queue -------------------------------------------------------------
  function queueRow(t) {
    const claimButton = el('button', {
      type: 'button',
      class: 'claim',
      'aria-label': `Claim ${t.kind} (${t.id})`,
      on: { click: () => claim(t.id) },
    }, 'Claim');
    return el('tr', { dataset: { task: t.id } },
      el('td', { 'data-label': 'Priority' }, el('span', { class: `priority ${t.priority}`, text: t.priority })),
      el('th', { scope: 'row', 'data-label': 'Kind' }, user(t.kind, { class: 'kind' }),
        user(t.id, { class: 'task-id' })),
      el('td', { 'data-label': 'Waited', class: 'waited', dataset: { since: t.created_at } }, Leasehold.formatAge(Date.now() - t.created_at)),
      el('td', { 'data-label': 'Due' }, dueText(t), timelineNote(t)),
      el('td', { 'data-label': 'Justification', class: 'justification', dir: 'auto' }, Leasehold.shortJustification(t.justification)),
      el('td', { class: 'action' }, claimButton));
  }

  function dueText(t) {
    if (t.due_at === null || t.due_at === undefined) return 'no due time';
    const node = el('time', { datetime: Leasehold.isoTime(t.due_at) }, Leasehold.formatTime(t.due_at));
    return t.due_at < Date.now() ? el('span', { class: 'overdue' }, node, ' (overdue)') : node;
  }

  // The task's reminders and escalation chain, under its due time.
  function timelineNote(t) {
    const words = Leasehold.timeline(t);
    return words ? el('span', { class: 'timeline' }, ...words) : null;
  }

  // Puts the rows in `ids` order, moving as few as it can so that the row
  // a keyboard user is on keeps its focus.
  function renderQueue(tasks, more) {
    const body = $('queue-rows');
    const next = new Map();
    for (const t of tasks) {
      const old = queue.get(t.id);
      const same = old && JSON.stringify(old.task) === JSON.stringify(t);
      const row = same || (old && old.row.contains(document.activeElement)) ? old.row : queueRow(t);
      if (old && row !== old.row) old.row.replaceWith(row);
      next.set(t.id, { task: t, row });
    }
    for (const [id, { row }] of queue) if (!next.has(id)) dropRow(row);
    queue.clear();
    for (const [id, v] of next) queue.set(id, v);
    order = tasks.map((t) => t.id);
    order.forEach((id, i) => {
      const row = queue.get(id).row;
      if (body.children[i] !== row) body.insertBefore(row, body.children[i] || null);
    });
    showQueueState(more);
  }

  function dropRow(row) {
    const hadFocus = row.contains(document.activeElement);
    row.remove();
    if (hadFocus) $('queue-title').focus();
  }

  function removeQueued(id) {
    const q = queue.get(id);
    if (!q) return;
    queue.delete(id);
    order = order.filter((x) => x !== id);
    dropRow(q.row);
    showQueueState(false);
  }

  function showQueueState(more) {
    $('queue-empty').hidden = queue.size > 0;
    $('queue-table').hidden = queue.size === 0;
    $('queue-count').textContent = queue.size === 0 ? '' : `${queue.size}${more ? '+' : ''} waiting`;
    $('queue-more').hidden = !more;
  }

  async function loadQueue() {
    const mineNow = ++generation;
    const res = await api('GET', `/v1/queue?limit=${PAGE}`);
    if (mineNow !== generation || !me) return;
    if (!res.ok) {
      warn(msg`The queue could not be read: ${explain(res.problem, me.actor)}`);
      return;
    }
    // A task this tab holds never shows in the queue, even for a moment.
    renderQueue(res.data.tasks.filter((t) => !mine.has(t.id)), Boolean(res.data.next));
    // The views' counts move with the queue (views.js).
    LeaseholdViews.tabs.soon(me);
  }

  let queued = null;
  function soon() {
    clearTimeout(queued);
    queued = setTimeout(loadQueue, 100);
  }

  // ---- Outcomes -------------------------------------------------------------
  // A task's decision buttons: its own outcomes, else its kind's, else
  // approve / reject / return.
  const DEFAULT_OUTCOMES = ['approved', 'rejected', 'returned']
    .map((name) => ({ name, needs_reason: false, output_schema: null }));
  const WORDS = {
    approved: ['Approve', 'Approved'],
    rejected: ['Reject', 'Rejected'],
    returned: ['Return', 'Returned'],
  };
  const kinds = new Map(); // kind → Promise of its outcomes (null: none)
  function kindOutcomes(kind) {
    if (!kinds.has(kind)) {
      kinds.set(kind, api('GET', path('/v1/kinds/', kind))
        .then((r) => (r.ok && r.data.outcomes.length ? r.data.outcomes : null)));
    }
    return kinds.get(kind);
  }

  // The fields of an output form, from the simple schemas a form can show:
  // an object's properties of string, number, integer, boolean or enum.
  function outputFields(schema) {
    if (!schema || schema.type !== 'object' || typeof schema.properties !== 'object') return [];
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    return Object.entries(schema.properties).map(([name, s]) => ({
      name, required: required.has(name), schema: s || {},
    })).filter(({ schema: s }) => Array.isArray(s.enum)
      || ['string', 'number', 'integer', 'boolean'].includes(s.type));
  }

  let fieldSeq = 0;
  function outputForm(t, rule) {
    const fields = outputFields(rule.output_schema);
    if (!fields.length) return null;
    const inputs = fields.map((f) => {
      const id = `out-${++fieldSeq}`;
      let input;
      if (Array.isArray(f.schema.enum)) {
        input = el('select', { id, name: f.name },
          ...(f.required ? [] : [el('option', { value: '' }, '—')]),
          ...f.schema.enum.map((v, i) => el('option', { value: String(i) }, String(v))));
        input.read = () => (input.value === '' ? undefined : f.schema.enum[Number(input.value)]);
      } else if (f.schema.type === 'boolean') {
        input = el('input', { id, name: f.name, type: 'checkbox' });
        input.read = () => input.checked;
      } else {
        const numeric = f.schema.type !== 'string';
        input = el('input', {
          id, name: f.name, type: numeric ? 'number' : 'text', autocomplete: 'off',
          ...(f.schema.type === 'integer' ? { step: '1' } : {}),
          ...(f.required ? { required: '' } : {}),
        });
        input.read = () => {
          if (input.value === '') return undefined;
          return numeric ? Number(input.value) : input.value;
        };
      }
      return { f, input, row: el('p', { class: 'field' }, el('label', { for: id }, f.name), ' ', input) };
    });
    const box = el('fieldset', { class: 'output', dataset: { outcome: rule.name } },
      el('legend', {}, `Details for “${rule.name}”`), ...inputs.map((i) => i.row));
    box.read = () => {
      const out = {};
      for (const { f, input } of inputs) {
        const v = input.read();
        if (v !== undefined) out[f.name] = v;
      }
      return out;
    };
    return box;
  }

  function decisionControls(t, rules) {
    const reasonId = `reason-${++fieldSeq}`;
    const reason = el('textarea', { id: reasonId, class: 'reason', rows: '2', maxlength: '4096', dir: 'auto' });
    const forms = new Map();
    for (const r of rules) {
      const f = outputForm(t, r);
      if (f) forms.set(r.name, f);
    }
    const buttons = rules.map((r, i) => {
      const [verb] = WORDS[r.name] || [r.name];
      return el('button', {
        type: 'button',
        class: `decide${i === 0 ? ' primary' : ''}`,
        'aria-label': `${verb}: ${t.kind} (${t.id})`,
        on: { click: busy(() => decide(t.id, r, reason, forms.get(r.name))) },
      }, verb);
    });
    return el('div', { class: 'decision' },
      el('label', { for: reasonId }, 'Reason'),
      reason,
      ...forms.values(),
      el('div', { class: 'actions' }, ...buttons));
  }

  const busy = (f) => async (e) => {
    const buttons = e.target.closest('.card').querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    try { await f(); } finally { buttons.forEach((b) => { b.disabled = false; }); }
  };

  // ---- My tasks -------------------------------------------------------------
  function card(t) {
    const heading = el('h3', { tabindex: '-1' }, user(t.kind, { class: 'kind' }), ' ',
      user(t.id, { class: 'task-id' }));
    const button = (text, cls, f) => el('button', {
      type: 'button', class: cls, 'aria-label': `${text}: ${t.kind} (${t.id})`, on: { click: busy(f) },
    }, text);
    const declared = t.outcomes && t.outcomes.length ? t.outcomes : null;
    const decision = decisionControls(t, declared || DEFAULT_OUTCOMES);
    if (!declared) {
      kindOutcomes(t.kind).then((rules) => {
        if (rules && decision.isConnected) decision.replaceWith(decisionControls(t, rules));
      });
    }
    const toId = `delegate-${++fieldSeq}`;
    const noteId = `note-${++fieldSeq}`;
    const to = el('input', { id: toId, type: 'text', autocomplete: 'off', spellcheck: 'false' });
    const note = el('textarea', { id: noteId, rows: '2', maxlength: '4096', dir: 'auto' });
    // A button, not a disclosure: the card's one <summary> is its
    // justification's.
    const history = el('ol', { class: 'history', hidden: true });
    const historyButton = el('button', {
      type: 'button', class: 'history-toggle', 'aria-expanded': 'false',
      'aria-label': `History: ${t.kind} (${t.id})`,
      on: {
        click: () => {
          const open = history.hidden;
          history.hidden = !open;
          historyButton.setAttribute('aria-expanded', String(open));
          if (open) showHistory(t.id, history);
        },
      },
    }, 'History');
    const historyBox = { open: (list) => {
      list.hidden = false;
      historyButton.setAttribute('aria-expanded', 'true');
    } };
    return el('li', { class: 'card', dataset: { task: t.id } },
      heading,
      el('p', { class: 'meta' }, el('span', { class: `priority ${t.priority}`, text: t.priority }), ' · due ', dueText(t), timelineNote(t)),
      el('p', { class: 'justification', dir: 'auto' }, Leasehold.shortJustification(t.justification, 240)),
      el('details', {}, el('summary', {}, 'Full justification'),
        el('pre', {}, Leasehold.readableJson(t.justification))),
      el('p', { class: 'lease', role: 'timer', 'aria-live': 'off' }),
      el('div', { class: 'actions' },
        button('Keep working', 'renew', () => renew(t.id)),
        button('Release', 'release', () => release(t.id))),
      decision,
      el('div', { class: 'hand-on' },
        el('label', { for: toId }, 'Hand to (their name)'), to,
        button('Delegate', 'delegate', () => delegate(t.id, to))),
      el('div', { class: 'notes' },
        el('label', { for: noteId }, 'Your note'), note,
        button('Add note', 'add-note', () => addNote(t.id, note, history, historyBox))),
      el('div', { class: 'history-box' }, historyButton, history));
  }

  // A task decided on this page, with its history as the server keeps it
  // (the decision, its reason and every note).
  function decided(t) {
    const list = el('ol', { class: 'history' });
    $('decided').prepend(el('li', { class: 'card', dataset: { task: t.id } },
      el('h3', {}, user(t.kind, { class: 'kind' }), ' ', user(t.id, { class: 'task-id' })),
      el('p', { class: 'meta' }, 'History'), list));
    $('decided-section').hidden = false;
    showHistory(t.id, list);
  }

  // A task's history, notes and decisions included, newest last.
  async function showHistory(id, list) {
    const res = await api('GET', path('/v1/tasks/', id, '/history?limit=1000'));
    if (!res.ok) {
      list.replaceChildren(el('li', {}, ...[explain(res.problem, me.actor)].flat()));
      return;
    }
    const known = mine.get(id) || queue.get(id);
    list.replaceChildren(...res.data.entries.map((e) => {
      const who = e.actor ? user(e.actor) : 'the service';
      const at = el('time', { datetime: Leasehold.isoTime(e.at) }, Leasehold.formatTime(e.at));
      // A reminder or chain step the service fired, in words.
      if (e.step) {
        return el('li', { dataset: { verb: e.verb }, class: 'step' }, at, ' ',
          ...Leasehold.firedStep(e.step, known && known.task));
      }
      const parts = [at, ' ', ...msg`${e.verb} by ${who}`];
      if (e.job) parts.push(...msg` (bulk job ${user(e.job)})`);
      if (e.note) parts.push(': ', el('q', { class: 'note', dir: 'auto' }, e.note));
      if (e.decision) {
        parts.push(...msg` — ${user(e.decision.outcome, { class: 'outcome' })}`);
        if (e.decision.reason) parts.push(': ', el('q', { class: 'reason', dir: 'auto' }, e.decision.reason));
      }
      return el('li', { dataset: { verb: e.verb } }, ...parts);
    }));
  }

  function hold(t, focus) {
    removeQueued(t.id);
    const old = mine.get(t.id);
    if (old) {
      old.task = t;
    } else {
      const c = card(t);
      mine.set(t.id, { task: t, card: c });
      $('mine').append(c);
    }
    tick();
    showMineState();
    if (focus) mine.get(t.id).card.querySelector('h3').focus();
  }

  function letGo(id) {
    const m = mine.get(id);
    if (!m) return;
    const hadFocus = m.card.contains(document.activeElement);
    m.card.remove();
    mine.delete(id);
    showMineState();
    if (hadFocus) $('next').focus();
  }

  function showMineState() {
    $('mine-empty').hidden = mine.size > 0;
  }

  // The countdown and the waiting times, once a second.
  function tick() {
    const now = Date.now();
    for (const { task, card: c } of mine.values()) {
      const lease = c.querySelector('.lease');
      c.dataset.leaseUntil = task.lease_until === null ? '' : String(task.lease_until);
      if (task.lease_until === null || task.lease_until === undefined) {
        lease.textContent = 'Yours until you release or decide it.';
      } else if (task.lease_until > now) {
        lease.replaceChildren('Yours for ',
          el('time', { class: 'left', datetime: Leasehold.isoTime(task.lease_until) },
            Leasehold.formatLeft(task.lease_until - now)),
          ` (until ${Leasehold.formatTime(task.lease_until)})`);
        lease.classList.toggle('ending', task.lease_until - now < 60000);
      } else {
        lease.textContent = 'Your time is up: the task goes back to the queue at any moment. Keep working to hold on to it.';
        lease.classList.add('ending');
      }
    }
    for (const cell of document.querySelectorAll('td.waited')) {
      cell.textContent = Leasehold.formatAge(now - Number(cell.dataset.since));
    }
  }

  // What I hold, from the server, every page of it.
  async function loadMine() {
    const held = new Map();
    let after = null;
    do {
      const res = await api('GET', `/v1/me/tasks?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      if (!me) return;
      if (!res.ok) {
        warn(msg`Your tasks could not be read: ${explain(res.problem, me.actor)}`);
        return;
      }
      for (const t of res.data.tasks) held.set(t.id, t);
      after = res.data.next;
    } while (after);
    for (const id of [...mine.keys()]) if (!held.has(id)) letGo(id);
    for (const t of held.values()) hold(t, false);
    showMineState();
  }

  // ---- Actions --------------------------------------------------------------
  async function claim(id) {
    const t = queue.get(id) ? queue.get(id).task : { id, kind: id };
    const res = await api('POST', path('/v1/tasks/', id, '/claim'), { lease_ms: leaseMs() });
    if (res.ok) {
      hold(res.data, true);
      say(msg`You hold ${label(res.data)}.`);
      return;
    }
    warn(msg`${label(t)}: ${explain(res.problem, me.actor)}`);
    if (['already-claimed', 'not-pending', 'not-found'].includes(res.problem.name)) removeQueued(id);
    soon();
  }

  async function claimNext() {
    const res = await api('POST', '/v1/queue/claim-next', { lease_ms: leaseMs() });
    if (!res.ok) {
      warn(explain(res.problem, me.actor));
      return;
    }
    if (!res.data.task) {
      say('Nothing is waiting for you.');
      return;
    }
    hold(res.data.task, true);
    say(msg`You hold ${label(res.data.task)}.`);
  }

  // The holder was refused: say who holds it now, if anyone, and let go.
  async function noLongerMine(id, t) {
    const now = await api('GET', path('/v1/tasks/', id));
    letGo(id);
    let why = 'your hold on it lapsed';
    if (now.ok && now.data.assignee && now.data.assignee !== me.actor) why = msg`${user(now.data.assignee)} holds it now`;
    else if (now.ok && !['open', 'claimed', 'escalated'].includes(now.data.state)) why = `it was settled (${now.data.state})`;
    warn(msg`${label(t)} is no longer yours: ${why}. Nothing was changed.`);
    soon();
  }

  async function renew(id) {
    const t = mine.get(id).task;
    const res = await api('POST', path('/v1/tasks/', id, '/renew'), { lease_ms: leaseMs() });
    if (res.ok) {
      hold(res.data, false);
      say(msg`You hold ${label(t)} until ${Leasehold.formatTime(res.data.lease_until)}.`);
    } else if (res.problem.name === 'not-held' || res.problem.name === 'not-found') {
      await noLongerMine(id, t);
    } else {
      warn(msg`${label(t)}: ${explain(res.problem, me.actor)}`);
    }
  }

  async function release(id) {
    const t = mine.get(id).task;
    const res = await api('POST', path('/v1/tasks/', id, '/release'), {});
    if (res.ok) {
      letGo(id);
      say(msg`Released ${label(t)}: it is back in the queue.`);
      soon();
    } else if (res.problem.name === 'not-held' || res.problem.name === 'not-found') {
      await noLongerMine(id, t);
    } else {
      warn(msg`${label(t)}: ${explain(res.problem, me.actor)}`);
    }
  }

  // The task changed since it was shown: still mine, show it as it is now
  // and say so; else say why it is no longer mine.
  async function changed(id, t) {
    const now = await api('GET', path('/v1/tasks/', id));
    if (now.ok && now.data.assignee === me.actor && now.data.state === 'claimed') {
      replaceCard(now.data);
      warn(msg`${label(t)}: ${explain({ name: 'stale' }, me.actor)}`);
    } else {
      await noLongerMine(id, t);
    }
  }

  function replaceCard(t) {
    const old = mine.get(t.id);
    if (!old) return;
    const c = card(t);
    old.card.replaceWith(c);
    mine.set(t.id, { task: t, card: c });
    tick();
  }

  async function decide(id, rule, reasonBox, form) {
    const t = mine.get(id).task;
    const decision = { outcome: rule.name };
    const reason = reasonBox.value.trim();
    if (reason) decision.reason = reason;
    if (rule.needs_reason && !reason) {
      warn(msg`${label(t)}: “${rule.name}” needs a reason. Nothing was done.`);
      reasonBox.focus();
      return;
    }
    if (form) decision.output = form.read();
    const res = await api('POST', path('/v1/tasks/', id, '/settle'),
      { settlement: 'completed', decision }, { revision: t.revision });
    const [, done] = WORDS[rule.name] || [];
    if (res.ok && res.data.settled) {
      letGo(id);
      decided(t);
      say(done ? msg`${done} ${label(t)}.` : msg`Decided ${label(t)}: ${user(rule.name)}.`);
    } else if (res.ok) {
      letGo(id);
      warn(msg`${label(t)} was already settled; nothing was changed.`);
    } else if (res.problem.name === 'not-held' || res.problem.name === 'not-found') {
      await noLongerMine(id, t);
    } else if (res.problem.name === 'stale') {
      await changed(id, t);
    } else {
      warn(msg`${label(t)}: ${explain(res.problem, me.actor)}`);
    }
  }

  async function delegate(id, input) {
    const t = mine.get(id).task;
    const to = input.value.trim();
    if (!to) {
      warn('Give the name of who should take it over.');
      input.focus();
      return;
    }
    const res = await api('POST', path('/v1/tasks/', id, '/delegate'), { to }, { revision: t.revision });
    if (res.ok) {
      letGo(id);
      say(msg`${label(t)} is now ${user(to)}'s.`);
    } else if (res.problem.name === 'not-held' && res.problem.actor === me.actor) {
      await noLongerMine(id, t);
    } else if (res.problem.name === 'stale') {
      await changed(id, t);
    } else {
      warn(msg`${label(t)}: ${explain(res.problem, me.actor)}`);
    }
  }

  async function addNote(id, box, list, historyBox) {
    const t = mine.get(id).task;
    const text = box.value.trim();
    if (!text) {
      warn('Write the note first.');
      box.focus();
      return;
    }
    const res = await api('POST', path('/v1/tasks/', id, '/notes'), { text });
    if (res.ok) {
      box.value = '';
      const held = mine.get(id);
      if (held) held.task = res.data;
      say(msg`Noted on ${label(t)}.`);
      historyBox.open(list);
      await showHistory(id, list);
    } else if (res.problem.name === 'not-found') {
      await noLongerMine(id, t);
    } else {
      warn(msg`${label(t)}: ${explain(res.problem, me.actor)}`);
    }
  }

  // ---- Live -----------------------------------------------------------------
  // A `task` event's data is a change as the JSON feed gives it:
  // {position, change: {task: {id, entry}}}, the entry saying how the
  // change left the task (`after` is its state).
  async function onTask(data) {
    const change = data.change && data.change.task;
    if (!change) return;
    const id = change.id;
    const e = change.entry;
    if (e.step) await stepFired(id, e);
    if (e.assignee === me.actor && e.after === 'claimed') {
      removeQueued(id);
      const held = mine.get(id);
      if (held) {
        hold(Object.assign({}, held.task, { lease_until: e.lease_until, revision: e.revision }), false);
      } else {
        // Claimed as me elsewhere (another tab, claim-next from a script).
        const res = await api('GET', path('/v1/tasks/', id));
        if (res.ok && res.data.assignee === me.actor && res.data.state === 'claimed') hold(res.data, false);
      }
      return;
    }
    const held = mine.get(id);
    if (held) {
      letGo(id);
      const t = held.task;
      if (e.verb === 'reclaim-lapsed') say(msg`Your time on ${label(t)} ran out: it went back to the queue.`);
      else if (e.assignee) say(msg`${label(t)} is no longer yours: ${user(e.assignee)} holds it now.`);
      else if (QUEUED.has(e.after)) say(msg`${label(t)} went back to the queue.`);
      else say(msg`${label(t)} was settled (${e.after}).`);
    }
    if (!QUEUED.has(e.after)) removeQueued(id);
    soon();
  }

  // A reminder or chain step the service fired on a task this reviewer
  // may see: logged, newest first, and announced.
  async function stepFired(id, e) {
    const known = mine.get(id) || queue.get(id);
    let t = known && known.task;
    if (!t || !(t.escalation || []).length) {
      const res = await api('GET', path('/v1/tasks/', id));
      if (res.ok) t = res.data;
    }
    // Built twice: a node sits in one place only.
    const words = () => Leasehold.firedStep(e.step, t);
    const what = () => (t ? label(t) : user(id));
    $('steps').prepend(el('li', { dataset: { task: id }, class: 'step' },
      el('time', { datetime: Leasehold.isoTime(e.at) }, Leasehold.formatTime(e.at)), ' ',
      ...msg`${words()} — ${what()}`));
    $('steps-section').hidden = false;
    say(msg`${words()}: ${what()}.`);
  }

  function startLive() {
    Leasehold.follow({
      onReady: (fresh) => {
        if (fresh) {
          loadMine();
          loadQueue();
        }
      },
      onEvent: (type, data) => {
        if (type === 'task' && me) {
          onTask(data);
          LeaseholdViews.tabs.soon(me);
        }
      },
    });
  }

  // ---- Start -------------------------------------------------------------------
  $('next').addEventListener('click', claimNext);
  $('refresh').addEventListener('click', () => {
    loadMine();
    loadQueue();
  });

  Leasehold.signIn({
    ready: (who) => {
      me = who;
      $('app').hidden = false;
      $('operator-link').hidden = who.scope !== 'operator';
      if (who.scope === 'service') {
        warn('This page is for reviewers: a service token cannot take tasks.');
        return;
      }
      loadMine();
      loadQueue();
      clearInterval(ticker);
      ticker = setInterval(tick, 1000);
      startLive();
    },
    out: () => {
      me = null;
      clearInterval(ticker);
      $('app').hidden = true;
      renderQueue([], false);
      for (const id of [...mine.keys()]) letGo(id);
      $('decided').replaceChildren();
      $('decided-section').hidden = true;
      $('steps').replaceChildren();
      $('steps-section').hidden = true;
      LeaseholdViews.tabs.clear();
    },
  });
})();
