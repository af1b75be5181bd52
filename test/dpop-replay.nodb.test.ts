// The DPoP replay stores of part 2 §5.3 and DECISIONS.md 10.
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { MemoryReplayStore, RedisReplayStore } from '../src/oauth/replay.js'
import { redisUrl } from './harness.js'

describe('in-memory replay store', () => {
  it('accepts a jti once within the window', async () => {
    const s = new MemoryReplayStore()
    expect(await s.firstSeen('a')).toBe(true)
    expect(await s.firstSeen('a')).toBe(false)
    expect(await s.firstSeen('b')).toBe(true)
  })

  it('sweeps expired entries on each call and accepts the jti again after the window', async () => {
    let now = 1_000_000
    const s = new MemoryReplayStore(16384, 60_000, () => now)
    await s.firstSeen('a')
    await s.firstSeen('b')
    now += 60_001
    expect(await s.firstSeen('c')).toBe(true)
    expect(s.size).toBe(1)
    expect(await s.firstSeen('a')).toBe(true)
  })

  it('holds 16384 entries and drops the oldest insertion beyond that', async () => {
    const s = new MemoryReplayStore()
    for (let i = 0; i < 16384; i++) await s.firstSeen(`j${i}`)
    expect(s.size).toBe(16384)
    expect(await s.firstSeen('j16384')).toBe(true)
    expect(s.size).toBe(16384)
    expect(await s.firstSeen('j0')).toBe(true) // evicted, so first seen again
    expect(await s.firstSeen('j2')).toBe(false)
  })
})

describe.skipIf(!redisUrl)('redis replay store', () => {
  it('records atomically: of concurrent checks of one jti exactly one is first', async () => {
    const a = new RedisReplayStore(redisUrl!)
    const b = new RedisReplayStore(redisUrl!)
    try {
      const jti = randomBytes(8).toString('hex')
      const results = await Promise.all([...Array(10)].map((_, i) => (i % 2 ? a : b).firstSeen(jti)))
      expect(results.filter(Boolean)).toHaveLength(1)
      expect(await b.firstSeen(randomBytes(8).toString('hex'))).toBe(true)
    } finally {
      await Promise.all([a.close(), b.close()])
    }
  })

  it('sets a 60 second expiry on each key', async () => {
    const { Redis } = await import('ioredis')
    const r = new Redis(redisUrl!)
    const s = new RedisReplayStore(redisUrl!, 'pds:test:jti:')
    try {
      const jti = randomBytes(8).toString('hex')
      await s.firstSeen(jti)
      const ttl = await r.ttl('pds:test:jti:' + jti)
      expect(ttl).toBeGreaterThan(55)
      expect(ttl).toBeLessThanOrEqual(60)
    } finally {
      await s.close()
      r.disconnect()
    }
  })
})
