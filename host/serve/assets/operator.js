// The operator's view: the tenant's counters, the overdue list, the
// consistency check and take-over. It reads what an operator token may
// read and follows the change feed, so the numbers move as work moves.
'use strict';

(() => {
  const { el, $, user, users, msg, say, warn, api, path, explain } = Leasehold;
  let me = null;

  async function loadCounters() {
    const get = (route) => api('GET', `/v1/stats/${route}`);
    const [open, leased, pending, due, leaseEnd] = await Promise.all([
      get('open-count'), get('leased-count'), get('pending-count'), get('next-due'), get('next-lease-end'),
    ]);
    const failed = [open, leased, pending, due, leaseEnd].find((r) => !r.ok);
    if (failed) {
      warn(msg`The counters could not be read: ${explain(failed.problem, me && me.actor)}`);
      return;
    }
    $('open-count').textContent = String(open.data.count);
    $('leased-count').textContent = String(leased.data.count);
    $('pending-count').textContent = String(pending.data.count);
    $('next-due').textContent = due.data.at === null ? 'none' : Leasehold.formatTime(due.data.at);
    $('next-lease-end').textContent = leaseEnd.data.at === null ? 'none' : Leasehold.formatTime(leaseEnd.data.at);
  }

  async function loadOverdue() {
    const res = await api('GET', '/v1/overdue?limit=100');
    if (!res.ok) {
      warn(msg`The overdue list could not be read: ${explain(res.problem, me && me.actor)}`);
      return;
    }
    const rows = res.data.tasks.map((t) => el('tr', { dataset: { task: t.id } },
      el('th', { scope: 'row' }, user(t.kind, { class: 'kind' }), user(t.id, { class: 'task-id' })),
      el('td', {}, el('time', { datetime: Leasehold.isoTime(t.due_at) }, Leasehold.formatTime(t.due_at))),
      el('td', {}, t.state),
      el('td', { class: 'names' }, t.assignee ? user(t.assignee) : 'nobody'),
      el('td', { class: 'names' }, t.candidate_roles.length ? users(t.candidate_roles) : '—')));
    $('overdue-rows').replaceChildren(...rows);
    $('overdue-table').hidden = rows.length === 0;
    $('overdue-empty').hidden = rows.length > 0;
  }

  function loadAll() {
    loadCounters();
    loadOverdue();
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
        onEvent: () => soon(),
      });
    },
    out: () => {
      me = null;
      $('app').hidden = true;
    },
  });
})();
