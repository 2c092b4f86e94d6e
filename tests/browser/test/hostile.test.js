// Safe by default: task text holding HTML and script shows as characters
// and runs nothing; the pages are served under a strict CSP; the token
// stays out of every URL; a bad token is refused in words; and behind an
// authenticating proxy (which adds Authorization itself) the page works
// without a token of its own.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, launch, scenario, signIn, live, openTask, waitQueued, waitMine, TENANT,
} from '../support/harness.js';

const users = {
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
const KIND = '<img src=x onerror="alert(1)"><script>alert(2)</script>';
const NOTE = '</pre><script>alert(3)</script><b onmouseover=alert(4)>bold</b>';
let server;
let browser;
before(async () => {
  server = await startServer(users);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

test('HTML and script in a task are shown as text and run nothing', async () => {
  await scenario(browser, 'hostile', async ({ page }) => {
    const id = 'evil-"><svg onload=alert(5)>';
    await openTask(server, { id, kind: KIND, justification: { note: NOTE, '<i>key</i>': '"quoted" & <u>' } });
    const a = await page('alice');
    await signIn(a, server.base, server.tokens.alice);
    await live(a);
    await waitQueued(a, id);
    const row = a.locator('#queue-rows tr').first();
    assert.equal(await row.locator('.kind').textContent(), KIND);
    assert.equal(await row.locator('.task-id').textContent(), id);
    assert.match(await row.locator('.justification').textContent(), /note: <\/pre><script>alert\(3\)<\/script><b onmouseover=alert\(4\)>bold<\/b>/);
    await a.getByRole('button', { name: `Claim ${KIND} (${id})` }).click();
    await waitMine(a, id);
    const card = a.locator('#mine .card').first();
    await card.locator('summary').click();
    assert.deepEqual(JSON.parse(await card.locator('pre').textContent()), { note: NOTE, '<i>key</i>': '"quoted" & <u>' });
    await card.locator('.justification').hover();
    // Not one element came from task text.
    const injected = await a.evaluate(() => document.querySelectorAll('main img, main svg, main script, main b, main i, main u').length);
    assert.equal(injected, 0);
    // assertClean (in scenario) fails on any dialog or console error.
  });
});

test('the pages are served under a strict policy, and the token never enters a URL', async () => {
  await scenario(browser, 'policy', async ({ page }) => {
    const a = await page('alice');
    for (const route of ['/', '/operator', '/assets/inbox.js', '/assets/style.css']) {
      const res = await a.goto(server.base + route);
      const h = res.headers();
      assert.equal(res.status(), 200, route);
      assert.match(h['content-security-policy'], /default-src 'self'/, route);
      assert.match(h['content-security-policy'], /script-src 'self';/, route);
      assert.match(h['content-security-policy'], /frame-ancestors 'none'/, route);
      assert.doesNotMatch(h['content-security-policy'], /unsafe|https?:/, route);
      assert.equal(h['x-content-type-options'], 'nosniff', route);
    }
    await a.goto(`${server.base}/`);
    await a.locator('#token').fill('lh_not-a-real-token');
    await a.locator('#token').press('Enter');
    await a.locator('#alert').filter({ hasText: 'That token was not accepted.' }).waitFor();
    await signIn(a, server.base, server.tokens.alice);
    assert.ok(!a.url().includes(server.tokens.alice));
    assert.equal(await a.evaluate(() => sessionStorage.getItem('leasehold.token')), server.tokens.alice);
    // Reloads keep the session, with no sign-in form shown; signing out
    // forgets the token.
    for (let i = 0; i < 2; i++) {
      await a.reload();
      await a.locator('#who').filter({ hasText: 'Signed in as alice' }).waitFor();
      assert.equal(await a.locator('#signin').isVisible(), false);
      assert.equal(await a.evaluate(() => sessionStorage.getItem('leasehold.token')), server.tokens.alice);
    }
    await a.getByRole('button', { name: 'Sign out' }).click();
    await a.locator('#signin').waitFor();
    assert.equal(await a.evaluate(() => sessionStorage.getItem('leasehold.token')), null);
  });
});

test('behind an authenticating proxy the page works with no token of its own', async () => {
  await scenario(browser, 'proxy', async ({ page }) => {
    await openTask(server, { id: 'pay-proxy', kind: 'approve-payment' });
    // The proxy's part: every request from this browser carries the
    // credential, as a proxy in front of the server would add it.
    const a = await page('alice', { extraHTTPHeaders: { Authorization: `Bearer ${server.tokens.alice}` } });
    await a.goto(`${server.base}/`);
    await a.locator('#who').filter({ hasText: `Signed in as alice (finance) · reviewer` }).waitFor();
    assert.equal(await a.locator('#signin').isVisible(), false);
    assert.equal(await a.locator('#sign-out').isVisible(), false, 'nothing to sign out of here');
    assert.equal(await a.evaluate(() => sessionStorage.getItem('leasehold.token')), null);
    await live(a);
    await waitQueued(a, 'pay-proxy');
    assert.ok(TENANT);
  });
});

test('times are shown in the browser’s time zone', async () => {
  await scenario(browser, 'time-zone', async ({ page }) => {
    const due = Date.UTC(2030, 0, 15, 0, 0);
    await openTask(server, { id: 'pay-tz', kind: 'approve-payment', due_at: due });
    const a = await page('alice', { timezoneId: 'Pacific/Auckland' });
    await signIn(a, server.base, server.tokens.alice);
    await waitQueued(a, 'pay-tz');
    const shown = await a.locator('#queue-rows tr[data-task="pay-tz"] time').textContent();
    // Midnight UTC is 13:00 the same day in Auckland's summer.
    assert.match(shown, /15 Jan 2030/);
    assert.match(shown, /13:00/);
    assert.equal(await a.locator('#queue-rows tr[data-task="pay-tz"] time').getAttribute('datetime'), '2030-01-15T00:00:00.000Z');
  });
});
