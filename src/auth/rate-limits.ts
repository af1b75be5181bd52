// Rate limits: a global budget for every XRPC call, plus the named limits the auth registry's
// `rateLimit` column gives a method. Counters live in memory, or in Redis when PDS_REDIS_URL is
// set so every process shares them. Exceeding one answers 429 RateLimitExceeded with RateLimit-*
// headers (xrpc-server's HttpRateLimiter sets them). Password checks outside XRPC routes (the
// OAuth sign-in form through account/login.ts, admin Basic) spend the same login counters through
// PasswordGuard.
import {
  MemoryRateLimiter,
  RedisRateLimiter,
  type HandlerContext,
  type Options as XrpcOptions,
  type RateLimiterI,
  type RateLimitOpts,
} from '@atproto/xrpc-server'
import type { Request } from 'express'
import type { Redis } from 'ioredis'
import type { Config } from '../config.js'
import type { Logger } from '../logger.js'
import { rowOf, type RateLimitName } from './registry.js'
import { loginKey } from '../account/login.js'

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

export type Window = { durationMs: number; points: number }
export type LimitName = RateLimitName | 'global' | 'loginAddress'

/**
 * The budgets (before PDS_RATE_LIMIT_MULTIPLIER). Logins, password resets and email sends are
 * tight: they cost a password hash or an email. Reads only meet the generous global budget.
 */
export const DEFAULT_LIMITS: Record<LimitName, Window[]> = {
  global: [{ durationMs: 5 * MINUTE, points: 3000 }],
  // password guesses at one account, from any address (many addresses are cheap to come by)
  login: [
    { durationMs: 5 * MINUTE, points: 30 },
    { durationMs: DAY, points: 300 },
  ],
  // password checks from one address, whatever the account (guessing across many accounts)
  loginAddress: [
    { durationMs: 5 * MINUTE, points: 100 },
    { durationMs: DAY, points: 1000 },
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
  // points: what each call costs is in its registry row (writePoints)
  write: [
    { durationMs: HOUR, points: 5000 },
    { durationMs: DAY, points: 35000 },
  ],
  upload: [{ durationMs: HOUR, points: 1000 }],
  // a sign-up form asks once per pause in typing; a scan of who has which handle costs more
  handleCheck: [{ durationMs: 5 * MINUTE, points: 300 }],
  // an import reads and hashes up to the whole upload limit: a migration needs one, a retry or two
  import: [
    { durationMs: HOUR, points: 5 },
    { durationMs: DAY, points: 20 },
  ],
}

type Ctx = HandlerContext
type Creds = { did?: string } | undefined

/** the client address every per-address limit counts against (express's req.ip: PDS_TRUST_PROXY) */
export const clientAddress = (req: { ip?: string; socket: { remoteAddress?: string } }) => req.ip ?? req.socket.remoteAddress ?? 'unknown'
const ip = (ctx: Ctx) => clientAddress(ctx.req)
const did = (ctx: Ctx) => (ctx.auth as { credentials?: Creds } | undefined)?.credentials?.did
const identifierOf = (v: unknown) => (typeof v === 'string' ? v : '')
const body = (ctx: Ctx) => ((ctx.input as { body?: unknown } | undefined)?.body ?? {}) as Record<string, unknown>

/** who a limit counts against: the account when the caller is signed in, else the address */
const KEYS: Record<LimitName, (ctx: Ctx) => string> = {
  global: (ctx) => did(ctx) ?? ip(ctx),
  // createSession names the account in its body; deleteAccount's caller is signed in
  login: (ctx) => loginKey(did(ctx) ?? identifierOf(body(ctx).identifier)),
  loginAddress: ip,
  createAccount: ip,
  email: (ctx) => did(ctx) ?? ip(ctx),
  resetPassword: ip,
  write: (ctx) => did(ctx) ?? ip(ctx),
  upload: (ctx) => did(ctx) ?? ip(ctx),
  handleCheck: ip,
  import: (ctx) => did(ctx) ?? ip(ctx),
}

/** the points one call of `nsid` costs of the write limit: its registry row says */
function writePoints(nsid: string): (ctx: Ctx) => number {
  const points = rowOf(nsid)?.writePoints
  if (typeof points === 'function') return (ctx) => points(body(ctx))
  const fixed = points ?? 1
  return () => fixed
}

export type RateLimitTuning = {
  /** key prefix for the counters (tests sharing one Redis keep apart with it) */
  prefix?: string
  /** replaces the default windows of some limits (tests use short windows) */
  limits?: Partial<Record<LimitName, Window[]>>
}

/** a registry row's limit and the ones that always come with it */
const WITH: Partial<Record<RateLimitName, LimitName[]>> = { login: ['login', 'loginAddress'] }

/** password checks that are not XRPC routes spend the login budgets here */
export interface PasswordGuard {
  /**
   * counts one password attempt at `identifier` from the request's address; the seconds to wait
   * when either budget is spent (nothing is checked then), else undefined
   */
  attempt(req: Request, identifier: string): Promise<number | undefined>
  /**
   * the server's own pages spend a budget of an XRPC method they share work with (a reset email,
   * a sign-up: by address; an email the account asks for: by its DID, `did`); the seconds to wait
   * when it is spent, else undefined
   */
  spend(req: Request, limit: 'resetPassword' | 'createAccount' | 'email', did?: string): Promise<number | undefined>
  /** admin Basic: the seconds to wait when this address may not try the admin password now */
  adminBlocked(req: Request): Promise<number | undefined>
  /** admin Basic: counts a wrong admin password against the address */
  adminFailed(req: Request): Promise<void>
}

export class RateLimits implements PasswordGuard {
  readonly limits: Record<LimitName, Window[]>
  private readonly prefix: string
  /** one limiter per window, shared by the XRPC routes and PasswordGuard so they count together */
  private readonly made = new Map<string, RateLimiterI<unknown>>()

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
    const describe = (name: LimitName) => this.limits[name].map((w, i) => ({ name: `${name}:${i}`, ...w, calcKey: KEYS[name] }))
    return {
      creator: (opts) => this.create(opts),
      global: describe('global'),
      shared: (Object.keys(this.limits) as LimitName[]).filter((n) => n !== 'global').flatMap(describe),
      bypass: (ctx) => this.bypassed(ctx),
    }
  }

  /** the method config's `rateLimit` for `nsid`, from its registry row */
  forMethod(nsid: string): RateLimitOpts[] | undefined {
    const name = rowOf(nsid)?.rateLimit
    if (!name || !this.config.rateLimitsEnabled) return undefined
    const calcPoints = name === 'write' ? writePoints(nsid) : undefined
    return (WITH[name] ?? [name]).flatMap((n) =>
      this.limits[n].map((_, i) => ({ name: `${n}:${i}`, calcKey: KEYS[n], ...(calcPoints ? { calcPoints } : {}) })),
    )
  }

  async attempt(req: Request, identifier: string): Promise<number | undefined> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return undefined
    const spend = (name: LimitName, key: string) =>
      this.limits[name].map((w, i) => this.limiter(name, i, w).consume(req, { calcKey: () => key, calcPoints: () => 1 }))
    const results = await Promise.allSettled([...spend('login', loginKey(identifier)), ...spend('loginAddress', ip({ req } as Ctx))])
    return waitOf(results)
  }

  async spend(req: Request, limit: 'resetPassword' | 'createAccount' | 'email', did?: string): Promise<number | undefined> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return undefined
    // the same key the XRPC method's limit uses, so the page and the method share one budget
    const key = limit === 'email' && did ? did : ip({ req } as Ctx)
    const results = await Promise.allSettled(
      this.limits[limit].map((w, i) => this.limiter(limit, i, w).consume(req, { calcKey: () => key, calcPoints: () => 1 })),
    )
    return waitOf(results)
  }

  async adminBlocked(req: Request): Promise<number | undefined> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return undefined
    const key = ip({ req } as Ctx)
    let wait: number | undefined
    for (const [i, w] of this.limits.loginAddress.entries()) {
      const inner = (
        this.limiter('loginAddress', i, w) as {
          limiter?: { get(k: string): Promise<{ consumedPoints: number; msBeforeNext: number } | null> }
        }
      ).limiter
      const res = await inner?.get(key).catch(() => null)
      if (res && res.consumedPoints >= w.points) wait = Math.max(wait ?? 0, Math.ceil(res.msBeforeNext / 1000))
    }
    return wait
  }

  async adminFailed(req: Request): Promise<void> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return
    const key = ip({ req } as Ctx)
    await Promise.allSettled(
      this.limits.loginAddress.map((w, i) => this.limiter('loginAddress', i, w).consume(req, { calcKey: () => key, calcPoints: () => 1 })),
    )
  }

  private limiter(name: LimitName, i: number, w: Window): RateLimiterI<unknown> {
    // the prefix xrpc-server gives the limiter it creates for the shared limit `${name}:${i}`
    return this.create({ keyPrefix: `rl-${name}:${i}`, ...w, calcKey: KEYS[name] as never, calcPoints: () => 1 })
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
    const made = this.made.get(opts.keyPrefix)
    if (made) return made as RateLimiterI<C>
    const options = {
      ...opts,
      keyPrefix: `${this.prefix}:${opts.keyPrefix}`,
      // a store outage must not take the server down with it: count nothing and log
      onError: async (err: unknown) => {
        this.logger.warn({ err: String(err), limiter: opts.keyPrefix }, 'rate limit store unavailable; request allowed')
        return null
      },
    }
    const limiter = this.redis ? new RedisRateLimiter<C>(this.redis, options) : new MemoryRateLimiter<C>(options)
    this.made.set(opts.keyPrefix, limiter as RateLimiterI<unknown>)
    return limiter
  }
}

/** the longest wait among the spent budgets (a rejected consume), in whole seconds */
function waitOf(results: PromiseSettledResult<unknown>[]): number | undefined {
  let wait: number | undefined
  for (const r of results) {
    if (r.status !== 'rejected') continue
    const ms = (r.reason as { status?: { msBeforeNext?: number } })?.status?.msBeforeNext
    if (typeof ms !== 'number') throw r.reason
    wait = Math.max(wait ?? 0, Math.ceil(ms / 1000))
  }
  return wait
}
