// The viewer page (daemon/web/) runs this package's browser build: core.js,
// browser.js and protocol.js, copied from dist/ after `tsc`.
//   node scripts/web-copy.mjs          copy
//   node scripts/web-copy.mjs --check  fail if daemon/web's copies differ from dist/
import { copyFileSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "dist");
const web = join(here, "..", "..", "..", "daemon", "web");
const FILES = ["core.js", "browser.js", "protocol.js"];
const check = process.argv.includes("--check");
let stale = [];
for (const name of FILES) {
  if (check) {
    let current = "";
    try { current = readFileSync(join(web, name), "utf8"); } catch { /* missing: stale */ }
    if (current !== readFileSync(join(dist, name), "utf8")) stale.push(name);
  } else {
    copyFileSync(join(dist, name), join(web, name));
  }
}
if (stale.length) {
  console.error(`daemon/web/${stale.join(", ")} differ from this build: run \`npm run build && npm run web\` in clients/typescript`);
  process.exit(1);
}
console.log(check ? "daemon/web has this build" : `copied ${FILES.join(", ")} to daemon/web`);
