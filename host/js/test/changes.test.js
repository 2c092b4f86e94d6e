// The record of changes through the JavaScript host, on both stores and
// both isolation modes: a task's life in its history with the actor, the
// states and the times the engine's clock gave, every change once in the
// feed, read on from any position, and a trimmed position answered gone.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { InvalidArgument, MemoryStore, SqliteStore, StoreError, open } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-js-changes-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const task = (id, extra = {}) => ({ id, run: 'r1', kind: 'k', createdAt: 1, ...extra });

const SETUPS = {
  'memory store, worker': () => ({ store: new MemoryStore() }),
  'sqlite store, worker': () => ({ store: new SqliteStore(join(dir, `w-${Math.random()}.db`), { durability: 'none' }) }),
  'memory store, thread': () => ({ store: new MemoryStore(), isolation: 'thread' }),
};

for (const [name, setup] of Object.entries(SETUPS)) {
  test(`a task's life is listed in its history with actor, states and times (${name})`, () => {
    const clock = { at: 1_000 };
    const engine = open({ ...setup(), clock: () => clock.at });
    try {
      const t = engine.tenant('acme');
      const lease = (now) => ({ now, leaseMs: 60_000 });
      t.open(task('pay-1', { candidateRoles: ['approver'], excludedActors: ['eve'] }));
      clock.at = 2_000;
      t.claim('pay-1', 'alice', ['approver']);
      clock.at = 3_000;
      t.release('pay-1', 'alice');
      clock.at = 4_000;
      t.claim('pay-1', 'bob', ['approver'], lease(4_000));
      clock.at = 4_500;
      assert.throws(() => t.claim('pay-1', 'eve', ['approver']));
      clock.at = 5_000;
      t.takeOver('pay-1', 'bob', 'carol', ['approver'], lease(5_000));
      clock.at = 6_000;
      t.renew('pay-1', 'carol', 6_000, 60_000);
      clock.at = 7_000;
      assert.equal(t.settle('pay-1', 'completed', 'carol'), true);
      const h = t.history('pay-1');
      assert.deepEqual(
        h.map((e) => [e.seq, e.at, e.verb, e.actor, e.before, e.after, e.assignee, e.leaseUntil]),
        [
          [1, 1_000, 'open', null, null, 'open', null, null],
          [2, 2_000, 'claim', 'alice', 'open', 'claimed', 'alice', null],
          [3, 3_000, 'release', 'alice', 'claimed', 'open', null, null],
          [4, 4_000, 'claim', 'bob', 'open', 'claimed', 'bob', 64_000],
          [5, 5_000, 'take-over', 'carol', 'claimed', 'claimed', 'carol', 65_000],
          [6, 6_000, 'renew', 'carol', 'claimed', 'claimed', 'carol', 66_000],
          [7, 7_000, 'settle', 'carol', 'claimed', 'completed', 'carol', null],
        ],
      );
      assert.deepEqual(h[0].candidateRoles, ['approver']);
      assert.deepEqual(h[0].excludedActors, ['eve']);
      assert.deepEqual(t.history('pay-1', 5, 1).map((e) => e.seq), [6]);
      // Each entry sits in the feed in order, in the one slot one writer uses.
      assert.deepEqual(
        [1, 2, 3, 4, 5, 6, 7].map((n) => t.entryPlace('pay-1', n)),
        [1n, 2n, 3n, 4n, 5n, 6n, 7n].map((seq) => ({ slot: 0, seq })),
      );
      assert.equal(t.entryPlace('pay-1', 8), null);

      // Every change once in the feed, and a read resumes at any position.
      clock.at = 8_000;
      t.arm({ run: 'r1', effect: 'wake', fireAt: 10 });
      const all = t.feed(null, 100).page;
      assert.equal(all.entries.length, 8);
      assert.equal(all.next, all.head);
      assert.deepEqual(all.entries.slice(0, 7).map((e) => e.change.task.entry.seq), [1, 2, 3, 4, 5, 6, 7]);
      assert.deepEqual(all.entries[7].change.timer, {
        run: 'r1', effect: 'wake', at: 8_000, verb: 'arm', what: 'armed', fireAt: 10, leaseUntil: null,
      });
      const rest = t.feed(all.entries[3].position, 100).page;
      assert.deepEqual(rest.entries, all.entries.slice(4));

      // Trimming past a position answers gone, with the feed's end.
      const trimmed = t.trim({ keep: 2 });
      assert.deepEqual(trimmed, { feedRemoved: 6, historyRemoved: 6, more: false });
      assert.deepEqual(t.feed(all.entries[1].position, 10), { gone: all.head });
      assert.deepEqual(t.history('pay-1').map((e) => e.seq), [7]);
      assert.deepEqual(t.check(), []);
      assert.throws(() => t.trim({}), (e) => e instanceof StoreError && e.case === 'invalid');
      assert.throws(() => t.history('pay-1', -1), InvalidArgument);
    } finally {
      engine.close();
    }
  });
}

test('the clock must answer integer milliseconds', () => {
  assert.throws(() => open({ store: new MemoryStore(), clock: 5 }), TypeError);
  const engine = open({ store: new MemoryStore(), clock: () => 1.5 });
  try {
    assert.throws(() => engine.tenant('acme').open(task('a')), /clock/);
  } finally {
    engine.close();
  }
});
