// com.atproto.server.getServiceAuth: ES256K with the repository key for another service, HS256
// for this one, never more than the caller holds.
import { verifyJwt } from '@atproto/xrpc-server'
import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { didDocFor } from '../src/account/store.js'
import { describe, JWT_SECRET, startTestPds, xrpc, type TestPds } from './harness.js'

let pds: TestPds
let acct: { did: string; accessJwt: string }

const get = (params: Record<string, string>, token = acct.accessJwt) =>
  xrpc(pds.url, 'com.atproto.server.getServiceAuth', { params, headers: { authorization: `Bearer ${token}` } })

describe('getServiceAuth', () => {
  beforeAll(async () => {
    pds = await startTestPds()
    const res = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'svc.test', email: 'svc@example.com', password: 'service auth password' },
    })
    acct = res.body
  })
  afterAll(() => pds?.stop())

  it("signs for another service with the account's repository key, verifiable from the DID document", async () => {
    const res = await get({ aud: 'did:web:video.example', lxm: 'app.bsky.video.getUploadLimits' })
    expect(res.status).toBe(200)
    const token = res.body.token as string
    expect(decodeProtectedHeader(token).alg).toBe('ES256K')
    const payload = await verifyJwt(token, 'did:web:video.example', 'app.bsky.video.getUploadLimits', async (iss) => {
      const doc = await didDocFor(pds.services.db, iss)
      return `did:key:${doc!.verificationMethod[0].publicKeyMultibase}`
    })
    expect(payload).toMatchObject({ iss: acct.did, aud: 'did:web:video.example', lxm: 'app.bsky.video.getUploadLimits' })
    const claims = decodeJwt(token)
    expect(claims.exp! - claims.iat!).toBe(60)
    expect(claims.jti).toMatch(/^[A-Za-z0-9_-]+$/)
  })

  it('a token signed for one audience or method fails verification for another', async () => {
    const token = (await get({ aud: 'did:web:feed.example', lxm: 'app.bsky.feed.getFeedSkeleton' })).body.token
    const key = async (iss: string) => `did:key:${(await didDocFor(pds.services.db, iss))!.verificationMethod[0].publicKeyMultibase}`
    await expect(verifyJwt(token, 'did:web:other.example', null, key)).rejects.toThrow()
    await expect(verifyJwt(token, 'did:web:feed.example', 'com.atproto.repo.createRecord', key)).rejects.toThrow()
  })

  it('omits lxm when not asked for', async () => {
    const token = (await get({ aud: 'did:web:feed.example' })).body.token
    expect(decodeJwt(token).lxm).toBeUndefined()
  })

  it("signs HS256 with PDS_JWT_SECRET when aud is this server's own DID", async () => {
    const res = await get({ aud: 'did:web:localhost', lxm: 'com.atproto.sync.getRepo' })
    expect(res.status).toBe(200)
    const { payload, protectedHeader } = await jwtVerify(res.body.token, new TextEncoder().encode(JWT_SECRET))
    expect(protectedHeader.alg).toBe('HS256')
    expect(payload).toMatchObject({ iss: acct.did, aud: 'did:web:localhost', lxm: 'com.atproto.sync.getRepo' })
  })

  it('honours a shorter exp and refuses one more than 60 seconds away or in the past with BadExpiration', async () => {
    const now = Math.floor(Date.now() / 1000)
    const ok = await get({ aud: 'did:web:feed.example', exp: String(now + 30) })
    expect(decodeJwt(ok.body.token).exp).toBe(now + 30)
    const far = await get({ aud: 'did:web:feed.example', exp: String(now + 3600) })
    expect(far.status).toBe(400)
    expect(far.body.error).toBe('BadExpiration')
    const past = await get({ aud: 'did:web:feed.example', exp: String(now - 10) })
    expect(past.status).toBe(400)
    expect(past.body.error).toBe('BadExpiration')
  })

  it('refuses an aud that is not a DID, and callers without a token', async () => {
    expect((await get({ aud: 'https://feed.example' })).status).toBe(400)
    const anon = await xrpc(pds.url, 'com.atproto.server.getServiceAuth', { params: { aud: 'did:web:feed.example' } })
    expect(anon.status).toBe(401)
  })
})
