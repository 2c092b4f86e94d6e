// Writes the runnable examples of the Markdown files given into a folder,
// one file each, and prints their names: a fenced code block is runnable
// when its info string is its language followed by the word `runnable`
// (```sh runnable, ```js runnable, ```python runnable). Markdown is parsed
// by mdast-util-from-markdown (remark's parser), so what counts as a block
// is what GitHub and remark see.
//
//   node extract.mjs OUT_DIR FILE.md…
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fromMarkdown } from 'mdast-util-from-markdown';

const extensions = { sh: 'sh', js: 'mjs', python: 'py' };
const [outDir, ...files] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });
let bad = 0;

function* codeBlocks(node) {
  if (node.type === 'code') yield node;
  for (const child of node.children ?? []) yield* codeBlocks(child);
}

for (const file of files) {
  for (const block of codeBlocks(fromMarkdown(readFileSync(file, 'utf8')))) {
    if (!(block.meta ?? '').split(/\s+/).includes('runnable')) continue;
    const where = `${file}:${block.position.start.line}`;
    const ext = extensions[block.lang];
    if (!ext) {
      console.error(`${where}: a runnable block must be sh, js or python, not ${block.lang}`);
      bad += 1;
      continue;
    }
    // The name says where the block is: README.md:75 becomes README.md-L75.mjs.
    const name = `${file.replaceAll('/', '_')}-L${block.position.start.line}.${ext}`;
    writeFileSync(`${outDir}/${name}`, block.value + '\n');
    console.log(name);
  }
}
process.exit(bad ? 1 : 0);
