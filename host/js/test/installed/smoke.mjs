// Runs one scenario through the installed package, from a project outside
// the repository (tests/run copies this file and test/support/scenarios.js
// there after `npm install` of the packed tarball). Exits non-zero on any
// failing step.
//
//   node smoke.mjs SCENARIO.json
import { readFileSync } from 'node:fs';

import * as lh from '@leasehold/host';

import { runScenario } from './scenarios.js';

const scenario = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let failed = 0;
for (const [kind, store] of [['memory', new lh.MemoryStore()], ['sqlite', new lh.SqliteStore(':memory:')]]) {
  const clock = { at: 0 };
  const engine = lh.open({ store, clock: () => clock.at });
  const failures = runScenario(scenario, engine, store, lh, clock);
  engine.close();
  console.log(`installed @leasehold/host ${lh.COMPONENT_SHA256.slice(0, 12)}: scenario ${scenario.name} on ${kind}: ${failures.length ? 'FAILED' : 'ok'}`);
  for (const f of failures) console.log(`  ${f}`);
  failed += failures.length;
}
process.exit(failed ? 1 : 0);
