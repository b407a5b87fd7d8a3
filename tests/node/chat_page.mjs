// The chat page of moex serve in headless Chromium (tests/cli_serve_page.sh):
// types a message, waits for the streamed reply and the tokens/s line, then
// stops a long reply with the stop button. Saves a screenshot.
// Usage: node chat_page.mjs URL SCREENSHOT USER_DATA_DIR
import { chromium } from 'playwright-core';

const [url, screenshot, userDataDir] = process.argv.slice(2);
let failures = 0;
function check(cond, what) {
  console.log((cond ? 'ok: ' : 'FAIL: ') + what);
  if (!cond) failures++;
}
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(60000);
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById('model').textContent !== 'moex');
  check((await page.textContent('#model')).length > 0, 'the page names the model');
  await page.fill('#max_tokens', '24');
  await page.fill('#temperature', '0');
  await page.fill('#system', 'Be brief.');
  await page.fill('#input', 'Hello there');
  await page.click('#send');
  await page.waitForSelector(".assistant[data-done='true']");
  const reply = await page.textContent('.assistant');
  check(reply.length > 0 && !reply.includes('[error'), `a streamed reply (${JSON.stringify(reply.slice(0, 60))})`);
  const status = await page.textContent('#status');
  check(/\d+ tokens in [\d.]+ s, [\d.]+ tokens\/s/.test(status), `tokens/s shown (${status})`);
  check((await page.textContent('.user')) === 'Hello there', 'the message is shown');
  await page.screenshot({ path: screenshot, fullPage: true });

  // A long reply, stopped.
  await page.fill('#max_tokens', '2000');
  await page.fill('#input', 'Go on');
  await page.click('#send');
  await page.waitForFunction(() => /\d+ tokens,/.test(document.getElementById('status').textContent));
  await page.click('#stop');
  await page.waitForFunction(() => document.querySelectorAll(".assistant[data-done='true']").length === 2);
  const stopped = await page.textContent('#status');
  check(stopped.includes('(stopped)') && !(await page.isDisabled('#send')), `the stop button ends the reply (${stopped})`);
} finally {
  await context.close();
}
console.log(failures ? `chat_page: ${failures} failed` : 'chat_page: all passed');
process.exit(failures ? 1 : 0);
