// Builds what the package runs: the component file (from the Rust CLI, or a
// given .wasm) and jco's transpiled bindings for it, under gen/; and, for
// the tests, the hostile fixture component's bindings under gen/hostile/.
//
//   npm run build                                   # both from cargo
//   npm run build -- --wasm FILE --hostile FILE     # transpiles the given files instead
//   LEASEHOLD_WASM=FILE npm run build               # the same as --wasm
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, '..');
const repo = resolve(pkg, '..', '..');
const gen = join(pkg, 'gen');

const flag = (name) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const given = flag('--wasm') ?? process.env.LEASEHOLD_WASM;
const hostileGiven = flag('--hostile');

const cargo = (args) => execFileSync('cargo', args, { cwd: repo, stdio: ['ignore', 'ignore', 'inherit'] });

/**
 * jco defines the class of an export's error result inside `instantiate`,
 * one class per instance and none exported. The bindings are patched to
 * derive it from one exported class, so the engine recognises an error
 * result by class rather than by a constructor's name.
 */
function exportErrorResult(file) {
  const js = readFileSync(file, 'utf8');
  const decl = 'class ComponentError extends Error {';
  const at = js.indexOf(decl);
  if (at < 0 || js.indexOf(decl, at + 1) >= 0) {
    throw new Error(`${file}: expected jco to declare ComponentError once; the pinned jco version changed its output`);
  }
  writeFileSync(
    file,
    '/** The class of every error result an export throws (patched in by scripts/build.mjs). */\n' +
      'export class ErrorResult extends Error {}\n' +
      js.replace(decl, 'class ComponentError extends ErrorResult {'),
  );
}

/**
 * jco wraps every export in `WebAssembly.promising` inside a try, and uses
 * the export itself when that throws, as it does where V8 has no JSPI
 * (Node 20 and 22). Each throw had V8 render the call's text by parsing
 * `instantiate` again, which is most of a megabyte: every instance took a
 * large part of a call's deadline to make. The bindings are patched to ask
 * once, at load, and to use the export itself where there is no
 * `promising`, which is what the catch did.
 */
function promisingOnce(file) {
  const js = readFileSync(file, 'utf8');
  const call = 'WebAssembly.promising(';
  const name = 'leaseholdPromising';
  if (js.includes(name)) throw new Error(`${file}: already names ${name}; the pinned jco version changed its output`);
  writeFileSync(
    file,
    '/** `WebAssembly.promising`, or the export itself without JSPI (patched in by scripts/build.mjs). */\n' +
      `const ${name} = typeof WebAssembly.promising === 'function' ? WebAssembly.promising : (f) => f;\n` +
      js.replaceAll(call, `${name}(`),
  );
}

function transpile(wasm, out) {
  const jco = join(pkg, 'node_modules', '.bin', 'jco');
  // Sync instantiation: every call is synchronous (better-sqlite3 is too), and
  // the package instantiates the component per tenant with its own imports.
  execFileSync(jco, [
    'transpile', wasm, '-o', out, '--name', 'leasehold',
    '--instantiation', 'sync', '--no-typescript', '--quiet',
  ], { stdio: 'inherit' });
  exportErrorResult(join(out, 'leasehold.js'));
  promisingOnce(join(out, 'leasehold.js'));
}

rmSync(gen, { recursive: true, force: true });
mkdirSync(gen, { recursive: true });
const wasm = join(gen, 'leasehold.wasm');
if (given) {
  copyFileSync(resolve(given), wasm);
} else {
  // The exact bytes the Rust host embeds, so every host runs the same ones.
  cargo(['run', '--quiet', '-p', 'leasehold-cli', '--', 'component', '--out', wasm]);
}
transpile(wasm, join(gen, 'bindings'));
const sha256 = createHash('sha256').update(readFileSync(wasm)).digest('hex');
writeFileSync(join(gen, 'leasehold.wasm.sha256'), `${sha256}\n`);
console.log(`${sha256}  ${wasm}`);

// The component the sandbox tests run: it loops, hoards memory and answers
// what the contract rules out on purpose. Not part of the package.
let hostile = hostileGiven && resolve(hostileGiven);
if (!hostile) {
  // A target directory of its own: built alone, the fixture's std does not
  // meet the no_std guest's features.
  const target = join(process.env.CARGO_TARGET_DIR ?? join(repo, 'target'), 'hostile-wasm');
  execFileSync('cargo', ['build', '--quiet', '--release', '--target', 'wasm32-wasip2', '-p', 'leasehold-hostile'], {
    cwd: repo,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, CARGO_TARGET_DIR: target },
  });
  hostile = join(target, 'wasm32-wasip2', 'release', 'leasehold_hostile.wasm');
}
transpile(hostile, join(gen, 'hostile'));
