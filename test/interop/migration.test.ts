// Proof against the reference: accounts move between our PDS and the reference PDS
// (@atproto/pds 0.5 via @atproto/dev-env, bench/peer/) in both directions through the standard
// atproto migration, driven by @atproto/api calls only. Both servers share the reference's PLC
// directory. The PLC token is read from the origin's email (the reference prints its mails, ours
// sends them to a sink). Afterwards every record and blob is read back from the destination and
// its repository is verified against the key the DID document names.
import { randomBytes } from 'node:crypto'
import { Agent, AtpAgent } from '@atproto/api'
import { verifyRepoCar } from '@atproto/repo'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, startTestPds, type TestPds } from '../harness.js'
import { startMailSink, sinkEnv, type MailSink } from '../mail-sink.js'
import { startPeer, type Peer } from './peer.js'

const PASSWORD = 'interop password 123'

let peer: Peer
let ours: TestPds
let sink: MailSink

type Seeded = {
  did: string
  handle: string
  email: string
  records: { uri: string; cid: string; value: any }[]
  blobs: { cid: string; bytes: Uint8Array; mimeType: string }[]
}

/** a fresh account on `agent`'s server with `n` posts, the first `b` of them with an image */
async function seed(agent: AtpAgent, handle: string, email: string, n: number, b: number): Promise<Seeded> {
  await agent.createAccount({ handle, email, password: PASSWORD })
  const did = agent.session!.did
  const blobs: Seeded['blobs'] = []
  const refs: any[] = []
  for (let i = 0; i < b; i++) {
    const bytes = new Uint8Array(randomBytes(3000 + i * 17))
    const res = await agent.com.atproto.repo.uploadBlob(bytes, { encoding: 'image/png' })
    refs.push(res.data.blob)
    blobs.push({ cid: res.data.blob.ref.toString(), bytes, mimeType: 'image/png' })
  }
  const records: Seeded['records'] = []
  for (let i = 0; i < n; i++) {
    const value: any = { $type: 'app.bsky.feed.post', text: `post ${i} from ${handle}`, createdAt: new Date().toISOString() }
    if (i < b) value.embed = { $type: 'app.bsky.embed.images', images: [{ image: refs[i], alt: `image ${i}` }] }
    const res = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: value })
    records.push({ uri: res.data.uri, cid: res.data.cid, value })
  }
  const profile = { $type: 'app.bsky.actor.profile', displayName: `Interop ${handle}` }
  const res = await agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.actor.profile', rkey: 'self', record: profile })
  records.push({ uri: res.data.uri, cid: res.data.cid, value: profile })
  return { did, handle, email, records, blobs }
}

/**
 * The standard atproto migration of `account` from `from` (signed in) to the server at `toUrl`,
 * each step an @atproto/api call; `plcToken` reads the token the origin emailed.
 * Returns the agent signed in at the destination.
 */
async function migrate(from: AtpAgent, toUrl: string, account: Seeded, plcToken: () => Promise<string>) {
  const to = new Agent(toUrl)
  const { data: describe } = await to.com.atproto.server.describeServer()
  // 1. origin: a service-auth token for the destination, bound to createAccount
  const { data: auth } = await from.com.atproto.server.getServiceAuth({
    aud: describe.did,
    lxm: 'com.atproto.server.createAccount',
  })
  // 2. destination: a deactivated account for the existing DID
  const { data: created } = await to.com.atproto.server.createAccount(
    { did: account.did, handle: account.handle, email: account.email, password: PASSWORD },
    { headers: { authorization: `Bearer ${auth.token}` }, encoding: 'application/json' },
  )
  expect(created.did).toBe(account.did)
  // the destination's session, sent to the destination itself: until the DID document names it, a
  // session agent would follow the document back to the origin (and our getSession refuses a
  // deactivated account: only checkAccountStatus and activateAccount relax the gate)
  to.setHeader('authorization', `Bearer ${created.accessJwt}`)
  // 3. repository
  const { data: car } = await from.com.atproto.sync.getRepo({ did: account.did })
  await to.com.atproto.repo.importRepo(car, { encoding: 'application/vnd.ipld.car' })
  // 4. blobs: whatever the destination misses, from the origin
  let cursor: string | undefined
  let moved = 0
  for (let page = 0; page < 100; page++) {
    const { data } = await to.com.atproto.repo.listMissingBlobs({ cursor, limit: 100 })
    for (const { cid } of data.blobs) {
      const blob = await from.com.atproto.sync.getBlob({ did: account.did, cid })
      await to.com.atproto.repo.uploadBlob(blob.data, { encoding: blob.headers['content-type'] ?? 'application/octet-stream' })
      moved++
    }
    cursor = data.cursor
    if (!cursor || !data.blobs.length) break
  }
  expect(moved).toBe(account.blobs.length)
  expect((await to.com.atproto.repo.listMissingBlobs({})).data.blobs).toEqual([])
  // 5. identity: the destination's recommended credentials, signed by the origin, submitted by the destination
  const { data: creds } = await to.com.atproto.identity.getRecommendedDidCredentials()
  await from.com.atproto.identity.requestPlcOperationSignature()
  const token = await plcToken()
  const { data: signed } = await from.com.atproto.identity.signPlcOperation({ token, ...(creds as any) })
  await to.com.atproto.identity.submitPlcOperation({ operation: signed.operation })
  // 6. switch over
  await to.com.atproto.server.activateAccount()
  await from.com.atproto.server.deactivateAccount({})
  return to
}

/** a new post through the destination session, added to what `account` must hold */
async function postAt(to: Agent, account: Seeded) {
  const value = { $type: 'app.bsky.feed.post', text: 'hello from the new home', createdAt: new Date().toISOString() }
  const { data } = await to.com.atproto.repo.createRecord({ repo: account.did, collection: 'app.bsky.feed.post', record: value })
  expect(data.uri).toContain(account.did)
  account.records.push({ uri: data.uri, cid: data.cid, value })
}

/** everything `account` had, read back from the destination at `url`; the repo verified */
async function expectAllAt(url: string, publicUrl: string, plcUrl: string, account: Seeded) {
  const reader = new AtpAgent({ service: url })
  for (const rec of account.records) {
    const [, collection, rkey] = rec.uri.slice('at://'.length).split('/')
    const { data } = await reader.com.atproto.repo.getRecord({ repo: account.did, collection, rkey })
    expect(data.cid).toBe(rec.cid)
    expect(JSON.parse(JSON.stringify(data.value))).toEqual(JSON.parse(JSON.stringify(rec.value)))
  }
  const { data: listed } = await reader.com.atproto.repo.listRecords({ repo: account.did, collection: 'app.bsky.feed.post', limit: 100 })
  expect(listed.records.length).toBe(account.records.length - 1)
  for (const blob of account.blobs) {
    const res = await reader.com.atproto.sync.getBlob({ did: account.did, cid: blob.cid })
    expect(Buffer.from(res.data).equals(Buffer.from(blob.bytes))).toBe(true)
  }
  const { data: cids } = await reader.com.atproto.sync.listBlobs({ did: account.did })
  expect(cids.cids.sort()).toEqual(account.blobs.map((b) => b.cid).sort())
  // the DID document now names this server, and the repository verifies against its atproto key
  const doc: any = await (await fetch(`${plcUrl}/${account.did}`)).json()
  expect(doc.service.find((s: any) => s.id === '#atproto_pds').serviceEndpoint).toBe(publicUrl)
  const data: any = await (await fetch(`${plcUrl}/${account.did}/data`)).json()
  const { data: car } = await reader.com.atproto.sync.getRepo({ did: account.did })
  const verified = await verifyRepoCar(car, account.did, data.verificationMethods.atproto)
  expect(verified.creates.length).toBe(account.records.length)
  const { data: status } = await reader.com.atproto.sync.getRepoStatus({ did: account.did })
  expect(status.active).toBe(true)
  const { data: described } = await reader.com.atproto.repo.describeRepo({ repo: account.did })
  expect(described.handle).toBe(account.handle)
  expect(described.handleIsCorrect).toBe(true)
}

describe('interop with the reference PDS', () => {
  beforeAll(async () => {
    peer = await startPeer()
    sink = await startMailSink()
    ours = await startTestPds({ PDS_DID_PLC_URL: peer.plcUrl, PDS_HOSTNAME: 'ours.localhost', ...sinkEnv(sink) })
  }, 120_000)
  afterAll(async () => {
    await ours?.stop()
    await sink?.close()
    await peer?.stop()
  })

  it('an account with records and blobs moves from the reference into ours', async () => {
    const origin = new AtpAgent({ service: peer.url })
    const account = await seed(origin, 'from-ref.test', 'from-ref@example.com', 25, 6)
    const to = await migrate(origin, ours.url, account, async () => {
      const mail = await peer.waitForMail('plcOperation', account.email)
      return mail.params.token
    })
    // the session at the destination is a working one: a new post lands in the migrated repo
    await postAt(to, account)
    await expectAllAt(ours.url, ours.env.PDS_PUBLIC_URL, peer.plcUrl, account)
    // the origin reports the account deactivated
    const { data: left } = await new AtpAgent({ service: peer.url }).com.atproto.sync.getRepoStatus({ did: account.did })
    expect(left).toMatchObject({ active: false, status: 'deactivated' })
  }, 120_000)

  it('an account with records and blobs moves from ours into the reference', async () => {
    const origin = new AtpAgent({ service: ours.url })
    const account = await seed(origin, 'from-ours.test', 'from-ours@example.com', 25, 6)
    const to = await migrate(origin, peer.url, account, async () => {
      // ours emails the token (bounded wait for the identity-change mail)
      for (let i = 0; i < 200; i++) {
        const mail = sink.received.find((m) => m.body.to === account.email && /identity/.test(m.body.subject))
        if (mail) return sink.tokenFor(account.email)
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error('no PLC operation mail from ours')
    })
    // the reference keeps the imported commit (signed with our key) until the account's next
    // write, which it signs with its own key: the repository verifies after it
    await postAt(to, account)
    await expectAllAt(peer.url, peer.url, peer.plcUrl, account)
    const { data: left } = await new AtpAgent({ service: ours.url }).com.atproto.sync.getRepoStatus({ did: account.did })
    expect(left).toMatchObject({ active: false, status: 'deactivated' })
  }, 120_000)
})
