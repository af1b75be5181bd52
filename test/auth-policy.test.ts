// What each kind of credential may do, tried as an attacker holding it would: an OAuth app
// (whatever its scope), a plain or privileged app password, a stolen session after the password
// changed. OAuth tokens come from the real authorization flow (PAR, the sign-in form, the token
// endpoint); sessions from @atproto/api; mail through the loopback HTTP sink.
import { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, agentAccount, bearer, describe, startTestPds, xrpc, PASSWORD, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { ath, authorize, dpopKey, exchange, loopbackClientId, refreshGrant, type DpopKey } from './oauth-helpers.js'

let pds: TestPds
let sink: MailSink
let srv: { url: string; publicUrl: string }
const basic = { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') }

const newAccount = () => agentAccount(pds.url, 'policy')

async function confirmEmail(acct: { agent: AtpAgent; email: string }) {
  await acct.agent.com.atproto.server.requestEmailConfirmation()
  await acct.agent.com.atproto.server.confirmEmail({ email: acct.email, token: sink.tokenFor(acct.email) })
}

async function login(identifier: string, password: string) {
  const agent = new AtpAgent({ service: pds.url })
  await agent.login({ identifier, password })
  return agent
}

async function appPassword(acct: { agent: AtpAgent; handle: string }, name: string, privileged: boolean) {
  const { data } = await acct.agent.com.atproto.server.createAppPassword({ name, privileged })
  return login(acct.handle, data.password)
}

type OAuthSession = { key: DpopKey; access: string; refresh: string; scope: string }

async function oauthSignIn(handle: string, scope: string): Promise<OAuthSession> {
  const key = await dpopKey()
  const clientId = loopbackClientId(scope)
  const { code, verifier } = await authorize(srv, key, { handle, password: PASSWORD }, { scope, client_id: clientId })
  const res = await exchange(srv, key, code, verifier, { client_id: clientId })
  expect(res.status, res.text).toBe(200)
  return { key, access: res.json.access_token, refresh: res.json.refresh_token, scope: res.json.scope }
}

/** an XRPC call with a DPoP-bound access token */
async function dpopCall(s: OAuthSession, nsid: string, opts: { method?: 'POST'; params?: Record<string, string>; body?: unknown } = {}) {
  const method = opts.method ?? (opts.body !== undefined ? 'POST' : 'GET')
  const qs = opts.params ? '?' + new URLSearchParams(opts.params) : ''
  const proof = await s.key.proof(method, `${srv.publicUrl}/xrpc/${nsid}`, { ath: ath(s.access) })
  const headers: Record<string, string> = { authorization: `DPoP ${s.access}`, dpop: proof }
  if (opts.body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(`${pds.url}/xrpc/${nsid}${qs}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined }
}

const call = (token: string, nsid: string, opts: { method?: 'POST'; params?: Record<string, string>; body?: unknown } = {}) =>
  xrpc(pds.url, nsid, { ...opts, headers: bearer(token) })

const serviceAuth = (token: string, lxm?: string) =>
  call(token, 'com.atproto.server.getServiceAuth', { params: { aud: 'did:web:feeds.example.com', ...(lxm ? { lxm } : {}) } })
const oauthServiceAuth = (s: OAuthSession, lxm?: string) =>
  dpopCall(s, 'com.atproto.server.getServiceAuth', { params: { aud: 'did:web:feeds.example.com', ...(lxm ? { lxm } : {}) } })

describe('auth policy per credential', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink))
    srv = { url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })

  describe('OAuth apps cannot take the account', () => {
    it('refuses every OAuth token on the email, app-password and deletion methods, and a password session still works', async () => {
      const acct = await newAccount()
      await confirmEmail(acct)
      const s = await oauthSignIn(acct.handle, 'atproto transition:generic')
      // the token works where its scope reaches
      const write = await dpopCall(s, 'com.atproto.repo.createRecord', {
        body: {
          repo: acct.did,
          collection: 'app.bsky.feed.post',
          record: { $type: 'app.bsky.feed.post', text: 'hi', createdAt: new Date().toISOString() },
        },
      })
      expect(write.status, JSON.stringify(write.body)).toBe(200)
      const attempts: [string, { method?: 'POST'; params?: Record<string, string>; body?: unknown }][] = [
        ['com.atproto.server.createAppPassword', { body: { name: 'stolen', privileged: true } }],
        ['com.atproto.server.listAppPasswords', {}],
        ['com.atproto.server.revokeAppPassword', { body: { name: 'any-name' } }],
        ['com.atproto.server.requestEmailUpdate', { body: { email: 'attacker@evil.example' } }],
        ['com.atproto.server.updateEmail', { body: { email: 'attacker@evil.example' } }],
        ['com.atproto.server.requestAccountDelete', { method: 'POST' }],
        ['com.atproto.server.deleteAccount', { body: { did: acct.did, password: PASSWORD, token: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' } }],
      ]
      for (const [nsid, opts] of attempts) {
        const res = await dpopCall(s, nsid, opts)
        expect([nsid, res.status, res.body?.error]).toEqual([nsid, 403, 'InsufficientScope'])
      }
      // nothing changed: no app password, the address is the same and still confirmed
      const { data: list } = await acct.agent.com.atproto.server.listAppPasswords()
      expect(list.passwords).toEqual([])
      const { data: me } = await acct.agent.com.atproto.server.getSession()
      expect([me.email, me.emailConfirmed]).toEqual([acct.email, true])
      await acct.agent.com.atproto.server.createAppPassword({ name: 'by-owner' })
    })
  })

  describe('an address change is approved by the address on file', () => {
    it('sends the update token to the confirmed current address, and the new address starts unconfirmed', async () => {
      const acct = await newAccount()
      await confirmEmail(acct)
      const before = sink.received.length
      const { data } = await acct.agent.com.atproto.server.requestEmailUpdate({ email: 'moved@example.com' } as never)
      expect(data.tokenRequired).toBe(true)
      const sent = sink.received.slice(before).map((m) => m.body.to)
      expect(sent).toEqual([acct.email])
      await acct.agent.com.atproto.server.updateEmail({ email: 'moved@example.com', token: sink.tokenFor(acct.email) })
      const { data: me } = await acct.agent.com.atproto.server.getSession()
      expect([me.email, me.emailConfirmed]).toEqual(['moved@example.com', false])
    })

    it('sends it to the new address while the current one is unconfirmed', async () => {
      const acct = await newAccount()
      const before = sink.received.length
      const { data } = await acct.agent.com.atproto.server.requestEmailUpdate({ email: 'fresh@example.com' } as never)
      expect(data.tokenRequired).toBe(true)
      expect(sink.received.slice(before).map((m) => m.body.to)).toEqual(['fresh@example.com'])
    })
  })

  describe('a password change ends every other session', () => {
    it('resetPassword ends password sessions, app-password sessions and OAuth grants, access tokens included', async () => {
      const acct = await newAccount()
      const apw = await appPassword(acct, 'phone', false)
      const s = await oauthSignIn(acct.handle, 'atproto transition:generic')
      const old = { access: acct.agent.session!.accessJwt, refresh: acct.agent.session!.refreshJwt }
      const apwOld = { access: apw.session!.accessJwt, refresh: apw.session!.refreshJwt }
      expect((await call(old.access, 'com.atproto.server.getSession')).status).toBe(200)
      expect((await dpopCall(s, 'com.atproto.server.getSession')).status).toBe(200)

      const before = sink.received.length
      await new AtpAgent({ service: pds.url }).com.atproto.server.requestPasswordReset({ email: acct.email })
      await sink.waitFor(before + 1)
      await new AtpAgent({ service: pds.url }).com.atproto.server.resetPassword({
        token: sink.tokenFor(acct.email),
        password: 'a brand new password',
      })

      for (const token of [old.access, apwOld.access]) {
        const res = await call(token, 'com.atproto.server.getSession')
        expect([res.status, res.body.error]).toEqual([401, 'ExpiredToken'])
      }
      for (const token of [old.refresh, apwOld.refresh]) {
        const res = await call(token, 'com.atproto.server.refreshSession', { method: 'POST' })
        expect([res.status, res.body.error]).toEqual([401, 'ExpiredToken'])
      }
      const oauthRes = await dpopCall(s, 'com.atproto.server.getSession')
      expect([oauthRes.status, oauthRes.body.error]).toEqual([401, 'ExpiredToken'])
      const refreshed = await refreshGrant(srv, s.key, s.refresh, { client_id: loopbackClientId(s.scope) })
      expect([refreshed.status, refreshed.json.error]).toEqual([400, 'invalid_grant'])
      // the official client gives up too: its refresh fails, the session is gone
      await expect(acct.agent.com.atproto.server.getSession()).rejects.toThrow()
      // the new password works, the old one does not
      const fresh = await login(acct.handle, 'a brand new password')
      expect((await fresh.com.atproto.server.getSession()).data.did).toBe(acct.did)
      await expect(login(acct.handle, PASSWORD)).rejects.toThrow()
    })

    it('admin updateAccountPassword does the same', async () => {
      const acct = await newAccount()
      const s = await oauthSignIn(acct.handle, 'atproto transition:generic')
      const access = acct.agent.session!.accessJwt
      const res = await xrpc(pds.url, 'com.atproto.admin.updateAccountPassword', {
        headers: basic,
        body: { did: acct.did, password: 'set by the admin' },
      })
      expect(res.status, res.text).toBe(200)
      const after = await call(access, 'com.atproto.server.getSession')
      expect([after.status, after.body.error]).toEqual([401, 'ExpiredToken'])
      const refresh = await xrpc(pds.url, 'com.atproto.server.refreshSession', {
        method: 'POST',
        headers: bearer(acct.agent.session!.refreshJwt),
      })
      expect([refresh.status, refresh.body.error]).toEqual([401, 'ExpiredToken'])
      expect((await dpopCall(s, 'com.atproto.server.getSession')).status).toBe(401)
      expect((await refreshGrant(srv, s.key, s.refresh, { client_id: loopbackClientId(s.scope) })).status).toBe(400)
      expect((await (await login(acct.handle, 'set by the admin')).com.atproto.server.getSession()).data.did).toBe(acct.did)
    })

    it('revokeAppPassword ends the sessions of that app password only', async () => {
      const acct = await newAccount()
      const gone = await appPassword(acct, 'old-phone', false)
      const kept = await appPassword(acct, 'laptop', true)
      const goneTokens = { ...gone.session! }
      await acct.agent.com.atproto.server.revokeAppPassword({ name: 'old-phone' })
      const res = await call(goneTokens.accessJwt, 'com.atproto.server.getSession')
      expect([res.status, res.body.error]).toEqual([401, 'ExpiredToken'])
      const refresh = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: bearer(goneTokens.refreshJwt) })
      expect([refresh.status, refresh.body.error]).toEqual([401, 'ExpiredToken'])
      // the other app password and the main password are untouched
      expect((await kept.com.atproto.server.getSession()).data.did).toBe(acct.did)
      expect((await acct.agent.com.atproto.server.getSession()).data.did).toBe(acct.did)
      // a new app password of the same name signs in and works
      const again = await appPassword(acct, 'old-phone', false)
      expect((await again.com.atproto.server.getSession()).data.did).toBe(acct.did)
      expect((await call(goneTokens.accessJwt, 'com.atproto.server.getSession')).status).toBe(401)
    })
  })

  describe('getServiceAuth grants no more than the caller holds', () => {
    it('gives an atproto-only OAuth token nothing, and a transition:generic one only non-privileged methods', async () => {
      const acct = await newAccount()
      const narrow = await oauthSignIn(acct.handle, 'atproto')
      for (const lxm of [undefined, 'app.bsky.feed.getTimeline']) {
        const res = await oauthServiceAuth(narrow, lxm)
        expect([lxm, res.status, res.body.error]).toEqual([lxm, 403, 'InsufficientScope'])
      }
      const wide = await oauthSignIn(acct.handle, 'atproto transition:generic')
      expect((await oauthServiceAuth(wide, 'app.bsky.feed.getTimeline')).status).toBe(200)
      for (const lxm of [
        undefined,
        'com.atproto.server.createAccount',
        'com.atproto.server.createAppPassword',
        'com.atproto.identity.updateHandle',
        'COM.ATPROTO.SERVER.UPDATEEMAIL',
        'chat.bsky.convo.getLog',
        'Chat.Bsky.convo.getLog',
      ]) {
        const res = await oauthServiceAuth(wide, lxm)
        expect([lxm, res.status, res.body.error]).toEqual([lxm, 403, 'InsufficientScope'])
      }
    })

    it('gives a plain app password tokens for ordinary methods only, a privileged one and the main password everything', async () => {
      const acct = await newAccount()
      const plain = (await appPassword(acct, 'plain', false)).session!.accessJwt
      const priv = (await appPassword(acct, 'trusted', true)).session!.accessJwt
      const main = acct.agent.session!.accessJwt
      expect((await serviceAuth(plain, 'app.bsky.feed.getTimeline')).status).toBe(200)
      for (const lxm of [
        undefined,
        'chat.bsky.convo.getLog',
        'CHAT.bsky.convo.getLog',
        'com.atproto.server.createAccount',
        'com.atproto.server.updateEmail',
      ]) {
        const res = await serviceAuth(plain, lxm)
        expect([lxm, res.status, res.body.error]).toEqual([lxm, 403, 'InsufficientScope'])
      }
      for (const token of [priv, main]) {
        for (const lxm of [undefined, 'chat.bsky.convo.getLog', 'com.atproto.server.createAccount', 'app.bsky.feed.getTimeline']) {
          expect([lxm, (await serviceAuth(token, lxm)).status]).toEqual([lxm, 200])
        }
      }
    })
  })

  describe('the account email', () => {
    it('is hidden from OAuth tokens without the email scope, shown to password sessions', async () => {
      const acct = await newAccount()
      for (const scope of ['atproto', 'atproto transition:generic']) {
        const s = await oauthSignIn(acct.handle, scope)
        const session = await dpopCall(s, 'com.atproto.server.getSession')
        expect(session.status).toBe(200)
        expect(session.body.did).toBe(acct.did)
        expect(session.body).not.toHaveProperty('email')
        expect(session.body).not.toHaveProperty('emailConfirmed')
        expect(session.body).not.toHaveProperty('emailAuthFactor')
        const status = await dpopCall(s, 'com.atproto.server.checkAccountStatus')
        expect(status.status).toBe(200)
        expect(status.body).not.toHaveProperty('email')
        expect(status.body).not.toHaveProperty('emailConfirmed')
      }
      const { data } = await acct.agent.com.atproto.server.getSession()
      expect([data.email, data.emailConfirmed, data.emailAuthFactor]).toEqual([acct.email, false, false])
    })
  })

  describe('identity methods need privilege', () => {
    it('refuses updateHandle and activateAccount to a plain app password, not to a privileged one', async () => {
      const acct = await newAccount()
      const plain = (await appPassword(acct, 'plain', false)).session!.accessJwt
      const priv = (await appPassword(acct, 'trusted', true)).session!.accessJwt
      const handle = await call(plain, 'com.atproto.identity.updateHandle', { body: { handle: acct.handle.replace('policy', 'moved') } })
      expect([handle.status, handle.body.error]).toEqual([403, 'InsufficientScope'])
      const activate = await call(plain, 'com.atproto.server.activateAccount', { method: 'POST' })
      expect([activate.status, activate.body.error]).toEqual([403, 'InsufficientScope'])
      expect((await call(priv, 'com.atproto.server.activateAccount', { method: 'POST' })).status).toBe(200)
      expect(
        (await call(priv, 'com.atproto.identity.updateHandle', { body: { handle: acct.handle.replace('policy', 'moved') } })).status,
      ).toBe(200)
    })
  })
})
