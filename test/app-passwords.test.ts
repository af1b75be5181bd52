import { AtpAgent } from '@atproto/api'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAccount as createAccount, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'

let pds: TestPds
let sink: MailSink
const auth = bearer
const newAccount = () => createAccount(pds.url, 'apw')
const post = (nsid: string, token: string, body?: unknown) =>
  xrpc(pds.url, `com.atproto.server.${nsid}`, { method: 'POST', body, headers: auth(token) })
const login = (identifier: string, password: string) =>
  xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password } })

async function appPassword(token: string, name: string, privileged = false) {
  const res = await post('createAppPassword', token, { name, privileged })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return res.body.password as string
}

describe('app passwords', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink))
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })

  it('returns a xxxx-xxxx-xxxx-xxxx secret from the 32-character alphabet, once; the list never shows it', async () => {
    const acct = await newAccount()
    const res = await post('createAppPassword', acct.accessJwt, { name: 'my-client.1' })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ name: 'my-client.1', privileged: false })
    expect(res.body.password).toMatch(/^[a-km-np-z2-9]{4}(-[a-km-np-z2-9]{4}){3}$/)
    expect(Date.parse(res.body.createdAt)).not.toBeNaN()
    const list = await xrpc(pds.url, 'com.atproto.server.listAppPasswords', { headers: auth(acct.accessJwt) })
    expect(list.body).toEqual({ passwords: [{ name: 'my-client.1', createdAt: res.body.createdAt, privileged: false }] })
    expect(list.text).not.toContain(res.body.password)
    const row = await pds.services.db.selectFrom('app_password').selectAll().where('did', '=', acct.did).executeTakeFirstOrThrow()
    expect(row.password_hash).not.toContain(res.body.password)
  })

  it('validates names and refuses a duplicate with 400 AppPasswordNameExists', async () => {
    const acct = await newAccount()
    for (const name of ['abc', 'x'.repeat(33), 'has space', 'slash/name']) {
      const res = await post('createAppPassword', acct.accessJwt, { name })
      expect(res.status, name).toBe(400)
      expect(res.body.error).toBe('InvalidRequest')
    }
    await appPassword(acct.accessJwt, 'phone')
    const dup = await post('createAppPassword', acct.accessJwt, { name: 'phone' })
    expect([dup.status, dup.body.error]).toEqual([400, 'AppPasswordNameExists'])
  })

  it('shares one salt per account, so a login costs one extra hash however many exist', async () => {
    const acct = await newAccount()
    for (const name of ['one1', 'two2', 'three3']) await appPassword(acct.accessJwt, name)
    const rows = await pds.services.db.selectFrom('app_password').select('password_hash').where('did', '=', acct.did).execute()
    const salts = new Set(rows.map((r) => r.password_hash.split(':')[4]))
    expect(salts.size).toBe(1)
    const account = await pds.services.db
      .selectFrom('account')
      .select('app_password_salt')
      .where('did', '=', acct.did)
      .executeTakeFirstOrThrow()
    expect([...salts][0]).toBe(account.app_password_salt)
  })

  it('logs in with an app password; the refresh record carries its name through every rotation', async () => {
    const acct = await newAccount()
    await appPassword(acct.accessJwt, 'first1')
    const pw = await appPassword(acct.accessJwt, 'second2', true)
    const res = await login(acct.handle, pw)
    expect(res.status).toBe(200)
    expect(decodeJwt(res.body.accessJwt).app_password).toMatchObject({ name: 'second2', privileged: true })
    let refresh = res.body.refreshJwt
    for (let i = 0; i < 2; i++) {
      const r = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(refresh) })
      expect(r.status).toBe(200)
      expect(decodeJwt(r.body.accessJwt).app_password).toMatchObject({ name: 'second2', privileged: true })
      refresh = r.body.refreshJwt
    }
    const jti = decodeJwt(refresh).jti!
    const rec = await pds.services.db.selectFrom('refresh_token').selectAll().where('jti', '=', jti).executeTakeFirstOrThrow()
    expect(rec.app_password_name).toBe('second2')
    // the main password still logs in, without the claim
    const main = await login(acct.handle, PASSWORD)
    expect(decodeJwt(main.body.accessJwt).app_password).toBeUndefined()
  })

  it('after revoke the app password no longer logs in, its sessions end at once, and revoke is idempotent', async () => {
    const acct = await newAccount()
    const pw = await appPassword(acct.accessJwt, 'revoked1', true)
    const session = (await login(acct.handle, pw)).body
    expect((await post('revokeAppPassword', acct.accessJwt, { name: 'revoked1' })).status).toBe(200)
    expect((await post('revokeAppPassword', acct.accessJwt, { name: 'revoked1' })).status).toBe(200)
    expect((await post('revokeAppPassword', acct.accessJwt, { name: 'never-existed' })).status).toBe(200)
    const again = await login(acct.handle, pw)
    expect([again.status, again.body.error]).toEqual([401, 'AuthenticationRequired'])
    const r = await xrpc(pds.url, 'com.atproto.server.refreshSession', { method: 'POST', headers: auth(session.refreshJwt) })
    expect([r.status, r.body.error]).toEqual([401, 'ExpiredToken'])
    const refused = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(session.accessJwt) })
    expect([refused.status, refused.body.error]).toEqual([401, 'ExpiredToken'])
  })

  it('refuses a non-privileged app-password session on the account-control methods, and lets a privileged one through', async () => {
    const acct = await newAccount()
    const plain = (await login(acct.handle, await appPassword(acct.accessJwt, 'plain1'))).body.accessJwt
    const priv = (await login(acct.handle, await appPassword(acct.accessJwt, 'priv1', true))).body.accessJwt
    const calls: [string, 'GET' | 'POST', unknown][] = [
      ['createAppPassword', 'POST', { name: 'sneaky' }],
      ['listAppPasswords', 'GET', undefined],
      ['revokeAppPassword', 'POST', { name: 'priv1' }],
      ['requestEmailConfirmation', 'POST', undefined],
      ['confirmEmail', 'POST', { email: acct.email, token: 'A'.repeat(32) }],
      ['requestEmailUpdate', 'POST', { email: 'attacker@example.com' }],
      ['updateEmail', 'POST', { email: 'attacker@example.com' }],
      ['requestAccountDelete', 'POST', undefined],
      ['deactivateAccount', 'POST', {}],
    ]
    for (const [nsid, method, body] of calls) {
      const res = await xrpc(pds.url, `com.atproto.server.${nsid}`, { method, body, headers: auth(plain) })
      expect([nsid, res.status, res.body?.error]).toEqual([nsid, 403, 'InsufficientScope'])
    }
    // a non-privileged session still does ordinary things
    expect((await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(plain) })).status).toBe(200)
    expect((await xrpc(pds.url, 'com.atproto.server.listAppPasswords', { headers: auth(priv) })).status).toBe(200)
    expect((await post('requestEmailConfirmation', priv)).status).toBe(200)
  })

  it('refuses the takeover chain: a non-privileged app password cannot change the email, so it cannot reset the password', async () => {
    const acct = await newAccount()
    const agent = new AtpAgent({ service: pds.url })
    await agent.login({ identifier: acct.handle, password: await appPassword(acct.accessJwt, 'thirdparty') })
    await expect(agent.com.atproto.server.requestEmailUpdate({ email: 'attacker@example.com' } as never)).rejects.toMatchObject({
      status: 403,
      error: 'InsufficientScope',
    })
    await expect(agent.com.atproto.server.updateEmail({ email: 'attacker@example.com' })).rejects.toMatchObject({
      error: 'InsufficientScope',
    })
    const before = sink.received.length
    await xrpc(pds.url, 'com.atproto.server.requestPasswordReset', { body: { email: 'attacker@example.com' } })
    await new Promise((r) => setTimeout(r, 100))
    expect(sink.received.slice(before)).toEqual([])
    const session = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth(acct.accessJwt) })
    expect(session.body.email).toBe(acct.email)
  })

  it('does not accept an app password as the password of deleteAccount', async () => {
    const acct = await newAccount()
    const pw = await appPassword(acct.accessJwt, 'deleter', true)
    await post('requestAccountDelete', acct.accessJwt)
    const res = await post('deleteAccount', acct.accessJwt, { did: acct.did, password: pw, token: sink.tokenFor(acct.email) })
    expect([res.status, res.body.error]).toEqual([401, 'AuthenticationRequired'])
  })
})
