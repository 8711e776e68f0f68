// The web UI (GET /) in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core):
// the page loads, a message gets a streamed reply equal to the server's greedy chat answer, the
// reply is made of token spans coloured as accepted drafts or target tokens, and the live
// statistics fill in. A screenshot goes to the build directory (web_ui.png).
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { chromium } from "playwright-core";
import { startServer, TARGET, DRAFT, ARTIFACTS } from "./server_helper.mjs";

let server, browser;

before(async () => {
  server = await startServer(["-m", TARGET(), "-md", DRAFT(), "--draft", "4", "--parallel", "2"]);
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"],
                                    timeout: 60000 });
});
after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
});

test("chat in the page streams a coloured reply", async () => {
  const question = "Tell me a story about a frog.";
  const expected = await fetch(server.base + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: question }], max_tokens: 128,
                           temperature: 0 }),
  }).then((r) => r.json());
  const reply = expected.choices[0].message.content;
  assert.ok(reply.length > 0);

  const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(server.base + "/", { timeout: 30000 });
  assert.equal(await page.title(), "Specula chat");
  await page.fill("#input", question);
  await page.press("#input", "Enter");
  await page.waitForSelector(".msg.assistant[data-done='1']", { timeout: 60000 });

  const shown = await page.textContent(".msg.assistant");
  assert.equal(shown, reply);
  const drafted = await page.locator(".msg.assistant .tok.drafted").count();
  const target = await page.locator(".msg.assistant .tok.target").count();
  assert.ok(drafted > 0, "accepted draft tokens are coloured");
  assert.ok(target > 0, "target tokens are coloured");
  const colours = await page.evaluate(() => [".tok.drafted", ".tok.target"].map(
    (s) => getComputedStyle(document.querySelector(s)).backgroundColor));
  assert.notEqual(colours[0], colours[1]);
  assert.match(await page.textContent("#tps"), /^\d+(\.\d+)?$/);
  assert.match(await page.textContent("#acc"), /%/);
  assert.equal(Number(await page.textContent("#ntok")), drafted + target);
  assert.deepEqual(errors, []);
  await page.screenshot({ path: path.join(ARTIFACTS, "web_ui.png"), fullPage: true });
});
