// Claude Code itself (npm's @anthropic-ai/claude-code, run headless: `claude -p`) against
// `specula serve`'s Messages API, on a tiny random-weight qwen3 model with Qwen3's real
// vocabulary and chat template. Its requests are what it sends to Anthropic (a ~12k-token system
// prompt with turn-level system messages, 20 tools, adaptive thinking, output_config.effort,
// context_management, max_tokens 128000): every one must be answered 200, and its own stream
// parser must accept the replies. A random-weight model never ends its turn, so each reply runs
// to the full context, which Claude Code must recognise as such (the stop reason
// model_context_window_exceeded), not as a malformed or refused response.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, qwen3VocabModel } from "./server_helper.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CLAUDE = path.join(HERE, "node_modules", ".bin", "claude");
const KEY = "sk-ant-local";

let server;
before(async () => {
  server = await startServer(["-m", qwen3VocabModel(2), "-t", "2", "-c", "12800", "--api-key",
                              KEY]);
});
after(async () => { if (server) await server.stop(); });

test("claude -p: every request answered 200, every reply parsed", async () => {
  const home = mkdtempSync(path.join(tmpdir(), "specula-claude-"));
  const env = { ...process.env, HOME: home, ANTHROPIC_BASE_URL: server.base,
                ANTHROPIC_API_KEY: KEY, DISABLE_TELEMETRY: "1", DISABLE_AUTOUPDATER: "1",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" };
  const out = await new Promise((resolve) => {
    execFile(CLAUDE, ["-p", "Say hi", "--max-turns", "1"], { env, cwd: home, timeout: 240000 },
             (err, stdout, stderr) => resolve({ code: err?.code ?? 0, text: stdout + stderr }))
      .stdin.end();  // no prompt on stdin: the one argument is the whole task
  });
  const requests = [...server.log().matchAll(/request: POST (\/v1\/messages\S*) (\d+)/g)];
  assert.ok(requests.length >= 1, "Claude Code reached the server:\n" + out.text);
  for (const [, route, status] of requests) assert.equal(status, "200", `${route}\n${out.text}`);
  // Claude Code understood the replies: a full context, not a malformed response or an error.
  assert.match(out.text, /context window/i, out.text);
  assert.doesNotMatch(out.text, /API Error: [45]\d\d/, out.text);
});
