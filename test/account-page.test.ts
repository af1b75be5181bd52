// The account page (/account) as a person uses it, in headless Chromium: every action driven
// through the page, what the page then says, and the effect seen through real clients (AtpAgent,
// an OAuth app's DPoP calls, resolveHandle). Passkeys are added and used with Chromium's virtual
// authenticator. CSRF refusal and the password re-entry window are checked at the HTTP level.
// With PDS_SCREENSHOTS=1 the README's screenshot is rewritten in docs/images/; otherwise it lands
// in test/artifacts/.
import { describeInChromium, launchChromium } from './browser-helpers.js'
import { mkdirSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { AtpAgent } from '@atproto/api'
import { Secret, TOTP } from 'otpauth'
import { type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { dialect, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import {
  dpopGet,
  dpopKey,
  exchange,
  loopbackClientId,
  openPage,
  par,
  pkce,
  post,
  REDIRECT,
  refreshGrant,
  submitPage,
} from './oauth-helpers.js'
import { startNameserver, type Nameserver } from './tripwire.js'
import { csrfOf, pageClient } from './page-client.js'

const SCREENSHOTS = process.env.PDS_SCREENSHOTS === '1'
const SHOTS = SCREENSHOTS ? new URL('../docs/images/', import.meta.url).pathname : new URL('./artifacts/', import.meta.url).pathname
const d = describeInChromium
// a real top-level domain, answered only by the loopback DNS server below
const DOMAIN = 'pdstest.net'

let pds: TestPds
let sink: MailSink
let dns: Nameserver
let browser: Browser
let apps: Server
let appBase: string
let base: string
const txt: Record<string, string[]> = {}
let n = 0

type Acct = { did: string; handle: string; email: string; password: string }

/** a fresh account; its address confirmed unless asked otherwise */
async function account(opts: { confirmed?: boolean } = {}): Promise<Acct> {
  n++
  const a = { handle: `page${n}.test`, email: `page${n}@example.com`, password: PASSWORD }
  const res = await xrpc(pds.url, 'com.atproto.server.createAccount', { body: a })
  expect(res.status, res.text).toBe(200)
  const { did, accessJwt } = res.body as { did: string; accessJwt: string }
  if (opts.confirmed !== false) {
    await xrpc(pds.url, 'com.atproto.server.requestEmailConfirmation', {
      method: 'POST',
      headers: { authorization: `Bearer ${accessJwt}` },
    })
    const confirmed = await xrpc(pds.url, 'com.atproto.server.confirmEmail', {
      headers: { authorization: `Bearer ${accessJwt}` },
      body: { email: a.email, token: sink.tokenFor(a.email) },
    })
    expect(confirmed.status, confirmed.text).toBe(200)
  }
  return { ...a, did }
}

async function agentFor(a: { handle: string; password: string }) {
  const agent = new AtpAgent({ service: pds.url })
  await agent.login({ identifier: a.handle, password: a.password })
  return agent
}

async function newContext(): Promise<BrowserContext> {
  return browser.newContext({ viewport: { width: 900, height: 1000 } })
}

/** the password sign-in of /account; lands on the account page */
async function signIn(page: Page, a: { handle: string; password: string }) {
  await page.goto(`${base}/account?view=login`, { timeout: 10_000 })
  await page.fill('#handle', a.handle)
  await page.fill('#password', a.password)
  await Promise.all([page.waitForURL(/\/account(#.*)?$/, { timeout: 10_000 }), page.click('button[type=submit]')])
}

/** submits the form holding `selector` and waits for the page it leads to */
/** a pushed request of the named test app; the URL its sign-in opens */
async function authorizeUrl() {
  const key = await dpopKey()
  const pushed = await par({ url: pds.url, publicUrl: base }, key, {
    client_id: `${appBase}/client.json`,
    redirect_uri: `${appBase}/callback`,
  })
  expect(pushed.status, pushed.text).toBe(201)
  return `${base}/oauth/authorize?request_uri=${encodeURIComponent(pushed.json.request_uri)}`
}

async function submit(page: Page, selector: string) {
  await Promise.all([page.waitForNavigation({ timeout: 10_000 }), page.click(selector)])
}

const text = async (page: Page, selector: string) => ((await page.textContent(selector, { timeout: 5000 })) ?? '').trim()

async function shoot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true })
  await page.screenshot({ path: join(SHOTS, SCREENSHOTS ? `${name}.png` : `${name}-${dialect}.png`), fullPage: true })
}

/** an OAuth grant of the named test app to `a`, through PAR, the sign-in page and the token endpoint */
async function connectApp(a: Acct, client: 'named' | 'loopback' = 'named') {
  const key = await dpopKey()
  const target = { url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }
  const clientId = client === 'named' ? `${appBase}/client.json` : loopbackClientId()
  const redirect = client === 'named' ? `${appBase}/callback` : REDIRECT
  const p = pkce()
  const pushed = await par(target, key, { client_id: clientId, redirect_uri: redirect }, p)
  expect(pushed.status, pushed.text).toBe(201)
  const requestUri = pushed.json.request_uri as string
  const opened = await openPage(pds.url, requestUri)
  const signedIn = await submitPage(
    pds.url,
    requestUri,
    { handle: a.handle, password: a.password, step: 'login', action: 'allow', csrf_token: opened.csrf },
    opened.cookie,
  )
  const did = /name="did" value="([^"]+)"/.exec(signedIn.text)?.[1]
  expect(did, signedIn.text).toBe(a.did)
  const allowed = await submitPage(pds.url, requestUri, { step: 'consent', did, action: 'allow', csrf_token: opened.csrf }, opened.cookie)
  expect(allowed.status, allowed.text).toBe(302)
  const code = new URL(allowed.headers.get('location')!).searchParams.get('code')!
  const tokens = await exchange(target, key, code, p.verifier, { client_id: clientId, redirect_uri: redirect })
  expect(tokens.status, tokens.text).toBe(200)
  return {
    key,
    access: tokens.json.access_token as string,
    refresh: tokens.json.refresh_token as string,
    call: () => dpopGet(target, key, tokens.json.access_token, 'com.atproto.server.getSession'),
    renew: () => refreshGrant(target, key, tokens.json.refresh_token, { client_id: clientId }),
  }
}

const httpClient = (url = pds.url) => pageClient(url)

d('the account page in headless Chromium', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    dns = await startNameserver({}, txt)
    pds = await startTestPds({ ...sinkEnv(sink), PDS_DNS_NAMESERVERS: dns.address })
    base = pds.env.PDS_PUBLIC_URL!
    apps = createServer((req, res) => {
      if (req.url === '/client.json') {
        return res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            client_id: `${appBase}/client.json`,
            client_name: 'Example Social',
            client_uri: 'https://app.example/',
            redirect_uris: [`${appBase}/callback`],
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
    await new Promise<void>((resolve) => apps.listen(0, '127.0.0.1', resolve))
    appBase = `http://localhost:${(apps.address() as AddressInfo).port}`
    browser = await launchChromium()
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    apps?.closeAllConnections()
    await new Promise((resolve) => apps?.close(resolve))
    await pds?.stop()
    await sink?.close()
    await dns?.close()
  })

  it('lists a connected app with its permissions in plain words; Revoke stops its tokens at once', async () => {
    const a = await account()
    const app = await connectApp(a)
    const other = await connectApp(a, 'loopback')
    expect((await app.call()).status).toBe(200)
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      expect(await text(page, '#account-handle')).toBe(`@${a.handle}`)
      const names = await page.locator('#app-list li[data-client-id] .app-name').allTextContents()
      expect(names.sort()).toEqual(['An app on this computer', 'Example Social'])
      const perms = await page.locator('#app-list .app-permissions li').allTextContents()
      expect(perms.length).toBeGreaterThan(1)
      expect(perms.join(' | ')).toMatch(/Know who you are.*records/)
      // an app password too, so the screenshot shows a lived-in page
      await page.fill('#ap-name', 'old-phone')
      await submit(page, '#app-passwords button:has-text("Create app password")')
      await shoot(page, 'account')
      // every field is named for assistive technology, and every button says what it does
      type Field = {
        outerHTML: string
        textContent: string | null
        labels?: { textContent: string | null }[]
        getAttribute(n: string): string | null
      }
      const unnamed = await page.evaluate(() => {
        const doc = (globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<Field> } }).document
        return [...doc.querySelectorAll('input:not([type=hidden]), select, button')]
          .filter((el) => {
            const label = el.labels?.[0]
            const name = el.getAttribute('aria-label') ?? (label ? label.textContent : el.textContent)
            return !name?.trim()
          })
          .map((el) => el.outerHTML)
      })
      expect(unnamed).toEqual([])

      await submit(page, '#app-list button[aria-label="Revoke access of Example Social"]')
      expect(await text(page, '#apps #notice')).toContain('can no longer use your account')
      expect(await page.locator('#app-list .app-name').allTextContents()).toEqual(['An app on this computer'])
      // the access token it holds stops now, not when it expires; its refresh token is gone
      const after = await app.call()
      expect(after.status).toBe(401)
      expect(after.json.error).toBe('ExpiredToken')
      expect((await app.renew()).status).toBe(400)
      // the other app is untouched
      expect((await other.call()).status).toBe(200)
      expect((await other.renew()).status).toBe(200)
    } finally {
      await ctx.close()
    }
  })

  it('an app signing out through token revocation loses its access token at once too', async () => {
    const a = await account()
    const app = await connectApp(a)
    expect((await app.call()).status).toBe(200)
    const res = await post(`${pds.url}/oauth/revoke`, { token: app.access, client_id: `${appBase}/client.json` })
    expect(res.status).toBe(200)
    expect((await app.call()).status).toBe(401)
    expect((await app.renew()).status).toBe(400)
  })

  it('creates an app password shown once that signs in with AtpAgent; Revoke ends its session', async () => {
    const a = await account()
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      await page.fill('#ap-name', 'my-client')
      await page.check('#app-passwords input[name=privileged]')
      await submit(page, '#app-passwords button:has-text("Create app password")')
      const secret = await text(page, '#app-password-value')
      expect(secret).toMatch(/^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/)
      expect(await text(page, '#app-password-list')).toContain('privileged')
      const agent = await agentFor({ handle: a.handle, password: secret })
      expect((await agent.com.atproto.server.getSession()).data.did).toBe(a.did)
      // shown once: a reload no longer has it
      await page.reload()
      expect(await page.locator('#app-password-value').count()).toBe(0)
      // a bad name gets the domain's own message
      await page.fill('#ap-name', 'my-client')
      await submit(page, '#app-passwords button:has-text("Create app password")')
      expect(await text(page, '#app-passwords #error')).toContain('already exists')

      await submit(page, '#app-password-list li[data-name="my-client"] button')
      expect(await text(page, '#app-passwords #notice')).toContain('revoked')
      await expect(agent.com.atproto.server.getSession()).rejects.toThrow()
      await expect(agentFor({ handle: a.handle, password: secret })).rejects.toThrow()
    } finally {
      await ctx.close()
    }
  })

  it('confirms the address with a mailed code, and changes it with a code sent to the confirmed address', async () => {
    const a = await account({ confirmed: false })
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      expect(await text(page, '#email-state')).toBe('not confirmed')
      await submit(page, '#email button:has-text("Send a confirmation code")')
      expect(await text(page, '#email #notice')).toContain(a.email)
      await page.fill('#confirm-token', sink.tokenFor(a.email).toLowerCase())
      await submit(page, '#email button:has-text("Confirm address")')
      expect(await text(page, '#email-state')).toBe('confirmed')

      const next = `moved${n}@example.com`
      const before = sink.received.length
      await page.fill('#new-email', next)
      await submit(page, '#email button:has-text("Send code")')
      // approved by the address on file, not by the new one
      expect(await text(page, '#email #notice')).toContain(a.email)
      const mails = (await sink.waitFor(before + 1)).slice(before)
      expect(mails.map((m) => m.body.to)).toEqual([a.email])
      await page.fill('#change-token', sink.tokenFor(a.email))
      await submit(page, '#email button:has-text("Change address")')
      expect(await text(page, '#email-address')).toBe(next)
      expect(await text(page, '#email-state')).toBe('not confirmed')
      const session = (await (await agentFor(a)).com.atproto.server.getSession()).data
      expect(session.email).toBe(next)
      expect(session.emailConfirmed).toBe(false)
    } finally {
      await ctx.close()
    }
  })

  it('changes the handle on the service domain, then to an own domain after showing the DNS record', async () => {
    const a = await account()
    const ctx = await newContext()
    const page = await ctx.newPage()
    const resolve = async (handle: string) =>
      (await new AtpAgent({ service: pds.url }).com.atproto.identity.resolveHandle({ handle })).data.did
    try {
      await signIn(page, a)
      const fresh = `renamed${n}`
      await page.fill('#handle-name', fresh)
      await submit(page, '#handle button:has-text("Change handle")')
      expect(await text(page, '#handle #notice')).toContain(`@${fresh}.test`)
      expect(await text(page, '#current-handle')).toBe(`@${fresh}.test`)
      expect(await resolve(`${fresh}.test`)).toBe(a.did)

      const own = `me${n}.${DOMAIN}`
      await page.fill('#own-domain', own)
      await submit(page, '#handle button:has-text("Verify and switch")')
      expect(await text(page, '#handle #error')).toContain(`_atproto.${own}`)
      const records = await text(page, '#handle-records')
      expect(records).toContain(`_atproto.${own}`)
      expect(records).toContain(`did=${a.did}`)
      expect(records).toContain(`https://${own}/.well-known/atproto-did`)
      txt[`_atproto.${own}`] = [`did=${a.did}`]
      expect(await page.inputValue('#own-domain')).toBe(own)
      await submit(page, '#handle button:has-text("Verify and switch")')
      expect(await text(page, '#current-handle')).toBe(`@${own}`)
      expect(await resolve(own)).toBe(a.did)
    } finally {
      await ctx.close()
    }
  })

  it('changes the password: the old one and every other session stop, this browser stays signed in', async () => {
    const a = await account()
    const other = await agentFor(a)
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      await page.fill('#current-password', 'not it at all')
      await page.fill('#new-password', 'a brand new password')
      await submit(page, '#password button:has-text("Change password")')
      expect(await text(page, '#password #error')).toContain('not right')
      await page.fill('#current-password', a.password)
      await page.fill('#new-password', 'a brand new password')
      await submit(page, '#password button:has-text("Change password")')
      expect(await text(page, '#password #notice')).toContain('signed out')
      const err = await other.com.atproto.server.getSession().catch((e: { error?: string }) => e)
      expect((err as { error?: string }).error).toMatch(/ExpiredToken|InvalidToken/)
      await expect(agentFor(a)).rejects.toThrow()
      await agentFor({ ...a, password: 'a brand new password' })
      await page.reload()
      expect(await text(page, '#account-handle')).toBe(`@${a.handle}`)
    } finally {
      await ctx.close()
    }
  })

  it('turns email sign-in codes on and off, sets up an authenticator app with recovery codes, and signs in with one', async () => {
    const a = await account()
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      expect(await text(page, '#email-codes-state')).toBe('off')
      await submit(page, '#security button:has-text("Turn on")')
      expect(await text(page, '#email-codes-state')).toBe('on')
      const asked = await agentFor(a).catch((e: { error?: string }) => e)
      expect((asked as { error?: string }).error).toBe('AuthFactorTokenRequired')
      await submit(page, '#security button:has-text("Turn off")')
      expect(await text(page, '#email-codes-state')).toBe('off')
      await agentFor(a)

      await submit(page, '#security button:has-text("Set up")')
      expect(await page.locator('#totp-setup .qr svg').count()).toBe(1)
      const secret = (await text(page, '#totp-secret')).replace(/\s/g, '')
      const totp = new TOTP({ secret: Secret.fromBase32(secret), digits: 6, period: 30, algorithm: 'SHA1' })
      await page.fill('#totp-code', '000000' === totp.generate() ? '111111' : '000000')
      await submit(page, '#totp-setup button')
      expect(await text(page, '#security #error')).toContain('did not match')
      // the set-up stays on the page after a wrong code
      await page.fill('#totp-code', totp.generate())
      await submit(page, '#totp-setup button')
      expect(await text(page, '#totp-state')).toBe('on')
      const codes = await page.locator('#recovery-codes li').allTextContents()
      expect(codes).toHaveLength(10)

      // signing in again now asks for the second step; a recovery code passes it once
      await submit(page, 'button:has-text("Sign out on this device")')
      await page.goto(`${base}/account?view=login`)
      await page.fill('#handle', a.handle)
      await page.fill('#password', a.password)
      await submit(page, 'button:has-text("Sign in")')
      expect(page.url()).toContain('view=second-factor')
      await page.fill('#code', 'WRONG-CODE')
      await submit(page, 'button:has-text("Continue")')
      expect(await text(page, '#error')).toContain('did not work')
      await page.fill('#code', codes[0])
      await submit(page, 'button:has-text("Continue")')
      expect(await text(page, '#account-handle')).toBe(`@${a.handle}`)
      expect(await text(page, '#security')).toContain('9 left')

      await submit(page, '#security button:has-text("Make new recovery codes")')
      expect(await page.locator('#recovery-codes li').count()).toBe(10)
      await submit(page, '#security button:has-text("Remove it")')
      expect(await text(page, '#totp-state')).toBe('off')
    } finally {
      await ctx.close()
    }
  })

  it('adds a passkey with the virtual authenticator, renames it, signs in with it, and removes it', async () => {
    const a = await account()
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      const cdp = await ctx.newCDPSession(page)
      await cdp.send('WebAuthn.enable')
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
      })
      await signIn(page, a)
      await page.fill('#passkey-name', 'Test laptop')
      await submit(page, 'button[data-passkey=register]')
      expect(await text(page, '#security #notice')).toContain('Test laptop')
      expect(await page.inputValue('#passkey-list input[name=name]')).toBe('Test laptop')
      // the first strong factor brings recovery codes
      expect(await page.locator('#recovery-codes li').count()).toBe(10)

      await page.fill('#passkey-list input[name=name]', 'Work laptop')
      await submit(page, '#passkey-list button:has-text("Rename")')
      expect(await page.inputValue('#passkey-list input[name=name]')).toBe('Work laptop')

      await submit(page, 'button:has-text("Sign out on this device")')
      await page.goto(`${base}/account?view=login`)
      await page.fill('#handle', a.handle)
      await page.fill('#password', a.password)
      await submit(page, 'button:has-text("Sign in")')
      await page.waitForSelector('button[data-passkey=authenticate]:visible', { timeout: 5000 })
      await submit(page, 'button[data-passkey=authenticate]')
      expect(await text(page, '#account-handle')).toBe(`@${a.handle}`)
      expect(await text(page, '#passkey-list')).not.toContain('last used never')

      await submit(page, '#passkey-list button:has-text("Remove")')
      expect(await text(page, '#security #notice')).toContain('removed')
      expect(await text(page, '#passkey-list')).toContain('No passkeys yet')
    } finally {
      await ctx.close()
    }
  })

  it('deactivates and reactivates the account, then deletes it with a mailed code and the password', async () => {
    const a = await account()
    const agent = await agentFor(a)
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      await submit(page, '#status button:has-text("Deactivate")')
      expect(await text(page, '#account-status')).toBe('deactivated')
      expect((await agent.com.atproto.server.checkAccountStatus()).data.activated).toBe(false)
      // like the XRPC methods, a deactivated account changes nothing else until it comes back
      expect(await text(page, '#deactivated')).toContain('Reactivate it')
      expect(await page.locator('#password, #handle, #email, #security, #ap-name').count()).toBe(0)
      await submit(page, '#status button:has-text("Reactivate")')
      expect(await text(page, '#status #notice')).toContain('active again')
      expect((await agent.com.atproto.server.checkAccountStatus()).data.activated).toBe(true)

      await submit(page, '#status button:has-text("Email me a deletion code")')
      expect(await text(page, '#status #notice')).toContain(a.email)
      await page.fill('#delete-token', sink.tokenFor(a.email))
      await page.fill('#delete-password', 'wrong password here')
      await submit(page, '#status button:has-text("Delete my account")')
      expect(await text(page, '#status #error')).toContain('not right')
      await page.fill('#delete-token', sink.tokenFor(a.email))
      await page.fill('#delete-password', a.password)
      await submit(page, '#status button:has-text("Delete my account")')
      expect(await text(page, 'h1')).toBe('Your account was deleted')
      await expect(agentFor(a)).rejects.toThrow()
    } finally {
      await ctx.close()
    }
  })

  it('shares the sign-in with the OAuth pages on this browser, both ways', async () => {
    const a = await account()
    const b = await account()
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      // signed in to an app, remembered: the account page offers the account without a password
      await page.goto(await authorizeUrl())
      await page.fill('#handle', a.handle)
      await page.fill('#password', a.password)
      await Promise.all([page.waitForSelector('#accept', { timeout: 10_000 }), page.click('button[value=allow]')])
      await page.goto(`${base}/account`)
      expect(await text(page, '#accounts')).toContain(`@${a.handle}`)
      await submit(page, `#accounts button.account:has-text("@${a.handle}")`)
      expect(await text(page, '#account-handle')).toBe(`@${a.handle}`)

      // signed in on the account page: the next app's sign-in offers that account too
      await signIn(page, b)
      await page.goto(await authorizeUrl())
      expect(await text(page, '#accounts')).toContain(`@${b.handle}`)
      await Promise.all([
        page.waitForSelector('#accept', { timeout: 10_000 }),
        page.click(`#accounts button.account:has-text("@${b.handle}")`),
      ])
      expect(await text(page, '#account-handle')).toBe(`@${b.handle}`)
    } finally {
      await ctx.close()
    }
  })

  it('resets a forgotten password through the mailed code', async () => {
    const a = await account()
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await page.goto(`${base}/account?view=login`)
      await submit(page, 'a:has-text("Forgot password?")')
      await page.fill('#email', a.email)
      const before = sink.received.length
      await submit(page, 'button:has-text("Send code")')
      await sink.waitFor(before + 1)
      const mail = sink.received.slice(before).find((m) => m.body.to === a.email)
      const token = (mail?.body.text as string).split('\n').find((l) => /^[A-Z2-7]{5}-[A-Z2-7]{5}$|^[A-Z2-7]{32}$/.test(l.trim()))
      expect(token).toBeTruthy()
      await page.fill('#token', token!.trim())
      await page.fill('#password', 'reset on the account page')
      await submit(page, 'button:has-text("Set password")')
      expect(await text(page, '#notice')).toContain('Sign in with the new one')
      await signIn(page, { handle: a.handle, password: 'reset on the account page' })
      expect(await text(page, '#account-handle')).toBe(`@${a.handle}`)
    } finally {
      await ctx.close()
    }
  })

  it('asks for the emailed sign-in code at the second step once email codes are on', async () => {
    const a = await account()
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      await submit(page, '#security button:has-text("Turn on")')
      await submit(page, 'button:has-text("Sign out on this device")')
      await page.goto(`${base}/account?view=login`)
      await page.fill('#handle', a.handle)
      await page.fill('#password', a.password)
      const before = sink.received.length
      await submit(page, 'button:has-text("Sign in")')
      expect(await text(page, '#notice')).toContain('We emailed you a sign-in code')
      await sink.waitFor(before + 1)
      const mail = sink.received.slice(before).find((m) => m.body.to === a.email && m.body.subject === 'Your sign-in code')
      const code = (mail?.body.text as string).split('\n').find((l) => /^[A-Z2-7]{5}-[A-Z2-7]{5}$/.test(l))
      expect(code).toBeTruthy()
      await page.fill('#code', code!.toLowerCase())
      await submit(page, 'button:has-text("Continue")')
      expect(await text(page, '#account-handle')).toBe(`@${a.handle}`)

      // that sign-in, code included, counts on this browser's app sign-in: picking the account
      // goes straight to consent, asking for neither the password nor a code again
      await page.goto(await authorizeUrl())
      await Promise.all([
        page.waitForSelector('#accept', { timeout: 10_000 }),
        page.click(`#accounts button.account:has-text("@${a.handle}")`),
      ])
    } finally {
      await ctx.close()
    }
  })

  it('works without JavaScript, saying that only passkeys need it', async () => {
    const a = await account()
    const ctx = await browser.newContext({ javaScriptEnabled: false })
    const page = await ctx.newPage()
    try {
      await signIn(page, a)
      expect(await page.isVisible('button[data-passkey=register]')).toBe(false)
      expect(await text(page, '#passkey-form [data-needs-script]')).toContain('needs JavaScript')
      await page.fill('#ap-name', 'no-script')
      await submit(page, '#app-passwords button:has-text("Create app password")')
      expect(await text(page, '#app-password-value')).toMatch(/^[a-z2-9-]{19}$/)
    } finally {
      await ctx.close()
    }
  })

  it('refuses a form without the device CSRF token, and asks for the password again after the re-auth window', async () => {
    const a = await account()
    const http = httpClient()
    const login = await http.get('/account?view=login')
    const csrf = csrfOf(login.text)
    const signedIn = await http.post('/account/sign-in', { csrf_token: csrf, handle: a.handle, password: a.password, remember: 'on' })
    expect(signedIn.status).toBe(303)
    const page = await http.get('/account')
    expect(page.text).toContain(`@${a.handle}`)
    expect(page.text).toContain('sensitive changes need no password until')

    const list = () => xrpc(pds.url, 'com.atproto.server.listAppPasswords', { headers: { authorization: `Bearer ${tokens}` } })
    const tokens = (
      (await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: a.handle, password: a.password } })).body as {
        accessJwt: string
      }
    ).accessJwt
    for (const token of [undefined, 'forged', csrfOf(login.text).slice(1)]) {
      const refused = await http.post('/account/app-passwords/create', { ...(token ? { csrf_token: token } : {}), name: 'forged-one' })
      expect(refused.status).toBe(403)
      expect(refused.text).toContain('Form expired')
    }
    expect((await list()).body.passwords).toHaveLength(0)

    // the password was confirmed at sign-in; let the window close
    const db = pds.services.db
    await db
      .updateTable('device_account')
      .set({
        authenticated_at: new Date(Date.now() - 6 * 60_000).toISOString(),
        password_at: new Date(Date.now() - 6 * 60_000).toISOString(),
      })
      .where('did', '=', a.did)
      .execute()
    const locked = await http.post('/account/app-passwords/create', { csrf_token: csrf, name: 'after-window' })
    expect(locked.status).toBe(303)
    expect(locked.location).toBe('/account?view=confirm&then=app-passwords')
    expect((await list()).body.passwords).toHaveLength(0)
    // ending access needs no password
    const confirmPage = await http.get(locked.location!)
    expect(confirmPage.text).toContain('Confirm your password')
    const wrong = await http.post('/account/confirm', { csrf_token: csrf, password: 'not the password', then: 'app-passwords' })
    expect(wrong.location).toContain('view=confirm')
    const right = await http.post('/account/confirm', { csrf_token: csrf, password: a.password, then: 'app-passwords' })
    expect(right.location).toBe('/account#app-passwords')
    const made = await http.post('/account/app-passwords/create', { csrf_token: csrf, name: 'after-window' })
    expect(made.location).toBe('/account#app-passwords')
    const shown = await http.get('/account')
    expect(shown.text).toMatch(/id="app-password-value">[a-z2-9-]{19}</)
    expect((await list()).body.passwords.map((p: { name: string }) => p.name)).toEqual(['after-window'])
    // the page allows only its own script
    expect(shown.csp).toContain("script-src 'self'")
    expect(shown.csp).not.toContain('unsafe-inline')
  })

  it('sends the mails a person asks for on the budget the XRPC methods that send them share', async () => {
    const limited = await startTestPds(
      { ...sinkEnv(sink), PDS_RATE_LIMITS_ENABLED: 'true' },
      { rateLimits: { limits: { email: [{ durationMs: 60_000, points: 3 }] } } },
    )
    try {
      const a = { handle: 'limited.test', email: 'limited@example.com', password: PASSWORD }
      const made = await xrpc(limited.url, 'com.atproto.server.createAccount', { body: a })
      expect(made.status, made.text).toBe(200)
      const http = httpClient(limited.url)
      const csrf = csrfOf((await http.get('/account?view=login')).text)
      expect((await http.post('/account/sign-in', { csrf_token: csrf, handle: a.handle, password: a.password })).status).toBe(303)
      const send = async () => {
        await http.post('/account/email/send-confirmation', { csrf_token: csrf })
        return (await http.get('/account')).text
      }
      for (let i = 0; i < 3; i++) expect(await send()).toContain('We sent a confirmation code')
      expect(await send()).toContain('Too many emails')
      const res = await xrpc(limited.url, 'com.atproto.server.requestEmailConfirmation', {
        method: 'POST',
        headers: { authorization: `Bearer ${(made.body as { accessJwt: string }).accessJwt}` },
      })
      expect(res.status).toBe(429)
    } finally {
      await limited.stop()
    }
  })
})
