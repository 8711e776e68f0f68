// Codex itself (npm's @openai/codex, run headless: `codex exec`) against `specula serve`'s
// Responses API through a custom provider (wire_api "responses"), on a tiny random-weight qwen3
// model with Qwen3's real vocabulary and chat template. Codex's requests carry developer
// messages, its function tools plus a namespace and web_search tool (dropped here by
// --drop-unsupported-tools, as Codex cannot be told not to send them), reasoning, store false,
// include reasoning.encrypted_content, prompt_cache_key and client_metadata: every one must be
// answered 200, and Codex's own stream parser must accept the replies. A random-weight model never
// ends its turn, so the reply runs to the full context, which Codex must report as an incomplete
// response, not as a malformed or refused one.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, qwen3VocabModel } from "./server_helper.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CODEX = path.join(HERE, "node_modules", ".bin", "codex");

let server;
before(async () => {
  server = await startServer(["-m", qwen3VocabModel(2), "-t", "2", "-c", "12800",
                              "--drop-unsupported-tools"]);
});
after(async () => { if (server) await server.stop(); });

test("codex exec: every request answered 200, every reply parsed", async () => {
  const home = mkdtempSync(path.join(tmpdir(), "specula-codex-"));
  mkdirSync(path.join(home, ".codex"));
  writeFileSync(path.join(home, ".codex", "config.toml"), [
    'model = "qwen3-tiny"',
    'model_provider = "specula"',
    "[model_providers.specula]",
    'name = "specula"',
    `base_url = "${server.base}/v1"`,
    'wire_api = "responses"',
    'env_key = "SPECULA_KEY"',
    "",
  ].join("\n"));
  const env = { ...process.env, HOME: home, SPECULA_KEY: "none" };
  const out = await new Promise((resolve) => {
    execFile(CODEX, ["exec", "--skip-git-repo-check", "say hi"], { env, cwd: home,
                                                                    timeout: 240000 },
             (err, stdout, stderr) => resolve({ code: err?.code ?? 0, text: stdout + stderr }))
      .stdin.end();  // no prompt on stdin: the one argument is the whole task
  });
  const requests = [...server.log().matchAll(/request: POST (\/v1\/responses\S*) (\d+)/g)];
  assert.ok(requests.length >= 1, "Codex reached the server:\n" + out.text);
  for (const [, route, status] of requests) assert.equal(status, "200", `${route}\n${out.text}`);
  assert.match(out.text, /Incomplete response returned, reason: max_output_tokens/, out.text);
  assert.doesNotMatch(out.text, /unexpected status|invalid_request_error/i, out.text);
});
