// Video: the app asks getServiceAuth for a token for this server and uploadBlob, hands it to the
// video service, and the video service uploads the transcoded file with it (raw fetch here, as it
// would). The account's own service token is accepted on uploadBlob, within the same limits as any
// upload, and is no access token anywhere else.
import { AtpAgent } from '@atproto/api'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { k256Keypair } from '../src/identity/k256.js'
import { ADMIN_PASSWORD, PASSWORD, describe, startTestPds, xrpc, type TestPds } from './harness.js'
import { serviceToken } from './service-token.js'

const LIMIT = 4096
let pds: TestPds
let n = 0
const OWN = 'did:web:localhost'
const UPLOAD = 'com.atproto.repo.uploadBlob'

async function newAgent() {
  n++
  const agent = new AtpAgent({ service: pds.url })
  await agent.createAccount({ handle: `video${n}x.test`, email: `video${n}@example.com`, password: PASSWORD })
  return agent
}

/** as the video service: the file, with the user's token */
const upload = (token: string, bytes: Uint8Array, type = 'video/mp4') =>
  fetch(`${pds.url}/xrpc/${UPLOAD}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': type }, body: bytes })

/** a token the account's repository key signs, as another server would mint it */
async function signedByAccountKey(did: string, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}) {
  const row = await pds.services.db.selectFrom('signing_key').select('private_key_hex').where('did', '=', did).executeTakeFirstOrThrow()
  return serviceToken(await k256Keypair(row.private_key_hex), { iss: did, aud: OWN, lxm: UPLOAD, ...claims }, header)
}

describe('uploads by the video service with the account’s service token', () => {
  beforeAll(async () => {
    pds = await startTestPds({ PDS_BLOB_UPLOAD_LIMIT: String(LIMIT) })
  })
  afterAll(() => pds?.stop())

  it('getServiceAuth for this server and uploadBlob, then the video service uploads with it; the post embeds it', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const { token } = (await agent.com.atproto.server.getServiceAuth({ aud: OWN, lxm: UPLOAD })).data
    const res = await upload(token, new Uint8Array(1000).fill(7))
    expect(res.status).toBe(200)
    const { blob } = (await res.json()) as { blob: { ref: { $link: string }; mimeType: string; size: number } }
    expect(blob).toMatchObject({ mimeType: 'video/mp4', size: 1000 })
    const post = await agent.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      record: {
        text: 'clip',
        createdAt: new Date().toISOString(),
        embed: { $type: 'app.bsky.embed.video', video: { $type: 'blob', ref: blob.ref, mimeType: 'video/mp4', size: 1000 } },
      },
    })
    expect(post.success).toBe(true)
    const got = await xrpc(pds.url, 'com.atproto.sync.getBlob', { params: { did, cid: blob.ref.$link } })
    expect(got.status).toBe(200)
  })

  it("accepts a token the account's own key signed, with aud bare or did#atproto_pds and a kid header", async () => {
    const did = (await newAgent()).session!.did
    for (const token of [
      await signedByAccountKey(did),
      await signedByAccountKey(did, { aud: `${OWN}#atproto_pds` }),
      await signedByAccountKey(did, {}, { kid: '#atproto' }),
    ]) {
      expect((await upload(token, new Uint8Array([1, 2, 3]))).status).toBe(200)
    }
    const other = await signedByAccountKey(did, { aud: 'did:web:video.bsky.app' })
    const res = await upload(other, new Uint8Array([1]))
    expect([res.status, ((await res.json()) as { error: string }).error]).toEqual([401, 'BadJwtAudience'])
  })

  it('keeps the upload limit, and describeServer says what it is', async () => {
    const agent = await newAgent()
    expect((await agent.com.atproto.server.describeServer()).data.blobUploadLimit).toBe(LIMIT)
    const { token } = (await agent.com.atproto.server.getServiceAuth({ aud: OWN, lxm: UPLOAD })).data
    const res = await upload(token, new Uint8Array(LIMIT + 1))
    expect(res.status).toBe(413)
  })

  it('is no access token anywhere else: other methods, and other lxm', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const { token } = (await agent.com.atproto.server.getServiceAuth({ aud: OWN, lxm: UPLOAD })).data
    const body = { repo: did, collection: 'app.bsky.feed.post', record: { text: 'x', createdAt: new Date().toISOString() } }
    const write = await xrpc(pds.url, 'com.atproto.repo.createRecord', { body, headers: { authorization: `Bearer ${token}` } })
    expect(write.status).toBe(401)
    const forWrite = (await agent.com.atproto.server.getServiceAuth({ aud: OWN, lxm: 'com.atproto.repo.createRecord' })).data.token
    const viaLxm = await xrpc(pds.url, 'com.atproto.repo.createRecord', { body, headers: { authorization: `Bearer ${forWrite}` } })
    expect(viaLxm.status).toBe(401)
    const session = await xrpc(pds.url, 'com.atproto.server.getSession', { headers: { authorization: `Bearer ${token}` } })
    expect(session.status).toBe(401)
    // a token for another method does not upload either
    const wrong = await upload(forWrite, new Uint8Array([1]))
    expect([wrong.status, ((await wrong.json()) as { error: string }).error]).toEqual([401, 'BadJwtLexiconMethod'])
  })

  it("refuses a taken-down account's token, and a DID that has no account here", async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const { token } = (await agent.com.atproto.server.getServiceAuth({ aud: OWN, lxm: UPLOAD })).data
    const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }
    await xrpc(pds.url, 'com.atproto.admin.updateSubjectStatus', {
      body: { subject: { $type: 'com.atproto.admin.defs#repoRef', did }, takedown: { applied: true } },
      headers: basic,
    })
    const down = await upload(token, new Uint8Array([1]))
    expect([down.status, ((await down.json()) as { error: string }).error]).toEqual([403, 'AccountTakedown'])
    const stranger = await serviceToken(await k256Keypair('3'.repeat(64)), {
      iss: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa',
      aud: OWN,
      lxm: UPLOAD,
    })
    expect((await upload(stranger, new Uint8Array([1]))).status).toBe(401)
  })
})
