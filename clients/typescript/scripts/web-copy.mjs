// The viewer page (daemon/web/) runs this package's browser build: core.js,
// browser.js and protocol.js, copied from dist/ after `tsc`, and two libraries
// bundled at build time from the npm registry (no CDN: the page's CSP allows
// 'self' only): marked (markdown → HTML), DOMPurify (that HTML made safe) and
// highlight.js (code blocks coloured, its common languages, GitHub's colours),
// copied from node_modules as marked.js, purify.js, highlight.js and
// highlight.css without their source-map comments.
//   node scripts/web-copy.mjs          copy
//   node scripts/web-copy.mjs --check  fail if daemon/web's copies differ
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "dist");
const modules = join(here, "..", "node_modules");
const web = join(here, "..", "..", "..", "daemon", "web");
// [source, name in daemon/web]
const FILES = [
  [join(dist, "core.js"), "core.js"],
  [join(dist, "browser.js"), "browser.js"],
  [join(dist, "protocol.js"), "protocol.js"],
  [join(modules, "marked", "lib", "marked.esm.js"), "marked.js"],
  [join(modules, "dompurify", "dist", "purify.es.mjs"), "purify.js"],
  [join(modules, "@highlightjs", "cdn-assets", "es", "highlight.min.js"), "highlight.js"],
  [join(modules, "@highlightjs", "cdn-assets", "styles", "github.min.css"), "highlight.css"],
];
const check = process.argv.includes("--check");
const built = (source) => readFileSync(source, "utf8").replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n");
let stale = [];
for (const [source, name] of FILES) {
  const want = built(source);
  if (check) {
    let current = "";
    try { current = readFileSync(join(web, name), "utf8"); } catch { /* missing: stale */ }
    if (current !== want) stale.push(name);
  } else {
    writeFileSync(join(web, name), want);
  }
}
if (stale.length) {
  console.error(`daemon/web/${stale.join(", ")} differ from this build: run \`npm run build && npm run web\` in clients/typescript`);
  process.exit(1);
}
console.log(check ? "daemon/web has this build" : `copied ${FILES.map(([, n]) => n).join(", ")} to daemon/web`);
