// Saved views, as both pages show them. Every view lives on the server
// (`/v1/views`); nothing about them is kept in the browser.
//
// The inbox (`tabs`): each view is a tab with its count, counted by the
// server as the signed-in reviewer sees it (`POST /v1/search/count`), and
// the selected tab lists that view's search a page at a time
// (`POST /v1/search`, "Show more" passing `next` back). inbox.js calls
// `tabs.soon(who)` when it reads its state or hears a task change, and
// `tabs.clear()` at sign-out.
//
// The operator page (`manage`): the tenant's views with what each
// searches for, a form that makes one (name, filter fields, sort), and
// delete, which asks twice. operator.js calls `manage.load(who, again)`,
// which answers the views it listed. The bulk actions (jobs.js) act on a
// view's filter or on the form's (`manage.formFilter()`), counted
// exactly by `countExact`.
'use strict';

const LeaseholdViews = (() => {
  const { el, $, user, users, msg, say, warn, api, path, explain } = Leasehold;
  const PAGE = 50;
  const MOST_VIEWS = 100;

  // What a view searches for, in words.
  function describe(f, sort) {
    const parts = [];
    if (f.states.length) parts.push(msg`in ${users(f.states)}`);
    if (f.kinds.length) parts.push(msg`of kind ${users(f.kinds)}`);
    if (f.role) parts.push(msg`offered to ${user(f.role)}`);
    if (f.assignee === 'nobody') parts.push('held by nobody');
    else if (f.assignee) parts.push(msg`held by ${user(f.assignee.actor)}`);
    if (f.case) parts.push(msg`of case ${user(f.case)}`);
    if (f.run) parts.push(msg`of run ${user(f.run)}`);
    if (f.priority_at_least) parts.push(`${f.priority_at_least} or above`);
    const at = (ms) => Leasehold.formatTime(ms);
    if (f.due_after !== null) parts.push(`due from ${at(f.due_after)}`);
    if (f.due_before !== null) parts.push(`due before ${at(f.due_before)}`);
    if (f.created_after !== null) parts.push(`created from ${at(f.created_after)}`);
    if (f.created_before !== null) parts.push(`created before ${at(f.created_before)}`);
    if (f.overdue_at !== null) parts.push(`overdue at ${at(f.overdue_at)}`);
    const what = parts.length ? parts.map((p, i) => (i ? ['; ', p] : p)) : 'every task';
    const order = sort ? `, by ${sort.key.replace('_', ' ')}${sort.descending ? ', descending' : ''}` : '';
    return msg`${what}${order}`;
  }

  // A filter's exact count: the parts of a count that stopped at its
  // budget, added up by following `next`. `progress(n)` hears the count
  // so far. Answers {ok, count} or {ok: false, problem}.
  async function countExact(filter, progress) {
    let count = 0;
    let after = null;
    for (;;) {
      const body = { filter };
      if (after !== null) body.after = after;
      const res = await api('POST', '/v1/search/count', body);
      if (!res.ok) return res;
      count += res.data.count;
      if (res.data.exact || res.data.next === null) return { ok: true, count };
      after = res.data.next;
      if (progress) progress(count);
    }
  }

  // ---- The inbox's tabs ------------------------------------------------------
  const tabs = (() => {
    let me = null;
    let views = []; // as the server last listed them
    let selected = null; // the selected view's name
    let shown = null; // {name, next, generation} of the list under the tabs
    let generation = 0;

    const countText = (a) => (a.exact ? String(a.count) : `${a.count}+`);

    function tab(v) {
      const count = el('span', { class: 'count', dataset: { count: '' } }, '…');
      const b = el('button', {
        type: 'button', role: 'tab', id: `view-tab-${views.indexOf(v)}`,
        'aria-selected': String(v.name === selected), 'aria-controls': 'view-panel',
        tabindex: v.name === selected || (!selected && views[0] === v) ? '0' : '-1',
        dataset: { view: v.name },
        on: { click: () => select(v.name), keydown: arrows },
      }, user(v.name), ' ', count);
      api('POST', '/v1/search/count', { filter: v.filter }).then((res) => {
        count.textContent = res.ok ? countText(res.data) : '?';
        count.dataset.count = res.ok ? countText(res.data) : '';
      });
      return b;
    }

    // Left and right move between the tabs, as a tab list is used.
    function arrows(e) {
      if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
      const all = [...$('view-tabs').querySelectorAll('[role="tab"]')];
      const i = all.indexOf(e.target) + (e.key === 'ArrowRight' ? 1 : -1);
      const next = all[(i + all.length) % all.length];
      if (next) next.focus();
      e.preventDefault();
    }

    function row(t) {
      return el('tr', { dataset: { task: t.id } },
        el('td', { 'data-label': 'Priority' }, el('span', { class: `priority ${t.priority}`, text: t.priority })),
        el('th', { scope: 'row', 'data-label': 'Task' }, user(t.kind, { class: 'kind' }), user(t.id, { class: 'task-id' })),
        el('td', { 'data-label': 'State' }, t.state),
        el('td', { 'data-label': 'Due' }, t.due_at === null ? 'no due time'
          : el('time', { datetime: Leasehold.isoTime(t.due_at) }, Leasehold.formatTime(t.due_at))),
        el('td', { 'data-label': 'Held by', class: 'names' }, t.assignee ? user(t.assignee) : 'nobody'));
    }

    // One page of the selected view, after what is shown (`more`) or from
    // the start.
    async function page(more) {
      const v = views.find((x) => x.name === selected);
      if (!v) return;
      const mine = more && shown && shown.name === v.name ? shown : { name: v.name, next: null, generation: ++generation };
      const body = { filter: v.filter, sort: v.sort, limit: PAGE };
      if (more) body.after = mine.next;
      const res = await api('POST', '/v1/search', body);
      if (!me || mine.generation !== generation) return;
      if (!res.ok) {
        warn(msg`The view ${user(v.name)} could not be read: ${explain(res.problem, me.actor)}`);
        return;
      }
      const rows = res.data.tasks.map(row);
      if (more) $('view-rows').append(...rows);
      else $('view-rows').replaceChildren(...rows);
      mine.next = res.data.next;
      shown = mine;
      const any = $('view-rows').children.length > 0;
      $('view-table').hidden = !any;
      $('view-empty').hidden = any || Boolean(mine.next);
      $('view-more').hidden = !mine.next;
      $('view-caption').replaceChildren(...msg`Tasks of the view ${user(v.name)}: ${describe(v.filter, v.sort)}`);
      $('view-panel').hidden = false;
    }

    function select(name) {
      selected = name;
      for (const b of $('view-tabs').querySelectorAll('[role="tab"]')) {
        const on = b.dataset.view === name;
        b.setAttribute('aria-selected', String(on));
        b.tabIndex = on ? 0 : -1;
        if (on) $('view-panel').setAttribute('aria-labelledby', b.id);
      }
      page(false);
    }

    // The tabs as the server has them, each counted again. The selected
    // view's list stays as it is, pages shown included, until its tab is
    // clicked again: a change elsewhere never pulls it from under the
    // reader.
    async function load(who) {
      me = who;
      const res = await api('GET', `/v1/views?limit=${MOST_VIEWS}`);
      if (!me) return;
      if (!res.ok) {
        warn(msg`The saved views could not be read: ${explain(res.problem, me.actor)}`);
        return;
      }
      views = res.data.views;
      if (!views.some((v) => v.name === selected)) selected = null;
      const focused = document.activeElement && document.activeElement.closest('#view-tabs [role="tab"]');
      const again = focused ? focused.dataset.view : null;
      $('view-tabs').replaceChildren(...views.map(tab));
      if (again) {
        const b = [...$('view-tabs').children].find((x) => x.dataset.view === again);
        if (b) b.focus();
      }
      $('views-section').hidden = views.length === 0;
      const on = [...$('view-tabs').children].find((x) => x.dataset.view === selected);
      if (on) $('view-panel').setAttribute('aria-labelledby', on.id);
      if (!selected) {
        $('view-panel').hidden = true;
        shown = null;
        generation++;
      }
    }

    // Many changes in a moment read the views once.
    let queued = null;
    function soon(who) {
      me = who;
      clearTimeout(queued);
      queued = setTimeout(() => { if (me) load(me); }, 100);
    }

    function clear() {
      clearTimeout(queued);
      me = null;
      views = [];
      selected = null;
      shown = null;
      generation++;
      $('view-tabs').replaceChildren();
      $('view-rows').replaceChildren();
      $('views-section').hidden = true;
      $('view-panel').hidden = true;
    }

    // Only the inbox has the tabs.
    const more = $('view-more');
    if (more) more.addEventListener('click', () => page(true));
    return { load, soon, clear };
  })();

  // ---- The operator's list and form ------------------------------------------
  const manage = (() => {
    let me = null;
    let reload = () => {};

    // Delete asks twice: the first press arms the button, the second deletes.
    function deleteButton(v) {
      const b = el('button', { type: 'button', class: 'reject', 'aria-label': `Delete the view ${v.name}` }, 'Delete');
      b.addEventListener('click', async () => {
        if (b.dataset.armed !== 'yes') {
          b.dataset.armed = 'yes';
          b.textContent = 'Really delete';
          return;
        }
        b.disabled = true;
        const res = await api('DELETE', path('/v1/views/', v.name), undefined, { revision: v.revision });
        if (res.ok) say(msg`The view ${user(v.name)} is deleted.`);
        else if (res.problem.name === 'stale') warn(msg`The view ${user(v.name)} changed since it was shown; nothing was deleted.`);
        else warn(msg`The view ${user(v.name)}: ${explain(res.problem, me && me.actor)}`);
        reload();
      });
      b.addEventListener('blur', () => {
        if (b.disabled) return;
        b.dataset.armed = 'no';
        b.textContent = 'Delete';
      });
      return b;
    }

    function row(v) {
      return el('tr', { dataset: { view: v.name } },
        el('th', { scope: 'row' }, user(v.name, { class: 'kind' })),
        el('td', { 'data-label': 'Searches for' }, describe(v.filter, v.sort)),
        el('td', { 'data-label': 'Changed' }, v.by ? user(v.by) : 'the service', ', ',
          el('time', { datetime: Leasehold.isoTime(v.at) }, Leasehold.formatTime(v.at))),
        el('td', { class: 'action' }, deleteButton(v)));
    }

    async function load(who, again) {
      me = who;
      reload = again || reload;
      const res = await api('GET', `/v1/views?limit=${MOST_VIEWS}`);
      if (!res.ok) {
        warn(msg`The saved views could not be read: ${explain(res.problem, me && me.actor)}`);
        return null;
      }
      const body = $('views-rows');
      const rows = res.data.views.map((v) => {
        const old = body.querySelector(`tr[data-view="${CSS.escape(v.name)}"]`);
        return old && old.querySelector('button[data-armed="yes"]') ? old : row(v);
      });
      // A row kept is left where it is: moved, it would lose its focus,
      // and with it its armed Delete.
      rows.forEach((r, i) => {
        if (body.children[i] !== r) body.insertBefore(r, body.children[i] || null);
      });
      while (body.children.length > rows.length) body.lastElementChild.remove();
      $('views-table').hidden = rows.length === 0;
      $('views-empty').hidden = rows.length > 0;
      return res.data.views;
    }

    const list = (id) => $(id).value.split(',').map((x) => x.trim()).filter(Boolean);
    const instant = (id) => ($(id).value ? new Date($(id).value).getTime() : null);
    const text = (id) => $(id).value.trim() || null;

    // The form's filter, as the API takes it.
    function filter() {
      const states = [...document.querySelectorAll('#view-form input[name="state"]:checked')].map((c) => c.value);
      const holder = text('vf-assignee');
      return {
        states,
        kinds: list('vf-kinds'),
        role: text('vf-role'),
        assignee: $('vf-nobody').checked ? 'nobody' : (holder ? { actor: holder } : null),
        case: text('vf-case'),
        run: text('vf-run'),
        priority_at_least: $('vf-priority').value || null,
        due_after: instant('vf-due-after'),
        due_before: instant('vf-due-before'),
        created_after: instant('vf-created-after'),
        created_before: instant('vf-created-before'),
        overdue_at: instant('vf-overdue-at'),
      };
    }

    // Only the operator page has the form.
    const form = $('view-form');
    if (form) form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = $('vf-name').value.trim();
      if (!name) {
        warn('Give the view a name.');
        $('vf-name').focus();
        return;
      }
      const body = { filter: filter(), sort: { key: $('vf-sort').value, descending: $('vf-descending').checked } };
      const res = await api('PUT', path('/v1/views/', name), body);
      if (!res.ok) {
        const field = res.problem.field ? msg` (${user(res.problem.field)})` : '';
        warn(msg`The view ${user(name)} was not made${field}: ${explain(res.problem, me && me.actor)}`);
        return;
      }
      warn('');
      say(msg`The view ${user(name)} is made: every reviewer sees it as a tab in the inbox.`);
      $('view-form').reset();
      reload();
    });

    return { load, formFilter: filter };
  })();

  return { tabs, manage, describe, countExact };
})();
