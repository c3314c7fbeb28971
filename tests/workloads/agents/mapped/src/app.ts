// dejavu fixture: the TypeScript source of dist/app.js, which was compiled from it by hand
// as esbuild compiles a module (its code on one generated line, an inline source map).
// With Node.js's source maps on, the agent names a call at this file's lines.
import * as fs from 'fs';

function readConfig(path: string): string {
  return fs.readFileSync(path, 'utf8'); // @site read readConfig
}

const path = process.argv[2];
for (let i = 0; i < 20; i++) {
  readConfig(path);
}
