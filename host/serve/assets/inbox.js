// The reviewer's inbox: my queue (what I may take, in queue order), my
// tasks (what I hold, with the time left on each lease), and the actions
// on both. The server decides everything; the page shows what it answers
// and follows the change feed, so another reviewer's claim or a lapsed
// lease shows up without a reload. "My tasks" is built from the claims
// made in this tab (their ids kept in sessionStorage, read again on load)
// and from every change the feed reports with me as the assignee.
'use strict';

(() => {
  const { el, $, user, msg, say, warn, api, path, explain } = Leasehold;
  const MINE_KEY = 'leasehold.mine';
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

  function saveMine() {
    sessionStorage.setItem(MINE_KEY, JSON.stringify([...mine.keys()]));
  }
  function savedMine() {
    try {
      const ids = JSON.parse(sessionStorage.getItem(MINE_KEY) || '[]');
      return Array.isArray(ids) ? ids.filter((x) => typeof x === 'string') : [];
    } catch (e) {
      return [];
    }
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
      el('td', { 'data-label': 'Due' }, dueText(t)),
      el('td', { 'data-label': 'Justification', class: 'justification', dir: 'auto' }, Leasehold.shortJustification(t.justification)),
      el('td', { class: 'action' }, claimButton));
  }

  function dueText(t) {
    if (t.due_at === null || t.due_at === undefined) return 'no due time';
    const node = el('time', { datetime: Leasehold.isoTime(t.due_at) }, Leasehold.formatTime(t.due_at));
    return t.due_at < Date.now() ? el('span', { class: 'overdue' }, node, ' (overdue)') : node;
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
  }

  let queued = null;
  function soon() {
    clearTimeout(queued);
    queued = setTimeout(loadQueue, 100);
  }

  // ---- My tasks -------------------------------------------------------------
  function card(t) {
    const heading = el('h3', { tabindex: '-1' }, user(t.kind, { class: 'kind' }), ' ',
      user(t.id, { class: 'task-id' }));
    const busy = (f) => async (e) => {
      const buttons = e.target.closest('.card').querySelectorAll('button');
      buttons.forEach((b) => { b.disabled = true; });
      try { await f(); } finally { buttons.forEach((b) => { b.disabled = false; }); }
    };
    const button = (text, cls, f) => el('button', {
      type: 'button', class: cls, 'aria-label': `${text}: ${t.kind} (${t.id})`, on: { click: busy(f) },
    }, text);
    return el('li', { class: 'card', dataset: { task: t.id } },
      heading,
      el('p', { class: 'meta' }, el('span', { class: `priority ${t.priority}`, text: t.priority }), ' · due ', dueText(t)),
      el('p', { class: 'justification', dir: 'auto' }, Leasehold.shortJustification(t.justification, 240)),
      el('details', {}, el('summary', {}, 'Full justification'),
        el('pre', {}, Leasehold.readableJson(t.justification))),
      el('p', { class: 'lease', role: 'timer', 'aria-live': 'off' }),
      el('div', { class: 'actions' },
        button('Keep working', 'renew', () => renew(t.id)),
        button('Release', 'release', () => release(t.id)),
        button('Approve', 'approve primary', () => settle(t.id, 'completed')),
        button('Reject', 'reject', () => settle(t.id, 'withdrawn'))));
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
    saveMine();
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
    saveMine();
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

  async function loadMine() {
    for (const id of savedMine()) {
      const res = await api('GET', path('/v1/tasks/', id));
      if (res.ok && res.data.assignee === me.actor && res.data.state === 'claimed') hold(res.data, false);
      else letGo(id);
    }
    saveMine();
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

  async function settle(id, settlement) {
    const t = mine.get(id).task;
    const res = await api('POST', path('/v1/tasks/', id, '/settle'), { settlement });
    if (res.ok && res.data.settled) {
      letGo(id);
      say(msg`${settlement === 'completed' ? 'Approved' : 'Rejected'} ${label(t)}.`);
    } else if (res.ok) {
      letGo(id);
      warn(msg`${label(t)} was already settled; nothing was changed.`);
    } else if (res.problem.name === 'not-held' || res.problem.name === 'not-found') {
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
    if (e.assignee === me.actor && e.after === 'claimed') {
      removeQueued(id);
      const held = mine.get(id);
      if (held) {
        hold(Object.assign({}, held.task, { lease_until: e.lease_until }), false);
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

  function startLive() {
    Leasehold.follow({
      onReady: (fresh) => {
        if (fresh) {
          loadMine();
          loadQueue();
        }
      },
      onEvent: (type, data) => {
        if (type === 'task' && me) onTask(data);
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
      sessionStorage.removeItem(MINE_KEY);
    },
  });
})();
