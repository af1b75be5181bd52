import { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { describe, startTestPds, xrpc, newAccount as createAccount, PASSWORD, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'

let pds: TestPds
let sink: MailSink
const auth = (token: string) => ({ authorization: `Bearer ${token}` })

const newAccount = () => createAccount(pds.url, 'mailer')

const call = (nsid: string, token: string, body?: unknown) =>
  xrpc(pds.url, `com.atproto.server.${nsid}`, { method: 'POST', body, headers: auth(token) })

async function confirmed() {
  const acct = await newAccount()
  await call('requestEmailConfirmation', acct.accessJwt)
  const token = sink.tokenFor(acct.email)
  expect((await call('confirmEmail', acct.accessJwt, { email: acct.email, token })).status).toBe(200)
  return acct
}

describe('email-token flows through the http-json backend', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink, { PDS_EMAIL_HTTP_TIMEOUT_MS: '1500' }))
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })
  beforeEach(() => {
    sink.mode = 'ok'
  })

  describe('the backend', () => {
    it('POSTs the generic JSON body with the bearer token and a subject that says what the mail is for', async () => {
      const acct = await newAccount()
      const before = sink.received.length
      expect((await call('requestEmailConfirmation', acct.accessJwt)).status).toBe(200)
      const [msg] = sink.received.slice(before)
      expect(msg.headers.authorization).toBe('Bearer sink-token')
      expect(msg.headers['content-type']).toMatch(/^application\/json/)
      expect(Object.keys(msg.body).sort()).toEqual(['from', 'replyTo', 'subject', 'text', 'to'])
      expect(msg.body).toMatchObject({ from: 'pds@example.com', to: acct.email, subject: 'Confirm your email address' })
      // the token on a line of its own: 32 characters of RFC 4648 base32
      expect(msg.body.text.split('\n')).toContain(sink.tokenFor(acct.email))
      expect(sink.tokenFor(acct.email)).toMatch(/^[A-Z2-7]{32}$/)
    })

    it('fails the call on a 500 but keeps the stored token; a later request issues a fresh one', async () => {
      const acct = await newAccount()
      sink.mode = 'fail'
      const res = await call('requestEmailConfirmation', acct.accessJwt)
      expect(res.status).toBe(502)
      expect(res.body.error).toBe('UpstreamFailure')
      const stored = await pds.services.db.selectFrom('email_token').selectAll().where('did', '=', acct.did).executeTakeFirstOrThrow()
      expect(stored.purpose).toBe('confirm-email')
      sink.mode = 'ok'
      expect((await call('requestEmailConfirmation', acct.accessJwt)).status).toBe(200)
      const fresh = sink.tokenFor(acct.email)
      expect(fresh).not.toBe(stored.token)
      // only the newest token works
      const old = await call('confirmEmail', acct.accessJwt, { email: acct.email, token: stored.token })
      expect(old.status).toBe(401)
      expect((await call('confirmEmail', acct.accessJwt, { email: acct.email, token: fresh })).status).toBe(200)
    })

    it('gives up on an endpoint that never answers after the configured timeout', async () => {
      const acct = await newAccount()
      sink.mode = 'hang'
      const started = Date.now()
      const res = await call('requestAccountDelete', acct.accessJwt)
      expect(res.status).toBe(502)
      expect(Date.now() - started).toBeLessThan(5000)
    })
  })

  describe('confirmEmail', () => {
    it('confirms the address with the mailed token, once', async () => {
      const acct = await newAccount()
      expect((await call('requestEmailConfirmation', acct.accessJwt)).status).toBe(200)
      const token = sink.tokenFor(acct.email)
      const ok = await call('confirmEmail', acct.accessJwt, { email: acct.email, token: token.toLowerCase() })
      expect(ok.status).toBe(200)
      const session = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(acct.accessJwt) })
      expect(session.body.emailConfirmed).toBe(true)
      const again = await call('confirmEmail', acct.accessJwt, { email: acct.email, token })
      expect(again.status).toBe(401)
      expect(again.body.error).toBe('InvalidToken')
    })

    it('answers a wrong or expired token with 401 InvalidToken', async () => {
      const acct = await newAccount()
      await call('requestEmailConfirmation', acct.accessJwt)
      const wrong = await call('confirmEmail', acct.accessJwt, { email: acct.email, token: 'A'.repeat(32) })
      expect([wrong.status, wrong.body.error]).toEqual([401, 'InvalidToken'])
      await pds.services.db
        .updateTable('email_token')
        .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
        .where('did', '=', acct.did)
        .execute()
      const expired = await call('confirmEmail', acct.accessJwt, { email: acct.email, token: sink.tokenFor(acct.email) })
      expect([expired.status, expired.body.error]).toEqual([401, 'InvalidToken'])
    })

    it('issues tokens with the TTL of their purpose', async () => {
      const acct = await newAccount()
      await call('requestEmailConfirmation', acct.accessJwt)
      await call('requestAccountDelete', acct.accessJwt)
      const rows = await pds.services.db.selectFrom('email_token').selectAll().where('did', '=', acct.did).execute()
      const ttl = (p: string) => {
        const r = rows.find((x) => x.purpose === p)!
        return Math.round((Date.parse(r.expires_at) - Date.parse(r.created_at)) / 60_000)
      }
      expect(ttl('confirm-email')).toBe(24 * 60)
      expect(ttl('delete-account')).toBe(60)
    })

    it('answers 200 and sends nothing when the address is already confirmed', async () => {
      const acct = await confirmed()
      const before = sink.received.length
      const res = await call('requestEmailConfirmation', acct.accessJwt)
      expect(res.status).toBe(200)
      expect(res.text).toBe('')
      expect(sink.received.length).toBe(before)
    })
  })

  describe('email change', () => {
    it('sends the token carrying the new address to the confirmed CURRENT address, applies that address and clears the confirmation', async () => {
      const acct = await confirmed()
      const before = sink.received.length
      const res = await call('requestEmailUpdate', acct.accessJwt, { email: `New${acct.handle.split('.')[0]}@Example.com` })
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ tokenRequired: true })
      const newEmail = `new${acct.handle.split('.')[0]}@example.com`
      expect(sink.received.slice(before).map((m) => m.body.to)).toEqual([acct.email])
      const token = sink.tokenFor(acct.email)
      // the token record is trusted: a different `email` field is tolerated and ignored
      const upd = await call('updateEmail', acct.accessJwt, { email: 'ignored@example.com', token })
      expect(upd.status).toBe(200)
      const session = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(acct.accessJwt) })
      expect(session.body).toMatchObject({ email: newEmail, emailConfirmed: false })
    })

    it('refuses an invalid address at requestEmailUpdate', async () => {
      const acct = await newAccount()
      const res = await call('requestEmailUpdate', acct.accessJwt, { email: 'not an address' })
      expect(res.status).toBe(400)
    })

    it('answers EmailNotAvailable when the new address is taken, and keeps the token', async () => {
      const acct = await newAccount()
      const other = await newAccount()
      await call('requestEmailUpdate', acct.accessJwt, { email: other.email })
      const token = sink.tokenFor(other.email)
      const res = await call('updateEmail', acct.accessJwt, { email: other.email, token })
      expect([res.status, res.body.error]).toEqual([400, 'EmailNotAvailable'])
      const kept = await pds.services.db
        .selectFrom('email_token')
        .select('token')
        .where('did', '=', acct.did)
        .where('purpose', '=', 'update-email')
        .executeTakeFirst()
      expect(kept?.token).toBe(token)
    })

    it('serves the official flow to AtpAgent: no token while unconfirmed, a token to the current address once confirmed', async () => {
      const acct = await newAccount()
      const agent = new AtpAgent({ service: pds.url })
      await agent.login({ identifier: acct.handle, password: PASSWORD })
      const first = await agent.com.atproto.server.requestEmailUpdate()
      expect(first.data.tokenRequired).toBe(false)
      await agent.com.atproto.server.updateEmail({ email: `direct${acct.handle.split('.')[0]}@example.com` })
      expect((await agent.com.atproto.server.getSession()).data.email).toBe(`direct${acct.handle.split('.')[0]}@example.com`)

      const current = `direct${acct.handle.split('.')[0]}@example.com`
      await agent.com.atproto.server.requestEmailConfirmation()
      await agent.com.atproto.server.confirmEmail({ email: current, token: sink.tokenFor(current) })
      const second = await agent.com.atproto.server.requestEmailUpdate()
      expect(second.data.tokenRequired).toBe(true)
      await expect(agent.com.atproto.server.updateEmail({ email: `later${acct.handle.split('.')[0]}@example.com` })).rejects.toMatchObject({
        error: 'TokenRequired',
      })
      await agent.com.atproto.server.updateEmail({ email: `later${acct.handle.split('.')[0]}@example.com`, token: sink.tokenFor(current) })
      const s = await agent.com.atproto.server.getSession()
      expect(s.data).toMatchObject({ email: `later${acct.handle.split('.')[0]}@example.com`, emailConfirmed: false })
    })
  })

  describe('password reset', () => {
    it('mails a reset token for a known address; the token sets the password and ends the sessions', async () => {
      const acct = await newAccount()
      const before = sink.received.length
      const res = await xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email: acct.email.toUpperCase() } })
      expect(res.status).toBe(200)
      await sink.waitFor(before + 1)
      const token = sink.tokenFor(acct.email)
      const reset = await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token, password: 'a brand new password' } })
      expect(reset.status).toBe(200)
      const login = await xrpc(pds.url, 'com.atproto.server.createSession', {
        body: { identifier: acct.handle, password: 'a brand new password' },
      })
      expect(login.status).toBe(200)
      const oldLogin = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: PASSWORD } })
      expect(oldLogin.status).toBe(401)
      expect((await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(acct.accessJwt) })).status).toBe(401)
      const refreshed = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(acct.refreshJwt) })
      expect([refreshed.status, refreshed.body.error]).toEqual([401, 'ExpiredToken'])
      expect((await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(login.body.accessJwt) })).status).toBe(200)
      const reused = await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token, password: 'another password' } })
      expect([reused.status, reused.body.error]).toEqual([400, 'InvalidToken'])
    })

    it('answers an unknown address exactly as a known one, and sends nothing', async () => {
      const acct = await newAccount()
      const start = sink.received.length
      const known = await xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email: acct.email } })
      await sink.waitFor(start + 1)
      const before = sink.received.length
      const unknown = await xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email: 'nobody@example.com' } })
      expect([unknown.status, unknown.text]).toEqual([known.status, known.text])
      await new Promise((r) => setTimeout(r, 100))
      expect(sink.received.filter((m) => m.body.to === 'nobody@example.com')).toEqual([])
      expect(sink.received.length).toBe(before)
    })

    it('answers 200 even when delivery fails', async () => {
      const acct = await newAccount()
      sink.mode = 'fail'
      const res = await xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email: acct.email } })
      expect(res.status).toBe(200)
    })

    it('refuses a short password with InvalidPassword (the token survives) and a bad token with InvalidToken', async () => {
      const acct = await newAccount()
      const start = sink.received.length
      await xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email: acct.email } })
      await sink.waitFor(start + 1)
      const token = sink.tokenFor(acct.email)
      const short = await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token, password: 'short' } })
      expect([short.status, short.body.error]).toEqual([400, 'InvalidPassword'])
      const bad = await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token: 'B'.repeat(32), password: 'long enough' } })
      expect([bad.status, bad.body.error]).toEqual([400, 'InvalidToken'])
      const ok = await xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token, password: 'long enough' } })
      expect(ok.status).toBe(200)
    })

    it('lets exactly one of five concurrent uses of one token succeed', async () => {
      const acct = await newAccount()
      const start = sink.received.length
      await xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email: acct.email } })
      await sink.waitFor(start + 1)
      const token = sink.tokenFor(acct.email)
      const results = await Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          xrpc(pds.url, 'com.atproto.server.resetPassword', { body: { token, password: `concurrent password ${i}` } }),
        ),
      )
      expect(results.filter((r) => r.status === 200)).toHaveLength(1)
      expect(results.filter((r) => r.status === 400 && r.body.error === 'InvalidToken')).toHaveLength(4)
    })
  })
})

describe('the postmark flavor', () => {
  let pm: TestPds
  let pmSink: MailSink
  beforeAll(async () => {
    pmSink = await startMailSink()
    pm = await startTestPds(sinkEnv(pmSink, { PDS_EMAIL_HTTP_FLAVOR: 'vendor' }))
  })
  afterAll(async () => {
    await pm?.stop()
    await pmSink?.close()
  })

  it('sends From, To, Subject, TextBody and ReplyTo', async () => {
    const res = await xrpc(pm.url, 'com.atproto.server.createAccount', {
      body: { handle: 'postmark1.test', email: 'pm1@example.com', password: PASSWORD },
    })
    await xrpc(pm.url, 'com.atproto.server.requestAccountDelete', { method: 'POST', headers: auth(res.body.accessJwt) })
    const [msg] = await pmSink.waitFor(1)
    expect(Object.keys(msg.body).sort()).toEqual(['From', 'ReplyTo', 'Subject', 'TextBody', 'To'])
    expect(msg.body).toMatchObject({ From: 'pds@example.com', To: 'pm1@example.com', Subject: 'Confirm the deletion of your account' })
    expect(msg.body.TextBody).toContain(pmSink.tokenFor('pm1@example.com'))
  })
})
