// The budgets of the requests that are not XRPC calls, spent where the routers are mounted, so
// every page and OAuth endpoint is covered before its own code runs (and before a page stores
// anything). A page's own rule may spend more (a signed-in account's budget, the login budget of a
// password); none is spent twice here. Over budget: 429 with Retry-After, an OAuth error body on
// the OAuth endpoints, a readable page on the pages (JSON to the pages' own scripts).
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express'
import type { Config } from '../config.js'
import { sendPage } from '../web/headers.js'
import { messagePage, serverInfo } from '../web/layout.js'
import { setRateLimitHeaders, type PasswordGuard, type RequestBudget } from './rate-limits.js'

type Answer = 'oauth' | 'page'
export type RequestRule = { budgets: RequestBudget[]; answer: Answer }

const PAGES = /^\/(account|oauth\/authorize)(\/|$)/
// a passkey ceremony's options: a route of its own on /account, a step of the form on /oauth/authorize
const PASSKEY_OPTIONS = /(^|[/-])options$/
const STATIC = /\.(js|css)$/

/** the budgets `req` spends before it reaches its route, by method and path (as the router matches them) */
export function ruleOf(req: Request): RequestRule | undefined {
  // a CORS preflight is answered before any route, at no cost
  if (req.method === 'OPTIONS') return undefined
  const path = req.path.toLowerCase().replace(/\/+$/, '') || '/'
  const view = req.method === 'GET' || req.method === 'HEAD'
  if (path === '/oauth/par') return view ? undefined : { budgets: ['oauthPar'], answer: 'oauth' }
  if (path === '/oauth/token' || path === '/oauth/revoke') return view ? undefined : { budgets: ['oauthToken'], answer: 'oauth' }
  if (path === '/' && view) return { budgets: ['pageView'], answer: 'page' }
  if (!PAGES.test(path)) return undefined
  if (view) return STATIC.test(path) ? undefined : { budgets: ['pageView'], answer: 'page' }
  return { budgets: PASSKEY_OPTIONS.test(path) ? ['pageForm', 'passkeyOptions'] : ['pageForm'], answer: 'page' }
}

export function requestLimits(
  config: Pick<Config, 'rateLimitsEnabled' | 'publicUrl' | 'links' | 'branding'>,
  guard: PasswordGuard,
): RequestHandler {
  const server = serverInfo(config)
  // the sign-in form names its step in the body; parsed here as its route would parse it
  const form = express.urlencoded({ extended: false, limit: '64kb' })

  const refuse = (req: Request, res: Response, answer: Answer, waitS: number) => {
    if (answer === 'oauth') {
      res.setHeader('Cache-Control', 'no-store')
      return res.status(429).json({ error: 'rate_limit_exceeded', error_description: `Too many requests; try again in ${waitS} seconds` })
    }
    // the pages' scripts ask for JSON (passkey options) and show its message
    if (req.accepts(['html', 'json']) === 'json') {
      res.setHeader('Cache-Control', 'no-store')
      return res.status(429).json({ error: 'RateLimitExceeded', message: tooMany(waitS) })
    }
    sendPage(res, messagePage(server, 'Too many requests', tooMany(waitS)), { status: 429, retryAfterS: waitS })
  }

  const spend = async (req: Request, res: Response, rule: RequestRule, budgets: RequestBudget[]): Promise<boolean> => {
    for (const budget of budgets) {
      const taken = await guard.take(req, budget)
      if (rule.answer === 'oauth') setRateLimitHeaders(res, taken.status)
      if (!taken.ok) {
        setRateLimitHeaders(res, taken.status, taken.retryAfterS)
        refuse(req, res, rule.answer, taken.retryAfterS)
        return false
      }
    }
    return true
  }

  return (req: Request, res: Response, next: NextFunction) => {
    const rule = config.rateLimitsEnabled ? ruleOf(req) : undefined
    if (!rule) return next()
    ;(async () => {
      if (!(await spend(req, res, rule, rule.budgets))) return
      if (req.method !== 'POST' || req.path.toLowerCase().replace(/\/+$/, '') !== '/oauth/authorize') return next()
      form(req, res, (err?: unknown) => {
        if (err) return next(err)
        const step = (req.body as Record<string, unknown> | undefined)?.step
        if (typeof step !== 'string' || !PASSKEY_OPTIONS.test(step)) return next()
        spend(req, res, rule, ['passkeyOptions']).then((ok) => ok && next(), next)
      })
    })().catch(next)
  }
}

function tooMany(waitS: number): string {
  const minutes = Math.ceil(waitS / 60)
  const when = minutes <= 1 ? 'a minute' : minutes < 120 ? `${minutes} minutes` : `${Math.ceil(minutes / 60)} hours`
  return `Too many requests from your network. Try again in ${when}.`
}
