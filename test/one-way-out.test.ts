// One way out: every path that ends an account's access ends all of it, tried through the doors an
// intruder uses. A planted passkey no longer signs in after revokeAccountCredentials; app passwords
// (privileged or not), OAuth grants and their access tokens, and a sign-in held waiting for its
// emailed code all end with a password change, whichever way it was made; takedown and deletion
// end the same. And the owner is mailed whenever a credential is added or changed.
import { randomBytes } from 'node:crypto'
import { AtpAgent } from '@atproto/api'
import { Secret, TOTP } from 'otpauth'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, describe, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink, type Received } from './mail-sink.js'
import { authorize, dpopGet, dpopKey, exchange, openPage, par, post, refreshGrant, submitPage } from './oauth-helpers.js'
import { SoftAuthenticator } from './soft-authenticator.js'
import {
  beginTotp,
  confirmTotp,
  passkeyRegistrationOptions,
  setEmailAuthFactor,
  verifyPasskeyRegistration,
} from '../src/account/factors/index.js'

let pds: TestPds
let sink: MailSink
let srv: { url: string; publicUrl: string }
const admin = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }

/** a fresh account with a confirmed address, signed in through AtpAgent */
async function account() {
  const id = randomBytes(4).toString('hex')
  const handle = `out${id}.test`
  const email = `out${id}@example.com`
  const agent = new AtpAgent({ service: pds.url })
  await agent.createAccount({ handle, email, password: PASSWORD })
  await agent.com.atproto.server.requestEmailConfirmation()
  await agent.com.atproto.server.confirmEmail({ email, token: sink.tokenFor(email) })
  return { agent, handle, email, did: agent.session!.did, password: PASSWORD }
}
type Account = Awaited<ReturnType<typeof account>>

const createSession = (identifier: string, password: string) =>
  xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password } })

/** an OAuth app's grant: its key, access token and refresh token */
async function oauthGrant(a: Account) {
  const key = await dpopKey()
  const { code, verifier } = await authorize(srv, key, { handle: a.handle, password: a.password })
  const tokens = await exchange(srv, key, code, verifier)
  expect(tokens.status, tokens.text).toBe(200)
  expect((await dpopGet(srv, key, tokens.json.access_token, 'com.atproto.server.getSession')).status).toBe(200)
  return { key, access: tokens.json.access_token as string, refresh: tokens.json.refresh_token as string }
}

/** `status`: a deleted account's tokens meet its status (403) before their revocation */
async function expectGrantDead(g: Awaited<ReturnType<typeof oauthGrant>>, status = 401) {
  const access = await dpopGet(srv, g.key, g.access, 'com.atproto.server.getSession')
  expect(access.status).toBe(status)
  const refreshed = await refreshGrant(srv, g.key, g.refresh)
  expect([refreshed.status, refreshed.json?.error]).toEqual([400, 'invalid_grant'])
}

/** the OAuth sign-in page with email sign-in codes on: a correct password, held waiting for its code */
async function heldSignIn(a: Account) {
  const requestUri = (await par(srv, await dpopKey())).json.request_uri as string
  const page = await openPage(pds.url, requestUri)
  const before = sink.received.length
  const held = await submitPage(
    pds.url,
    requestUri,
    { step: 'login', handle: a.handle, password: a.password, csrf_token: page.csrf },
    page.cookie,
  )
  expect(held.text).toContain('name="code"')
  await sink.waitFor(before + 1)
  const mail = sink.received.slice(before).find((m) => m.body.to === a.email && m.body.subject === 'Your sign-in code')
  const code = (mail?.body.text as string).split('\n').find((l) => /^[A-Z2-7]{5}-[A-Z2-7]{5}$/.test(l))!
  const action = `${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`
  /** the mailed code given at the held step: the page's answer */
  return () => post(action, { step: 'factor', code, csrf_token: page.csrf }, { cookie: page.cookie })
}

/** everything an intruder may hold of `a`: app passwords, an OAuth grant, a session, a held sign-in */
async function intruderHoldings(a: Account) {
  const plain = (await a.agent.com.atproto.server.createAppPassword({ name: 'plain-app' })).data.password
  const privileged = (await a.agent.com.atproto.server.createAppPassword({ name: 'privileged-app', privileged: true })).data.password
  expect((await createSession(a.handle, plain)).status).toBe(200)
  expect((await createSession(a.handle, privileged)).status).toBe(200)
  const grant = await oauthGrant(a)
  const session = (await createSession(a.handle, a.password)).body as { refreshJwt: string; accessJwt: string }
  expect(await setEmailAuthFactor(pds.services, a.did, true)).toBe(true)
  const finishSignIn = await heldSignIn(a)
  return { plain, privileged, grant, session, finishSignIn }
}

async function expectAllEnded(a: Account, h: Awaited<ReturnType<typeof intruderHoldings>>) {
  for (const pw of [h.plain, h.privileged]) {
    const res = await createSession(a.handle, pw)
    expect([res.status, res.body.error]).toEqual([401, 'AuthenticationRequired'])
  }
  await expectGrantDead(h.grant)
  const refreshed = await xrpc(pds.url, 'com.atproto.server.refreshSession', {
    method: 'POST',
    headers: { authorization: `Bearer ${h.session.refreshJwt}` },
  })
  expect(refreshed.body.error).toBe('ExpiredToken')
  const access = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { authorization: `Bearer ${h.session.accessJwt}` } })
  expect(access.body.error).toBe('ExpiredToken')
  // the held sign-in is gone: the right code no longer reaches the consent page
  const finished = await h.finishSignIn()
  expect(finished.status).not.toBe(302)
  expect(finished.text).not.toContain('name="step" value="consent"')
}

/** asks for a reset code for `a` (`ask`: the door used) and waits, bounded, for the mail carrying it */
async function resetCode(
  email: string,
  ask: () => Promise<unknown> = () => xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email } }),
) {
  const before = sink.received.length
  await ask()
  const until = Date.now() + 5000
  while (!sink.received.slice(before).some((m) => m.body.to === email && m.body.subject === 'Reset your password')) {
    if (Date.now() > until) throw new Error(`no reset code mailed to ${email}`)
    await new Promise((r) => setTimeout(r, 20))
  }
  return sink.tokenFor(email)
}

/** the latest notice to `to` whose subject says `headline`, waiting (bounded) for it */
async function notice(to: string, headline: string): Promise<Received> {
  const until = Date.now() + 5000
  for (;;) {
    const hit = sink.received.findLast((m) => m.body.to === to && m.body.subject === `Security notice: ${headline}`)
    if (hit) return hit
    if (Date.now() > until) throw new Error(`no "${headline}" notice to ${to}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** what, when (within the minute around the change) and the account page's address, no secret */
function expectNotice(mail: Received, what: RegExp, since: number, secrets: string[] = []) {
  const text = mail.body.text as string
  expect(text).toMatch(what)
  const when = /on (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) UTC/.exec(text)
  expect(when).toBeTruthy()
  const at = Date.parse(`${when![1].replace(' ', 'T')}Z`)
  expect(at).toBeGreaterThanOrEqual(Math.floor(since / 1000) * 1000)
  expect(at).toBeLessThanOrEqual(Date.now())
  expect(text).toContain(`${pds.env.PDS_PUBLIC_URL}/account`)
  for (const s of secrets) expect(text).not.toContain(s)
}

describe('one way out', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink))
    srv = { url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })

  it('F1: a planted passkey, the authenticator app and recovery codes no longer sign in after revokeAccountCredentials', async () => {
    const a = await account()
    const origin = new URL(pds.services.config.publicUrl).origin
    const intruder = new SoftAuthenticator(origin)
    const planted = await verifyPasskeyRegistration(
      pds.services,
      a.did,
      intruder.register(await passkeyRegistrationOptions(pds.services, a)),
      'Planted',
    )
    expect(planted.ok).toBe(true)
    const setup = await beginTotp(pds.services, a.did, a.handle)
    if ('alreadyOn' in setup) throw new Error('authenticator already on')
    expect((await confirmTotp(pds.services, a.did, new TOTP({ secret: Secret.fromBase32(setup.secret) }).generate())).ok).toBe(true)

    /** the password-less passkey sign-in of the OAuth page: its answer */
    const passkeySignIn = async () => {
      const requestUri = (await par(srv, await dpopKey())).json.request_uri as string
      const page = await openPage(pds.url, requestUri)
      const action = `${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`
      const options = await post(action, { step: 'passkey-options', csrf_token: page.csrf }, { cookie: page.cookie })
      expect(options.status).toBe(200)
      const answer = intruder.authenticate(options.json)
      return post(action, { step: 'passkey', passkey_response: JSON.stringify(answer), csrf_token: page.csrf }, { cookie: page.cookie })
    }
    expect((await passkeySignIn()).text).toContain('name="step" value="consent"')

    const revoked = await xrpc(pds.url, 'com.atproto.temp.revokeAccountCredentials', { body: { account: a.did }, headers: admin })
    expect(revoked.status).toBe(200)
    const after = await passkeySignIn()
    expect(after.status).toBe(401)
    expect(after.text).not.toContain('name="step" value="consent"')

    // the owner resets the password and signs in with it alone: the app and its codes went too
    const reset = await xrpc(pds.url, 'com.atproto.server.resetPassword', {
      body: { token: await resetCode(a.email), password: 'owner is back 1' },
    })
    expect(reset.status).toBe(200)
    const back = await createSession(a.handle, 'owner is back 1')
    expect(back.status).toBe(200)
    expect(back.body.accessJwt).toBeTruthy()
  })

  it("F3: app passwords, OAuth grants, sessions and held sign-ins end with the owner's reset (com.atproto.server.resetPassword)", async () => {
    const a = await account()
    const h = await intruderHoldings(a)
    const reset = await xrpc(pds.url, 'com.atproto.server.resetPassword', {
      body: { token: await resetCode(a.email), password: 'reset by owner 1' },
    })
    expect(reset.status).toBe(200)
    await expectAllEnded(a, h)
  })

  it("F3: ... with the operator's com.atproto.admin.updateAccountPassword", async () => {
    const a = await account()
    const h = await intruderHoldings(a)
    const set = await xrpc(pds.url, 'com.atproto.admin.updateAccountPassword', {
      body: { did: a.did, password: 'set by admin 1' },
      headers: admin,
    })
    expect(set.status).toBe(200)
    await expectAllEnded(a, h)
  })

  it('F3: ... with the reset form of the OAuth sign-in page', async () => {
    const a = await account()
    const h = await intruderHoldings(a)
    const requestUri = (await par(srv, await dpopKey())).json.request_uri as string
    const page = await openPage(pds.url, requestUri)
    const action = `${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`
    const token = await resetCode(a.email, () =>
      post(action, { step: 'reset-request', email: a.email, csrf_token: page.csrf }, { cookie: page.cookie }),
    )
    const done = await post(
      action,
      { step: 'reset', token, password: 'reset on the page 1', csrf_token: page.csrf },
      { cookie: page.cookie },
    )
    expect(done.text).toContain('Your password was changed')
    await expectAllEnded(a, h)
  })

  it('takedown and deletion end the same, and a lifted takedown signs nobody back in', async () => {
    const a = await account()
    const h = await intruderHoldings(a)
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: a.did }
    const down = await xrpc(pds.url, 'com.atproto.admin.updateSubjectStatus', {
      body: { subject, takedown: { applied: true } },
      headers: admin,
    })
    expect(down.status).toBe(200)
    const up = await xrpc(pds.url, 'com.atproto.admin.updateSubjectStatus', {
      body: { subject, takedown: { applied: false } },
      headers: admin,
    })
    expect(up.status).toBe(200)
    await expectAllEnded(a, h)

    const b = await account()
    const g = await oauthGrant(b)
    const plain = (await b.agent.com.atproto.server.createAppPassword({ name: 'plain-app' })).data.password
    const gone = await xrpc(pds.url, 'com.atproto.admin.deleteAccount', { body: { did: b.did }, headers: admin })
    expect(gone.status).toBe(200)
    await expectGrantDead(g, 403)
    expect((await createSession(b.handle, plain)).status).toBe(401)
    expect(await pds.services.db.selectFrom('app_password').select('name').where('did', '=', b.did).execute()).toEqual([])
  })

  it('mails the owner when a passkey, app password, authenticator app, password or email address is added or changed', async () => {
    const a = await account()
    let since = Date.now()
    const created = await a.agent.com.atproto.server.createAppPassword({ name: 'phone-app', privileged: true })
    expectNotice(await notice(a.email, 'app password created'), /a privileged app password named "phone-app" was created/i, since, [
      created.data.password,
    ])

    since = Date.now()
    const key = new SoftAuthenticator(new URL(pds.services.config.publicUrl).origin)
    await verifyPasskeyRegistration(pds.services, a.did, key.register(await passkeyRegistrationOptions(pds.services, a)), 'Laptop key')
    expectNotice(await notice(a.email, 'passkey added'), /a passkey named "Laptop key" was added to your account/i, since)

    since = Date.now()
    const setup = await beginTotp(pds.services, a.did, a.handle)
    if ('alreadyOn' in setup) throw new Error('authenticator already on')
    await confirmTotp(pds.services, a.did, new TOTP({ secret: Secret.fromBase32(setup.secret) }).generate())
    expectNotice(await notice(a.email, 'authenticator app set up'), /an authenticator app was set up for your account/i, since, [
      setup.secret,
    ])

    since = Date.now()
    const set = await xrpc(pds.url, 'com.atproto.admin.updateAccountPassword', {
      body: { did: a.did, password: 'new by admin 1' },
      headers: admin,
    })
    expect(set.status).toBe(200)
    expectNotice(await notice(a.email, 'password changed'), /password was changed by the server's operator/i, since, ['new by admin 1'])

    since = Date.now()
    await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token: await resetCode(a.email), password: 'new by reset 1' } })
    expectNotice(await notice(a.email, 'password reset'), /password was reset/i, since, ['new by reset 1'])

    // the address: the old one hears of it (it approved the change), the new one is not told
    const b = await account()
    since = Date.now()
    await b.agent.com.atproto.server.requestEmailUpdate()
    const moved = `moved-${b.email}`
    await b.agent.com.atproto.server.updateEmail({ email: moved, token: sink.tokenFor(b.email) })
    expectNotice(await notice(b.email, 'email address changed'), new RegExp(`email address was changed from ${b.email} to ${moved}`), since)
    expect(sink.received.some((m) => m.body.to === moved && /Security notice/.test(m.body.subject))).toBe(false)
  })

  it("never fails the owner's change when the notice cannot be sent", async () => {
    const a = await account()
    sink.mode = 'fail'
    try {
      const created = await a.agent.com.atproto.server.createAppPassword({ name: 'while-mail-down' })
      expect(created.data.password).toMatch(/^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/)
      expect((await createSession(a.handle, created.data.password)).status).toBe(200)
    } finally {
      sink.mode = 'ok'
    }
  })
})
