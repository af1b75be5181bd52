// Redis going away under a server that uses it for the DPoP replay store and the rate limits:
// DPoP-bound requests are refused with a clear temporary error (fail closed: a replay could not be
// told from a fresh proof), password sessions keep working (the rate limits let requests
// through), and DPoP works again once Redis is back; the same, within a bound, when Redis hangs
// without closing its connections. Runs its own redis-server on a free port.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, freePort, startTestPds, xrpc, type TestPds } from './harness.js'
import { authorize, dpopGet, dpopKey, exchange, refreshGrant, type DpopKey } from './oauth-helpers.js'

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const d = haveRedis ? describe : describe.skip
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function startRedis(port: number): { child: ChildProcess; exited: Promise<void> } {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  })
  return { child, exited: new Promise((resolve) => child.on('exit', () => resolve())) }
}

async function redisUp(port: number) {
  for (let i = 0; i < 100; i++) {
    if (
      spawnSync('redis-cli', ['-p', String(port), 'ping'])
        .stdout?.toString()
        .trim() === 'PONG'
    )
      return
    await sleep(50)
  }
  throw new Error('redis-server did not start')
}

d('Redis down', () => {
  let pds: TestPds
  let redis: ReturnType<typeof startRedis>
  let port: number
  const publicUrl = () => pds.env.PDS_PUBLIC_URL

  beforeAll(async () => {
    port = await freePort()
    redis = startRedis(port)
    await redisUp(port)
    pds = await startTestPds({
      PDS_REDIS_URL: `redis://127.0.0.1:${port}`,
      PDS_DPOP_REPLAY_STORE: 'redis',
      PDS_RATE_LIMITS_ENABLED: 'true',
      PDS_RATE_LIMIT_MULTIPLIER: '100',
    })
  })
  afterAll(async () => {
    await pds?.stop()
    if (redis?.child.exitCode === null) {
      redis.child.kill('SIGKILL')
      await redis.exited
    }
  })

  it('refuses DPoP requests with a clear 503, keeps password sessions working, and recovers', async () => {
    const created = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'redisdown.test', email: 'redisdown@example.com', password: 'redis down pw' },
    })
    expect(created.status).toBe(200)
    const { did } = created.body
    const key: DpopKey = await dpopKey()
    const s = { url: pds.url, publicUrl: publicUrl() }
    const { code, verifier } = await authorize(s, key, { handle: 'redisdown.test', password: 'redis down pw' })
    const tokens = (await exchange(s, key, code, verifier)).json
    expect((await dpopGet(s, key, tokens.access_token, 'com.atproto.server.getSession')).status).toBe(200)

    redis.child.kill('SIGKILL')
    await redis.exited

    const t0 = Date.now()
    const refused = await dpopGet(s, key, tokens.access_token, 'com.atproto.server.getSession')
    expect([refused.status, refused.json.error]).toEqual([503, 'TemporarilyUnavailable'])
    // bounded: the store gives up within its 2 s command timeout
    expect(Date.now() - t0).toBeLessThan(4000)
    const grant = await refreshGrant(s, key, tokens.refresh_token)
    expect([grant.status, grant.json.error]).toEqual([503, 'temporarily_unavailable'])

    // password sessions do not depend on Redis
    const login = await xrpc(pds.url, 'com.atproto.server.createSession', {
      body: { identifier: 'redisdown.test', password: 'redis down pw' },
    })
    expect(login.status).toBe(200)
    const auth = { authorization: `Bearer ${login.body.accessJwt}` }
    expect((await xrpc(pds.url, 'com.atproto.server.getSession', { headers: auth })).status).toBe(200)
    const w = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: auth,
      body: { repo: did, collection: 'com.example.redis', record: { $type: 'com.example.redis', ok: true } },
    })
    expect(w.status).toBe(200)
    const refreshed = await xrpc(pds.url, 'com.atproto.server.refreshSession', {
      method: 'POST',
      headers: { authorization: `Bearer ${login.body.refreshJwt}` },
    })
    expect(refreshed.status).toBe(200)

    // Redis back on the same port: the refused refresh token still works, DPoP requests pass again
    redis = startRedis(port)
    await redisUp(port)
    let again = 0
    for (let i = 0; i < 100; i++) {
      again = (await dpopGet(s, key, tokens.access_token, 'com.atproto.server.getSession')).status
      if (again === 200) break
      await sleep(100)
    }
    expect(again).toBe(200)
    expect((await refreshGrant(s, key, tokens.refresh_token)).status).toBe(200)
  })

  it('answers within a bound while Redis hangs: password sessions and writes go on, DPoP is refused, both recover', async () => {
    const created = await xrpc(pds.url, 'com.atproto.server.createAccount', {
      body: { handle: 'redishang.test', email: 'redishang@example.com', password: 'redis hang pw' },
    })
    expect(created.status).toBe(200)
    const key: DpopKey = await dpopKey()
    const s = { url: pds.url, publicUrl: publicUrl() }
    const { code, verifier } = await authorize(s, key, { handle: 'redishang.test', password: 'redis hang pw' })
    const tokens = (await exchange(s, key, code, verifier)).json

    // stopped, not gone: connections stay open and commands go unanswered
    redis.child.kill('SIGSTOP')
    try {
      let t0 = Date.now()
      const login = await xrpc(pds.url, 'com.atproto.server.createSession', {
        body: { identifier: 'redishang.test', password: 'redis hang pw' },
      })
      expect(login.status).toBe(200)
      const w = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
        headers: { authorization: `Bearer ${login.body.accessJwt}` },
        body: { repo: created.body.did, collection: 'com.example.redis', record: { $type: 'com.example.redis', hung: true } },
      })
      expect(w.status).toBe(200)
      // each waits out the 2 s command timeout once at most
      expect(Date.now() - t0).toBeLessThan(10_000)
      t0 = Date.now()
      const refused = await dpopGet(s, key, tokens.access_token, 'com.atproto.server.getSession')
      expect([refused.status, refused.json.error]).toEqual([503, 'TemporarilyUnavailable'])
      expect(Date.now() - t0).toBeLessThan(8000)
    } finally {
      redis.child.kill('SIGCONT')
    }
    let again = 0
    for (let i = 0; i < 100; i++) {
      again = (await dpopGet(s, key, tokens.access_token, 'com.atproto.server.getSession')).status
      if (again === 200) break
      await sleep(100)
    }
    expect(again).toBe(200)
  })
})
