// The operator page's bulk actions: a form that picks the tasks (a saved
// view's filter, or the filter under "Make a view") and an action, a
// confirmation that says how many tasks it will change (counted exactly,
// `LeaseholdViews.countExact`), then `POST /v1/jobs`. The server runs the
// job a task at a time; the page follows it to its end (the feed's `job`
// events when they come, and polling `GET /v1/jobs/{id}`, which works
// without them), with Cancel, and lists the tenant's recent jobs. It never
// changes a task itself: the job does, on the server.
//
// operator.js calls `load(who)` when it reloads its view, `views(list)`
// with the saved views it listed, `heard(job)` for a `job` event, and
// `clear()` at sign-out.
'use strict';

const LeaseholdJobs = (() => {
  const { el, $, user, msg, say, warn, api, path, explain } = Leasehold;
  const POLL_MS = 1000;
  // A screen reader hears the progress at most this often, and every
  // change of state at once: a line a second for minutes is noise.
  const NEWS_MS = 10000;
  const SHOWN = 20; // recent jobs in the list
  const PAGE = 100;
  const PAGES = 10; // the list reads at most this many pages of jobs
  const RANK = { counting: 0, running: 1, cancelled: 2, done: 2 };

  let me = null;
  let saved = []; // the saved views, as operator.js last listed them
  let pending = null; // {filter, action} the confirmation shows
  let followed = null; // {id, job, timer, saidState, saidAt}
  let listing = 0; // the latest list read; older answers are dropped

  const finished = (j) => j.state === 'done' || j.state === 'cancelled';
  const noun = (n) => `${n} task${n === 1 ? '' : 's'}`;

  // A job's filter in full, for `describe`, whatever the answer omitted.
  const full = (f) => ({
    states: [], kinds: [], role: null, assignee: null, case: null, run: null, priority_at_least: null,
    due_after: null, due_before: null, created_after: null, created_before: null, overdue_at: null, ...f,
  });

  // What an action does, in words, to `n` ("40 tasks") or, without it, to
  // the job's tasks: "assign 40 tasks to bob", "assign to bob".
  function doing(a, n) {
    const of = n ? msg` of ${n}` : '';
    const them = n ? ` ${n}` : '';
    switch (a.kind) {
      case 'release': return `release${them}`;
      case 'escalate': return `escalate${them}`;
      case 'withdraw': return `withdraw${them}`;
      case 'assign':
        return msg`assign${them} to ${user(a.to)}${a.override_roles ? ', overriding the roles rule' : ''}`;
      case 'update': {
        const c = a.changes || {};
        const parts = [];
        if (c.priority !== undefined) parts.push(msg`change the priority${of} to ${c.priority}`);
        if (c.due_at === null) parts.push(msg`clear the due time${of}`);
        else if (c.due_at !== undefined) parts.push(msg`change the due time${of} to ${Leasehold.formatTime(c.due_at)}`);
        const rest = Object.keys(c).filter((k) => k !== 'priority' && k !== 'due_at');
        if (rest.length) parts.push(msg`change ${rest.join(', ')}${of}`);
        return parts.length ? parts.map((p, i) => (i ? [' and ', p] : p)) : msg`change nothing${of}`;
      }
      default: return msg`${a.kind}${them}`;
    }
  }

  // The progress in words: "Running: done 12 of 40, 1 skipped, 0 failed."
  function status(j) {
    if (j.state === 'counting') return `Counting its tasks: ${j.total} found so far.`;
    const label = { running: 'Running', done: 'Finished', cancelled: 'Cancelled' }[j.state] || j.state;
    return `${label}: done ${j.done} of ${j.total}, ${j.skipped} skipped, ${j.failed} failed.`;
  }

  // Whether `a` is at least as far along as `b`: a poll's answer may land
  // after an event that is newer, and must not move the display back.
  function newer(a, b) {
    if (!b) return true;
    if (RANK[a.state] !== RANK[b.state]) return RANK[a.state] > RANK[b.state];
    return a.total + a.done + a.skipped + a.failed >= b.total + b.done + b.skipped + b.failed;
  }

  // ---- Following one job ----------------------------------------------------
  function show(j) {
    const box = $('job');
    box.hidden = false;
    box.dataset.job = j.id;
    box.dataset.state = j.state;
    $('job-title').replaceChildren(...msg`Job ${user(j.id)}`);
    $('job-what').replaceChildren(...msg`To ${doing(j.action, null)}: ${LeaseholdViews.describe(full(j.filter))}. Started by ${
      j.by ? user(j.by) : 'the service'}, ${Leasehold.formatTime(j.created_at)}.`);
    const bar = $('job-bar');
    if (j.state === 'counting') {
      bar.removeAttribute('value'); // indeterminate while the total grows
    } else {
      // A job of no task is complete, not empty.
      bar.max = Math.max(j.total, 1);
      bar.value = j.total ? j.done + j.skipped + j.failed : 1;
    }
    $('job-status').textContent = status(j);
    // A job that ends under the focused Cancel hands the focus on, not to
    // the page's start.
    if (finished(j) && document.activeElement === $('job-cancel')) $('job-title').focus();
    $('job-cancel').hidden = finished(j);
    const reasons = (list, part, ul) => {
      $(part).hidden = list.length === 0;
      $(ul).replaceChildren(...list.map((f) => el('li', { dataset: { task: f.id } }, ...msg`${user(f.id)}: ${user(f.reason)}`)));
    };
    reasons(j.last_failures || [], 'job-failures-part', 'job-failures');
    reasons(j.last_skipped || [], 'job-skipped-part', 'job-skipped');
  }

  function announce(f, j) {
    const now = Date.now();
    if (j.state === f.saidState && now - f.saidAt < NEWS_MS) return;
    $('job-news').textContent = status(j);
    f.saidState = j.state;
    f.saidAt = now;
  }

  function stop() {
    if (followed) clearTimeout(followed.timer);
    followed = null;
  }

  function follow(j) {
    stop();
    followed = { id: j.id, job: null, timer: null, saidState: null, saidAt: 0 };
    update(j);
  }

  // A job as the server answered it, from a poll, an event or the list.
  function update(j) {
    const f = followed;
    if (!f || j.id !== f.id || !newer(j, f.job)) return;
    const ended = f.job && !finished(f.job) && finished(j);
    f.job = j;
    show(j);
    announce(f, j);
    row(j);
    if (finished(j)) {
      clearTimeout(f.timer);
      if (ended) loadList();
    } else {
      poll(f, POLL_MS);
    }
  }

  // The next poll, `after` ms from now; an event that comes first puts
  // it off, since the poll is only the fallback.
  function poll(f, after) {
    clearTimeout(f.timer);
    f.timer = setTimeout(async () => {
      const res = await api('GET', path('/v1/jobs/', f.id));
      if (followed !== f) return;
      if (res.ok) update(res.data);
      else {
        warn(msg`The job ${user(f.id)} could not be read: ${explain(res.problem, me && me.actor)}`);
        if (res.status === 404) return;
      }
      if (followed === f && !finished(f.job)) poll(f, POLL_MS);
    }, after);
  }

  $('job-cancel').addEventListener('click', async () => {
    const f = followed;
    if (!f) return;
    const button = $('job-cancel');
    button.disabled = true;
    const res = await api('POST', path('/v1/jobs/', f.id, '/cancel'));
    button.disabled = false;
    if (!res.ok) {
      warn(msg`The job ${user(f.id)} was not cancelled: ${explain(res.problem, me && me.actor)}`);
      return;
    }
    warn('');
    update(res.data);
    $('job-title').focus();
  });

  // ---- The list of recent jobs ----------------------------------------------
  function jobRow(j) {
    const started = j.by ? user(j.by) : 'the service';
    return el('tr', { dataset: { job: j.id, state: j.state } },
      el('th', { scope: 'row' }, user(j.id, { class: 'kind' })),
      el('td', { 'data-label': 'Does' }, doing(j.action, null),
        el('span', { class: 'timeline' }, LeaseholdViews.describe(full(j.filter)))),
      el('td', { 'data-label': 'Started' }, started, ', ',
        el('time', { datetime: Leasehold.isoTime(j.created_at) }, Leasehold.formatTime(j.created_at))),
      el('td', { 'data-label': 'State' }, j.state),
      el('td', { 'data-label': 'Progress' }, `${j.done} of ${j.total} done, ${j.skipped} skipped, ${j.failed} failed`),
      el('td', { class: 'action' }, el('button', {
        type: 'button', 'aria-label': `Show the job ${j.id}`,
        on: { click: () => { follow(j); poll(followed, 0); $('job-title').focus(); } },
      }, 'Show')));
  }

  // A job's row, redrawn in place when it is listed.
  function row(j) {
    const old = $('jobs-rows').querySelector(`tr[data-job="${CSS.escape(j.id)}"]`);
    if (!old) return false;
    const fresh = jobRow(j);
    const focused = old.contains(document.activeElement);
    old.replaceWith(fresh);
    if (focused) fresh.querySelector('button').focus();
    return true;
  }

  // The most recently started jobs. The API lists jobs by id, so the list
  // reads them all (to a bound) and sorts them by when they started.
  async function loadList() {
    const mine = ++listing;
    const all = [];
    let after = null;
    let cut = false;
    for (let i = 0; ; i++) {
      const res = await api('GET', `/v1/jobs?limit=${PAGE}${after === null ? '' : `&after=${encodeURIComponent(after)}`}`);
      if (!me || mine !== listing) return;
      if (!res.ok) {
        warn(msg`The bulk actions could not be read: ${explain(res.problem, me.actor)}`);
        return;
      }
      all.push(...res.data.jobs);
      after = res.data.next ?? null;
      if (after === null) break;
      if (i + 1 === PAGES) {
        cut = true;
        break;
      }
    }
    all.sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1));
    const shown = all.slice(0, SHOWN);
    const focused = document.activeElement && document.activeElement.closest('#jobs-rows tr');
    const again = focused ? focused.dataset.job : null;
    $('jobs-rows').replaceChildren(...shown.map(jobRow));
    if (again) {
      const r = $('jobs-rows').querySelector(`tr[data-job="${CSS.escape(again)}"] button`);
      if (r) r.focus();
    }
    $('jobs-table').hidden = shown.length === 0;
    $('jobs-empty').hidden = shown.length > 0;
    const more = $('jobs-more');
    more.hidden = !cut && all.length <= SHOWN;
    more.textContent = cut
      ? `The ${SHOWN} most recently started of the first ${all.length} jobs by id are shown; GET /v1/jobs pages through them all.`
      : `The ${SHOWN} most recently started of ${all.length} jobs are shown.`;
  }

  // ---- The form and its confirmation ------------------------------------------
  // The form shows only the fields of the chosen action.
  function fields() {
    const a = $('bulk-action').value;
    $('bulk-assign').hidden = a !== 'assign';
    $('bulk-priority-fields').hidden = a !== 'priority';
    $('bulk-due-fields').hidden = a !== 'due';
  }
  $('bulk-action').addEventListener('change', fields);
  $('bulk-view').addEventListener('change', () => { $('bulk-of-view').checked = true; });

  // The tasks chosen: {filter, what}, or null when none can be (said why).
  function chosen() {
    if ($('bulk-of-form').checked) {
      return { filter: LeaseholdViews.manage.formFilter(), what: 'the filter under “Make a view” matches' };
    }
    const v = saved.find((x) => x.name === $('bulk-view').value);
    if (!v) {
      warn('No view is saved: choose the filter under “Make a view”, or save a view first.');
      $('bulk-of-form').focus();
      return null;
    }
    return { filter: v.filter, what: msg`of the view ${user(v.name)}` };
  }

  // The action chosen, as `POST /v1/jobs` takes it, or null (said why).
  function action() {
    const need = (id, why) => {
      warn(why);
      $(id).focus();
      return null;
    };
    switch ($('bulk-action').value) {
      case 'assign': {
        const to = $('bulk-to').value.trim();
        if (!to) return need('bulk-to', 'Give whom to assign the tasks to.');
        const roles = $('bulk-roles').value.split(',').map((r) => r.trim()).filter(Boolean);
        return { kind: 'assign', to, roles, override_roles: $('bulk-override').checked };
      }
      case 'priority':
        return { kind: 'update', changes: { priority: document.querySelector('#bulk-form input[name="priority"]:checked').value } };
      case 'due':
        if ($('bulk-clear-due').checked) return { kind: 'update', changes: { due_at: null } };
        if (!$('bulk-due').value) return need('bulk-due', 'Give the new due time, or clear it.');
        return { kind: 'update', changes: { due_at: new Date($('bulk-due').value).getTime() } };
      default:
        return { kind: $('bulk-action').value };
    }
  }

  $('bulk-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const tasks = chosen();
    const act = tasks && action();
    if (!act) return;
    const button = $('bulk-start');
    button.disabled = true;
    button.textContent = 'Counting…';
    const counted = await LeaseholdViews.countExact(tasks.filter, (n) => { button.textContent = `Counting… ${n}`; });
    button.disabled = false;
    button.textContent = 'Count and confirm…';
    if (!me) return;
    if (!counted.ok) {
      warn(msg`The tasks could not be counted: ${explain(counted.problem, me.actor)}`);
      return;
    }
    warn('');
    pending = { filter: tasks.filter, action: act };
    $('bulk-confirm').dataset.count = String(counted.count);
    $('bulk-confirm-text').replaceChildren(...msg`This will ${doing(act, noun(counted.count))}.`);
    $('bulk-confirm-what').replaceChildren(...msg`The tasks ${tasks.what}: ${LeaseholdViews.describe(full(tasks.filter))}.`);
    $('bulk-confirm').showModal();
    // The safe answer has the focus: Enter alone changes nothing.
    $('bulk-back').focus();
  });

  $('bulk-back').addEventListener('click', () => $('bulk-confirm').close());
  $('bulk-confirm').addEventListener('close', () => { pending = null; });

  $('bulk-go').addEventListener('click', async () => {
    const p = pending;
    if (!p) return;
    const go = $('bulk-go');
    go.disabled = true;
    // The server names the job (a UUIDv7), so that ids list in the order
    // jobs began, whoever started them.
    const res = await api('POST', '/v1/jobs', { filter: p.filter, action: p.action });
    go.disabled = false;
    $('bulk-confirm').close();
    if (!res.ok) {
      const field = res.problem.field ? msg` (${user(res.problem.field)})` : '';
      warn(msg`The bulk action was not started${field}: ${explain(res.problem, me && me.actor)}`);
      $('bulk-start').focus();
      return;
    }
    warn('');
    say(msg`The job ${user(res.data.id)} is started.`);
    follow(res.data);
    $('job-title').focus();
    loadList();
  });

  // ---- What operator.js calls -------------------------------------------------
  function load(who) {
    me = who;
    loadList();
    // Back from a break in the feed: read the followed job now.
    if (followed && followed.job && !finished(followed.job)) poll(followed, 0);
  }

  function views(list) {
    saved = list;
    const select = $('bulk-view');
    const was = select.value;
    select.replaceChildren(...(saved.length
      ? saved.map((v) => el('option', { value: v.name }, v.name))
      : [el('option', { value: '' }, '(no view is saved)')]));
    if (saved.some((v) => v.name === was)) select.value = was;
  }

  // A `job` event: the followed job moves; a listed one is redrawn; a new
  // one is listed.
  let queued = null;
  function heard(j) {
    if (!me || !j || typeof j.id !== 'string') return;
    update(j);
    if (!row(j)) {
      clearTimeout(queued);
      queued = setTimeout(() => { if (me) loadList(); }, 250);
    }
  }

  function clear() {
    me = null;
    stop();
    clearTimeout(queued);
    listing++;
    pending = null;
    if ($('bulk-confirm').open) $('bulk-confirm').close();
    $('job').hidden = true;
    $('jobs-rows').replaceChildren();
    $('jobs-table').hidden = true;
    $('jobs-empty').hidden = false;
  }

  fields();
  return { load, views, heard, clear };
})();
