import { AtpAgent } from '@atproto/api'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAccount as createAccount, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'

let pds: TestPds
let sink: MailSink
const auth = bearer
const newAccount = () => createAccount(pds.url, 'life')
const post = (nsid: string, token: string, body?: unknown) =>
  xrpc(pds.url, `com.atproto.server.${nsid}`, { method: 'POST', body, headers: auth(token) })
const get = (nsid: string, token: string) => xrpc(pds.url, `com.atproto.server.${nsid}`, { headers: auth(token) })

/** the account's events after its creation, decoded */
async function eventsOf(did: string) {
  const rows = await pds.services.db.selectFrom('event').selectAll().where('did', '=', did).orderBy('seq').execute()
  // creation wrote #identity, #account, the empty repository's #commit and its #sync
  return rows.map((r) => ({ type: r.type, ...dagCbor.decode<object>(r.payload) })).slice(4)
}

describe('account lifecycle', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink))
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })

  it('reports both field sets at checkAccountStatus, through AtpAgent (which validates the response)', async () => {
    const acct = await newAccount()
    const agent = new AtpAgent({ service: pds.url })
    await agent.login({ identifier: acct.handle, password: PASSWORD })
    const { data } = await agent.com.atproto.server.checkAccountStatus()
    expect(data).toMatchObject({
      did: acct.did,
      handle: acct.handle,
      email: acct.email,
      emailConfirmed: false,
      status: 'active',
      active: true,
      activated: true,
      validDid: true,
      repoBlocks: expect.any(Number),
      indexedRecords: expect.any(Number),
      privateStateValues: expect.any(Number),
      expectedBlobs: expect.any(Number),
      importedBlobs: expect.any(Number),
    })
    expect(() => CID.parse(data.repoCommit)).not.toThrow()
    expect(typeof data.repoRev).toBe('string')
    expect(data).not.toHaveProperty('expectedRecords')
    expect(data).not.toHaveProperty('expectedBlocks')
  })

  it('deactivates and reactivates, with #account events and a #sync of the repository; only the admitted methods pass meanwhile', async () => {
    const acct = await newAccount()
    const res = await post('deactivateAccount', acct.accessJwt, { deleteAfter: new Date(Date.now() + 86_400_000).toISOString() })
    expect(res.status).toBe(200)
    const status = await get('checkAccountStatus', acct.accessJwt)
    expect(status.body).toMatchObject({ status: 'deactivated', active: false, activated: false })
    const blocked = await get('getSession', acct.accessJwt)
    expect([blocked.status, blocked.body.error]).toEqual([403, 'AccountDeactivated'])
    const blocked2 = await post('createAppPassword', acct.accessJwt, { name: 'while-off' })
    expect([blocked2.status, blocked2.body.error]).toEqual([403, 'AccountDeactivated'])
    // refresh tokens stay valid, and a deactivated user can log in to reactivate
    const stored = await pds.services.db.selectFrom('refresh_token').select('jti').where('did', '=', acct.did).execute()
    expect(stored.length).toBeGreaterThan(0)
    const session = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: PASSWORD } })
    expect(session.body).toMatchObject({ active: false, status: 'deactivated' })
    const activated = await post('activateAccount', session.body.accessJwt)
    expect([activated.status, activated.text]).toEqual([200, ''])
    expect((await get('getSession', acct.accessJwt)).status).toBe(200)
    const latest = await xrpc(pds.url, 'com.atproto.sync.getLatestCommit', { params: { did: acct.did } })
    expect(await eventsOf(acct.did)).toEqual([
      { type: 'account', did: acct.did, active: false, status: 'deactivated' },
      { type: 'account', did: acct.did, active: true },
      { type: 'identity', did: acct.did, handle: acct.handle },
      { type: 'sync', did: acct.did, rev: latest.body.rev, blocks: expect.any(Uint8Array) },
    ])
  })

  it('answers activateAccount on an active account with 200, an empty body and no event', async () => {
    const acct = await newAccount()
    const res = await post('activateAccount', acct.accessJwt)
    expect([res.status, res.text]).toEqual([200, ''])
    expect(await eventsOf(acct.did)).toEqual([])
  })

  it('needs all four proofs at deleteAccount, with a named error for each failed proof', async () => {
    const acct = await newAccount()
    const other = await newAccount()
    expect((await post('requestAccountDelete', acct.accessJwt)).status).toBe(200)
    const token = sink.tokenFor(acct.email)
    const noAuth = await xrpc(pds.url, 'com.atproto.server.deleteAccount', { body: { did: acct.did, password: PASSWORD, token } })
    expect([noAuth.status, noAuth.body.error]).toEqual([401, 'AuthMissing'])
    const mismatch = await post('deleteAccount', acct.accessJwt, { did: other.did, password: PASSWORD, token })
    expect([mismatch.status, mismatch.body.error]).toEqual([400, 'InvalidRequest'])
    const wrongPw = await post('deleteAccount', acct.accessJwt, { did: acct.did, password: 'wrong password', token })
    expect([wrongPw.status, wrongPw.body.error]).toEqual([401, 'AuthenticationRequired'])
    const badToken = await post('deleteAccount', acct.accessJwt, { did: acct.did, password: PASSWORD, token: 'C'.repeat(32) })
    expect([badToken.status, badToken.body.error]).toEqual([400, 'InvalidToken'])
    // another account's token is not this account's proof
    await post('requestAccountDelete', other.accessJwt)
    const foreign = await post('deleteAccount', acct.accessJwt, { did: acct.did, password: PASSWORD, token: sink.tokenFor(other.email) })
    expect([foreign.status, foreign.body.error]).toEqual([400, 'InvalidToken'])
    expect((await get('getSession', acct.accessJwt)).status).toBe(200)
  })

  it('deletes: status deleted with the record kept and its sessions ended, #account then #tombstone, and the account refused after', async () => {
    const acct = await newAccount()
    await post('requestAccountDelete', acct.accessJwt)
    const res = await post('deleteAccount', acct.accessJwt, { did: acct.did, password: PASSWORD, token: sink.tokenFor(acct.email) })
    expect(res.status).toBe(200)
    const row = await pds.services.db.selectFrom('account').selectAll().where('did', '=', acct.did).executeTakeFirstOrThrow()
    expect(row.status).toBe('deleted')
    const tokens = await pds.services.db.selectFrom('refresh_token').select('jti').where('did', '=', acct.did).execute()
    expect(tokens).toHaveLength(0)
    expect(await eventsOf(acct.did)).toEqual([
      { type: 'account', did: acct.did, active: false, status: 'deleted' },
      { type: 'tombstone', did: acct.did },
    ])
    const after = await get('checkAccountStatus', acct.accessJwt)
    expect([after.status, after.body.error]).toEqual([403, 'AccountDeleted'])
    const relogin = await xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier: acct.handle, password: PASSWORD } })
    expect([relogin.status, relogin.body.error]).toEqual([401, 'AuthenticationRequired'])
  })
})
