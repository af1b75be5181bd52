// The DPoP replay stores: the per-process one and the shared one in Redis.
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { verifyDpopProof } from '../src/jwt/dpop.js'
import { MemoryReplayStore, RedisReplayStore, ReplayStoreFull } from '../src/jwt/replay.js'
import { redisUrl } from './harness.js'

const MINUTE = 60_000

/** an ES256 proof for GET `url` with the given iat (seconds) */
function proofWithIat(url: string, iat: number) {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const b64u = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')
  const input = `${b64u({ typ: 'dpop+jwt', alg: 'ES256', jwk: publicKey.export({ format: 'jwk' }) })}.${b64u({
    jti: randomBytes(12).toString('hex'),
    htm: 'GET',
    htu: url,
    iat,
  })}`
  return `${input}.${sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`
}

describe('in-memory replay store', () => {
  it('accepts a jti once while it is live', async () => {
    const s = new MemoryReplayStore()
    const until = Date.now() + MINUTE
    expect(await s.firstSeen('a', 'k', until)).toBe(true)
    expect(await s.firstSeen('a', 'k', until)).toBe(false)
    expect(await s.firstSeen('a', 'other key', until)).toBe(false)
    expect(await s.firstSeen('b', 'k', until)).toBe(true)
  })

  it('keeps each jti until the time it is given, then accepts it again', async () => {
    let now = 1_000_000
    const s = new MemoryReplayStore(65536, 4096, () => now)
    await s.firstSeen('short', 'k', now + MINUTE)
    await s.firstSeen('long', 'k', now + 2 * MINUTE)
    now += MINUTE + 1
    expect(await s.firstSeen('c', 'k', now + MINUTE)).toBe(true)
    expect(s.size).toBe(2)
    expect(await s.firstSeen('long', 'k', now + MINUTE)).toBe(false)
    expect(await s.firstSeen('short', 'k', now + MINUTE)).toBe(true)
    now += 10 * MINUTE
    expect(await s.firstSeen('d', 'k', now + MINUTE)).toBe(true)
    expect(s.size).toBe(1)
  })

  it("never drops another key's live entry: a busy key evicts its own, a full store refuses", async () => {
    const s = new MemoryReplayStore(10, 4)
    const until = Date.now() + MINUTE
    expect(await s.firstSeen('v0', 'victim', until)).toBe(true)
    for (let i = 0; i < 6; i++) expect(await s.firstSeen(`a${i}`, 'attacker', until)).toBe(true)
    expect(s.size).toBe(5)
    expect(await s.firstSeen('v0', 'victim', until)).toBe(false)
    for (let i = 0; i < 5; i++) await s.firstSeen(`c${i}`, `key${i}`, until)
    await expect(s.firstSeen('d0', 'late', until)).rejects.toThrow(ReplayStoreFull)
    expect(await s.firstSeen('v0', 'victim', until)).toBe(false)
    expect(await s.firstSeen('c0', 'key0', until)).toBe(false)
  })

  it('remembers a proof whose iat is ahead of our clock until that iat has aged out', async () => {
    let skew = 0
    const store = new MemoryReplayStore(undefined, undefined, () => Date.now() + skew)
    const url = 'https://pds.example/oauth/token'
    const proof = proofWithIat(url, Math.floor(Date.now() / 1000) + 55)
    await verifyDpopProof({ proof, method: 'GET', url }, store)
    // 61 s later (by the store's clock) the proof's iat is still within tolerance of a clock
    // running behind: it must still be refused
    skew = 61_000
    await expect(verifyDpopProof({ proof, method: 'GET', url }, store)).rejects.toThrow(/replayed/)
  })
})

describe.skipIf(!redisUrl)('redis replay store', () => {
  it('records atomically: of concurrent checks of one jti exactly one is first', async () => {
    const a = new RedisReplayStore(redisUrl!)
    const b = new RedisReplayStore(redisUrl!)
    try {
      const jti = randomBytes(8).toString('hex')
      const until = Date.now() + MINUTE
      const results = await Promise.all([...Array(10)].map((_, i) => (i % 2 ? a : b).firstSeen(jti, 'k', until)))
      expect(results.filter(Boolean)).toHaveLength(1)
      expect(await b.firstSeen(randomBytes(8).toString('hex'), 'k', until)).toBe(true)
    } finally {
      await Promise.all([a.close(), b.close()])
    }
  })

  it("expires each key when its proof's iat window ends, future skew included", async () => {
    const { Redis } = await import('ioredis')
    const r = new Redis(redisUrl!)
    const s = new RedisReplayStore(redisUrl!, 'pds:test:jti:')
    try {
      const url = 'https://pds.example/oauth/token'
      const now = Math.floor(Date.now() / 1000)
      const recent = proofWithIat(url, now)
      const ahead = proofWithIat(url, now + 55)
      await verifyDpopProof({ proof: recent, method: 'GET', url }, s)
      await verifyDpopProof({ proof: ahead, method: 'GET', url }, s)
      const jti = (p: string) => JSON.parse(Buffer.from(p.split('.')[1], 'base64url').toString()).jti
      const ttl = async (p: string) => (await r.pttl('pds:test:jti:' + jti(p))) / 1000
      expect(await ttl(recent)).toBeGreaterThan(55)
      expect(await ttl(recent)).toBeLessThanOrEqual(61)
      expect(await ttl(ahead)).toBeGreaterThan(110)
      expect(await ttl(ahead)).toBeLessThanOrEqual(116)
    } finally {
      await s.close()
      r.disconnect()
    }
  })
})
