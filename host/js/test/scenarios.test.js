// The scenario suite through the JavaScript host, on both stores. Prints the
// SHA-256 of the component it ran, as the Rust and Python runners do.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import * as lh from '../src/index.js';

const { COMPONENT_SHA256, MemoryStore, SqliteStore, open } = lh;
import { runScenario, scenarioFiles } from './support/scenarios.js';

console.log(`scenarios: component sha256 ${COMPONENT_SHA256}`);

const dir = mkdtempSync(join(tmpdir(), 'leasehold-js-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const STORES = {
  memory: () => new MemoryStore(),
  sqlite: (name) => new SqliteStore(join(dir, `${name}.db`), { durability: 'none' }),
};

for (const { file, scenario } of scenarioFiles()) {
  for (const [kind, make] of Object.entries(STORES)) {
    test(`scenario ${scenario.name} (${file}) answers as written on the ${kind} store`, () => {
      const store = make(scenario.name);
      const clock = { at: 0 };
      const engine = open({ store, clock: () => clock.at });
      try {
        const failures = runScenario(scenario, engine, store, lh, clock);
        assert.deepEqual(failures, [], `${scenario.name}:\n${failures.join('\n')}`);
      } finally {
        engine.close();
      }
    });
  }
}
