// Signing in on the account page, on the one sign-in flow the OAuth page uses (web/sign-in):
// handle and password, the second step while it is held server-side, picking or forgetting a
// remembered account, signing out, the password again before a sensitive change, and a forgotten
// password outside any app.
import { XRPCError } from '@atproto/xrpc-server'
import { passkeyAuthenticationOptions } from '../../account/factors/index.js'
import { requestPasswordReset, resetPassword } from '../../account/password.js'
import { resetPage, resetRequestPage, type Flow } from '../../oauth/page.js'
import { clearCookie, readCookie } from '../cookies.js'
import { csrfToken } from '../csrf.js'
import { deviceAccounts, forgetAccount, type Device } from '../devices.js'
import * as flow from '../sign-in/flow.js'
import { REMEMBERED_MAX_S } from '../sign-in/flow.js'
import type { RowContext } from '../rows.js'
import { loginPage } from './views.js'
import {
  CURRENT,
  done,
  go,
  json,
  mailedFlash,
  page,
  parseJson,
  PATH,
  safeDecode,
  sectionOf,
  tooMany,
  wrongPassword,
  type AccountKit,
  type AccountRowDef,
  type Answer,
} from './kit.js'

const SECOND = `${PATH}?view=second-factor`
const expired = () => done({ error: 'That sign-in expired. Sign in again.' })

export function signInRows(kit: AccountKit): AccountRowDef[] {
  const { deps } = kit
  const { db, config } = deps
  const post = (path: string, run: (c: RowContext) => Promise<Answer>, rate?: 'login' | 'resetPassword'): AccountRowDef => ({
    method: 'post',
    path: `${PATH}/${path}`,
    gate: 'none',
    csrf: true,
    rate,
    run,
  })

  /** the second step's outcome: signed in, or the step again with what went wrong */
  const second = (c: RowContext, out: flow.Outcome): Answer => {
    if (out.kind === 'signedIn') {
      kit.show(c.res, out.account.did)
      return done({})
    }
    if (out.kind === 'restart' || !out.account) {
      if (out.kind === 'restart' && out.why === 'tooManyWrong') return done({ error: 'Too many wrong codes. Sign in again.' })
      return expired()
    }
    const error =
      out.kind === 'rateLimited'
        ? tooMany(out.retryAfterS)
        : out.kind === 'refused' && out.why === 'codeExpired'
          ? 'That code has expired. Ask for a new one.'
          : 'That did not work. Check the code and try again.'
    return go(SECOND, { error })
  }

  return [
    post(
      'sign-in',
      async (c) => {
        const handle = (c.fields.handle ?? '').trim()
        const input = { identifier: handle, password: c.fields.password ?? '', remember: c.fields.remember === 'on' }
        const out = await flow.passwordStep(deps, kit.place(c.device), input, c.budget)
        const again = (error: string, status: number, retryAfterS?: number) =>
          page(loginPage(kit.common(c.device, { error }), { handle, hasAccounts: false }), { status, retryAfterS })
        if (out.kind === 'rateLimited') return again(tooMany(out.retryAfterS), 429, out.retryAfterS)
        if (out.kind === 'refused')
          return again(out.why === 'takendown' ? 'This account has been taken down.' : 'Wrong handle or password.', 401)
        if (out.kind === 'factor') return go(SECOND, mailedFlash(out.mailed))
        return second(c, out)
      },
      'login',
    ),
    post(
      'sign-in/code',
      async (c) => second(c, await flow.factorStep(deps, kit.place(c.device), { code: c.fields.code ?? '' }, c.budget)),
      'login',
    ),
    post(
      'sign-in/passkey',
      async (c) => {
        const response = parseJson(c.fields.response)
        if (!response) return go(SECOND, { error: 'The passkey did not answer. Try again.' })
        return second(c, await flow.factorStep(deps, kit.place(c.device), { passkeyResponse: response as never }, c.budget))
      },
      'login',
    ),
    post('sign-in/passkey-options', async (c) => {
      const held = await flow.held(db, kit.place(c.device))
      if (!held || held.step.awaits !== 'factor') return json({ error: 'That sign-in expired. Sign in again.' }, 401)
      return json(await passkeyAuthenticationOptions(deps, held.step.did))
    }),
    post('sign-in/email-code', async (c) => {
      if (!(await flow.held(db, kit.place(c.device)))) return expired()
      const mailed = await flow.resendCode(deps, kit.place(c.device))
      if (mailed === undefined || mailed === 'none') return go(SECOND, { error: 'Email codes are not on for this account.' })
      return go(SECOND, mailedFlash(mailed, 'We emailed you a new code.'))
    }),
    post('select', async (c) => {
      const remembered = (await deviceAccounts(db, c.device.id)).find((a) => a.did === c.fields.did)
      if (!remembered) return done({ error: 'That account is no longer remembered on this device.' })
      const signed = await flow.signedIn(db, c.device.id, remembered.did, REMEMBERED_MAX_S)
      if (!signed)
        return go(`${PATH}?view=login&handle=${encodeURIComponent(remembered.handle)}`, { notice: 'Enter your password to continue.' })
      kit.show(c.res, signed.account.did)
      return done({})
    }),
    post('forget', async (c) => {
      if (c.fields.did) await forgetAccount(db, c.device.id, c.fields.did)
      return done({ notice: 'The account was forgotten on this device.' })
    }),
    post('sign-out', async (c) => {
      const did = readCookie(c.req, CURRENT)
      if (did) await forgetAccount(db, c.device.id, safeDecode(did))
      clearCookie(c.res, CURRENT, { publicUrl: config.publicUrl, path: PATH })
      return done({ notice: 'You are signed out on this device.' })
    }),
    // the password again: a signed-in account (deactivated too), on the login budget
    {
      method: 'post',
      path: `${PATH}/confirm`,
      gate: 'signed-in',
      statuses: ['active', 'deactivated'],
      csrf: true,
      rate: 'login',
      run: async (c) => {
        const { account, session } = c.signed!
        const then = sectionOf(c.fields.then)
        const input = { password: c.fields.password ?? '', remember: session.remember }
        const wrong = wrongPassword(await flow.confirmPassword(deps, kit.place(c.device), account, input, c.budget))
        if (wrong) return go(`${PATH}?view=confirm${then ? `&then=${then}` : ''}`, wrong)
        return done({ notice: 'Password confirmed. You can make the change now.' }, then)
      },
    },
    {
      method: 'get',
      path: `${PATH}/forgot`,
      gate: 'none',
      csrf: false,
      run: async (c) => {
        const f = forgotFlow(kit, c.device)
        return page(c.req.query.view === 'reset-token' ? resetPage(f) : resetRequestPage(f, {}))
      },
    },
    post(
      'forgot',
      async (c) => {
        const f = c.fields
        if (f.step !== 'reset') {
          if (!f.email?.trim())
            return page(resetRequestPage(forgotFlow(kit, c.device, { error: 'Enter your email address.' }), f), { status: 400 })
          await requestPasswordReset(deps, f.email)
          return page(resetPage(forgotFlow(kit, c.device, { notice: 'If an account uses that address, we sent it a code.' })))
        }
        try {
          await resetPassword(deps, (f.token ?? '').trim().toUpperCase(), f.password ?? '')
        } catch (err) {
          if (!(err instanceof XRPCError)) throw err
          const error = err.customErrorName === 'InvalidToken' ? 'That code is wrong or has expired.' : err.message
          return page(resetPage(forgotFlow(kit, c.device, { error })), { status: 400 })
        }
        return go(`${PATH}?view=login`, { notice: 'Your password was changed. Sign in with the new one.' })
      },
      'resetPassword',
    ),
  ]
}

/** the reset pages of the OAuth sign-in, outside any app */
const forgotFlow = (kit: AccountKit, device: Device, extra: { error?: string; notice?: string } = {}): Flow => ({
  server: kit.server,
  client: { id: kit.deps.config.publicUrl, name: kit.server.name, loopback: false },
  action: `${PATH}/forgot`,
  link: (view) => (view === 'login' ? `${PATH}?view=login` : `${PATH}/forgot${view === 'reset-token' ? '?view=reset-token' : ''}`),
  csrf: csrfToken(device),
  ...extra,
})

/** the forgot form again with the budget's refusal */
export function forgotRefused(kit: AccountKit, device: Device, fields: Record<string, string | undefined>, waitS: number): Answer {
  const f = forgotFlow(kit, device, { error: tooMany(waitS) })
  return page(fields.step === 'reset' ? resetPage(f) : resetRequestPage(f, fields), { status: 429, retryAfterS: waitS })
}
