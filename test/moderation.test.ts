// What Ozone and an operator do with the admin password beyond account takedowns: take down and
// restore single records and blobs, find accounts, manage invite codes, change an account's handle,
// email and signing key, and revoke its credentials. Every call goes through AtpAgent or the
// generated client, which validate responses against the official lexicons.
import { Secp256k1Keypair } from '@atproto/crypto'
import { AtpAgent } from '@atproto/api'
import * as dagCbor from '@ipld/dag-cbor'
import { verifyRepoCar } from '@atproto/repo'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { subscribe } from './firehose-client.js'
import { ADMIN_PASSWORD, PASSWORD, describe, startTestPds, xrpc, type TestPds } from './harness.js'

let pds: TestPds
let n = 0
const headers = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }
const admin = () => pds.client().com.atproto.admin
const post = (text: string, extra: Record<string, unknown> = {}) => ({
  $type: 'app.bsky.feed.post',
  text,
  createdAt: new Date().toISOString(),
  ...extra,
})

/** the XRPC error name a client call fails with */
async function errorOf(call: Promise<unknown>): Promise<string | undefined> {
  try {
    await call
  } catch (err) {
    return (err as { error?: string }).error
  }
  throw new Error('the call succeeded')
}

/** a signed-in agent on a fresh account, signed up with a fresh invite code */
async function newAgent(prefix = 'mod') {
  n++
  const { data } = await pds.client().com.atproto.server.createInviteCode({ useCount: 1 }, { headers })
  const agent = new AtpAgent({ service: pds.url })
  await agent.createAccount({
    handle: `${prefix}${n}x.test`,
    email: `${prefix}${n}@example.com`,
    password: PASSWORD,
    inviteCode: data.code,
  })
  return agent
}
const didOf = (agent: AtpAgent) => agent.session!.did

describe('moderation of records and blobs', () => {
  beforeAll(async () => {
    pds = await startTestPds({ PDS_INVITE_REQUIRED: 'true' })
  })
  afterAll(() => pds?.stop())

  it('hides a taken-down record from every read until the takedown is reversed', async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    const kept = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('kept') })
    const hidden = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('hidden') })
    const rkey = hidden.data.uri.split('/').pop()!
    const reader = new AtpAgent({ service: pds.url })
    const listed = async () =>
      (await reader.com.atproto.repo.listRecords({ repo: did, collection: 'app.bsky.feed.post' })).data.records.map((r) => r.uri)
    expect((await reader.com.atproto.repo.getRecord({ repo: did, collection: 'app.bsky.feed.post', rkey })).data.uri).toBe(hidden.data.uri)
    expect(await listed()).toEqual([hidden.data.uri, kept.data.uri])

    const subject = { $type: 'com.atproto.repo.strongRef', uri: hidden.data.uri, cid: hidden.data.cid }
    const down = await admin().updateSubjectStatus({ subject, takedown: { applied: true, ref: 'case-41' } }, { headers })
    expect(down.data).toEqual({ subject, takedown: { applied: true, ref: 'case-41' } })
    expect((await admin().getSubjectStatus({ uri: hidden.data.uri }, { headers })).data).toEqual({
      subject,
      takedown: { applied: true, ref: 'case-41' },
    })

    // gone for everyone, the owner included; the rest of the repository reads as before
    for (const who of [reader, agent]) {
      expect(await errorOf(who.com.atproto.repo.getRecord({ repo: did, collection: 'app.bsky.feed.post', rkey }))).toBe('RecordNotFound')
    }
    expect(await listed()).toEqual([kept.data.uri])
    expect(await errorOf(reader.com.atproto.sync.getRecord({ did, collection: 'app.bsky.feed.post', rkey }))).toBe('RecordNotFound')
    expect(
      (await reader.com.atproto.sync.getRecord({ did, collection: 'app.bsky.feed.post', rkey: kept.data.uri.split('/').pop()! })).success,
    ).toBe(true)

    const up = await admin().updateSubjectStatus({ subject, takedown: { applied: false } }, { headers })
    expect(up.data).toEqual({ subject, takedown: { applied: false } })
    const back = await reader.com.atproto.repo.getRecord({ repo: did, collection: 'app.bsky.feed.post', rkey })
    expect(back.data).toMatchObject({ uri: hidden.data.uri, cid: hidden.data.cid, value: { text: 'hidden' } })
    expect(await listed()).toEqual([hidden.data.uri, kept.data.uri])
    expect((await reader.com.atproto.sync.getRecord({ did, collection: 'app.bsky.feed.post', rkey })).success).toBe(true)
  })

  it('hides a taken-down blob from getBlob until the takedown is reversed', async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    const bytes = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4, 5])
    const { data } = await agent.uploadBlob(bytes, { encoding: 'image/png' })
    await agent.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      record: post('with image', { embed: { $type: 'app.bsky.embed.images', images: [{ alt: '', image: data.blob }] } }),
    })
    const cid = data.blob.ref.toString()
    const reader = new AtpAgent({ service: pds.url })
    expect(Buffer.from((await reader.com.atproto.sync.getBlob({ did, cid })).data)).toEqual(Buffer.from(bytes))

    const subject = { $type: 'com.atproto.admin.defs#repoBlobRef', did, cid }
    const down = await admin().updateSubjectStatus({ subject, takedown: { applied: true } }, { headers })
    expect(down.data).toEqual({ subject, takedown: { applied: true } })
    expect((await admin().getSubjectStatus({ did, blob: cid }, { headers })).data).toEqual({ subject, takedown: { applied: true } })
    expect(await errorOf(reader.com.atproto.sync.getBlob({ did, cid }))).toBe('BlobNotFound')

    await admin().updateSubjectStatus({ subject, takedown: { applied: false } }, { headers })
    expect((await admin().getSubjectStatus({ did, blob: cid }, { headers })).data.takedown).toEqual({ applied: false })
    expect(Buffer.from((await reader.com.atproto.sync.getBlob({ did, cid })).data)).toEqual(Buffer.from(bytes))
  })

  it('getBlocks refuses a taken-down record’s block with BlockNotFound until the takedown is reversed; getRepo keeps it', async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    const createdAt = new Date().toISOString()
    const hidden = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('hidden') })
    const kept = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('kept') })
    // two records with one value share its block
    const twin = post('twin', { createdAt })
    const twinA = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: twin })
    const twinB = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: twin })
    expect(twinA.data.cid).toBe(twinB.data.cid)
    const reader = new AtpAgent({ service: pds.url })
    const blocks = (cids: string[]) => reader.com.atproto.sync.getBlocks({ did, cids })
    expect((await blocks([hidden.data.cid, kept.data.cid])).success).toBe(true)

    const strong = (r: typeof hidden) => ({ $type: 'com.atproto.repo.strongRef', uri: r.data.uri, cid: r.data.cid })
    await admin().updateSubjectStatus({ subject: strong(hidden), takedown: { applied: true } }, { headers })
    await admin().updateSubjectStatus({ subject: strong(twinA), takedown: { applied: true } }, { headers })
    expect(await errorOf(blocks([hidden.data.cid]))).toBe('BlockNotFound')
    expect(await errorOf(blocks([kept.data.cid, hidden.data.cid]))).toBe('BlockNotFound')
    const raw = await xrpc(pds.url, 'com.atproto.sync.getBlocks', { params: { did, cids: hidden.data.cid } })
    expect([raw.status, raw.body.error]).toEqual([400, 'BlockNotFound'])
    // the rest of the repository, and a value a record that is not taken down still has
    expect((await blocks([kept.data.cid, twinA.data.cid])).success).toBe(true)
    // the whole repository still carries it, so its commit verifies
    const car = new Uint8Array((await reader.com.atproto.sync.getRepo({ did })).data)
    const doc = (await reader.com.atproto.identity.resolveDid({ did })).data.didDoc as any
    const verified = await verifyRepoCar(car, did, 'did:key:' + doc.verificationMethod[0].publicKeyMultibase)
    expect(verified.creates.map((c) => c.cid.toString())).toContain(hidden.data.cid)

    await admin().updateSubjectStatus({ subject: strong(twinB), takedown: { applied: true } }, { headers })
    expect(await errorOf(blocks([twinA.data.cid]))).toBe('BlockNotFound')
    await admin().updateSubjectStatus({ subject: strong(hidden), takedown: { applied: false } }, { headers })
    expect((await blocks([hidden.data.cid])).success).toBe(true)
  })

  it('a firehose replay leaves out a taken-down account’s events, its #account ones aside, and carries them again after the reversal', async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    const other = await newAgent()
    const note = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('before') })
    const repoRef = { $type: 'com.atproto.admin.defs#repoRef', did }
    await admin().updateSubjectStatus({ subject: repoRef, takedown: { applied: true } }, { headers })
    // not even the whole repository is served while it is taken down
    expect(await errorOf(new AtpAgent({ service: pds.url }).com.atproto.sync.getRepo({ did }))).toBe('RepoTakendown')
    // a replay from the start, up to a write made after the takedown
    const replay = async (rkey: string) => {
      const marker = await other.com.atproto.repo.createRecord({
        repo: didOf(other),
        collection: 'app.bsky.feed.post',
        rkey,
        record: post(rkey),
      })
      const fh = await subscribe(pds.url, 0)
      try {
        const frames = await fh.until((f) => f.some((x) => x.t === '#commit' && x.body.commit?.toString() === marker.data.commit!.cid))
        return frames.filter((f) => f.body.did === did || f.body.repo === did)
      } finally {
        fh.close()
      }
    }
    const down = await replay('markerdown')
    expect(down.map((f) => f.t)).toEqual(['#account', '#account'])
    expect(down.at(-1)!.body).toMatchObject({ did, active: false, status: 'takendown' })

    await admin().updateSubjectStatus({ subject: repoRef, takedown: { applied: false } }, { headers })
    const up = await replay('markerup')
    // everything again, the commit of the record made before the takedown included
    expect(new Set(up.map((f) => f.t))).toEqual(new Set(['#identity', '#account', '#sync', '#commit']))
    const paths = up.filter((f) => f.t === '#commit').flatMap((f) => f.body.ops.map((o: { path: string }) => o.path))
    expect(paths).toContain(note.data.uri.split('/').slice(3).join('/'))
    expect(up.slice(-2).map((f) => f.t)).toEqual(['#account', '#account'])
    expect(up.at(-1)!.body).toMatchObject({ did, active: true })
  })

  it('answers unknown record and blob subjects with 404 and a blob without its DID with 400', async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    const uri = `at://${did}/app.bsky.feed.post/3kabcabcabc22`
    const cid = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
    const strong = { $type: 'com.atproto.repo.strongRef', uri, cid }
    expect(await errorOf(admin().updateSubjectStatus({ subject: strong, takedown: { applied: true } }, { headers }))).toBe('NotFound')
    expect(await errorOf(admin().getSubjectStatus({ uri }, { headers }))).toBe('NotFound')
    const blob = { $type: 'com.atproto.admin.defs#repoBlobRef', did, cid }
    expect(await errorOf(admin().updateSubjectStatus({ subject: blob, takedown: { applied: true } }, { headers }))).toBe('NotFound')
    const res = await xrpc(pds.url, 'com.atproto.admin.getSubjectStatus', { params: { blob: cid }, headers })
    expect([res.status, res.body.error]).toEqual([400, 'InvalidRequest'])
  })
})

describe('admin account methods', () => {
  beforeAll(async () => {
    pds = await startTestPds({ PDS_INVITE_REQUIRED: 'true' })
  })
  afterAll(() => pds?.stop())

  it('finds accounts by email or handle prefix, page by page', async () => {
    const a = await newAgent('srcha')
    const b = await newAgent('srchb')
    await newAgent('other')
    const byEmail = await admin().searchAccounts({ email: `srcha${n - 2}@exa` }, { headers })
    expect(byEmail.data.accounts.map((x) => x.did)).toEqual([didOf(a)])
    expect(byEmail.data.accounts[0]).toMatchObject({ handle: a.session!.handle, email: a.session!.email })
    const byHandle = await admin().searchAccounts({ email: 'SRCH' }, { headers })
    expect(byHandle.data.accounts.map((x) => x.did).sort()).toEqual([didOf(a), didOf(b)].sort())
    // a LIKE wildcard in the term matches itself only
    expect((await admin().searchAccounts({ email: '%' }, { headers })).data.accounts).toEqual([])

    const seen: string[] = []
    let cursor: string | undefined
    for (let page = 0; page < 20; page++) {
      const res = await admin().searchAccounts({ limit: 1, cursor }, { headers })
      seen.push(...res.data.accounts.map((x) => x.did))
      cursor = res.data.cursor
      if (!cursor) break
    }
    expect(seen).toEqual([...new Set(seen)])
    expect(seen).toEqual(expect.arrayContaining([didOf(a), didOf(b)]))
  })

  it('lists invite codes by recency and by usage, and disables codes and accounts’ codes', async () => {
    const owner = await newAgent()
    const { data: mine } = await pds
      .client()
      .com.atproto.server.createInviteCodes({ codeCount: 2, useCount: 3, forAccounts: [didOf(owner)] }, { headers })
    const [ownerCode, ownerCode2] = mine.codes[0].codes
    const friend = new AtpAgent({ service: pds.url })
    await friend.createAccount({ handle: `friend${++n}x.test`, email: `friend${n}@example.com`, password: PASSWORD, inviteCode: ownerCode })

    const recent = await admin().getInviteCodes({ sort: 'recent', limit: 500 }, { headers })
    const times = recent.data.codes.map((c) => c.createdAt)
    expect(times).toEqual([...times].sort().reverse())
    const usage = await admin().getInviteCodes({ sort: 'usage', limit: 500 }, { headers })
    const used = usage.data.codes.map((c) => c.uses.length)
    expect(used).toEqual([...used].sort((x, y) => y - x))
    expect(usage.data.codes.find((c) => c.code === ownerCode)!.uses.map((u) => u.usedBy)).toEqual([friend.session!.did])

    for (const sort of ['recent', 'usage']) {
      const seen: string[] = []
      let cursor: string | undefined
      for (let page = 0; page < 100; page++) {
        const res = await admin().getInviteCodes({ sort, limit: 2, cursor }, { headers })
        seen.push(...res.data.codes.map((c) => c.code))
        cursor = res.data.cursor
        if (!cursor) break
      }
      expect(seen.sort()).toEqual(recent.data.codes.map((c) => c.code).sort())
    }

    const { data: lone } = await pds.client().com.atproto.server.createInviteCode({ useCount: 1 }, { headers })
    await admin().disableInviteCodes({ codes: [lone.code], accounts: [didOf(owner)] }, { headers })
    const after = await admin().getInviteCodes({ limit: 500 }, { headers })
    const disabled = after.data.codes.filter((c) => c.disabled).map((c) => c.code)
    expect(disabled.sort()).toEqual([lone.code, ownerCode, ownerCode2].sort())
    for (const inviteCode of [lone.code, ownerCode2]) {
      const res = await xrpc(pds.url, 'com.atproto.server.createAccount', {
        body: { handle: `late${++n}x.test`, email: `late${n}@example.com`, password: PASSWORD, inviteCode },
      })
      expect([res.status, res.body.error]).toEqual([400, 'InvalidInviteCode'])
    }
    expect(await errorOf(admin().disableInviteCodes({ accounts: ['admin'] }, { headers }))).toBe('InvalidRequest')
  })

  it("changes an account's handle under the user's rules, with a PLC operation and #identity", async () => {
    const agent = await newAgent()
    const other = await newAgent()
    const did = didOf(agent)
    const handle = `renamed${++n}x.test`
    await admin().updateAccountHandle({ did, handle }, { headers })
    expect((await agent.com.atproto.identity.resolveHandle({ handle })).data.did).toBe(did)
    const described = await agent.com.atproto.repo.describeRepo({ repo: did })
    expect(described.data).toMatchObject({ handle, handleIsCorrect: true })
    const events = await pds.services.db
      .selectFrom('event')
      .selectAll()
      .where('did', '=', did)
      .where('type', '=', 'identity')
      .orderBy('seq')
      .execute()
    expect(dagCbor.decode(events.at(-1)!.payload)).toMatchObject({ did, handle })

    expect(await errorOf(admin().updateAccountHandle({ did, handle: other.session!.handle }, { headers }))).toBe('HandleNotAvailable')
    expect(await errorOf(admin().updateAccountHandle({ did, handle: 'someone.example.com' }, { headers }))).toBe('InvalidHandle')
  })

  it("sets an account's email address as unconfirmed", async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    await pds.services.db.updateTable('account').set({ email_confirmed_at: new Date().toISOString() }).where('did', '=', did).execute()
    await admin().updateAccountEmail({ account: agent.session!.handle, email: 'New.Address@Example.com' }, { headers })
    const info = await admin().getAccountInfo({ did }, { headers })
    expect(info.data.email).toBe('new.address@example.com')
    expect(info.data.emailConfirmedAt).toBeUndefined()
    const fresh = new AtpAgent({ service: pds.url })
    await fresh.login({ identifier: 'new.address@example.com', password: PASSWORD })
    expect(fresh.session!.emailConfirmed).toBe(false)
    const other = await newAgent()
    expect(await errorOf(admin().updateAccountEmail({ account: did, email: other.session!.email! }, { headers }))).toBe('EmailNotAvailable')
  })

  it("names another signing key in the account's DID document", async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    const key = await Secp256k1Keypair.create()
    await admin().updateAccountSigningKey({ did, signingKey: key.did() }, { headers })
    const doc = (await agent.com.atproto.repo.describeRepo({ repo: did })).data.didDoc as {
      verificationMethod: { id: string; publicKeyMultibase: string }[]
    }
    expect(doc.verificationMethod.find((m) => m.id.endsWith('#atproto'))!.publicKeyMultibase).toBe(key.did().slice('did:key:'.length))
    expect(await errorOf(admin().updateAccountSigningKey({ did, signingKey: 'did:key:zNotAKey' }, { headers }))).toBe('InvalidRequest')
  })

  it("revokes an account's sessions (access tokens too), app passwords and password until a reset", async () => {
    const agent = await newAgent()
    const did = didOf(agent)
    const appPassword = (await agent.com.atproto.server.createAppPassword({ name: 'phone' })).data.password
    const refreshJwt = agent.session!.refreshJwt
    await pds.client().com.atproto.temp.revokeAccountCredentials({ account: did }, { headers })

    const refresh = pds.client().com.atproto.server.refreshSession(undefined, { headers: { authorization: `Bearer ${refreshJwt}` } })
    expect(await errorOf(refresh)).toBe('ExpiredToken')
    // the access token in hand stops working at once, not when it expires
    expect(await errorOf(agent.com.atproto.server.getSession())).toBe('ExpiredToken')
    for (const password of [PASSWORD, appPassword]) {
      const login = new AtpAgent({ service: pds.url }).login({ identifier: did, password })
      expect(await errorOf(login)).toBe('AuthenticationRequired')
    }
    // a password reset gives the account back
    await admin().updateAccountPassword({ did, password: 'a new password' }, { headers })
    await new AtpAgent({ service: pds.url }).login({ identifier: did, password: 'a new password' })
  })
})
