// Bundles the chat page (page/app.jsx: React and useStream from node_modules) into dist/ with
// esbuild, offline: nothing is fetched at build time or when the page loads.
// Usage: node build.mjs [out dir]
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";

const out = process.argv[2] ?? "dist";
mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["page/app.jsx"],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "chrome120",
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  outfile: join(out, "app.js"),
  logLevel: "warning",
});
for (const name of ["index.html", "chat.css"]) copyFileSync(join("page", name), join(out, name));
