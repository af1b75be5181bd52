import * as dagCbor from '@ipld/dag-cbor'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, bearer, describe, newAccount as harnessAccount, startTestPds, xrpc, PASSWORD, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'

let pds: TestPds
let sink: MailSink
let n = 0
const basic = (password = ADMIN_PASSWORD) => ({ authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}` })
const admin = (nsid: string, opts: { body?: unknown; params?: Record<string, string> } = {}) =>
  xrpc(pds.url, nsid, { ...opts, headers: basic() })

async function signUp(url: string, extra: Record<string, unknown> = {}) {
  n++
  const email = `adm${n}@example.com`
  return xrpc(url, 'com.atproto.server.createAccount', { body: { handle: `adm${n}x.test`, email, password: PASSWORD, ...extra } })
}
const newAccount = () => harnessAccount(pds.url, 'adu')
const login = (identifier: string, password = PASSWORD) =>
  xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password } })

describe('admin API', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink))
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })

  it('needs HTTP Basic admin:<PDS_ADMIN_PASSWORD>', async () => {
    const acct = await newAccount()
    const none = await xrpc(pds.url, 'com.atproto.admin.getAccountInfo', { params: { did: acct.did } })
    expect([none.status, none.body.error]).toEqual([401, 'AuthMissing'])
    const wrong = await xrpc(pds.url, 'com.atproto.admin.getAccountInfo', { params: { did: acct.did }, headers: basic('nope') })
    expect([wrong.status, wrong.body.error]).toEqual([401, 'AuthenticationRequired'])
    const user = await xrpc(pds.url, 'com.atproto.admin.getAccountInfo', { params: { did: acct.did }, headers: bearer(acct.accessJwt) })
    expect(user.status).toBe(401)
  })

  it('takes an account down and restores it, with #account events', async () => {
    const acct = await newAccount()
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: acct.did }
    const down = await admin('com.atproto.admin.updateSubjectStatus', { body: { subject, takedown: { applied: true, ref: 'case-17' } } })
    expect(down.status).toBe(200)
    expect(down.body).toEqual({ subject, takedown: { applied: true, ref: 'case-17' } })
    const status = await admin('com.atproto.admin.getSubjectStatus', { params: { did: acct.did } })
    expect(status.body).toEqual({ subject, takedown: { applied: true, ref: 'case-17' }, deactivated: { applied: false } })
    const l = await login(acct.handle)
    expect([l.status, l.body.error]).toEqual([401, 'AccountTakedown'])
    const s = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: bearer(acct.accessJwt) })
    expect([s.status, s.body.error]).toEqual([403, 'AccountTakedown'])
    const s2 = await xrpc(pds.url, 'com.atproto.server.checkAccountStatus', { headers: bearer(acct.accessJwt) })
    expect([s2.status, s2.body.error]).toEqual([403, 'AccountTakedown'])

    const up = await admin('com.atproto.admin.updateSubjectStatus', { body: { subject, takedown: { applied: false } } })
    expect(up.body).toEqual({ subject, takedown: { applied: false } })
    expect((await login(acct.handle)).status).toBe(200)
    const rows = await pds.services.db
      .selectFrom('event')
      .selectAll()
      .where('did', '=', acct.did)
      .where('type', '=', 'account')
      .orderBy('seq')
      .execute()
    // the first is the creation's #account active=true
    expect(rows.slice(1).map((r) => dagCbor.decode(r.payload))).toEqual([
      { did: acct.did, active: false, status: 'takendown' },
      { did: acct.did, active: true },
    ])
  })

  it('answers an unknown record subject and an unknown account with 404', async () => {
    const acct = await newAccount()
    const rec = await admin('com.atproto.admin.updateSubjectStatus', {
      body: {
        subject: {
          $type: 'com.atproto.repo.strongRef',
          uri: `at://${acct.did}/app.bsky.feed.post/3kabc`,
          cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
        },
        takedown: { applied: true },
      },
    })
    expect([rec.status, rec.body.error]).toEqual([404, 'NotFound'])
    const unknown = await admin('com.atproto.admin.getAccountInfo', { params: { did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' } })
    expect([unknown.status, unknown.body.error]).toEqual([404, 'NotFound'])
  })

  it('describes accounts at getAccountInfo and getAccountInfos', async () => {
    const a = await newAccount()
    const b = await newAccount()
    const one = await admin('com.atproto.admin.getAccountInfo', { params: { did: a.did } })
    expect(one.status).toBe(200)
    expect(one.body).toMatchObject({ did: a.did, handle: a.handle, email: a.email, invitesDisabled: false, invites: [] })
    expect(Date.parse(one.body.indexedAt)).not.toBeNaN()
    const qs = new URLSearchParams([
      ['dids', a.did],
      ['dids', b.did],
      ['dids', 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'],
    ])
    const res = await fetch(`${pds.url}/xrpc/com.atproto.admin.getAccountInfos?${qs}`, { headers: basic() })
    const body: any = await res.json()
    expect(body.infos.map((i: { did: string }) => i.did).sort()).toEqual([a.did, b.did].sort())
  })

  it("sends an operator's message to the account's address", async () => {
    const acct = await newAccount()
    const res = await admin('com.atproto.admin.sendEmail', {
      body: { recipientDid: acct.did, senderDid: 'did:web:localhost', subject: 'About your account', content: 'Hello from the operator.' },
    })
    expect(res.body).toEqual({ sent: true })
    const msg = sink.received.at(-1)!
    expect(msg.body).toMatchObject({ to: acct.email, subject: 'About your account' })
    // the operator's words first, then the service's signature every email carries
    expect(msg.body.text).toMatch(/^Hello from the operator\.\n\n-- \n/)
  })

  it('sets a password and deletes an account (record kept, #tombstone)', async () => {
    const acct = await newAccount()
    const short = await admin('com.atproto.admin.updateAccountPassword', { body: { did: acct.did, password: 'short' } })
    expect([short.status, short.body.error]).toEqual([400, 'InvalidPassword'])
    expect((await admin('com.atproto.admin.updateAccountPassword', { body: { did: acct.did, password: 'operator chosen' } })).status).toBe(
      200,
    )
    expect((await login(acct.handle, 'operator chosen')).status).toBe(200)
    expect((await admin('com.atproto.admin.deleteAccount', { body: { did: acct.did } })).status).toBe(200)
    const row = await pds.services.db.selectFrom('account').select('status').where('did', '=', acct.did).executeTakeFirstOrThrow()
    expect(row.status).toBe('deleted')
    const last = await pds.services.db
      .selectFrom('event')
      .select('type')
      .where('did', '=', acct.did)
      .orderBy('seq', 'desc')
      .executeTakeFirstOrThrow()
    expect(last.type).toBe('tombstone')
  })
})

describe('invite codes', () => {
  let inv: TestPds
  beforeAll(async () => {
    inv = await startTestPds({ PDS_INVITE_REQUIRED: 'true' })
  })
  afterAll(() => inv?.stop())
  const adm = (nsid: string, body: unknown) => xrpc(inv.url, nsid, { body, headers: basic() })

  it('refuses sign-up without a code or with an unknown one', async () => {
    for (const extra of [{}, { inviteCode: 'localhost-nope1-nope2' }]) {
      const res = await signUp(inv.url, extra)
      expect([res.status, res.body.error]).toEqual([400, 'InvalidInviteCode'])
    }
    const describeRes = await xrpc(inv.url, 'com.atproto.server.describeServer')
    expect(describeRes.body.inviteCodeRequired).toBe(true)
  })

  it('spends a code use by use', async () => {
    const { body } = await adm('com.atproto.server.createInviteCode', { useCount: 2 })
    expect(body.code).toMatch(/^localhost-[a-z2-7]{5}-[a-z2-7]{5}$/)
    expect((await signUp(inv.url, { inviteCode: body.code })).status).toBe(200)
    expect((await signUp(inv.url, { inviteCode: body.code })).status).toBe(200)
    const third = await signUp(inv.url, { inviteCode: body.code })
    expect([third.status, third.body.error]).toEqual([400, 'InvalidInviteCode'])
  })

  it('lets exactly one of two sign-ups racing for a one-use code win', async () => {
    const { body } = await adm('com.atproto.server.createInviteCode', { useCount: 1 })
    const results = await Promise.all([signUp(inv.url, { inviteCode: body.code }), signUp(inv.url, { inviteCode: body.code })])
    expect(results.map((r) => r.status).sort()).toEqual([200, 400])
    expect(results.find((r) => r.status === 400)!.body.error).toBe('InvalidInviteCode')
    const uses = await inv.services.db.selectFrom('invite_code_use').selectAll().where('code', '=', body.code).execute()
    expect(uses).toHaveLength(1)
  })

  it("creates codes for accounts, shows them with their uses, and honours the operator's invite switch", async () => {
    const seed = (await adm('com.atproto.server.createInviteCode', { useCount: 1 })).body.code
    const owner = (await signUp(inv.url, { inviteCode: seed })).body
    const created = await adm('com.atproto.server.createInviteCodes', { codeCount: 2, useCount: 1, forAccounts: [owner.did] })
    expect(created.body.codes).toHaveLength(1)
    expect(created.body.codes[0].account).toBe(owner.did)
    const [c1, c2] = created.body.codes[0].codes as string[]
    const friend = await signUp(inv.url, { inviteCode: c1 })
    expect(friend.status).toBe(200)

    const mine = await xrpc(inv.url, 'com.atproto.server.getAccountInviteCodes', { headers: bearer(owner.accessJwt) })
    expect(mine.status).toBe(200)
    const used = mine.body.codes.find((c: { code: string }) => c.code === c1)
    expect(used).toMatchObject({ available: 1, disabled: false, forAccount: owner.did, createdBy: 'admin' })
    expect(used.uses).toEqual([{ usedBy: friend.body.did, usedAt: expect.any(String) }])
    const unused = await xrpc(inv.url, 'com.atproto.server.getAccountInviteCodes', {
      params: { includeUsed: 'false' },
      headers: bearer(owner.accessJwt),
    })
    expect(unused.body.codes.map((c: { code: string }) => c.code)).toEqual([c2])

    const info = await xrpc(inv.url, 'com.atproto.admin.getAccountInfo', { params: { did: friend.body.did }, headers: basic() })
    expect(info.body.invitedBy.code).toBe(c1)

    expect((await adm('com.atproto.admin.disableAccountInvites', { account: owner.did, note: 'spam wave' })).status).toBe(200)
    const refused = await signUp(inv.url, { inviteCode: c2 })
    expect([refused.status, refused.body.error]).toEqual([400, 'InvalidInviteCode'])
    const ownerInfo = await xrpc(inv.url, 'com.atproto.admin.getAccountInfo', { params: { did: owner.did }, headers: basic() })
    expect(ownerInfo.body).toMatchObject({ invitesDisabled: true, inviteNote: 'spam wave' })
    expect((await adm('com.atproto.admin.enableAccountInvites', { account: owner.did })).status).toBe(200)
    expect((await signUp(inv.url, { inviteCode: c2 })).status).toBe(200)
  })
})
