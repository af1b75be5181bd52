// What the Chromium tests of web apps share: headless Chromium (playwright-core), an esbuild
// bundle of an app's source, a loopback web server for it on its own origin, a stand-in PLC
// directory that answers browsers from the PDS's own DID documents, and the sign-in an OAuth app
// sends its user through.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { build } from 'esbuild'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { didDocFor } from '../src/account/store.js'
import { expect } from 'vitest'
import { describe, type TestPds } from './harness.js'

// PDS_TEST_CHROMIUM: another Chromium binary, where it is not installed system-wide
export const CHROMIUM = process.env.PDS_TEST_CHROMIUM ?? '/usr/bin/chromium'
export const hasChromium = existsSync(CHROMIUM)
/** the harness's describe (per dialect), skipped where no Chromium is installed (`make test` installs it) */
export const describeInChromium = hasChromium ? describe : describe.skip
// the background-networking flags keep Chromium from calling out of a closed network at start
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** a headless Chromium for page tests */
export const launchChromium = () => chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 20_000 })

export type Served = { server: Server; origin: string }

/** one headless Chromium with a throw-away profile, and a place for app bundles */
export class BrowserRig {
  browser!: BrowserContext
  private profile = ''
  private bundles = ''
  private servers: Server[] = []

  async start() {
    this.bundles = mkdtempSync(join(tmpdir(), 'pds-bundles-'))
    this.profile = mkdtempSync(join(tmpdir(), 'pds-chromium-'))
    this.browser = await chromium.launchPersistentContext(this.profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      timeout: 20_000,
    })
  }

  async stop() {
    await this.browser?.close()
    for (const s of this.servers) {
      s.closeAllConnections()
      await new Promise((r) => s.close(r))
    }
    for (const dir of [this.profile, this.bundles]) if (dir) rmSync(dir, { recursive: true, force: true })
  }

  /** the app's source bundled for the browser, its imports taken from this project's node_modules */
  async bundle(name: string, source: string) {
    const entry = join(this.bundles, `${name}.js`)
    writeFileSync(entry, source)
    const outfile = join(this.bundles, `${name}.bundle.js`)
    await build({
      entryPoints: [entry],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'chrome120',
      outfile,
      nodePaths: [resolve('node_modules')],
      define: { 'process.env.NODE_ENV': '"production"' },
      logLevel: 'silent',
    })
    return readFileSync(outfile, 'utf8')
  }

  /** a loopback web server for one app: the HTML shell on every path (with `window.CONFIG`), the bundle at /app.js */
  async serveApp(bundle: string, config: (origin: string) => Record<string, string>): Promise<Served> {
    let origin = ''
    const server = createServer((req, res) => {
      if (req.url === '/app.js') return res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle)
      if (req.url === '/favicon.ico') return res.writeHead(404).end()
      res.writeHead(200, { 'content-type': 'text/html' })
      res.end(
        `<!doctype html><meta charset="utf-8"><title>app</title><script>window.CONFIG = ${JSON.stringify(config(origin))}</script><script type="module" src="/app.js"></script>`,
      )
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    this.servers.push(server)
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    return { server, origin }
  }
}

/** the PLC directory an OAuth client in the browser resolves an account's DID through (CORS open) */
export async function startBrowserPlc(pds: () => TestPds): Promise<{ url: string; close(): Promise<void> }> {
  const plc = createServer(async (req, res) => {
    const cors = { 'access-control-allow-origin': '*' }
    const did = decodeURIComponent((req.url ?? '/').slice(1))
    const doc = await didDocFor(pds().services.db, did)
    if (!doc) return res.writeHead(404, { 'content-type': 'application/json', ...cors }).end('{"message":"DID not registered"}')
    res.writeHead(200, { 'content-type': 'application/did+ld+json', ...cors }).end(JSON.stringify(doc))
  })
  await new Promise<void>((r) => plc.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(plc.address() as AddressInfo).port}`,
    close: async () => {
      plc.closeAllConnections()
      await new Promise((r) => plc.close(r))
    },
  }
}

/**
 * evaluates `expr` in the page once it is truthy, within `timeout` ms. Polled from here, not with
 * waitForFunction: its in-page poller evals the string, which the sign-in page's CSP refuses.
 */
export async function waitFor<T>(page: Page, expr: string, timeout = 20_000): Promise<T> {
  const deadline = Date.now() + timeout
  for (;;) {
    // a navigation in progress has no document to ask yet
    const value = await page.evaluate<T>(expr).catch((err: Error) => {
      if (/context was destroyed|navigat/i.test(err.message)) return undefined
      throw err
    })
    if (value) return value
    if (Date.now() > deadline) throw new Error(`not true within ${timeout} ms: ${expr}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/**
 * With the app's page open and its `window.signIn(handle)` calling the OAuth client: to our
 * sign-in page, the password, Allow, then the consent step. `beforeAccept` sees the consent page;
 * the promise settles once the browser is back at the app.
 */
export async function signInThroughPages(
  page: Page,
  opts: { pds: Pick<TestPds, 'env'>; appOrigin: string; handle: string; password: string; beforeAccept?: (page: Page) => Promise<void> },
) {
  const authorize = opts.pds.env.PDS_PUBLIC_URL + '/oauth/authorize'
  await page.evaluate((handle) => void (globalThis as any).signIn(handle), opts.handle)
  const where = await waitFor<string>(
    page,
    `window.signInError || (location.href.startsWith(${JSON.stringify(authorize)}) && document.readyState === 'complete' && 'sign-in page')`,
    15_000,
  )
  expect(where).toBe('sign-in page')
  expect(await page.inputValue('#handle')).toBe(opts.handle)
  await page.fill('#password', opts.password)
  await Promise.all([page.waitForSelector('#accept', { timeout: 15_000 }), page.click('button[value=allow]')])
  await opts.beforeAccept?.(page)
  await Promise.all([page.waitForURL((u) => u.href.startsWith(opts.appOrigin), { timeout: 15_000 }), page.click('#accept')])
}
