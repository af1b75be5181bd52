// Rate limits: a global budget for every XRPC call, plus the named limits the auth registry's
// `rateLimit` column gives a method. Counters live in memory, or in Redis when PDS_REDIS_URL is
// set so every process shares them. Exceeding one answers 429 RateLimitExceeded with RateLimit-*
// headers (xrpc-server's HttpRateLimiter sets them).
import {
  MemoryRateLimiter,
  RedisRateLimiter,
  type HandlerContext,
  type Options as XrpcOptions,
  type RateLimiterI,
  type RateLimitOpts,
} from '@atproto/xrpc-server'
import type { Redis } from 'ioredis'
import type { Config } from '../config.js'
import type { Logger } from '../logger.js'
import { registry, type RateLimitName } from './registry.js'

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

export type Window = { durationMs: number; points: number }
export type LimitName = RateLimitName | 'global'

/**
 * The budgets (before PDS_RATE_LIMIT_MULTIPLIER). Logins, password resets and email sends are
 * tight: they cost a password hash or an email. Reads only meet the generous global budget.
 */
export const DEFAULT_LIMITS: Record<LimitName, Window[]> = {
  global: [{ durationMs: 5 * MINUTE, points: 3000 }],
  login: [
    { durationMs: 5 * MINUTE, points: 30 },
    { durationMs: DAY, points: 300 },
  ],
  createAccount: [{ durationMs: 5 * MINUTE, points: 100 }],
  email: [
    { durationMs: HOUR, points: 5 },
    { durationMs: DAY, points: 15 },
  ],
  resetPassword: [
    { durationMs: HOUR, points: 15 },
    { durationMs: DAY, points: 50 },
  ],
  // points: a create costs 3, an update 2, a delete 1 (as the reference PDS counts them)
  write: [
    { durationMs: HOUR, points: 5000 },
    { durationMs: DAY, points: 35000 },
  ],
  upload: [{ durationMs: HOUR, points: 1000 }],
  // a sign-up form asks once per pause in typing; a scan of who has which handle costs more
  handleCheck: [{ durationMs: 5 * MINUTE, points: 300 }],
}

type Ctx = HandlerContext
type Creds = { did?: string } | undefined

/** the client address every per-address limit counts against (express's req.ip: PDS_TRUST_PROXY) */
export const clientAddress = (req: { ip?: string; socket: { remoteAddress?: string } }) =>
  req.ip ?? req.socket.remoteAddress ?? 'unknown'
const ip = (ctx: Ctx) => clientAddress(ctx.req)
const did = (ctx: Ctx) => ((ctx.auth as { credentials?: Creds } | undefined)?.credentials as Creds)?.did
const body = (ctx: Ctx) => ((ctx.input as { body?: unknown } | undefined)?.body ?? {}) as Record<string, unknown>

/** who a limit counts against: the account when the caller is signed in, else the address */
const KEYS: Record<LimitName, (ctx: Ctx) => string> = {
  global: (ctx) => did(ctx) ?? ip(ctx),
  // the identifier with the address, so one attacker cannot lock a user out from everywhere
  login: (ctx) => `${String(body(ctx).identifier ?? '').toLowerCase()}@${ip(ctx)}`,
  createAccount: ip,
  email: (ctx) => did(ctx) ?? ip(ctx),
  resetPassword: ip,
  write: (ctx) => did(ctx) ?? ip(ctx),
  upload: (ctx) => did(ctx) ?? ip(ctx),
  handleCheck: ip,
}

const WRITE_POINTS: Record<string, number> = {
  'com.atproto.repo.createRecord': 3,
  'com.atproto.repo.putRecord': 2,
  'com.atproto.repo.deleteRecord': 1,
}
const OP_POINTS: Record<string, number> = {
  'com.atproto.repo.applyWrites#create': 3,
  'com.atproto.repo.applyWrites#update': 2,
  'com.atproto.repo.applyWrites#delete': 1,
}

function writePoints(nsid: string) {
  if (nsid !== 'com.atproto.repo.applyWrites') return () => WRITE_POINTS[nsid] ?? 1
  return (ctx: Ctx) => {
    const writes = body(ctx).writes
    if (!Array.isArray(writes)) return 1
    return Math.max(1, writes.reduce((n: number, w) => n + (OP_POINTS[(w as { $type?: string })?.$type ?? ''] ?? 1), 0))
  }
}

export type RateLimitTuning = {
  /** key prefix for the counters (tests sharing one Redis keep apart with it) */
  prefix?: string
  /** replaces the default windows of some limits (tests use short windows) */
  limits?: Partial<Record<LimitName, Window[]>>
}

export class RateLimits {
  readonly limits: Record<LimitName, Window[]>
  private readonly prefix: string

  constructor(
    private config: Config,
    private logger: Logger,
    private redis: Redis | undefined,
    tuning: RateLimitTuning = {},
  ) {
    const m = config.rateLimitMultiplier
    const merged = { ...DEFAULT_LIMITS, ...tuning.limits }
    this.limits = Object.fromEntries(
      Object.entries(merged).map(([name, ws]) => [name, ws.map((w) => ({ ...w, points: Math.max(1, Math.round(w.points * m)) }))]),
    ) as Record<LimitName, Window[]>
    this.prefix = tuning.prefix ?? 'pds-rl'
  }

  /** the `rateLimits` option of the XRPC server; undefined when PDS_RATE_LIMITS_ENABLED=false */
  xrpcOptions(): XrpcOptions['rateLimits'] {
    if (!this.config.rateLimitsEnabled) return undefined
    const describe = (name: LimitName) =>
      this.limits[name].map((w, i) => ({ name: `${name}:${i}`, ...w, calcKey: KEYS[name] }))
    return {
      creator: (opts) => this.create(opts),
      global: describe('global'),
      shared: (Object.keys(this.limits) as LimitName[]).filter((n) => n !== 'global').flatMap(describe),
      bypass: (ctx) => this.bypassed(ctx),
    }
  }

  /** the method config's `rateLimit` for `nsid`, from its registry row */
  forMethod(nsid: string): RateLimitOpts[] | undefined {
    const name = registry[nsid]?.rateLimit
    if (!name || !this.config.rateLimitsEnabled) return undefined
    const calcPoints = name === 'write' ? writePoints(nsid) : undefined
    return this.limits[name].map((_, i) => ({ name: `${name}:${i}`, calcKey: KEYS[name], ...(calcPoints ? { calcPoints } : {}) }))
  }

  private bypassed(ctx: Ctx): boolean {
    const { rateLimitBypassKey: key, rateLimitBypassIps: ips } = this.config
    if (key && ctx.req.headers['x-ratelimit-bypass'] === key) return true
    return ips.length > 0 && ips.includes(ip(ctx))
  }

  private create<C>(opts: {
    keyPrefix: string
    durationMs: number
    points: number
    calcKey: (ctx: C) => string | null
    calcPoints: (ctx: C) => number
    failClosed?: boolean
  }): RateLimiterI<C> {
    const options = {
      ...opts,
      keyPrefix: `${this.prefix}:${opts.keyPrefix}`,
      // a store outage must not take the server down with it: count nothing and log
      onError: async (err: unknown) => {
        this.logger.warn({ err: String(err), limiter: opts.keyPrefix }, 'rate limit store unavailable; request allowed')
        return null
      },
    }
    return this.redis ? new RedisRateLimiter<C>(this.redis, options) : new MemoryRateLimiter<C>(options)
  }
}
