// Second factors on the OAuth sign-in page, in headless Chromium, driven by the official
// @atproto/oauth-client-node: the emailed code (read from the mail sink), an authenticator app's
// code, a recovery code once, wrong codes refused with a visible error and charged to the login
// budget, a remembered device not asked again (and asked again once its sign-in is old or
// predates the factor), a mail service that is down, and passkeys in Chromium's virtual
// authenticator: signing in with no password, and as the second factor after one. With
// PDS_SCREENSHOTS=1 the factor step's screenshot is rewritten in docs/images/; otherwise it lands
// in test/artifacts/.
import { describeInChromium, launchChromium } from './browser-helpers.js'
import { mkdirSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { AtpAgent } from '@atproto/api'
import { NodeOAuthClient, type NodeSavedSession, type NodeSavedState } from '@atproto/oauth-client-node'
import { requestLocalLock } from '@atproto/oauth-client'
import { Secret, TOTP } from 'otpauth'
import { type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { didDocFor } from '../src/account/store.js'
import { beginTotp, confirmTotp, passkeyRegistrationOptions, verifyPasskeyRegistration } from '../src/account/factors/index.js'
import { dialect, startTestPds, PASSWORD, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'

const SCREENSHOTS = process.env.PDS_SCREENSHOTS === '1'
const SHOTS = SCREENSHOTS ? new URL('../docs/images/', import.meta.url).pathname : new URL('./artifacts/', import.meta.url).pathname
const d = describeInChromium
const SCOPE = 'atproto transition:generic'
// wrong codes and passwords an account may try in five minutes (each kind counts on its own key)
// a password and a code each cost an attempt at the account, whichever spelling names it
const LOGIN_BUDGET = 6

let pds: TestPds
let sink: MailSink
let plc: Server
let plcUrl: string
let browser: Browser
// the app's redirect target, a loopback server that only says the browser is back
let app: Server
let REDIRECT: string

function newClient() {
  const map = <T>() => {
    const m = new Map<string, T>()
    return {
      get: async (k: string) => m.get(k),
      set: async (k: string, v: T) => void m.set(k, v),
      del: async (k: string) => void m.delete(k),
    }
  }
  return new NodeOAuthClient({
    clientMetadata: {
      client_id: `http://localhost?${new URLSearchParams({ redirect_uri: REDIRECT, scope: SCOPE })}`,
      redirect_uris: [REDIRECT],
      scope: SCOPE,
      response_types: ['code'],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      dpop_bound_access_tokens: true,
    },
    stateStore: map<NodeSavedState>(),
    sessionStore: map<NodeSavedSession>(),
    handleResolver: pds.url,
    plcDirectoryUrl: plcUrl,
    allowHttp: true,
    requestLock: requestLocalLock,
  })
}

async function newContext(opts: { javaScriptEnabled?: boolean } = {}): Promise<BrowserContext> {
  return browser.newContext({ viewport: { width: 720, height: 900 }, ...opts })
}

/** an official client's sign-in opened in the page; ends on whatever page the server shows first */
async function startSignIn(page: Page, handle: string | undefined) {
  const client = newClient()
  const authUrl = await client.authorize(handle ?? pds.env.PDS_PUBLIC_URL, { scope: SCOPE })
  await page.goto(authUrl.href, { timeout: 10_000 })
  return client
}

/** Allow on the consent page, then the client's callback: the session's getSession answers for `did` */
async function allowAndFinish(page: Page, client: NodeOAuthClient, did: string) {
  await page.waitForSelector('#accept', { timeout: 10_000 })
  await Promise.all([page.waitForURL((u) => u.href.startsWith(REDIRECT), { timeout: 10_000 }), page.click('#accept')])
  const { session } = await client.callback(new URL(page.url()).searchParams)
  expect(session.did).toBe(did)
  const res = await session.fetchHandler('/xrpc/com.atproto.server.getSession')
  expect(res.status).toBe(200)
  expect(((await res.json()) as { did: string }).did).toBe(did)
}

/** clicks what posts a form and waits for the page the server answers with */
const submit = (page: Page, selector: string) => Promise.all([page.waitForEvent('load', { timeout: 10_000 }), page.click(selector)])

async function password(page: Page, handle: string) {
  if ((await page.inputValue('#handle')) !== handle) await page.fill('#handle', handle)
  await page.fill('#password', PASSWORD)
  await submit(page, 'button[value=allow]')
}

async function enterCode(page: Page, code: string) {
  await page.fill('#code', code)
  await submit(page, '#verify')
}

async function shoot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true })
  await page.screenshot({ path: join(SHOTS, SCREENSHOTS ? `${name}.png` : `${name}-${dialect}.png`), fullPage: true })
}

let n = 0
/** a fresh account with a confirmed address, through the official XRPC client */
async function newAccount(prefix: string) {
  n++
  const handle = `${prefix}${n}.test`
  const email = `${prefix}${n}@example.com`
  const agent = new AtpAgent({ service: pds.url })
  await agent.createAccount({ handle, email, password: PASSWORD })
  await agent.com.atproto.server.requestEmailConfirmation()
  await agent.com.atproto.server.confirmEmail({ email, token: sink.tokenFor(email) })
  return { agent, handle, email, did: agent.session!.did }
}

/** an authenticator app set up through the factors API; its secret and the recovery codes */
async function withTotp(acct: { did: string; handle: string }) {
  const setup = await beginTotp(pds.services, acct.did, acct.handle)
  if ('alreadyOn' in setup) throw new Error('authenticator already on')
  const totp = new TOTP({ secret: Secret.fromBase32(setup.secret) })
  const confirmed = await confirmTotp(pds.services, acct.did, totp.generate())
  if (!confirmed.ok) throw new Error('authenticator not confirmed')
  // the confirming code's step is spent: sign-ins use the next one
  const next = () => totp.generate({ timestamp: Date.now() + 30_000 })
  return { next, recoveryCodes: confirmed.recoveryCodes }
}

/** the sign-in code in the latest mail to `to` */
function mailedCode(to: string): string {
  const msg = [...sink.received].reverse().find((m) => m.body.to === to && m.body.subject === 'Your sign-in code')
  const line = (msg?.body.text as string | undefined)?.split('\n').find((l) => /^[A-Z2-7]{5}-[A-Z2-7]{5}$/.test(l))
  if (!line) throw new Error(`no sign-in code mailed to ${to}`)
  return line
}

/** a virtual platform authenticator on the page (user verification always succeeds) */
async function virtualAuthenticator(page: Page) {
  const cdp = await page.context().newCDPSession(page)
  await cdp.send('WebAuthn.enable')
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
  })
  return { cdp, authenticatorId }
}

/** registers a passkey of the page's authenticator for the account, through the factors API */
async function registerPasskey(page: Page, acct: { did: string; handle: string }) {
  await page.goto(`${pds.env.PDS_PUBLIC_URL}/web/style.css`, { timeout: 10_000 })
  const options = await passkeyRegistrationOptions(pds.services, acct)
  const response = await page.evaluate(async (o) => {
    const bytes = (s: string) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (ch) => ch.charCodeAt(0))
    const b64u = (b: ArrayBuffer) =>
      btoa(String.fromCharCode(...new Uint8Array(b)))
        .replace(/\+/g, '-')
        .replace(/\//g, '_')
        .replace(/=+$/, '')
    // the page's own WebAuthn API (the tests are type-checked without the DOM library)
    type Attestation = { clientDataJSON: ArrayBuffer; attestationObject: ArrayBuffer; getTransports(): string[] }
    type Credentials = { create(o: unknown): Promise<{ id: string; rawId: ArrayBuffer; type: string; response: Attestation }> }
    const { credentials } = (globalThis as unknown as { navigator: { credentials: Credentials } }).navigator
    const cred = await credentials.create({
      publicKey: {
        ...o,
        challenge: bytes(o.challenge),
        user: { ...o.user, id: bytes(o.user.id) },
        excludeCredentials: (o.excludeCredentials ?? []).map((c) => ({ ...c, id: bytes(c.id) })),
      },
    })
    const r = cred.response
    return {
      id: cred.id,
      rawId: b64u(cred.rawId),
      type: 'public-key' as const,
      clientExtensionResults: {},
      response: { clientDataJSON: b64u(r.clientDataJSON), attestationObject: b64u(r.attestationObject), transports: r.getTransports() },
    }
  }, options)
  const result = await verifyPasskeyRegistration(pds.services, acct.did, response, 'Chromium')
  if (!result.ok) throw new Error(result.message)
  return result
}

d('second factors on the sign-in page, in headless Chromium', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink, { PDS_RATE_LIMITS_ENABLED: 'true' }), {
      rateLimits: {
        limits: { login: [{ durationMs: 300_000, points: LOGIN_BUDGET }], loginAddress: [{ durationMs: 300_000, points: 10_000 }] },
      },
    })
    plc = createServer(async (req, res) => {
      const doc = await didDocFor(pds.services.db, decodeURIComponent((req.url ?? '/').slice(1)))
      if (!doc) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"DID not registered"}')
      res.writeHead(200, { 'content-type': 'application/did+ld+json' }).end(JSON.stringify(doc))
    })
    await new Promise<void>((resolve) => plc.listen(0, '127.0.0.1', resolve))
    plcUrl = `http://127.0.0.1:${(plc.address() as AddressInfo).port}`
    app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Back at the app</h1>'))
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve))
    REDIRECT = `http://127.0.0.1:${(app.address() as AddressInfo).port}/oauth-callback`
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
    await new Promise((resolve) => plc?.close(resolve))
    await new Promise((resolve) => app?.close(resolve))
    await pds?.stop()
    await sink?.close()
  })

  it('asks for the emailed code after the password; a wrong code is refused, the mailed one continues to consent', async () => {
    const acct = await newAccount('mailed')
    // switched on the official way: a token from requestEmailUpdate, then updateEmail
    await acct.agent.com.atproto.server.requestEmailUpdate()
    await acct.agent.com.atproto.server.updateEmail({ email: acct.email, emailAuthFactor: true, token: sink.tokenFor(acct.email) })

    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      const client = await startSignIn(page, acct.handle)
      const before = sink.received.length
      await password(page, acct.handle)
      expect(await page.textContent('h1')).toBe('Confirm it is you')
      expect(await page.textContent('#notice')).toContain('We emailed a sign-in code')
      expect(await page.textContent('#code-hint')).toBe('Enter the code we emailed you.')
      expect(await page.isVisible('#factor-passkey-button')).toBe(false)
      await sink.waitFor(before + 1)
      const code = mailedCode(acct.email)

      // the password alone is held by the server: a consent form posted now grants nothing
      const csrf = await page.inputValue('input[name=csrf_token] >> nth=0')
      const forged = await page.request.post(page.url(), {
        form: { csrf_token: csrf, step: 'consent', did: acct.did, action: 'allow' },
        maxRedirects: 0,
      })
      expect(forged.status()).toBe(401)
      expect(await forged.text()).toContain('Sign in again to continue')

      // "send again" right away waits; the code already mailed still works
      await submit(page, '#resend')
      expect(await page.textContent('#error')).toContain('Wait a little')
      expect(sink.received.length).toBe(before + 1)

      await enterCode(page, 'AAAAA-BBBBB')
      expect(await page.textContent('#error')).toBe('That code is wrong or was already used.')
      await shoot(page, 'sign-in-factor')
      await enterCode(page, code)
      expect(await page.textContent('#account-handle')).toBe(`@${acct.handle}`)
      await allowAndFinish(page, client, acct.did)
    } finally {
      await ctx.close()
    }
  })

  it("asks for the authenticator app's code; the remembered device is not asked again until its sign-in is old", async () => {
    const acct = await newAccount('app')
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      // signed in on this device before the app was set up: that sign-in no longer counts
      let client = await startSignIn(page, acct.handle)
      await password(page, acct.handle)
      await allowAndFinish(page, client, acct.did)
      const totp = await withTotp(acct)

      client = await startSignIn(page, acct.handle)
      await submit(page, '#accounts .account')
      expect(await page.textContent('#notice')).toContain('Enter your password')
      await password(page, acct.handle)
      expect(await page.textContent('#code-hint')).toBe('Enter the 6-digit code from your authenticator app or one of your recovery codes.')
      await enterCode(page, totp.next())
      await allowAndFinish(page, client, acct.did)

      // now the device's sign-in included the app's code: one click, straight to consent
      client = await startSignIn(page, acct.handle)
      await submit(page, '#accounts .account')
      await allowAndFinish(page, client, acct.did)

      // a week later the remembered sign-in has run out: password and code again
      const old = new Date(Date.now() - 8 * 24 * 3600 * 1000).toISOString()
      await pds.services.db
        .updateTable('device_account')
        .set({ authenticated_at: old, factor_at: old })
        .where('did', '=', acct.did)
        .execute()
      client = await startSignIn(page, acct.handle)
      await submit(page, '#accounts .account')
      await password(page, acct.handle)
      expect(await page.isVisible('#code')).toBe(true)
      await enterCode(page, totp.recoveryCodes[0])
      await allowAndFinish(page, client, acct.did)
    } finally {
      await ctx.close()
    }
  })

  it('takes a recovery code once; wrong codes spend the login budget', async () => {
    const acct = await newAccount('recover')
    const { recoveryCodes } = await withTotp(acct)
    const first = await newContext()
    const second = await newContext()
    try {
      let page = await first.newPage()
      let client = await startSignIn(page, acct.handle)
      await password(page, acct.handle)
      await enterCode(page, recoveryCodes[3])
      await allowAndFinish(page, client, acct.did)

      // another browser: the same recovery code is refused, and each wrong code costs a login attempt
      page = await second.newPage()
      client = await startSignIn(page, acct.handle)
      await password(page, acct.handle)
      await enterCode(page, recoveryCodes[3])
      expect(await page.textContent('#error')).toBe('That code is wrong or was already used.')
      // the budget counts the account, passwords and codes alike: six tries in all (four spent
      // above: two passwords, two codes), then the page says wait
      await enterCode(page, '000000')
      await enterCode(page, '999999')
      expect(await page.textContent('#error')).toBe('That code is wrong or was already used.')
      await enterCode(page, recoveryCodes[4])
      expect(await page.textContent('#error')).toContain('Too many sign-in attempts')
      expect(await page.isVisible('#code')).toBe(true)
    } finally {
      await first.close()
      await second.close()
    }
  })

  it('says when the code could not be mailed; the authenticator app still signs in', async () => {
    const acct = await newAccount('maildown')
    await acct.agent.com.atproto.server.requestEmailUpdate()
    await acct.agent.com.atproto.server.updateEmail({ email: acct.email, emailAuthFactor: true, token: sink.tokenFor(acct.email) })
    const totp = await withTotp(acct)
    const ctx = await newContext()
    const page = await ctx.newPage()
    sink.mode = 'fail'
    try {
      const client = await startSignIn(page, acct.handle)
      await password(page, acct.handle)
      expect(await page.textContent('#error')).toContain('could not be sent')
      expect(await page.textContent('#code-hint')).toBe(
        'Enter the code we emailed you, the 6-digit code from your authenticator app or one of your recovery codes.',
      )
      await enterCode(page, totp.next())
      await allowAndFinish(page, client, acct.did)
    } finally {
      sink.mode = 'ok'
      await ctx.close()
    }
  })

  it('signs in with a passkey and no password, and takes a passkey as the second factor', async () => {
    const acct = await newAccount('passkey')
    const ctx = await newContext()
    const page = await ctx.newPage()
    try {
      await virtualAuthenticator(page)
      const registered = await registerPasskey(page, acct)
      expect(registered.recoveryCodes).toHaveLength(10)

      // no handle, no password: the browser offers the passkey it holds for this server
      let client = await startSignIn(page, undefined)
      // the script is the server's own file: no inline script is allowed
      const csp = (await page.request.get(page.url())).headers()['content-security-policy']
      expect(csp).toContain("script-src 'self'")
      expect(csp).not.toContain('unsafe-inline')
      await page.waitForSelector('#passkey-signin-button', { state: 'visible', timeout: 10_000 })
      expect(await page.isVisible('#passkey-needs-js')).toBe(false)
      await Promise.all([page.waitForSelector('#accept', { timeout: 10_000 }), page.click('#passkey-signin-button')])
      expect(await page.textContent('#account-handle')).toBe(`@${acct.handle}`)
      await allowAndFinish(page, client, acct.did)

      // a new device session in the same browser: the password, then "Use a passkey"
      await ctx.clearCookies()
      client = await startSignIn(page, acct.handle)
      await password(page, acct.handle)
      expect(await page.textContent('#code-hint')).toBe('Enter one of your recovery codes.')
      await page.waitForSelector('#factor-passkey-button', { state: 'visible', timeout: 10_000 })
      await Promise.all([page.waitForSelector('#accept', { timeout: 10_000 }), page.click('#factor-passkey-button')])
      await allowAndFinish(page, client, acct.did)
    } finally {
      await ctx.close()
    }
    // without JavaScript there is no passkey button, and the page says why
    const nojs = await newContext({ javaScriptEnabled: false })
    try {
      const page = await nojs.newPage()
      await startSignIn(page, acct.handle)
      expect(await page.isVisible('#passkey-signin-button')).toBe(false)
      expect(await page.textContent('#passkey-needs-js')).toContain('needs JavaScript')
      await password(page, acct.handle)
      expect(await page.isVisible('#factor-passkey-button')).toBe(false)
      expect(await page.isVisible('#code')).toBe(true)
    } finally {
      await nojs.close()
    }
  })
})
