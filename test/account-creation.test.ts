// PDS_ACCOUNT_CREATION, one rule for every way in: `open`, `invite`, `moving-in` (only accounts
// arriving with their DID) and `closed` (the operator alone), obeyed alike by XRPC createAccount,
// the OAuth sign-up page and describeServer; PDS_INVITE_REQUIRED=true still means `invite`.
import { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { loadConfig } from '../src/config.js'
import { ADMIN_PASSWORD, describe, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { dpopKey, openPage, par, submitPage } from './oauth-helpers.js'
import { startMovePair, type MovePair } from './move-pair.js'

let pair: MovePair
const servers: Record<string, TestPds> = {}
let n = 0
const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }

/** a fresh sign-up over XRPC: 'ok' or the error name and message */
async function signUp(pds: TestPds, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const name = `new${++n}`
  const res = await xrpc(pds.url, 'com.atproto.server.createAccount', {
    body: { handle: `${name}.test`, email: `${name}@example.com`, password: PASSWORD, ...extra },
    headers,
  })
  return res.status === 200 ? 'ok' : [res.status, res.body?.error, res.body?.message as string]
}

/** an account on the origin server moving to `pds` the standard way (a service-auth token) */
async function moveIn(pds: TestPds) {
  const name = `mover${++n}`
  const origin = new AtpAgent({ service: pair.origin.url })
  await origin.createAccount({ handle: `${name}.test`, email: `${name}@example.com`, password: PASSWORD })
  const destDid = (await xrpc(pds.url, 'com.atproto.server.describeServer')).body.did
  const { token } = (await origin.com.atproto.server.getServiceAuth({ aud: destDid, lxm: 'com.atproto.server.createAccount' })).data
  const res = await xrpc(pds.url, 'com.atproto.server.createAccount', {
    body: { did: origin.session!.did, handle: `${name}.test`, email: `${name}@example.com`, password: PASSWORD },
    headers: { authorization: `Bearer ${token}` },
  })
  return res.status === 200 ? 'ok' : [res.status, res.body?.error, res.body?.message as string]
}

/** the OAuth sign-up page as a person meets it: the GET, then the filled-in form */
async function signUpPage(pds: TestPds) {
  const s = { url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }
  const parred = await par(s, await dpopKey(), { prompt: 'create' })
  expect(parred.status, parred.text).toBe(201)
  const requestUri = parred.json.request_uri as string
  const page = await openPage(s.url, requestUri)
  const name = `page${++n}`
  const sent = await submitPage(
    s.url,
    requestUri,
    { step: 'signup', name, email: `${name}@example.com`, password: PASSWORD, csrf_token: page.csrf } as never,
    page.cookie,
  )
  const accountMade = (await xrpc(pds.url, 'com.atproto.identity.resolveHandle', { params: { handle: `${name}.test` } })).status === 200
  return { page, sent, accountMade }
}

const inviteCodeRequired = async (pds: TestPds) => (await xrpc(pds.url, 'com.atproto.server.describeServer')).body.inviteCodeRequired

describe('account creation modes', () => {
  beforeAll(async () => {
    pair = await startMovePair()
    const on = (hostname: string, env: Record<string, string>) =>
      startTestPds({ PDS_DID_PLC_URL: pair.plcUrl, PDS_HOSTNAME: hostname, ...env })
    servers.invite = await on('invite.localhost', { PDS_INVITE_REQUIRED: 'true' })
    servers.movingIn = await on('moving.localhost', { PDS_ACCOUNT_CREATION: 'moving-in' })
    servers.closed = await on('closed.localhost', { PDS_ACCOUNT_CREATION: 'closed' })
  })
  afterAll(async () => {
    for (const s of Object.values(servers)) await s.stop()
    await pair?.stop()
  })

  it('open (the default): anyone signs up over XRPC and on the page; describeServer asks for no code', async () => {
    const open = pair.dest
    expect(await inviteCodeRequired(open)).toBe(false)
    expect(await signUp(open)).toBe('ok')
    expect(await moveIn(open)).toBe('ok')
    const { page, sent, accountMade } = await signUpPage(open)
    expect(page.status).toBe(200)
    expect(page.html).not.toContain('name="invite_code"')
    expect(sent.status, sent.text).toBe(200)
    expect(accountMade).toBe(true)
  })

  it('invite (PDS_INVITE_REQUIRED=true): a code is needed over XRPC, on the page and to move in', async () => {
    const pds = servers.invite
    expect(loadConfig(pds.env).accountCreation).toBe('invite')
    expect(await inviteCodeRequired(pds)).toBe(true)
    expect(await signUp(pds)).toEqual([400, 'InvalidInviteCode', expect.any(String)])
    const code = (await xrpc(pds.url, 'com.atproto.server.createInviteCode', { body: { useCount: 1 }, headers: basic })).body.code
    expect(await signUp(pds, { inviteCode: code })).toBe('ok')
    expect(await moveIn(pds)).toEqual([400, 'InvalidInviteCode', expect.any(String)])
    const { page, sent, accountMade } = await signUpPage(pds)
    expect(page.html).toContain('name="invite_code"')
    expect(sent.status).toBe(400)
    expect(accountMade).toBe(false)
  })

  it('moving-in: no new identity over XRPC or on the page, accounts arriving with their DID are welcome', async () => {
    const pds = servers.movingIn
    expect(await inviteCodeRequired(pds)).toBe(true)
    const refused = await signUp(pds)
    expect(refused).toEqual([400, 'InvalidRequest', expect.stringMatching(/only accepts accounts moving in/)])
    expect(await moveIn(pds)).toBe('ok')
    const { page, sent, accountMade } = await signUpPage(pds)
    // the page says so before anyone fills it in, and refuses the form all the same
    expect(page.status).toBe(403)
    expect(page.html).toContain('only accepts accounts moving in')
    expect(sent.status).toBe(400)
    expect(sent.text).toContain('only accepts accounts moving in')
    expect(accountMade).toBe(false)
  })

  it('closed: nobody signs up or moves in; the operator still creates accounts with admin Basic', async () => {
    const pds = servers.closed
    expect(await inviteCodeRequired(pds)).toBe(true)
    expect(await signUp(pds)).toEqual([400, 'InvalidRequest', 'This server is not accepting new accounts'])
    const code = (await xrpc(pds.url, 'com.atproto.server.createInviteCode', { body: { useCount: 1 }, headers: basic })).body.code
    expect(await signUp(pds, { inviteCode: code })).toEqual([400, 'InvalidRequest', 'This server is not accepting new accounts'])
    expect(await moveIn(pds)).toEqual([400, 'InvalidRequest', 'This server is not accepting new accounts'])
    const { page, sent, accountMade } = await signUpPage(pds)
    expect(page.status).toBe(403)
    expect(page.html).toContain('not accepting new accounts')
    expect(sent.status).toBe(400)
    expect(accountMade).toBe(false)
    // the operator: admin Basic; a wrong password is refused as on every admin method
    expect(await signUp(pds, {}, basic)).toBe('ok')
    const wrong = { authorization: `Basic ${Buffer.from('admin:not-the-password-at-all').toString('base64')}` }
    expect(await signUp(pds, {}, wrong)).toEqual([401, 'AuthenticationRequired', expect.any(String)])
  })

  it('refuses at start a PDS_INVITE_REQUIRED that contradicts PDS_ACCOUNT_CREATION, and an unknown mode', async () => {
    const env = pair.dest.env
    expect(() => loadConfig({ ...env, PDS_INVITE_REQUIRED: 'true', PDS_ACCOUNT_CREATION: 'open' })).toThrow(/PDS_INVITE_REQUIRED/)
    expect(() => loadConfig({ ...env, PDS_ACCOUNT_CREATION: 'invites' })).toThrow(/PDS_ACCOUNT_CREATION/)
    expect(loadConfig({ ...env, PDS_INVITE_REQUIRED: 'true', PDS_ACCOUNT_CREATION: 'invite' }).accountCreation).toBe('invite')
    expect(loadConfig({ ...env, PDS_INVITE_REQUIRED: 'false', PDS_ACCOUNT_CREATION: 'closed' }).accountCreation).toBe('closed')
  })
})
