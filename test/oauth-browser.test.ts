// The sign-in pages in a real browser (headless Chromium through playwright-core): a password
// sign-in with consent, Deny, a returning user picking a remembered account, forgetting it, a
// forgotten password reset through the pages and the mail sink, sign-up with prompt=create, the
// consent page of a discoverable client asking granular permissions, keyboard-only use, and a
// whole sign-in with JavaScript off. With PDS_SCREENSHOTS=1 the README's screenshots are rewritten
// in docs/images/; otherwise they land in test/artifacts/.
import { describeInChromium, launchChromium } from './browser-helpers.js'
import { mkdirSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { dialect, startTestPds, xrpc, PASSWORD, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { dpopKey, loopbackClientId, par, pkce } from './oauth-helpers.js'

const SCREENSHOTS = process.env.PDS_SCREENSHOTS === '1'
const SHOTS = SCREENSHOTS ? new URL('../docs/images/', import.meta.url).pathname : new URL('./artifacts/', import.meta.url).pathname
const d = describeInChromium
// a 1×1 PNG standing in for an app's logo (the browser never leaves loopback: the route is served here)
const LOGO = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

let pds: TestPds
let sink: MailSink
let browser: Browser
let target: Server
let redirect: string
let metaBase: string

async function newRequest(state: string, extra: Record<string, string> = {}) {
  const key = await dpopKey()
  const clientId = loopbackClientId('atproto transition:generic', redirect)
  const res = await par({ url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }, key, {
    client_id: clientId,
    redirect_uri: redirect,
    state,
    ...extra,
  })
  expect(res.status, res.text).toBe(201)
  return `${pds.url}/oauth/authorize?${new URLSearchParams({ client_id: clientId, request_uri: res.json.request_uri })}`
}

async function newContext(opts: { javaScriptEnabled?: boolean } = {}): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: { width: 720, height: 900 }, ...opts })
  await ctx.route('https://app.example/**', (route) => route.fulfill({ status: 200, contentType: 'image/png', body: LOGO }))
  return ctx
}

async function backAtApp(page: Page, click: () => Promise<unknown>) {
  await Promise.all([page.waitForURL((u) => u.href.startsWith(redirect), { timeout: 10_000 }), click()])
  return new URL(page.url())
}

async function shoot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true })
  await page.screenshot({ path: join(SHOTS, SCREENSHOTS ? `${name}.png` : `${name}-${dialect}.png`), fullPage: true })
}

async function signInWithPassword(page: Page, handle: string, password = PASSWORD) {
  if ((await page.inputValue('#handle')) !== handle) await page.fill('#handle', handle)
  await page.fill('#password', password)
  await Promise.all([page.waitForSelector('#accept', { timeout: 10_000 }), page.click('button[value=allow]')])
}

d('sign-in pages in headless Chromium', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink))
    for (const h of ['browser', 'forgetful', 'keys', 'nojs']) {
      await xrpc(pds.url, 'com.atproto.server.createAccount', {
        body: { handle: `${h}.test`, email: `${h}@example.com`, password: PASSWORD },
      })
    }
    target = createServer((req, res) => {
      if (req.url === '/client.json') {
        return res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            client_id: `${metaBase}/client.json`,
            client_name: 'Example Social',
            client_uri: 'https://app.example/',
            logo_uri: 'https://app.example/logo.png',
            tos_uri: 'https://app.example/terms',
            policy_uri: 'https://app.example/privacy',
            redirect_uris: [`${metaBase}/callback`],
            scope: 'atproto transition:generic',
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            dpop_bound_access_tokens: true,
            token_endpoint_auth_method: 'none',
          }),
        )
      }
      res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Back at the app</h1>')
    })
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve))
    const port = (target.address() as AddressInfo).port
    redirect = `http://127.0.0.1:${port}/callback`
    metaBase = `http://localhost:${port}`
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
    await new Promise((resolve) => target?.close(resolve))
    await pds?.stop()
    await sink?.close()
  })

  it('signs in with the password, shows the consent page, and a returning user picks the remembered account', async () => {
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await page.goto(await newRequest('first', { login_hint: 'browser.test' }), { timeout: 10_000 })
      expect(await page.textContent('#client-name')).toBe('An app on this computer')
      expect(await page.inputValue('#handle')).toBe('browser.test')
      expect(await page.isChecked('input[name=remember]')).toBe(true)
      await page.fill('#password', 'not the password')
      await page.click('button[value=allow]')
      await page.waitForSelector('#error', { timeout: 10_000 })
      expect(await page.textContent('#error')).toContain('Wrong handle or password')

      await signInWithPassword(page, 'browser.test')
      expect(await page.textContent('#account-handle')).toBe('@browser.test')
      expect(await page.textContent('#permissions')).toContain('Create, change and delete any of your records')
      const first = await backAtApp(page, () => page.click('#accept'))
      expect(first.searchParams.get('code')).toBeTruthy()
      expect(first.searchParams.get('state')).toBe('first')
      expect(first.searchParams.get('iss')).toBe(pds.env.PDS_PUBLIC_URL)

      // the next app's request shows the remembered account: one click and no password
      await page.goto(await newRequest('again'), { timeout: 10_000 })
      const accounts = await page.locator('#accounts .account').allTextContents()
      expect(accounts.map((a) => a.trim())).toEqual(['BT@browser.test'])
      await shoot(page, 'sign-in-accounts')
      await Promise.all([page.waitForSelector('#accept', { timeout: 10_000 }), page.click('#accounts .account')])
      const again = await backAtApp(page, () => page.click('#accept'))
      expect(again.searchParams.get('code')).toBeTruthy()
      expect(again.searchParams.get('state')).toBe('again')

      // "Use another account" leads to the empty password form
      await page.goto(await newRequest('other'), { timeout: 10_000 })
      await page.click('#other-account')
      expect(await page.inputValue('#handle')).toBe('')
    } finally {
      await ctx.close()
    }
  })

  it('Deny returns to the app with access_denied; Forget removes the account from the device', async () => {
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await page.goto(await newRequest('deny'), { timeout: 10_000 })
      const denied = await backAtApp(page, () => page.click('button[value=deny]'))
      expect(denied.searchParams.get('error')).toBe('access_denied')
      expect(denied.searchParams.get('code')).toBeNull()

      await page.goto(await newRequest('remember'), { timeout: 10_000 })
      await signInWithPassword(page, 'forgetful.test')
      await backAtApp(page, () => page.click('#accept'))
      await page.goto(await newRequest('forget'), { timeout: 10_000 })
      expect(await page.locator('#accounts .account').count()).toBe(1)
      await page.click('button[value=forget]')
      await page.waitForSelector('#notice', { timeout: 10_000 })
      expect(await page.locator('#accounts').count()).toBe(0)
      expect(await page.isVisible('#password')).toBe(true)
    } finally {
      await ctx.close()
    }
  })

  it('resets a forgotten password through the pages and the mailed code, then signs in with the new one', async () => {
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await page.goto(await newRequest('reset'), { timeout: 10_000 })
      await page.click('text=Forgot password?')
      await page.fill('#email', 'forgetful@example.com')
      const before = sink.received.length
      await Promise.all([page.waitForSelector('#token', { timeout: 10_000 }), page.click('button[value=allow]')])
      expect(await page.textContent('#notice')).toContain('we sent it a code')
      await sink.waitFor(before + 1)
      await page.fill('#token', sink.tokenFor('forgetful@example.com'))
      await page.fill('#password', 'a brand new password')
      await Promise.all([page.waitForSelector('#notice', { timeout: 10_000 }), page.click('button[value=allow]')])
      expect(await page.textContent('#notice')).toContain('Your password was changed')
      await page.fill('#handle', 'forgetful.test')
      await page.fill('#password', PASSWORD)
      await page.click('button[value=allow]')
      await page.waitForSelector('#error', { timeout: 10_000 })
      await signInWithPassword(page, 'forgetful.test', 'a brand new password')
      const back = await backAtApp(page, () => page.click('#accept'))
      expect(back.searchParams.get('code')).toBeTruthy()
    } finally {
      await ctx.close()
    }
  })

  it('prompt=create signs up inside the flow, then asks for consent', async () => {
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await page.goto(await newRequest('create', { prompt: 'create' }), { timeout: 10_000 })
      expect(await page.textContent('h1')).toContain('Create an account')
      expect(await page.textContent('#handle-domain')).toBe('.test')
      expect(await page.locator('#invite').count()).toBe(0)
      await page.fill('#name', 'newcomer')
      await page.fill('#email', 'newcomer@example.com')
      await page.fill('#password', PASSWORD)
      await shoot(page, 'sign-up')
      await Promise.all([page.waitForSelector('#accept', { timeout: 15_000 }), page.click('button[value=allow]')])
      expect(await page.textContent('#account-handle')).toBe('@newcomer.test')
      const back = await backAtApp(page, () => page.click('#accept'))
      expect(back.searchParams.get('code')).toBeTruthy()
      const session = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: 'newcomer.test', password: PASSWORD } })
      expect(session.status).toBe(200)
    } finally {
      await ctx.close()
    }
  })

  it('shows a discoverable client’s name, logo and links, and granular permissions in plain words by kind', async () => {
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      const clientId = `${metaBase}/client.json`
      // the request as PAR stores it, with permissions this branch's PAR does not accept yet
      const scope =
        'atproto repo:app.bsky.feed.post repo:app.bsky.feed.like?action=create blob:image/* account:email identity:handle transition:chat.bsky rpc:app.bsky.feed.getTimeline?aud=did:web:api.bsky.app%23bsky_appview'
      const requestUri = 'urn:ietf:params:oauth:request_uri:consent-page-test'
      await pds.services.db
        .insertInto('oauth_request')
        .values({
          request_uri: requestUri,
          client_id: clientId,
          redirect_uri: `${metaBase}/callback`,
          scope,
          state: 'granular',
          code_challenge: pkce().challenge,
          code_challenge_method: 'S256',
          dpop_jkt: (await dpopKey()).jkt,
          login_hint: 'browser.test',
          prompt: null,
          expires_at: new Date(Date.now() + 60_000).toISOString(),
          created_at: new Date().toISOString(),
        })
        .execute()
      await page.goto(`${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`, { timeout: 10_000 })
      await signInWithPassword(page, 'browser.test')
      expect(await page.textContent('#client-name')).toBe('Example Social')
      expect(await page.getAttribute('#client-logo', 'src')).toBe('https://app.example/logo.png')
      expect(await page.evaluate<number>('document.querySelector("#client-logo").naturalWidth')).toBe(1)
      expect(await page.getAttribute('#client-uri', 'href')).toBe('https://app.example/')
      expect(await page.getAttribute('#client-tos', 'href')).toBe('https://app.example/terms')
      expect(await page.getAttribute('#client-policy', 'href')).toBe('https://app.example/privacy')
      const groups = await page
        .locator('#permissions > li')
        .evaluateAll((lis) =>
          lis.map((li) => [li.getAttribute('data-kind'), li.querySelector('strong')!.textContent, li.querySelector('ul')!.textContent]),
        )
      expect(groups.map((g) => g[0])).toEqual(['identity', 'records', 'files', 'email', 'handle', 'chat', 'services'])
      expect(groups[1][2]).toContain('Create, change and delete your posts')
      expect(groups[1][2]).toContain('Create your likes')
      expect(groups[2][2]).toContain('Upload images')
      expect(groups[3][2]).toContain('See your email address')
      expect(groups[4][2]).toContain('Change your handle')
      expect(groups[5][2]).toContain('Bluesky chat')
      expect(groups[6][2]).toContain('app.bsky.feed.getTimeline')
      // the raw scope is there, behind a disclosure
      expect(await page.isVisible('#raw-scope')).toBe(false)
      await page.click('summary')
      expect(await page.textContent('#raw-scope')).toBe(scope)
      await shoot(page, 'consent')
      const back = await Promise.all([
        page.waitForURL((u) => u.href.startsWith(`${metaBase}/callback`), { timeout: 10_000 }),
        page.click('#accept'),
      ]).then(() => new URL(page.url()))
      expect(back.searchParams.get('state')).toBe('granular')
      expect(back.searchParams.get('code')).toBeTruthy()
    } finally {
      await ctx.close()
    }
  })

  it('works with the keyboard alone: Tab reaches every control, with a visible focus ring, and Enter submits', async () => {
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await page.goto(await newRequest('keys'), { timeout: 10_000 })
      const seen: string[] = []
      for (let i = 0; i < 14; i++) {
        await page.keyboard.press('Tab')
        // in the page: the focused control's name and its outline (past the last control focus
        // leaves the page for the browser's own UI)
        const [label, outline] = await page.evaluate<[string, string]>(`(() => {
          const el = document.activeElement
          if (el === document.body) return ['(browser)', 'solid']
          const name = el.tagName === 'BUTTON' || el.tagName === 'A' ? el.textContent.trim() : el.id || el.name
          return [name, getComputedStyle(el).outlineStyle + ' ' + getComputedStyle(el).outlineWidth]
        })()`)
        seen.push(label)
        expect(outline, label).not.toMatch(/^none/)
      }
      for (const control of ['handle', 'password', 'remember', 'Sign in', 'Cancel', 'Forgot password?', 'Create an account']) {
        expect(seen).toContain(control)
      }
      // now sign in with keys only
      await page.focus('body')
      for (let i = 0; i < 10 && (await page.evaluate<string>('document.activeElement?.id')) !== 'handle'; i++)
        await page.keyboard.press('Tab')
      await page.keyboard.type('keys.test')
      await page.keyboard.press('Tab')
      await page.keyboard.type(PASSWORD)
      await Promise.all([page.waitForSelector('#accept', { timeout: 10_000 }), page.keyboard.press('Enter')])
      for (let i = 0; i < 20 && (await page.evaluate<string>('document.activeElement?.id')) !== 'accept'; i++)
        await page.keyboard.press('Tab')
      const back = await backAtApp(page, () => page.keyboard.press('Enter'))
      expect(back.searchParams.get('code')).toBeTruthy()
    } finally {
      await ctx.close()
    }
  })

  it('completes a sign-in with JavaScript disabled', async () => {
    const ctx = await newContext({ javaScriptEnabled: false })
    const page = await ctx.newPage()
    try {
      await page.goto(await newRequest('nojs'), { timeout: 10_000 })
      expect(await page.locator('script:not([src])').count()).toBe(0)
      await page.fill('#handle', 'nojs.test')
      await signInWithPassword(page, 'nojs.test')
      const back = await backAtApp(page, () => page.click('#accept'))
      expect(back.searchParams.get('code')).toBeTruthy()
      expect(back.searchParams.get('state')).toBe('nojs')
    } finally {
      await ctx.close()
    }
  })
})
