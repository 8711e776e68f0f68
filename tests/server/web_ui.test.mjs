// The web UI (GET /) in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core):
// the page loads, a message gets a streamed reply equal to the server's greedy chat answer, the
// reply is made of token spans coloured as accepted drafts or target tokens, and the live
// statistics fill in; the system prompt reaches the server (same reply as the API with the same
// system + user messages), the draft-length field sets the request's draft length (0: no draft
// tokens, 4: some; 65: the server's 400 message is shown), "New chat" clears the log and the
// conversation, and against a server started with --api-key the page asks for the key until it is
// entered (and remembers it). Screenshots go to the build directory (web_ui.png: a speculative
// reply; web_ui_api_key.png: the key request).
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { chromium } from "playwright-core";
import { startServer, TARGET, DRAFT, ARTIFACTS } from "./server_helper.mjs";

const KEY = "sk-web-ui-test";
let server, keyServer, browser;

before(async () => {
  server = await startServer(["-m", TARGET(), "-md", DRAFT(), "--draft", "4", "--parallel", "2",
                                "--max-model-len", "512"]);
  keyServer = await startServer(["-m", TARGET(), "--api-key", KEY]);
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"],
                                    timeout: 60000 });
});
after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
  if (keyServer) await keyServer.stop();
});

// The server's greedy chat reply to `messages`, over the API.
async function apiReply(base, messages, key) {
  const headers = { "Content-Type": "application/json" };
  if (key) headers.Authorization = "Bearer " + key;
  const r = await fetch(base + "/v1/chat/completions", {
    method: "POST", headers, body: JSON.stringify({ messages, max_tokens: 128, temperature: 0 }),
  });
  assert.equal(r.status, 200);
  const reply = (await r.json()).choices[0].message.content;
  assert.ok(reply.length > 0);
  return reply;
}

async function openPage(base) {
  const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(base + "/", { timeout: 30000 });
  assert.equal(await page.title(), "Specula chat");
  return { page, errors };
}

// Sends `text` and waits for the n-th assistant reply (1-based) to finish; returns its locator.
async function ask(page, text, n = 1) {
  await page.fill("#input", text);
  await page.press("#input", "Enter");
  const reply = page.locator(".msg.assistant[data-done='1']").nth(n - 1);
  await reply.waitFor({ timeout: 60000 });
  return reply;
}

const count = (page, sel) => page.locator(sel).count();

test("chat in the page streams a coloured reply", async () => {
  const question = "Tell me a story about a frog.";
  const reply = await apiReply(server.base, [{ role: "user", content: question }]);

  const { page, errors } = await openPage(server.base);
  const shown = await ask(page, question);
  assert.equal(await shown.textContent(), reply);
  const drafted = await count(page, ".msg.assistant .tok.drafted");
  const target = await count(page, ".msg.assistant .tok.target");
  assert.ok(drafted > 0, "accepted draft tokens are coloured");
  assert.ok(target > 0, "target tokens are coloured");
  const colours = await page.evaluate(() => [".tok.drafted", ".tok.target"].map(
    (s) => getComputedStyle(document.querySelector(s)).backgroundColor));
  assert.notEqual(colours[0], colours[1]);
  assert.match(await page.textContent("#tps"), /^\d+(\.\d+)?$/);
  assert.match(await page.textContent("#acc"), /%/);
  assert.equal(Number(await page.textContent("#ntok")), drafted + target);
  assert.deepEqual(errors, []);
  await page.close();
});

test("system prompt, draft length and New chat", async () => {
  const question = "Once upon a time there was a cat.";
  const system = "You are a storyteller who loves dogs.";
  const plain = await apiReply(server.base, [{ role: "user", content: question }]);
  const withSystem = await apiReply(server.base, [{ role: "system", content: system },
                                                  { role: "user", content: question }]);
  assert.notEqual(withSystem, plain, "the system prompt changes the greedy reply");

  const { page, errors } = await openPage(server.base);
  await page.fill("#system", system);
  let shown = await ask(page, question);
  assert.equal(await shown.textContent(), withSystem, "the system prompt reached the server");

  // New chat: the log and the statistics are cleared, and the next question starts afresh
  // (the same greedy reply as a lone request, not a second turn).
  await page.click("#newchat");
  assert.equal(await count(page, "#log .msg"), 0);
  assert.equal(await page.textContent("#ntok"), "0");
  await page.fill("#system", "");
  await page.fill("#draft", "0");
  shown = await ask(page, question);
  assert.equal(await shown.textContent(), plain);
  assert.equal(await count(page, ".msg.user"), 1, "New chat forgot the first turn");
  assert.equal(await count(page, ".msg.assistant .tok.drafted"), 0, "draft 0: plain decoding");
  assert.ok(await count(page, ".msg.assistant .tok.target") > 0);

  await page.click("#newchat");
  await page.fill("#draft", "4");
  shown = await ask(page, question);
  assert.equal(await shown.textContent(), plain, "speculative greedy reply = plain reply");
  assert.ok(await count(page, ".msg.assistant .tok.drafted") > 0, "draft 4: accepted drafts");
  assert.match(await page.textContent("#acc"), /%/);
  assert.deepEqual(errors, []);
  await page.screenshot({ path: path.join(ARTIFACTS, "web_ui.png"), fullPage: true });

  // A draft length the server refuses shows the server's message, naming the field.
  await page.fill("#draft", "65");
  await page.fill("#input", question);
  await page.press("#input", "Enter");
  const err = page.locator(".msg.error");
  await err.waitFor({ timeout: 30000 });
  assert.match(await err.textContent(), /num_speculative_tokens/);
  assert.deepEqual(errors, []);
  await page.close();
});

test("a server with --api-key: the page asks for the key, then streams", async () => {
  const question = "Tell me a story about a frog.";
  const reply = await apiReply(keyServer.base, [{ role: "user", content: question }], KEY);

  const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(keyServer.base + "/", { timeout: 30000 });
  await page.waitForFunction(() => document.getElementById("model").textContent !== "…");
  assert.equal(await page.textContent("#model"), "(API key needed)");
  await page.fill("#input", question);
  await page.press("#input", "Enter");
  const err = page.locator(".msg.error");
  await err.waitFor({ timeout: 30000 });
  assert.match(await err.textContent(), /API key/);
  assert.equal(await count(page, ".msg.assistant"), 0);
  await page.screenshot({ path: path.join(ARTIFACTS, "web_ui_api_key.png") });

  // A wrong key is refused the same way.
  await page.fill("#apikey", "wrong");
  await page.fill("#input", question);
  await page.press("#input", "Enter");
  await page.locator(".msg.error").nth(1).waitFor({ timeout: 30000 });
  assert.match(await page.locator(".msg.error").nth(1).textContent(), /API key/);

  await page.fill("#apikey", KEY);
  await page.dispatchEvent("#apikey", "change");
  await page.waitForFunction(() => !/key|…/.test(document.getElementById("model").textContent));
  assert.ok((await page.textContent("#model")).length > 0, "the model list loads with the key");
  const shown = await ask(page, question);
  assert.equal(await shown.textContent(), reply);

  // The key is kept in localStorage: a reloaded page sends it without asking.
  await page.reload();
  assert.equal(await page.inputValue("#apikey"), KEY);
  await page.fill("#input", question);
  await page.press("#input", "Enter");
  const again = page.locator(".msg.assistant[data-done='1']");
  await again.waitFor({ timeout: 60000 });
  assert.equal(await again.textContent(), reply);
  assert.equal(await count(page, ".msg.error"), 0);
  assert.deepEqual(errors, []);
  await context.close();
});
