// The shipped deploy/Caddyfile in front of the server, as an operator runs it: only its host names
// swapped for a loopback site on plain http (no certificates here) and the admin endpoint off.
// Through it, headless Chromium opens an app's sign-in page (its stylesheet and passkey script
// load, the passkey button shows), signs in and consents, opens /account, and the home page; the
// firehose WebSocket and on-demand TLS's ask endpoint go through too.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { type Browser, type Page } from 'playwright-core'
import WebSocket from 'ws'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describeInChromium, launchChromium } from './browser-helpers.js'
import { freePort, newAccount, PASSWORD, startTestPds, tempDir, type TestPds } from './harness.js'
import { dpopKey, loopbackClientId, par } from './oauth-helpers.js'

const hasCaddy = spawnSync('sh', ['-c', 'command -v caddy']).status === 0
const d = hasCaddy ? describeInChromium : describeInChromium.skip
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** deploy/Caddyfile with its sites on http://localhost:<port> and *.localhost:<port> */
export function loopbackCaddyfile(port: number): string {
  const shipped = readFileSync('deploy/Caddyfile', 'utf8')
  const swapped = shipped
    .replace(/^pds\.example\.com \{$/m, `http://localhost:${port} {`)
    .replace(/^\*\.pds\.example\.com \{$/m, `http://*.localhost:${port} {`)
    // several test files may run Caddy at once: no shared admin port
    .replace(/^\{$/m, '{\n\tadmin off')
  expect(swapped).not.toContain('example.com {')
  return swapped
}

let pds: TestPds
let caddy: ChildProcess
let base: string
let browser: Browser
let app: Server
let redirect: string

async function startCaddy(port: number, pdsPort: number): Promise<{ child: ChildProcess; base: string }> {
  const dir = tempDir('pds-caddy-')
  const file = join(dir, 'Caddyfile')
  writeFileSync(file, loopbackCaddyfile(port))
  let log = ''
  const child = spawn('caddy', ['run', '--config', file, '--adapter', 'caddyfile'], {
    // the Caddyfile's own upstream setting points it at this test's server
    env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_CONFIG_HOME: dir, XDG_DATA_HOME: dir, PDS_UPSTREAM: `127.0.0.1:${pdsPort}` },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  child.stderr.on('data', (c) => (log += c))
  const url = `http://localhost:${port}`
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`caddy exited: ${log}`)
    const ok = await fetch(`${url}/xrpc/_health`).then(
      (r) => r.ok,
      () => false,
    )
    if (ok) return { child, base: url }
    await sleep(100)
  }
  child.kill('SIGKILL')
  throw new Error(`caddy did not serve: ${log}`)
}

/** the page's same-origin responses by path, as the browser received them */
function responses(page: Page) {
  const seen = new Map<string, { status: number; type: string }>()
  page.on('response', (r) => {
    const u = new URL(r.url())
    if (u.origin === base) seen.set(u.pathname, { status: r.status(), type: r.headers()['content-type'] ?? '' })
  })
  return seen
}

d('deploy/Caddyfile in front of the server, in Chromium', () => {
  beforeAll(async () => {
    const caddyPort = await freePort()
    pds = await startTestPds({ PDS_PUBLIC_URL: `http://localhost:${caddyPort}` })
    ;({ child: caddy, base } = await startCaddy(caddyPort, pds.port))
    app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Back at the app</h1>'))
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r))
    redirect = `http://127.0.0.1:${(app.address() as AddressInfo).port}/callback`
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
    caddy?.kill('SIGTERM')
    await new Promise((r) => app?.close(r))
    await pds?.stop()
  })

  it('serves the OAuth sign-in page whole (stylesheet, passkey script) and completes a sign-in', async () => {
    const a = await newAccount(base, 'caddy')
    const key = await dpopKey()
    const clientId = loopbackClientId('atproto transition:generic', redirect)
    const pushed = await par({ url: base, publicUrl: base }, key, { client_id: clientId, redirect_uri: redirect })
    expect(pushed.status, pushed.text).toBe(201)
    const ctx = await browser.newContext()
    const page = await ctx.newPage()
    try {
      const seen = responses(page)
      await page.goto(`${base}/oauth/authorize?${new URLSearchParams({ client_id: clientId, request_uri: pushed.json.request_uri })}`)
      expect(await page.textContent('h1')).toContain('Sign in')
      expect(seen.get('/web/style.css')).toEqual({ status: 200, type: expect.stringContaining('text/css') })
      expect(seen.get('/web/passkey.js')).toEqual({ status: 200, type: expect.stringContaining('javascript') })
      // the stylesheet applied (the browser's default is a serif font), and the script showed the passkey button
      expect(await page.evaluate('getComputedStyle(document.body).fontFamily')).not.toMatch(/^"?Times/)
      expect(await page.isVisible('#passkey-signin-button')).toBe(true)

      await page.fill('#handle', a.handle)
      await page.fill('#password', PASSWORD)
      await Promise.all([page.waitForSelector('#accept', { timeout: 10_000 }), page.click('button[value=allow]')])
      await Promise.all([page.waitForURL((u) => u.href.startsWith(redirect), { timeout: 10_000 }), page.click('#accept')])
      expect(new URL(page.url()).searchParams.get('code')).toBeTruthy()
    } finally {
      await ctx.close()
    }
  })

  it('serves /account and the home page through the proxy', async () => {
    const a = await newAccount(base, 'caddyacct')
    const ctx = await browser.newContext()
    const page = await ctx.newPage()
    try {
      const seen = responses(page)
      await page.goto(`${base}/account?view=login`)
      expect(seen.get('/web/style.css')?.status).toBe(200)
      await page.fill('#handle', a.handle)
      await page.fill('#password', PASSWORD)
      await Promise.all([page.waitForURL(/\/account(#.*)?$/, { timeout: 10_000 }), page.click('button[type=submit]')])
      expect(await page.textContent('#account-handle')).toBe(`@${a.handle}`)

      const home = await page.goto(`${base}/`)
      expect(home?.status()).toBe(200)
      expect(await page.textContent('h1')).toContain('localhost')
      expect(await page.getAttribute('a[href="/account"]', 'href')).toBe('/account')
    } finally {
      await ctx.close()
    }
  })

  it('passes the firehose WebSocket and answers on-demand TLS asks', async () => {
    const ws = new WebSocket(`${base.replace('http', 'ws')}/xrpc/com.atproto.sync.subscribeRepos?cursor=0`)
    const first = await new Promise<Buffer>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no frame within 10 s')), 10_000)
      ws.once('message', (m) => {
        clearTimeout(t)
        resolve(m as Buffer)
      })
      ws.once('error', reject)
    })
    ws.close()
    expect(first.length).toBeGreaterThan(0)
    // what Caddy's ask sends before it obtains a certificate for a handle's name
    expect((await fetch(`${base}/tls-check?domain=nobody.invalid`)).status).toBe(404)
    expect((await fetch(`${base}/tls-check?domain=localhost`)).status).toBe(200)
  })
})
