// DPoP jti replay stores, per process or shared through Redis: an atomic check-and-record that
// answers whether the jti is seen for the first time while a proof carrying it could still be
// accepted.
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import type { Redis } from 'ioredis'

/** a jti is refused again for at least this long after it was accepted */
export const REPLAY_WINDOW_S = 60

/** the shared store cannot answer (Redis down): the proof is refused, never waved through */
export class ReplayStoreUnavailable extends Error {}
/** the store holds as many live proofs as it may: refused, retry shortly */
export class ReplayStoreFull extends Error {}

export interface ReplayStore {
  /**
   * true the first time `jti` is seen; records it atomically until `expiresAtMs` (the end of the
   * window in which a proof carrying it could still be accepted). `jkt` is the proof's key.
   */
  firstSeen(jti: string, jkt: string, expiresAtMs: number): Promise<boolean>
  close(): Promise<void>
}

type Entry = { expires: number; jkt: string }

/**
 * Per-process store, partitioned by the proof's key. Nobody can push out another client's live
 * entries (that would let its proofs be replayed): proofs are recorded only once bound to a
 * verified code or token, and a key that sends more than `perKey` proofs within a window evicts
 * only its own oldest ones (a client signing faster than that only weakens its own protection,
 * and only a holder of its private key can add to its partition). Above `capacity` live entries
 * in all, new proofs are refused (ReplayStoreFull) rather than evicting anyone's.
 */
export class MemoryReplayStore implements ReplayStore {
  private seen = new Map<string, Entry>()
  /** each key's ids in insertion order */
  private byKey = new Map<string, Set<string>>()
  /** ids by the second their entry expires, for sweeping without scanning every entry */
  private byExpiry = new Map<number, string[]>()
  private sweptTo: number

  constructor(
    private capacity = 131072,
    private perKey = 2048,
    private now = () => Date.now(),
  ) {
    this.sweptTo = Math.floor(this.now() / 1000)
  }

  async firstSeen(jti: string, jkt: string, expiresAtMs: number): Promise<boolean> {
    const now = this.now()
    this.sweep(now)
    // a jti is up to 256 characters of the client's choosing: long ones are kept as a digest
    const id = jti.length > 43 ? createHash('sha256').update(jti).digest('base64url') : jti
    const prior = this.seen.get(id)
    if (prior && prior.expires > now) return false
    if (prior) this.drop(id, prior)
    let mine = this.byKey.get(jkt)
    if (mine && mine.size >= this.perKey) {
      const oldest = mine.values().next().value as string
      this.drop(oldest, this.seen.get(oldest)!)
    } else if (this.seen.size >= this.capacity) {
      throw new ReplayStoreFull('Too many DPoP proofs right now')
    }
    const expires = Math.max(expiresAtMs, now + 1)
    this.seen.set(id, { expires, jkt })
    mine = this.byKey.get(jkt)
    if (mine) mine.add(id)
    else this.byKey.set(jkt, new Set([id]))
    const second = Math.ceil(expires / 1000)
    const bucket = this.byExpiry.get(second)
    if (bucket) bucket.push(id)
    else this.byExpiry.set(second, [id])
    return true
  }

  get size() {
    return this.seen.size
  }

  async close() {}

  private sweep(now: number) {
    const upTo = Math.floor(now / 1000)
    if (upTo <= this.sweptTo) return
    // after a long idle spell, visit the buckets that exist rather than every second since
    const seconds = upTo - this.sweptTo > this.byExpiry.size ? [...this.byExpiry.keys()] : range(this.sweptTo + 1, upTo)
    for (const s of seconds) {
      if (s > upTo) continue
      for (const id of this.byExpiry.get(s) ?? []) {
        const e = this.seen.get(id)
        // the id may have been evicted, or recorded again since with a later expiry
        if (e && e.expires <= now) this.drop(id, e)
      }
      this.byExpiry.delete(s)
    }
    this.sweptTo = upTo
  }

  private drop(id: string, e: Entry) {
    this.seen.delete(id)
    const mine = this.byKey.get(e.jkt)
    mine?.delete(id)
    if (mine?.size === 0) this.byKey.delete(e.jkt)
  }
}

function range(from: number, to: number): number[] {
  const out: number[] = []
  for (let s = from; s <= to; s++) out.push(s)
  return out
}

/**
 * Shared store for several processes: SET key 1 NX PX <ttl> is the atomic check-and-record. Keys
 * expire on their own and are never evicted by us; run Redis with `maxmemory-policy noeviction`
 * so that a full Redis refuses (the proof fails closed) rather than dropping live entries.
 */
export class RedisReplayStore implements ReplayStore {
  private redis: Redis
  constructor(
    url: string,
    private prefix = 'pds:dpop:jti:',
  ) {
    // a command waits for a reconnect a little (a blip), then fails: never longer than 2 s
    // ioredis (~20 MiB) loads only when a Redis store is configured
    const { Redis: RedisClient } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis')
    this.redis = new RedisClient(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true, commandTimeout: 2000 })
    // connection errors surface on the calls that need the store; an idle reconnect must not crash
    this.redis.on('error', () => {})
  }

  async firstSeen(jti: string, _jkt: string, expiresAtMs: number): Promise<boolean> {
    let res: string | null
    try {
      const ttlMs = Math.max(1, Math.ceil(expiresAtMs - Date.now()))
      res = await this.redis.set(this.prefix + jti, '1', 'PX', ttlMs, 'NX')
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
