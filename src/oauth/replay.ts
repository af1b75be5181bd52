// DPoP jti replay stores (part 2 §5.3, DECISIONS.md 10): an atomic check-and-record that answers
// whether the jti is seen for the first time within the window.
import { createRequire } from 'node:module'
import type { Redis } from 'ioredis'

export const REPLAY_WINDOW_S = 60

/** the shared store cannot answer (Redis down): the proof is refused, never waved through */
export class ReplayStoreUnavailable extends Error {}

export interface ReplayStore {
  /** true the first time `jti` is seen within the window; records it atomically */
  firstSeen(jti: string): Promise<boolean>
  close(): Promise<void>
}

/** per-process store: 16384 entries, expired ones swept on each call, oldest insertion evicted */
export class MemoryReplayStore implements ReplayStore {
  // a Map iterates in insertion order, and with one fixed window that is also expiry order
  private seen = new Map<string, number>()
  constructor(
    private capacity = 16384,
    private windowMs = REPLAY_WINDOW_S * 1000,
    private now = () => Date.now(),
  ) {}

  async firstSeen(jti: string): Promise<boolean> {
    const now = this.now()
    for (const [key, expires] of this.seen) {
      if (expires > now) break
      this.seen.delete(key)
    }
    const prior = this.seen.get(jti)
    if (prior !== undefined && prior > now) return false
    while (this.seen.size >= this.capacity) {
      const oldest = this.seen.keys().next().value as string
      this.seen.delete(oldest)
    }
    this.seen.set(jti, now + this.windowMs)
    return true
  }

  get size() {
    return this.seen.size
  }

  async close() {}
}

/** shared store for several processes: SET key 1 NX EX 60 is the atomic check-and-record */
export class RedisReplayStore implements ReplayStore {
  private redis: Redis
  constructor(url: string, private prefix = 'pds:dpop:jti:') {
    // a command waits for a reconnect a little (a blip), then fails: never longer than 2 s
    // ioredis (~20 MiB) loads only when a Redis store is configured
    const { Redis: RedisClient } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis')
    this.redis = new RedisClient(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true, commandTimeout: 2000 })
    // connection errors surface on the calls that need the store; an idle reconnect must not crash
    this.redis.on('error', () => {})
  }

  async firstSeen(jti: string): Promise<boolean> {
    let res: string | null
    try {
      res = await this.redis.set(this.prefix + jti, '1', 'EX', REPLAY_WINDOW_S, 'NX')
    } catch (err) {
      // fail closed: without the shared store a replayed proof could not be told from a fresh one
      throw new ReplayStoreUnavailable(`DPoP replay store unavailable: ${(err as Error).message}`)
    }
    return res === 'OK'
  }

  async close() {
    await this.redis.quit().catch(() => this.redis.disconnect())
  }
}
