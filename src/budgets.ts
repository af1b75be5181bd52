// The budgets code below auth/ spends (the pages, the sign-in rows, the services bag): the
// interface auth/rate-limits.ts implements, so the lower layers need not import auth/.
import type { Request } from 'express'
import type { RateLimiterStatus } from '@atproto/xrpc-server'

/** the budgets of the requests that are not XRPC calls */
export type RequestBudget = 'pageView' | 'pageForm' | 'pageAccount' | 'passkeyOptions' | 'oauthPar' | 'oauthToken'

/** a request's budget: spent, or refused with the seconds to wait; `status` feeds RateLimit-* headers */
export type Taken = { ok: true; status?: RateLimiterStatus } | { ok: false; retryAfterS: number; status: RateLimiterStatus }

/** password checks that are not XRPC routes spend the login budgets here, other requests theirs */
export interface PasswordGuard {
  /**
   * counts one password attempt at `identifier` (the account it names, when it names one) from the
   * request's address; the seconds to wait when either budget is spent (nothing is checked then),
   * else undefined
   */
  attempt(req: Request, identifier: string): Promise<number | undefined>
  /**
   * the server's own pages spend a budget of an XRPC method they share work with (a reset email,
   * a sign-up: by address; an email the account asks for: by its DID, `did`); the seconds to wait
   * when it is spent, else undefined
   */
  spend(req: Request, limit: 'resetPassword' | 'createAccount' | 'email', did?: string): Promise<number | undefined>
  /**
   * one request of `budget`: per signed-in account with `did` (pageAccount), else per address.
   * Always allowed when rate limits are off or the request may bypass them.
   */
  take(req: Request, budget: RequestBudget, did?: string): Promise<Taken>
  /**
   * admin Basic: counts one try of the admin password from this address and from everybody,
   * before the password is compared (so concurrent guesses get no more tries); the seconds to
   * wait when either budget is spent, else undefined
   */
  adminAttempt(req: Request): Promise<number | undefined>
  /** admin Basic: the try was the right password, so it costs nothing after all */
  adminSucceeded(req: Request): Promise<void>
}
