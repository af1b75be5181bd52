// The sign-in page in a real browser (headless Chromium through playwright-core): sign in, see
// the client name and scopes, Authorize → redirect with a code; Deny → access_denied. A
// screenshot lands in test/artifacts/ for humans.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, dialect, startTestPds, xrpc, type TestPds } from './harness.js'
import { dpopKey, loopbackClientId, par } from './oauth-helpers.js'

const CHROMIUM = '/usr/bin/chromium'
const ARTIFACTS = new URL('./artifacts/', import.meta.url).pathname
const d = existsSync(CHROMIUM) ? describe : describe.skip

let pds: TestPds
let browser: BrowserContext
let profile: string
let target: Server
let redirect: string
const PASSWORD = 'browser test password'

async function newRequest(state: string) {
  const key = await dpopKey()
  const clientId = loopbackClientId('atproto transition:generic', redirect)
  const res = await par({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }, key, {
    client_id: clientId,
    redirect_uri: redirect,
    state,
    login_hint: 'browser.test',
  })
  expect(res.status, res.text).toBe(201)
  return `${pds.url}/oauth/authorize?${new URLSearchParams({ client_id: clientId, request_uri: res.json.request_uri })}`
}

d('sign-in page in headless Chromium', () => {
  beforeAll(async () => {
    pds = await startTestPds()
    await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'browser.test', email: 'browser@example.com', password: PASSWORD },
    })
    target = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Back at the app</h1>'))
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve))
    redirect = `http://127.0.0.1:${(target.address() as AddressInfo).port}/callback`
    profile = mkdtempSync(join(tmpdir(), 'pds-chromium-'))
    // a fresh profile directory: playwright passes it as --user-data-dir
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      timeout: 20_000,
    })
  })
  afterAll(async () => {
    await browser?.close()
    await new Promise((resolve) => target?.close(resolve))
    await pds?.stop()
    if (profile) rmSync(profile, { recursive: true, force: true })
  })

  it('signs in and redirects to the client with a code', async () => {
    const page = await browser.newPage()
    try {
      await page.goto(await newRequest('browser-allow'), { timeout: 10_000 })
      expect(await page.textContent('#client-name')).toBe('An application on this computer')
      const scopes = await page.locator('#scopes li').allTextContents()
      expect(scopes).toHaveLength(2)
      expect(scopes[0]).toContain('Know who you are')
      expect(scopes[1]).toContain('read and write your posts')
      expect(await page.inputValue('#handle')).toBe('browser.test')

      await page.fill('#password', 'not the password')
      await page.click('button[value=allow]')
      await page.waitForSelector('.error', { timeout: 10_000 })
      expect(await page.textContent('.error')).toContain('Wrong handle or password')

      await page.fill('#password', PASSWORD)
      mkdirSync(ARTIFACTS, { recursive: true })
      await page.screenshot({ path: join(ARTIFACTS, `oauth-sign-in-${dialect}.png`), fullPage: true })
      await Promise.all([page.waitForURL((u) => u.href.startsWith(redirect), { timeout: 10_000 }), page.click('button[value=allow]')])
      const url = new URL(page.url())
      expect(url.searchParams.get('code')).toBeTruthy()
      expect(url.searchParams.get('state')).toBe('browser-allow')
      expect(url.searchParams.get('iss')).toBe(pds.env.PDS_PUBLIC_URL)
      expect(await page.textContent('h1')).toBe('Back at the app')
    } finally {
      await page.close()
    }
  })

  it('Deny returns to the client with access_denied, without filling the form', async () => {
    const page = await browser.newPage()
    try {
      await page.goto(await newRequest('browser-deny'), { timeout: 10_000 })
      await Promise.all([page.waitForURL((u) => u.href.startsWith(redirect), { timeout: 10_000 }), page.click('button[value=deny]')])
      const url = new URL(page.url())
      expect(url.searchParams.get('error')).toBe('access_denied')
      expect(url.searchParams.get('state')).toBe('browser-deny')
      expect(url.searchParams.get('code')).toBeNull()
    } finally {
      await page.close()
    }
  })
})
