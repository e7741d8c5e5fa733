// Writes every ```js and ```ts block of the client's README and of docs/client.md to
// test/types/snippets/ as a module of its own, so that `tsc -p test/types` (npm test) type-checks
// the documentation's code against index.d.ts and world.d.ts. A block right after a line
// `<!-- not type-checked: why -->` is left out, and says why.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const PAGES = [join(HERE, '../../README.md'), join(HERE, '../../../../docs/client.md')];
const OUT = join(HERE, 'snippets');

export function blocks(markdown) {
  const found = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(js|ts)$/.exec(lines[i]);
    if (!open) continue;
    const skipped = i > 0 && lines[i - 1].startsWith('<!-- not type-checked:');
    const start = i + 1;
    do i++;
    while (i < lines.length && lines[i] !== '```');
    if (!skipped) found.push({ lang: open[1], line: start, code: lines.slice(start, i).join('\n') });
  }
  return found;
}

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
let n = 0;
for (const page of PAGES) {
  const name = relative(join(HERE, '../../../..'), page).replace(/[^A-Za-z0-9]+/g, '-');
  for (const block of blocks(readFileSync(page, 'utf8'))) {
    // Each block is a module of its own (no shared globals); where it came from is its first line.
    const file = join(OUT, `${name}-${block.line}.${block.lang}`);
    writeFileSync(file, `// ${relative(join(HERE, '../../../..'), page)}:${block.line}\n${block.code}\nexport {};\n`);
    n++;
  }
}
console.log(`test/types/snippets: ${n} code blocks of the documentation`);
