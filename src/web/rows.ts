// The server's pages as rows, the way the XRPC registry declares methods: each page action or
// sign-in step is one row naming its gate (none, a signed-in account, or a password confirmed on
// this device moments ago), the account statuses it admits, whether it needs the device's form
// token, and the rate budget it spends. One wrapper enforces every row before its handler runs;
// handlers answer with values (a page, a redirect, JSON, or a page's own kinds), never by
// throwing, and the page renders them.
import express, { type Request, type Response, type Router } from 'express'
import type { AccountStatus } from '../db/schema.js'
import type { PasswordGuard } from '../budgets.js'
import type { LoginBudget } from '../account/login.js'
import type { AccountRow } from '../account/store.js'
import { formFields, wrap, type FormFields } from './forms.js'
import { formDevice, pageDevice, type Device, type DeviceAccount } from './devices.js'
import { passwordFresh } from './sign-in/flow.js'
import type { Db } from '../db/index.js'

/** who may use a row: anyone, an account signed in on the device, or one whose password was just confirmed here */
export type Gate = 'none' | 'signed-in' | 'fresh-password'
/**
 * the limiter budget a row spends before its handler: `login` rows hand their handler the login
 * budget (the sign-in flow spends it per account once the identifier is known); the others are
 * spent by the wrapper, `email` per signed-in account
 */
export type RateBudget = 'login' | 'resetPassword' | 'createAccount' | 'email'

export type Signed = { account: AccountRow; session: DeviceAccount }

/** what a row's handler gets */
export type RowContext = {
  req: Request
  res: Response
  device: Device
  fields: FormFields
  /** the signed-in account, for gated rows (and any row where one is signed in) */
  signed?: Signed
  /** the login budgets of this request, keyed by what the flow names */
  budget: LoginBudget
}

export type Row<A> = {
  method: 'get' | 'post'
  path: string
  /** for rows sharing one path (the OAuth page's steps): the form's step this row answers */
  step?: string
  gate: Gate
  /** account statuses a gated row admits (default: active only) */
  statuses?: readonly AccountStatus[]
  /** the device's form token is required (every post) */
  csrf: boolean
  rate?: RateBudget
  /** the part of the page its answers land in (the account page's sections) */
  section?: string
  run: (c: RowContext) => Promise<A>
}

/** why the wrapper refused a row before its handler */
export type Refusal =
  | { why: 'badForm' }
  | { why: 'forged' }
  | { why: 'signIn' }
  | { why: 'status'; signed: Signed }
  | { why: 'confirm'; signed: Signed }
  | { why: 'rateLimited'; retryAfterS: number; budget: RateBudget | 'pageAccount' }

/** what a page lends the wrapper */
export type Page<A> = {
  /** the account the page acts for on the device, when its sign-in still counts */
  signedIn(req: Request, device: Device): Promise<Signed | undefined>
  /** the answer to a refusal */
  refuse(r: Refusal, row: Row<A>, c: { req: Request; res: Response; device?: Device; fields?: FormFields }): A | Promise<A>
  render(res: Response, device: Device | undefined, answer: A): void | Promise<void>
  /** a post's step (default: its `step` field) */
  stepOf?: (fields: FormFields) => string | undefined
  /** an answer before anything else, e.g. the OAuth page's expired request */
  precheck?: (req: Request, res: Response) => Promise<A | undefined>
  /** the answer to a post whose step matches no row */
  unknownStep?: (c: RowContext) => Promise<A>
}

/** the window in which a confirmed password unlocks `fresh-password` rows */
export type RowDeps = { db: Db; config: { publicUrl: string }; passwords: PasswordGuard; freshS: number }

/** mounts the rows on the router, every one behind the same checks */
export function mountRows<A>(router: Router, deps: RowDeps, page: Page<A>, rows: Row<A>[]): void {
  const body = express.urlencoded({ extended: false, limit: '64kb' })
  const byPath = new Map<string, Row<A>[]>()
  for (const row of rows) {
    const key = `${row.method} ${row.path}`
    byPath.set(key, [...(byPath.get(key) ?? []), row])
  }
  for (const [key, group] of byPath) {
    const [method, path] = key.split(' ') as ['get' | 'post', string]
    const handler = wrap(async (req, res) => {
      const early = page.precheck && (await page.precheck(req, res))
      if (early !== undefined) return page.render(res, undefined, early)
      if (method === 'get') return enforce(req, res, group[0], {})
      const fields = formFields(req.body)
      if (!fields) return page.render(res, undefined, await page.refuse({ why: 'badForm' }, group[0], { req, res }))
      const step = page.stepOf ? page.stepOf(fields) : fields.step
      const row = group.length === 1 && !group[0].step ? group[0] : group.find((r) => r.step === step)
      return enforce(req, res, row ?? { ...group[0], run: (c) => page.unknownStep!(c) }, fields)
    })
    if (method === 'get') router.get(path, handler)
    else router.post(path, body, handler)
  }

  async function enforce(req: Request, res: Response, row: Row<A>, fields: FormFields): Promise<void> {
    const device = row.csrf ? await formDevice(deps.db, req, fields.csrf_token) : await pageDevice(deps.db, req, res, deps.config.publicUrl)
    if (!device) return page.render(res, undefined, await page.refuse({ why: 'forged' }, row, { req, res, fields }))
    const answer = await admit(req, res, row, device, fields)
    await page.render(res, device, answer)
  }

  async function admit(req: Request, res: Response, row: Row<A>, device: Device, fields: FormFields): Promise<A> {
    const at = { req, res, device, fields }
    const signed = await page.signedIn(req, device)
    if (row.gate !== 'none') {
      if (!signed) return page.refuse({ why: 'signIn' }, row, at)
      if (!(row.statuses ?? ['active']).includes(signed.account.status)) return page.refuse({ why: 'status', signed }, row, at)
      if (row.gate === 'fresh-password' && !passwordFresh(signed.session, deps.freshS))
        return page.refuse({ why: 'confirm', signed }, row, at)
    }
    // a signed-in account's posts share one budget whichever address they come from
    if (signed && row.method === 'post') {
      const taken = await deps.passwords.take(req, 'pageAccount', signed.account.did)
      if (!taken.ok) return page.refuse({ why: 'rateLimited', retryAfterS: taken.retryAfterS, budget: 'pageAccount' }, row, at)
    }
    if (row.rate && row.rate !== 'login') {
      const wait = await deps.passwords.spend(req, row.rate, row.rate === 'email' ? signed?.account.did : undefined)
      if (wait !== undefined) return page.refuse({ why: 'rateLimited', retryAfterS: wait, budget: row.rate }, row, at)
    }
    const budget: LoginBudget = { attempt: (id) => deps.passwords.attempt(req, id) }
    return row.run({ req, res, device, fields, signed, budget })
  }
}
