// Rate limits: a global budget for every XRPC call, the named limits the auth registry's
// `rateLimit` column gives a method, and the budgets of the requests that are not XRPC calls (the
// HTML pages, the OAuth endpoints, passkey options). Counters live in memory, or in Redis when
// PDS_REDIS_URL is set so every process shares them. Exceeding one answers 429 RateLimitExceeded
// with RateLimit-* headers (xrpc-server's HttpRateLimiter sets them on XRPC calls). Password checks
// outside XRPC routes (the sign-in pages through account/login.ts, admin Basic) spend the same
// login counters through PasswordGuard; the other requests spend theirs through `take`.
import {
  MemoryRateLimiter,
  RedisRateLimiter,
  type HandlerContext,
  type Options as XrpcOptions,
  type RateLimiterI,
  type RateLimiterStatus,
  type RateLimitOpts,
} from '@atproto/xrpc-server'
import type { Request, Response } from 'express'
import type { Redis } from 'ioredis'
import type { Config } from '../config.js'
import type { Logger } from '../logger.js'
import { rowOf, type RateLimitName } from './registry.js'
import { loginKey } from '../account/login.js'
import { addressKey } from './address-key.js'
import type { PasswordGuard, RequestBudget, Taken } from '../budgets.js'

export type { PasswordGuard, RequestBudget, Taken }

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

export type Window = { durationMs: number; points: number }
/** the budgets of requests that are not XRPC calls: what a page row or an endpoint declares */
export type LimitName = RateLimitName | 'global' | 'loginAddress' | 'adminGlobal' | RequestBudget

/**
 * The budgets (before PDS_RATE_LIMIT_MULTIPLIER). Logins, password resets and email sends are
 * tight: they cost a password hash or an email. Reads only meet the generous global budget.
 */
export const DEFAULT_LIMITS: Record<LimitName, Window[]> = {
  global: [{ durationMs: 5 * MINUTE, points: 3000 }],
  // password guesses at one account, from any address (many addresses are cheap to come by); a
  // handle, email address or DID that names an account counts against that account
  login: [
    { durationMs: 5 * MINUTE, points: 30 },
    { durationMs: DAY, points: 300 },
  ],
  // password checks from one address, whatever the account (guessing across many accounts), and
  // wrong admin passwords from it
  loginAddress: [
    { durationMs: 5 * MINUTE, points: 100 },
    { durationMs: DAY, points: 1000 },
  ],
  // wrong admin passwords from every address together: guessing from many networks ends here too
  // (an operator locked out meanwhile still has the bypass addresses and the command line)
  adminGlobal: [
    { durationMs: 5 * MINUTE, points: 200 },
    { durationMs: DAY, points: 2000 },
  ],
  // every HTML page shown (/account, the OAuth sign-in, sign-up, reset and consent pages), per address
  pageView: [
    { durationMs: 5 * MINUTE, points: 600 },
    { durationMs: DAY, points: 10_000 },
  ],
  // every form posted to those pages (each sign-in step among them), per address
  pageForm: [
    { durationMs: 5 * MINUTE, points: 300 },
    { durationMs: DAY, points: 5000 },
  ],
  // the forms one signed-in account posts, from any address
  pageAccount: [
    { durationMs: 5 * MINUTE, points: 300 },
    { durationMs: DAY, points: 5000 },
  ],
  // passkey options: each one stores a challenge, per address
  passkeyOptions: [
    { durationMs: 5 * MINUTE, points: 60 },
    { durationMs: DAY, points: 1000 },
  ],
  // pushed authorization requests: each one stores a request row, per address (an app's server
  // signing its users in pushes one per sign-in)
  oauthPar: [
    { durationMs: 5 * MINUTE, points: 300 },
    { durationMs: DAY, points: 10_000 },
  ],
  // token requests and revocations: a code redeemed, a refresh every access token's lifetime (an
  // app's server refreshing for many people from one address: 3000 covers 18000 sessions)
  oauthToken: [{ durationMs: 5 * MINUTE, points: 3000 }],
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

/** the client's address (express's req.ip: PDS_TRUST_PROXY) */
export const clientAddress = (req: { ip?: string; socket: { remoteAddress?: string } }) => req.ip ?? req.socket.remoteAddress ?? 'unknown'
/** what every per-address limit counts against: the address, an IPv6 one as its /64 */
export const budgetAddress = (req: { ip?: string; socket: { remoteAddress?: string } }) => addressKey(clientAddress(req))
const ip = (ctx: Ctx) => budgetAddress(ctx.req)
const did = (ctx: Ctx) => (ctx.auth as { credentials?: Creds } | undefined)?.credentials?.did
const identifierOf = (v: unknown) => (typeof v === 'string' ? v : '')
const body = (ctx: Ctx) => ((ctx.input as { body?: unknown } | undefined)?.body ?? {}) as Record<string, unknown>

/** who a limit counts against: the account when the caller is signed in, else the address */
const KEYS: Record<LimitName, (ctx: Ctx) => string> = {
  global: (ctx) => did(ctx) ?? ip(ctx),
  // createSession names the account in its body (the limiter turns it into the account's DID);
  // deleteAccount's caller is signed in
  login: (ctx) => did(ctx) ?? identifierOf(body(ctx).identifier),
  loginAddress: ip,
  adminGlobal: () => 'all',
  pageView: ip,
  pageForm: ip,
  pageAccount: (ctx) => did(ctx) ?? ip(ctx),
  passkeyOptions: ip,
  oauthPar: ip,
  oauthToken: ip,
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

export type RateLimitDeps = {
  /** the DID of the account a handle, email address or DID names, if any */
  accountOf?: (identifier: string) => Promise<string | undefined>
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
    private deps: RateLimitDeps = {},
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
    return waitOf(
      await Promise.allSettled([...this.consume(req, 'login', identifier), ...this.consume(req, 'loginAddress', budgetAddress(req))]),
    )
  }

  async spend(req: Request, limit: 'resetPassword' | 'createAccount' | 'email', did?: string): Promise<number | undefined> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return undefined
    // the same key the XRPC method's limit uses, so the page and the method share one budget
    const key = limit === 'email' && did ? did : budgetAddress(req)
    return waitOf(await Promise.allSettled(this.consume(req, limit, key)))
  }

  async take(req: Request, budget: RequestBudget, did?: string): Promise<Taken> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return { ok: true }
    const results = await Promise.allSettled(this.consume(req, budget, did ?? budgetAddress(req)))
    const wait = waitOf(results)
    // the headers describe the window that refuses (the longest wait), else the one with least left
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as { status: RateLimiterStatus }).status] : []))
    const passed = results.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []))
    const status = refused.length
      ? refused.reduce((a, b) => (b.msBeforeNext > a.msBeforeNext ? b : a))
      : passed.reduce<RateLimiterStatus | undefined>((a, b) => (!a || b.remainingPoints < a.remainingPoints ? b : a), undefined)
    if (wait === undefined) return { ok: true, status }
    return { ok: false, retryAfterS: wait, status: status! }
  }

  async adminAttempt(req: Request): Promise<number | undefined> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return undefined
    // the global budget only counts tries an address may still make: one address hammering away
    // spends its own budget, not everybody's
    const wait = waitOf(await Promise.allSettled(this.consume(req, 'loginAddress', budgetAddress(req))))
    return wait ?? waitOf(await Promise.allSettled(this.consume(req, 'adminGlobal', 'all')))
  }

  async adminSucceeded(req: Request): Promise<void> {
    if (!this.config.rateLimitsEnabled || this.bypassed({ req } as Ctx)) return
    await Promise.allSettled([this.refund('loginAddress', budgetAddress(req)), this.refund('adminGlobal', 'all')])
  }

  /** one point of every window of `name`, counted against `key` */
  private consume(req: Request, name: LimitName, key: string) {
    return this.limits[name].map((w, i) => this.limiter(name, i, w).consume(req, { calcKey: () => key, calcPoints: () => 1 }))
  }

  /** gives back the point a try took from every window of `name` */
  private async refund(name: LimitName, key: string): Promise<void> {
    for (const [i, w] of this.limits[name].entries()) {
      const inner = (this.limiter(name, i, w) as { limiter?: { reward(k: string, points: number): Promise<unknown> } }).limiter
      await inner?.reward(key, 1).catch(() => undefined)
    }
  }

  private limiter(name: LimitName, i: number, w: Window): RateLimiterI<unknown> {
    // the prefix xrpc-server gives the limiter it creates for the shared limit `${name}:${i}`
    return this.create({ keyPrefix: `rl-${name}:${i}`, ...w, calcKey: KEYS[name] as never, calcPoints: () => 1 })
  }

  private bypassed(ctx: Ctx): boolean {
    const { rateLimitBypassKey: key, rateLimitBypassIps: ips } = this.config
    if (key && ctx.req.headers['x-ratelimit-bypass'] === key) return true
    return ips.length > 0 && ips.includes(clientAddress(ctx.req))
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
    let limiter: RateLimiterI<C> = this.redis ? new RedisRateLimiter<C>(this.redis, options) : new MemoryRateLimiter<C>(options)
    if (opts.keyPrefix.startsWith('rl-login:')) limiter = new AccountKeyed(limiter, opts.calcKey, this.deps.accountOf)
    this.made.set(opts.keyPrefix, limiter as RateLimiterI<unknown>)
    return limiter
  }
}

/**
 * The login budget of an identifier that names an account is the account's, whichever spelling
 * (handle, email address, DID) was typed; one that names none counts as typed, trimmed and
 * lower-cased. The lookup is asynchronous, which a limiter's key function cannot be.
 */
class AccountKeyed<C> implements RateLimiterI<C> {
  constructor(
    private inner: RateLimiterI<C>,
    private calcKey: (ctx: C) => string | null,
    private accountOf: RateLimitDeps['accountOf'],
  ) {}

  private async key(ctx: C, calc?: (ctx: C) => string | null): Promise<string | null> {
    const typed = (calc ?? this.calcKey)(ctx)
    if (typed === null) return null
    const did = typed.trim() ? await this.accountOf?.(typed).catch(() => undefined) : undefined
    return did ?? loginKey(typed)
  }

  async consume(ctx: C, opts?: Parameters<RateLimiterI<C>['consume']>[1]) {
    const key = await this.key(ctx, opts?.calcKey)
    if (key === null) return null
    return this.inner.consume(ctx, { ...opts, calcKey: () => key })
  }

  async reset(ctx: C, opts?: Parameters<RateLimiterI<C>['reset']>[1]) {
    const key = await this.key(ctx, opts?.calcKey)
    if (key !== null) await this.inner.reset(ctx, { calcKey: () => key })
  }
}

/** RateLimit-* headers of `status` on a response that is not an XRPC call's, as xrpc-server sets them */
export function setRateLimitHeaders(res: Response, status: RateLimiterStatus | undefined, retryAfterS?: number): void {
  if (status) {
    res.setHeader('RateLimit-Limit', status.limit)
    res.setHeader('RateLimit-Reset', Math.floor((Date.now() + status.msBeforeNext) / 1000))
    res.setHeader('RateLimit-Remaining', status.remainingPoints)
    res.setHeader('RateLimit-Policy', `${status.limit};w=${status.duration}`)
  }
  if (retryAfterS !== undefined) res.setHeader('Retry-After', String(retryAfterS))
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
