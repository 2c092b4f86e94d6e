// The operator page's webhook subscriptions: each one's endpoint, what it
// is sent, its state, how far behind it is and its last attempt, with
// pause, resume and delete. It only reads and acts through the API, as an
// operator token may; adding a subscription (whose secret is shown once)
// is the API's or the CLI's. operator.js calls `load` whenever it reloads
// its view, so the lag moves with the feed.
'use strict';

const LeaseholdSubscriptions = (() => {
  const { el, $, user, users, msg, say, warn, api, path, explain } = Leasehold;
  let me = null;
  let reload = () => {};

  // What a subscription is sent, in words.
  function sends(f) {
    const what = [f.tasks && (f.settling_only ? 'settled tasks' : 'task changes'), f.timers && 'timer changes']
      .filter(Boolean).join(' and ');
    const only = [];
    if (f.verbs.length) only.push(msg`by ${users(f.verbs)}`);
    if (f.kinds.length) only.push(msg`of kinds ${users(f.kinds)}`);
    if (f.runs.length) only.push(msg`of runs ${users(f.runs)}`);
    return only.length ? msg`${what}, only ${only.map((o, i) => (i ? ['; ', o] : o))}` : what;
  }

  // How far behind it is: changes after its position, and the oldest's age.
  function lag(d) {
    if (d.lag_entries === 0) return 'caught up';
    const changes = d.lag_entries === 1 ? '1 change' : `${d.lag_entries} changes`;
    const age = d.lag_seconds > 0 ? `, oldest ${Leasehold.formatAge(d.lag_seconds * 1000)} old` : '';
    return `${changes} behind${age}`;
  }

  // The last attempt this server made, else the last failure kept with it.
  function lastAttempt(s) {
    const a = s.delivery.last_attempts.at(-1) || s.attempts.at(-1);
    const retry = s.delivery.next_retry === null ? null
      : el('span', { class: 'timeline' }, `next retry ${Leasehold.formatTime(s.delivery.next_retry)}`);
    if (!a) return ['none yet', retry];
    const ok = a.status !== null && a.status >= 200 && a.status < 300;
    return [
      el('span', { class: ok ? null : 'overdue' }, user(a.outcome)),
      ` in ${a.latency_ms} ms, `,
      el('time', { datetime: Leasehold.isoTime(a.at) }, Leasehold.formatTime(a.at)),
      retry,
    ];
  }

  function state(s) {
    const where = s.state === 'active' && !s.delivery.here && s.lease
      ? el('span', { class: 'timeline' }, msg`delivered by ${user(s.lease.holder)}`) : null;
    const over = s.delivery.over_bound ? el('span', { class: 'timeline' }, 'waiting: the tenant\'s bound of subscriptions delivered at once is reached') : null;
    return [
      el('span', { class: s.state === 'active' ? null : 'overdue' }, s.state),
      s.note ? el('span', { class: 'timeline' }, user(s.note)) : null,
      where,
      over,
    ];
  }

  // A refusal about a subscription, in words.
  function refusal(problem) {
    if (problem.name === 'not-found') return 'This subscription no longer exists.';
    if (problem.name === 'stale') return 'This subscription changed since it was shown. Nothing was done: look at it again.';
    return explain(problem, me && me.actor);
  }

  async function act(s, action, done) {
    const route = action === 'delete' ? '' : `/${action}`;
    const method = action === 'delete' ? 'DELETE' : 'POST';
    const options = action === 'delete' ? {} : { revision: s.revision };
    const res = await api(method, path('/v1/subscriptions/', s.id, route), undefined, options);
    if (!res.ok) {
      warn(msg`${user(s.id)}: ${refusal(res.problem)}`);
      reload();
      return;
    }
    warn('');
    say(done);
    reload();
  }

  // Delete asks twice: the first press arms the button, the second deletes.
  function deleteButton(s) {
    const b = el('button', { type: 'button', class: 'reject', 'aria-label': `Delete ${s.id}` }, 'Delete');
    b.addEventListener('click', () => {
      if (b.dataset.armed !== 'yes') {
        b.dataset.armed = 'yes';
        b.textContent = 'Really delete';
        b.setAttribute('aria-label', `Really delete ${s.id}: its deliveries stop at once`);
        return;
      }
      b.disabled = true;
      act(s, 'delete', msg`${user(s.id)} is deleted; its deliveries stopped.`);
    });
    b.addEventListener('blur', () => {
      if (b.disabled) return;
      b.dataset.armed = 'no';
      b.textContent = 'Delete';
      b.setAttribute('aria-label', `Delete ${s.id}`);
    });
    return b;
  }

  function actions(s) {
    const pause = s.state === 'active'
      ? el('button', {
        type: 'button', 'aria-label': `Pause ${s.id}`,
        on: { click: () => act(s, 'pause', msg`${user(s.id)} is paused; nothing is sent until it is resumed.`) },
      }, 'Pause') : null;
    const resume = s.state === 'paused' || s.state === 'failing'
      ? el('button', {
        type: 'button', 'aria-label': `Resume ${s.id}`,
        on: { click: () => act(s, 'resume', msg`${user(s.id)} is resumed; what it is owed is sent from its position.`) },
      }, 'Resume') : null;
    return el('div', { class: 'actions' }, pause, resume, deleteButton(s));
  }

  function row(s) {
    return el('tr', { dataset: { subscription: s.id } },
      el('th', { scope: 'row' }, user(s.id, { class: 'kind' }), user(s.url, { class: 'task-id' })),
      el('td', { 'data-label': 'Sends' }, sends(s.filter)),
      el('td', { 'data-label': 'State' }, state(s)),
      el('td', { 'data-label': 'Lag' }, s.state === 'gone' ? '—' : lag(s.delivery)),
      el('td', { 'data-label': 'Last attempt' }, lastAttempt(s)),
      el('td', { class: 'action' }, actions(s)));
  }

  // A row whose delete button is armed is kept as it is, so a reload under
  // the operator's hand takes nothing away; focus inside a row that is
  // rebuilt moves to the new row's first button (after Pause, Resume).
  async function load(who, again) {
    me = who;
    reload = again || reload;
    const res = await api('GET', '/v1/subscriptions?limit=100');
    if (!res.ok) {
      warn(msg`The subscriptions could not be read: ${explain(res.problem, me && me.actor)}`);
      return;
    }
    const body = $('subscriptions-rows');
    const active = document.activeElement;
    const focused = active && body.contains(active) ? active.closest('tr') : null;
    const rows = res.data.subscriptions.map((s) => {
      const old = body.querySelector(`tr[data-subscription="${CSS.escape(s.id)}"]`);
      return old && old.querySelector('button[data-armed="yes"]') ? old : row(s);
    });
    body.replaceChildren(...rows);
    if (focused && !focused.isConnected) {
      const again = rows.find((r) => r.dataset.subscription === focused.dataset.subscription);
      const target = again ? again.querySelector('button:not([disabled])') : null;
      (target || $('subscriptions-title')).focus();
    }
    $('subscriptions-table').hidden = rows.length === 0;
    $('subscriptions-empty').hidden = rows.length > 0;
    $('subscriptions-more').hidden = res.data.next === null;
  }

  return { load };
})();
