// Builds what the package runs: the component file (from the Rust CLI, or a
// given .wasm) and jco's transpiled bindings for it, under gen/.
//
//   npm run build                      # runs `leasehold component --out` via cargo
//   npm run build -- --wasm FILE       # transpiles FILE instead
//   LEASEHOLD_WASM=FILE npm run build  # the same
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, '..');
const repo = resolve(pkg, '..', '..');
const gen = join(pkg, 'gen');

const flag = process.argv.indexOf('--wasm');
const given = flag >= 0 ? process.argv[flag + 1] : process.env.LEASEHOLD_WASM;

rmSync(gen, { recursive: true, force: true });
mkdirSync(gen, { recursive: true });
const wasm = join(gen, 'leasehold.wasm');
if (given) {
  copyFileSync(resolve(given), wasm);
} else {
  // The exact bytes the Rust host embeds, so every host runs the same ones.
  execFileSync('cargo', ['run', '--quiet', '-p', 'leasehold-cli', '--', 'component', '--out', wasm], {
    cwd: repo,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
const jco = join(pkg, 'node_modules', '.bin', 'jco');
// Sync instantiation: every call is synchronous (better-sqlite3 is too), and
// the package instantiates the component once per tenant with its own imports.
execFileSync(jco, [
  'transpile', wasm, '-o', join(gen, 'bindings'), '--name', 'leasehold',
  '--instantiation', 'sync', '--no-typescript', '--quiet',
], { stdio: 'inherit' });
const sha256 = createHash('sha256').update(readFileSync(wasm)).digest('hex');
writeFileSync(join(gen, 'leasehold.wasm.sha256'), `${sha256}\n`);
console.log(`${sha256}  ${wasm}`);
