// /account: what a person manages without an app. The same device session as the OAuth sign-in
// (signing in on either counts for both, on the one sign-in flow), the same CSRF tokens, headers
// and layout. Every action is a row (web/rows.ts) naming its gate, the account statuses it
// admits, its form token and its rate budget; one wrapper enforces them. Every action is a form
// post answered by a redirect (post, redirect, get); what the next page shows once travels in a
// sealed cookie. Sensitive changes need the password confirmed on this device within the last
// few minutes (a passkey alone is no password); ending access and undoing a deactivation do not.
import { Router, type Response } from 'express'
import { sendPage } from '../headers.js'
import { messagePage } from '../layout.js'
import type { Device } from '../devices.js'
import { mountRows, type Page, type Refusal, type Row } from '../rows.js'
import { PASSKEY_SCRIPT } from './script.js'
import { SCRIPT_PATH } from './views.js'
import { accountKit, done, go, json, page, PATH, REAUTH_S, tooMany, type AccountDeps, type AccountKit, type Answer } from './kit.js'
import { homeRows } from './home.js'
import { forgotRefused, signInRows } from './sign-in.js'
import { accessRows } from './access.js'
import { securityRows } from './security.js'
import { dataRows } from './data.js'

export { REAUTH_S } from './kit.js'

/** every row of the account page, for the router and for tests that read the declarations */
export const accountRows = (kit: AccountKit): Row<Answer>[] => [
  ...homeRows(kit),
  ...signInRows(kit),
  ...accessRows(kit),
  ...securityRows(kit),
  ...dataRows(kit),
]

export function accountPages(deps: AccountDeps): Router {
  const kit = accountKit(deps)
  const r = Router()
  r.get(SCRIPT_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/javascript').send(PASSKEY_SCRIPT)
  })
  mountRows(r, { db: deps.db, config: deps.config, passwords: deps.passwords, freshS: REAUTH_S }, accountPage(kit), accountRows(kit))
  return r
}

function accountPage(kit: AccountKit): Page<Answer> {
  const { server } = kit
  const scriptAsks = (row: Row<Answer>) => row.path === `${PATH}/passkeys/options`
  return {
    signedIn: (req, device) => kit.current(req, device),

    refuse(r: Refusal, row, c): Answer {
      switch (r.why) {
        case 'badForm':
          return page(messagePage(server, 'Bad request', 'Each form field may be given once.'), { status: 400 })
        case 'forged':
          return page(messagePage(server, 'Form expired', 'This form is no longer valid. Reload the page and try again.'), { status: 403 })
        case 'signIn':
          if (scriptAsks(row))
            return json({ error: 'reauth', location: `${PATH}?view=confirm&then=security` }, 403, {
              notice: 'Confirm your password to add a passkey.',
            })
          return done({ error: 'Sign in to continue.' })
        case 'status':
          // as with the XRPC methods: a deactivated account changes nothing until reactivated
          return done({ error: 'Your account is deactivated. Reactivate it to change this.' }, 'status')
        case 'confirm':
          if (scriptAsks(row))
            return json({ error: 'reauth', location: `${PATH}?view=confirm&then=security` }, 403, {
              notice: 'Confirm your password to add a passkey.',
            })
          return go(`${PATH}?view=confirm&then=${row.section ?? ''}`, { notice: 'Confirm your password to make this change.' })
        case 'rateLimited':
          if (r.budget === 'resetPassword') return forgotRefused(kit, c.device!, c.fields ?? {}, r.retryAfterS)
          return done(
            { error: tooMany(r.retryAfterS, r.budget === 'email' ? 'emails' : r.budget === 'pageAccount' ? 'requests' : 'attempts') },
            row.section,
          )
      }
    },

    async render(res: Response, device: Device | undefined, a: Answer) {
      if (a.kind === 'download') return download(res, a)
      if (a.kind === 'page') return sendPage(res, a.html, { status: a.status, retryAfterS: a.retryAfterS, scripts: a.scripts })
      const flash = a.kind === 'done' ? { ...a.flash, at: a.at } : a.flash
      if (flash && device) kit.flashTo(res, device, flash)
      if (a.kind === 'json') {
        res.setHeader('Cache-Control', 'no-store')
        res.status(a.status ?? 200).json(a.body)
        return
      }
      if (a.kind === 'done') return res.redirect(303, a.at ? `${PATH}#${a.at}` : PATH)
      res.redirect(303, a.to)
    },
  }
}

// an error once bytes are out can only cut the connection: the browser shows the download as failed
async function download(res: Response, a: Extract<Answer, { kind: 'download' }>): Promise<void> {
  res.setHeader('Cache-Control', 'no-store')
  res.setHeader('X-Content-Type-Options', 'nosniff')
  res.setHeader('Content-Type', a.contentType)
  res.setHeader('Content-Disposition', `attachment; filename="${a.filename.replace(/[^\w.@-]/g, '_')}"`)
  await a.write(res).catch(() => res.destroy())
}
