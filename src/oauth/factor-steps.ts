// The OAuth sign-in page's steps after the password, on the one sign-in flow (web/sign-in): a
// second factor (a code mailed when the step opens, from an authenticator app, or a recovery
// code; or a passkey), and a passkey alone with no handle and no password. The first passkey
// sign-in after a password change also asks for the new password. The page renders the flow's
// outcomes; on a sign-in it continues to consent exactly as after a password.
import type { Services } from '../context.js'
import { factorsOf, passkeyAuthenticationOptions, type AuthenticationResponseJSON } from '../account/factors/index.js'
import type { AccountRow } from '../account/store.js'
import * as flowOf from '../web/sign-in/flow.js'
import type { Mailed, Outcome } from '../web/sign-in/flow.js'
import { factorPage, passwordAgainPage } from './factor-page.js'
import type { Flow } from './page.js'
import type { LoginBudget } from '../account/login.js'
import type { Answer, Ctx, Shown } from './authorize-kit.js'

/** the POST steps this module answers */
export const FACTOR_STEPS = new Set([
  'factor',
  'factor-resend',
  'factor-passkey',
  'factor-passkey-options',
  'passkey',
  'passkey-options',
  'passkey-password',
])

type Deps = Pick<Services, 'config' | 'db' | 'mailer' | 'passwords'>
type Account = { did: string; handle: string }

/** what the rest of the sign-in page lends these steps */
export type FlowKit<C extends Ctx> = {
  flow: (c: C, o: Shown) => Flow
  httpsImages: (c: C) => boolean
  showLogin: (c: C, handle: string | undefined, o?: Shown) => Promise<Answer>
  showConsent: (c: C, account: Account, o?: Shown) => Promise<Answer>
  tooMany: (waitS: number, what?: string) => Shown
}

/** what the page says about a sign-in code it mailed (or could not) */
export function mailedWords(mailed: Mailed, tooMany: (waitS: number, what?: string) => Shown): Shown {
  if (mailed === 'sent') return { notice: 'We emailed a sign-in code to the address of this account. It is valid for 15 minutes.' }
  if (mailed === 'tooSoon')
    return { status: 429, retryAfterS: 30, error: 'A code was sent moments ago. Wait a little before asking for another.' }
  // the mail service is down: the page still takes another factor, or a later "send again"
  if (mailed === 'down')
    return { status: 502, error: 'The email with your code could not be sent. Try "Email me a new code" in a little while.' }
  if (mailed === 'none') return {}
  return tooMany(mailed.retryAfterS, 'codes mailed')
}

export function factorSteps<C extends Ctx>(deps: Deps, kit: FlowKit<C>) {
  const { db } = deps
  const place = (c: C) => ({ deviceId: c.device.id, place: c.row.request_uri })

  const send = (c: C, page: (f: Flow) => ReturnType<typeof factorPage>, o: Shown, scripts: boolean): Answer => ({
    kind: 'page',
    html: page(kit.flow(c, o)),
    status: o.status,
    retryAfterS: o.retryAfterS,
    httpsImages: kit.httpsImages(c),
    scripts,
  })

  const showFactor = async (c: C, account: AccountRow, o: Shown = {}): Promise<Answer> => {
    const factors = await factorsOf(db, account.did)
    return send(c, (f) => factorPage(f, { handle: account.handle, factors }), o, factors.passkeys > 0)
  }
  const showPasswordAgain = (c: C, account: AccountRow, o: Shown = {}) =>
    send(c, (f) => passwordAgainPage(f, { handle: account.handle }), o, false)

  /** the page for where the sign-in stands */
  const render = async (c: C, out: Outcome, at: 'factor' | 'password' | 'passkey' = 'factor'): Promise<Answer> => {
    switch (out.kind) {
      case 'signedIn':
        return kit.showConsent(c, out.account)
      case 'factor':
        return showFactor(c, out.account, mailedWords(out.mailed, kit.tooMany))
      case 'password':
        return showPasswordAgain(c, out.account, {
          notice: 'Your password was changed since this passkey was last used. Enter your password once to continue.',
        })
      case 'rateLimited': {
        const o = kit.tooMany(out.retryAfterS, 'sign-in attempts')
        if (!out.account) return kit.showLogin(c, undefined, o)
        return at === 'password' ? showPasswordAgain(c, out.account, o) : showFactor(c, out.account, o)
      }
      case 'restart':
        if (out.why === 'tooManyWrong') {
          const what = at === 'password' ? 'Too many wrong passwords.' : 'Too many wrong codes.'
          return kit.showLogin(c, out.account?.handle, { status: 401, error: `${what} Enter your password again.` })
        }
        return kit.showLogin(c, undefined, { status: 401, error: 'The sign-in took too long. Enter your password again.' })
      case 'refused': {
        if (at === 'passkey' || !out.account) {
          const error =
            out.why === 'takendown'
              ? 'This account has been taken down.'
              : 'That passkey is not registered here, or its request expired. Try again, or use your password.'
          return kit.showLogin(c, undefined, { status: 401, error })
        }
        if (at === 'password') return showPasswordAgain(c, out.account, { status: 401, error: 'That password is not right.' })
        const error =
          out.why === 'noAnswer'
            ? 'The passkey gave no answer. Try again.'
            : out.why === 'codeExpired'
              ? 'That code has expired. Ask for a new one.'
              : 'That code is wrong or was already used.'
        return showFactor(c, out.account, { status: out.why === 'noAnswer' ? 400 : 401, error })
      }
    }
  }

  const parseResponse = (raw: string | undefined): AuthenticationResponseJSON | undefined => {
    try {
      const v = JSON.parse(raw ?? '') as unknown
      return v && typeof v === 'object' && !Array.isArray(v) ? (v as AuthenticationResponseJSON) : undefined
    } catch {
      return undefined
    }
  }

  const optionsJson = (status: number, body: unknown): Answer => ({ kind: 'json', status, body })

  return {
    render,

    /** GET view=factor: the held step again, while it is live */
    async show(c: C): Promise<Answer> {
      const h = await flowOf.held(db, place(c))
      if (!h) return kit.showLogin(c, undefined)
      return h.step.awaits === 'password' ? showPasswordAgain(c, h.account) : showFactor(c, h.account)
    },

    async post(c: C, step: string, body: Record<string, string | undefined>, budget: LoginBudget): Promise<Answer> {
      switch (step) {
        case 'passkey-options':
          return optionsJson(200, await passkeyAuthenticationOptions(deps))
        case 'passkey':
          return render(
            c,
            await flowOf.passkeyStep(deps, place(c), parseResponse(body.passkey_response), body.remember === 'on'),
            'passkey',
          )
        case 'passkey-password':
          return render(c, await flowOf.passwordAfterPasskey(deps, place(c), body.password ?? '', budget), 'password')
        case 'factor-passkey-options': {
          const h = await flowOf.held(db, place(c))
          if (!h || h.step.awaits !== 'factor') return optionsJson(401, { message: 'The sign-in took too long; reload the page.' })
          return optionsJson(200, await passkeyAuthenticationOptions(deps, h.step.did))
        }
        case 'factor-resend': {
          const h = await flowOf.held(db, place(c))
          const mailed = h && (await flowOf.resendCode(deps, place(c)))
          if (!h || !mailed) return render(c, { kind: 'restart', why: 'expired' })
          return showFactor(c, h.account, mailedWords(mailed, kit.tooMany))
        }
        case 'factor-passkey': {
          const response = parseResponse(body.passkey_response)
          if (!response) {
            const h = await flowOf.held(db, place(c))
            return render(c, h ? { kind: 'refused', why: 'noAnswer', account: h.account } : { kind: 'restart', why: 'expired' })
          }
          return render(c, await flowOf.factorStep(deps, place(c), { passkeyResponse: response }, budget))
        }
        default: {
          const code = (body.code ?? '').trim()
          if (!code) {
            const h = await flowOf.held(db, place(c))
            if (!h) return render(c, { kind: 'restart', why: 'expired' })
            return showFactor(c, h.account, { status: 400, error: 'Enter the code.' })
          }
          return render(c, await flowOf.factorStep(deps, place(c), { code }, budget))
        }
      }
    },
  }
}
