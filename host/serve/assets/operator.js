// The operator's view: the tenant's counters, the overdue list, its
// schedules, saved views (views.js), bulk actions (jobs.js) and webhook
// subscriptions (subscriptions.js), the consistency check and take-over.
// It reads what an operator token may read and follows the change feed,
// so the numbers move as work moves.
'use strict';

(() => {
  const { el, $, user, users, msg, say, warn, api, path, explain } = Leasehold;
  let me = null;

  async function loadCounters() {
    const get = (route) => api('GET', `/v1/stats/${route}`);
    const [open, leased, pending, due, leaseEnd, wake] = await Promise.all([
      get('open-count'), get('leased-count'), get('pending-count'), get('next-due'), get('next-lease-end'),
      get('next-wake'),
    ]);
    const failed = [open, leased, pending, due, leaseEnd, wake].find((r) => !r.ok);
    if (failed) {
      warn(msg`The counters could not be read: ${explain(failed.problem, me && me.actor)}`);
      return;
    }
    $('open-count').textContent = String(open.data.count);
    $('leased-count').textContent = String(leased.data.count);
    $('pending-count').textContent = String(pending.data.count);
    $('next-due').textContent = due.data.at === null ? 'none' : Leasehold.formatTime(due.data.at);
    $('next-lease-end').textContent = leaseEnd.data.at === null ? 'none' : Leasehold.formatTime(leaseEnd.data.at);
    $('next-wake').textContent = wake.data.at === null ? 'none' : Leasehold.formatTime(wake.data.at);
  }

  async function loadOverdue() {
    const res = await api('GET', '/v1/overdue?limit=100');
    if (!res.ok) {
      warn(msg`The overdue list could not be read: ${explain(res.problem, me && me.actor)}`);
      return;
    }
    const rows = res.data.tasks.map((t) => el('tr', { dataset: { task: t.id } },
      el('th', { scope: 'row' }, user(t.kind, { class: 'kind' }), user(t.id, { class: 'task-id' })),
      el('td', {}, el('time', { datetime: Leasehold.isoTime(t.due_at) }, Leasehold.formatTime(t.due_at)),
        Leasehold.timeline(t) ? el('span', { class: 'timeline' }, ...Leasehold.timeline(t)) : null),
      el('td', {}, t.state),
      el('td', { class: 'names' }, t.assignee ? user(t.assignee) : 'nobody'),
      el('td', { class: 'names' }, t.candidate_roles.length ? users(t.candidate_roles) : '—')));
    $('overdue-rows').replaceChildren(...rows);
    $('overdue-table').hidden = rows.length === 0;
    $('overdue-empty').hidden = rows.length > 0;
  }

  // A schedule's recurrence as a person reads it.
  function recurrence(r) {
    if (r.kind === 'cron') return msg`cron ${el('code', {}, user(r.expr))}`;
    const every = r.every_ms % 1000 === 0 ? `${r.every_ms / 1000} s` : `${r.every_ms} ms`;
    return `every ${every} from ${Leasehold.formatTime(r.anchor)}`;
  }

  // An instant in the browser's zone, or in UTC.
  function instant(ms, utc) {
    if (ms === null) return '—';
    const text = utc ? Leasehold.isoTime(ms).replace('.000Z', 'Z') : Leasehold.formatTime(ms);
    return el('time', { datetime: Leasehold.isoTime(ms) }, text);
  }

  async function loadSchedules() {
    const [res, tz] = await Promise.all([api('GET', '/v1/schedules?limit=100'), api('GET', '/v1/tz-version')]);
    if (!res.ok) {
      warn(msg`The schedules could not be read: ${explain(res.problem, me && me.actor)}`);
      return;
    }
    const rows = res.data.schedules.map((s) => el('tr', { dataset: { schedule: s.spec.id } },
      el('th', { scope: 'row' }, user(s.spec.id, { class: 'schedule-id' })),
      el('td', { 'data-label': 'Recurrence' }, recurrence(s.spec.recurrence)),
      el('td', { 'data-label': 'Zone' }, user(s.spec.zone)),
      el('td', { 'data-label': 'Next (your time)' }, instant(s.next_at, false)),
      el('td', { 'data-label': 'Next (UTC)' }, instant(s.next_at, true)),
      el('td', { 'data-label': 'State' }, s.paused === null ? 'running' : msg`paused: ${user(s.paused)}`)));
    $('schedules-rows').replaceChildren(...rows);
    $('schedules-table').hidden = rows.length === 0;
    $('schedules-empty').hidden = rows.length > 0;
    $('schedules-more').hidden = res.data.next === null;
    $('tz-version').textContent = tz.ok
      ? `Instants come from the IANA time-zone database ${tz.data.tz_version}.`
      : '';
  }

  function loadAll() {
    loadCounters();
    loadOverdue();
    loadSchedules();
    LeaseholdSubscriptions.load(me, loadAll);
    LeaseholdViews.manage.load(me, loadAll).then((views) => { if (views && me) LeaseholdJobs.views(views); });
    LeaseholdJobs.load(me);
  }

  let queued = null;
  function soon() {
    clearTimeout(queued);
    queued = setTimeout(loadAll, 250);
  }

  // ---- The consistency check --------------------------------------------------
  $('check').addEventListener('click', async () => {
    const button = $('check');
    button.disabled = true;
    $('check-result').textContent = 'Checking…';
    $('check-list').replaceChildren();
    const res = await api('GET', '/v1/check');
    button.disabled = false;
    button.focus();
    if (!res.ok) {
      $('check-result').textContent = '';
      warn(msg`The check did not run: ${explain(res.problem, me.actor)}`);
      return;
    }
    const found = res.data.discrepancies;
    $('check-result').textContent = found.length === 0
      ? `Consistent: nothing is out of place (checked ${Leasehold.formatTime(Date.now())}).`
      : `${found.length} discrepanc${found.length === 1 ? 'y' : 'ies'} found:`;
    $('check-list').replaceChildren(...found.map((d) => el('li', {}, ...msg`${d.structure} ${user(d.subject)}: ${d.detail}`)));
  });

  // ---- Take-over ----------------------------------------------------------------
  // Looking a task up fills in who holds it, so the usual case is one id.
  $('to-task').addEventListener('change', async () => {
    const id = $('to-task').value.trim();
    const state = $('to-task-state');
    if (!id) {
      state.textContent = '';
      return;
    }
    const res = await api('GET', path('/v1/tasks/', id));
    if (!res.ok) {
      state.replaceChildren(...[explain(res.problem, me.actor)].flat());
      return;
    }
    const t = res.data;
    state.replaceChildren(...(t.assignee
      ? msg`“${user(t.kind)}”, ${t.state}, held by ${user(t.assignee)}${
        t.lease_until ? ` until ${Leasehold.formatTime(t.lease_until)}.` : '.'}`
      : msg`“${user(t.kind)}”, ${t.state}, held by nobody.`));
    if (t.assignee) $('to-from').value = t.assignee;
  });

  $('takeover-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const id = $('to-task').value.trim();
    const from = $('to-from').value.trim();
    if (!id || !from) {
      warn('Give the task id and who holds it now.');
      (id ? $('to-from') : $('to-task')).focus();
      return;
    }
    const body = { from };
    const actor = $('to-actor').value.trim();
    if (actor) body.actor = actor;
    const roles = $('to-roles').value.split(',').map((r) => r.trim()).filter(Boolean);
    if (roles.length) body.roles = roles;
    const lease = Number($('to-lease').value);
    if ($('to-lease').value !== '') {
      if (!Number.isInteger(lease) || lease < 1 || lease > 604800) {
        warn('The lease is a whole number of seconds, from 1 to 604800.');
        $('to-lease').focus();
        return;
      }
      body.lease_ms = lease * 1000;
    }
    const res = await api('POST', path('/v1/tasks/', id, '/take-over'), body);
    if (!res.ok) {
      warn(msg`${user(id)}: ${explain(res.problem, me.actor)}`);
      return;
    }
    warn('');
    const to = res.data.assignee === me.actor ? 'You now hold' : msg`${user(res.data.assignee)} now holds`;
    say(msg`${to} “${user(res.data.kind)}” (${user(res.data.id)}), taken over from ${user(from)}.`);
    $('to-task-state').textContent = '';
    soon();
  });

  // ---- Assign, unassign, change -------------------------------------------
  let looked = null; // the task as last looked up
  async function lookUp() {
    const id = $('ch-task').value.trim();
    const state = $('ch-task-state');
    looked = null;
    if (!id) {
      state.textContent = '';
      return null;
    }
    const res = await api('GET', path('/v1/tasks/', id));
    if (!res.ok) {
      state.replaceChildren(...[explain(res.problem, me.actor)].flat());
      return null;
    }
    looked = res.data;
    const t = looked;
    state.replaceChildren(...msg`“${user(t.kind)}”, ${t.state}, ${t.priority}, held by ${
      t.assignee ? user(t.assignee) : 'nobody'}, due ${t.due_at === null ? 'never' : Leasehold.formatTime(t.due_at)}.`);
    return t;
  }
  $('ch-task').addEventListener('change', lookUp);

  async function change(route, method, body, done) {
    const t = looked && looked.id === $('ch-task').value.trim() ? looked : await lookUp();
    if (!t) {
      warn('Give the id of a task to change.');
      $('ch-task').focus();
      return;
    }
    const res = await api(method, path('/v1/tasks/', t.id, route), body, { revision: t.revision });
    if (!res.ok) {
      warn(msg`${user(t.id)}: ${explain(res.problem, me.actor)}`);
      if (res.problem.name === 'stale') await lookUp();
      return;
    }
    warn('');
    say(done(res.data));
    await lookUp();
    soon();
  }

  $('ch-assign').addEventListener('click', () => {
    const to = $('ch-to').value.trim();
    if (!to) {
      warn('Give whom to assign it to.');
      $('ch-to').focus();
      return;
    }
    const roles = $('ch-roles').value.split(',').map((r) => r.trim()).filter(Boolean);
    change('/assign', 'POST', { to, roles, override_roles: $('ch-override').checked },
      (t) => msg`${user(t.assignee)} now holds “${user(t.kind)}” (${user(t.id)}).`);
  });
  $('ch-unassign').addEventListener('click', () => {
    change('/unassign', 'POST', undefined,
      (t) => msg`“${user(t.kind)}” (${user(t.id)}) is back in the queue.`);
  });
  $('change-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const body = {};
    if ($('ch-clear-due').checked) body.due_at = null;
    else if ($('ch-due').value) body.due_at = new Date($('ch-due').value).getTime();
    if ($('ch-priority').value) body.priority = $('ch-priority').value;
    if (Object.keys(body).length === 0) {
      warn('Say what to change: a due time, clearing it, or a priority.');
      $('ch-due').focus();
      return;
    }
    change('', 'PATCH', body, (t) => msg`“${user(t.kind)}” (${user(t.id)}) is now ${t.priority}, due ${
      t.due_at === null ? 'never' : Leasehold.formatTime(t.due_at)}.`);
  });

  $('refresh').addEventListener('click', loadAll);

  Leasehold.signIn({
    ready: (who) => {
      me = who;
      if (who.scope !== 'operator') {
        warn(msg`This page is for operator tokens; yours is a ${who.scope}'s. The inbox is at the Inbox link.`);
        return;
      }
      $('app').hidden = false;
      loadAll();
      Leasehold.follow({
        onReady: (fresh) => { if (fresh) loadAll(); },
        // A job's progress is the jobs' own; the tasks it changes come
        // as task events of their own.
        onEvent: (type, data) => (type === 'job' ? LeaseholdJobs.heard(data) : soon()),
      });
    },
    out: () => {
      me = null;
      LeaseholdJobs.clear();
      $('app').hidden = true;
    },
  });
})();
