// Two server processes sharing one database and one Redis: a DPoP proof accepted by one is a
// replay at the other (PDS_DPOP_REPLAY_STORE=redis).
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, redisUrl, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'
import { ath, authorize, dpopGet, dpopKey, exchange, nonceFrom } from './oauth-helpers.js'

const d = redisUrl ? describe : describe.skip

d('DPoP replay across processes sharing Redis', () => {
  let a: TestPds
  let b: TestPds
  const publicUrl = 'http://localhost:2999'

  beforeAll(async () => {
    const dir = tempDir()
    const shared = { PDS_DPOP_REPLAY_STORE: 'redis', PDS_REDIS_URL: redisUrl!, PDS_PUBLIC_URL: publicUrl }
    a = await startTestPds(shared, { dataDir: dir })
    // the second process: same data directory (SQLite) or same schema (PostgreSQL)
    const same: Record<string, string> = { ...shared }
    if (a.env.PDS_DB_POSTGRES_SCHEMA) {
      same.PDS_DB_POSTGRES_URL = a.env.PDS_DB_POSTGRES_URL
      same.PDS_DB_POSTGRES_SCHEMA = a.env.PDS_DB_POSTGRES_SCHEMA
    }
    b = await startTestPds(same, { dataDir: dir })
    // both processes derive the same nonces; nothing listens on the public URL itself
    nonceFrom(publicUrl, a.url)
  })
  afterAll(async () => {
    await b?.close()
    await a?.stop()
  })

  it('refuses at one process a proof the other already accepted', async () => {
    const created = await xrpc(a.url, 'com.atproto.server.createAccount', {
      body: { handle: 'shared.test', email: 'shared@example.com', password: 'shared password' },
    })
    expect(created.status).toBe(200)
    const key = await dpopKey()
    const sa = { url: a.url, publicUrl }
    const sb = { url: b.url, publicUrl }
    const { code, verifier } = await authorize(sa, key, { handle: 'shared.test', password: 'shared password' })
    const tokens = (await exchange(sa, key, code, verifier)).json
    const proof = await key.proof('GET', `${publicUrl}/xrpc/com.atproto.server.getSession`, { ath: ath(tokens.access_token) })
    const first = await dpopGet(sa, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)
    expect(first.status).toBe(200)
    const replay = await dpopGet(sb, key, tokens.access_token, 'com.atproto.server.getSession', {}, proof)
    expect(replay.status).toBe(401)
    expect(replay.json.error).toBe('InvalidToken')
    // a fresh proof works at the second process
    expect((await dpopGet(sb, key, tokens.access_token, 'com.atproto.server.getSession')).status).toBe(200)
  })
})
