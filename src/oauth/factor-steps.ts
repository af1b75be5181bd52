// The sign-in page's second factors and passkeys. After a correct password for an account with
// second factors, the password is held server-side (sign-in-steps.ts) and this step asks for the
// factor: a code (mailed when the step opens, from an authenticator app, or a recovery code) or a
// passkey. Wrong answers spend the same login budgets as a wrong password. A passkey alone, with
// no handle and no password, also signs in: it is both factors. Either way the device session
// records the sign-in, and the flow continues to consent exactly as after a password.
import type { Request, Response } from 'express'
import { XRPCError } from '@atproto/xrpc-server'
import type { Services } from '../context.js'
import {
  checkSecondFactor,
  factorsOf,
  needsSecondFactor,
  passkeyAuthenticationOptions,
  sendEmailCode,
  signInWithPasskey,
  type AuthenticationResponseJSON,
  type SecondFactorResult,
} from '../account/factors/index.js'
import { getAccount } from '../account/store.js'
import { sendPage } from '../web/headers.js'
import { rememberAccount, type Device } from '../web/devices.js'
import { factorPage } from './factor-page.js'
import type { Flow } from './page.js'
import type { OAuthRequest } from './store.js'
import { claimMail, dropStep, heldStep, holdPassword, recordFactor, stepFailed, takeStep, type HeldStep } from './sign-in-steps.js'

/** the POST steps this module answers */
export const FACTOR_STEPS = new Set(['factor', 'factor-resend', 'factor-passkey', 'factor-passkey-options', 'passkey', 'passkey-options'])

type Deps = Pick<Services, 'config' | 'db' | 'mailer' | 'passwords'>
type Ctx = { req: Request; res: Response; row: OAuthRequest; device: Device }
type Shown = { status?: number; error?: string; notice?: string; retryAfterS?: number }
type Account = { did: string; handle: string }

/** what the rest of the sign-in flow lends this step */
export type FlowKit<C extends Ctx> = {
  flow: (c: C, o: Shown) => Flow
  httpsImages: (c: C) => boolean
  showLogin: (c: C, handle: string | undefined, o?: Shown) => Promise<unknown>
  showConsent: (c: C, account: Account, o?: Shown) => Promise<unknown>
  tooMany: (waitS: number, what?: string) => Shown
}

export function factorSteps<C extends Ctx>(deps: Deps, kit: FlowKit<C>) {
  const { db } = deps

  const showFactor = async (c: C, did: string, o: Shown = {}) => {
    const account = await getAccount(db, did)
    if (!account) return kit.showLogin(c, undefined, { status: 401, error: 'Sign in again to continue.' })
    const factors = await factorsOf(db, did)
    sendPage(c.res, factorPage(kit.flow(c, o), { handle: account.handle, factors }), {
      status: o.status,
      retryAfterS: o.retryAfterS,
      httpsImages: kit.httpsImages(c),
      scripts: factors.passkeys > 0,
    })
  }

  /** mails a sign-in code for the step when the account uses them; what to tell the person */
  const mailCode = async (step: HeldStep, first: boolean): Promise<Shown> => {
    const account = await getAccount(db, step.did)
    const factors = await factorsOf(db, step.did)
    if (!account?.email || !factors.emailCode) return {}
    if (!(await claimMail(db, step, first))) {
      return { status: 429, retryAfterS: 30, error: 'A code was sent moments ago. Wait a little before asking for another.' }
    }
    let sent
    try {
      sent = await sendEmailCode(deps, { did: account.did, handle: account.handle, email: account.email })
    } catch (err) {
      if (!(err instanceof XRPCError)) throw err
      // the mail service is down: the page still takes another factor, or a later "send again"
      return { status: 502, error: 'The email with your code could not be sent. Try "Email me a new code" in a little while.' }
    }
    if (!sent.sent) return kit.tooMany(sent.retryAfterS, 'codes mailed')
    return { notice: 'We emailed a sign-in code to the address of this account. It is valid for 15 minutes.' }
  }

  /** the device's sign-in of the account is recorded, second factor included; then consent */
  const signedIn = async (c: C, account: Account, remember: boolean) => {
    await rememberAccount(db, c.device.id, account.did, { remember })
    await recordFactor(db, c.device.id, account.did)
    return kit.showConsent(c, account)
  }

  const expired = (c: C) => kit.showLogin(c, undefined, { status: 401, error: 'The sign-in took too long. Enter your password again.' })

  const judged = async (c: C, step: HeldStep, result: SecondFactorResult, what: 'code' | 'passkey' = 'code') => {
    if (result.ok) {
      if (!(await takeStep(db, step))) return expired(c)
      const account = await getAccount(db, step.did)
      if (!account || account.status === 'deleted' || account.status === 'takendown') return expired(c)
      return signedIn(c, account, step.remember)
    }
    if (result.why === 'rateLimited') return showFactor(c, step.did, kit.tooMany(result.retryAfterS, 'sign-in attempts'))
    if (!(await stepFailed(db, step))) {
      const account = await getAccount(db, step.did)
      return kit.showLogin(c, account?.handle, { status: 401, error: 'Too many wrong codes. Enter your password again.' })
    }
    const error =
      what === 'passkey'
        ? 'That passkey was not accepted. Try again, or use a code.'
        : result.why === 'expired'
          ? 'That code has expired. Ask for a new one.'
          : 'That code is wrong or was already used.'
    return showFactor(c, step.did, { status: 401, error })
  }

  const parseResponse = (raw: string | undefined): AuthenticationResponseJSON | undefined => {
    try {
      const v = JSON.parse(raw ?? '') as unknown
      return v && typeof v === 'object' && !Array.isArray(v) ? (v as AuthenticationResponseJSON) : undefined
    } catch {
      return undefined
    }
  }

  const optionsJson = (res: Response, status: number, body: unknown) => {
    res.setHeader('Cache-Control', 'no-store')
    res.status(status).json(body)
  }

  return {
    /** after a correct main password: true when this step took over (the account has second factors) */
    async afterPassword(c: C, account: Account, remember: boolean): Promise<boolean> {
      if (!needsSecondFactor(await factorsOf(db, account.did))) return false
      const step = await holdPassword(db, { deviceId: c.device.id, requestUri: c.row.request_uri, did: account.did, remember })
      await showFactor(c, account.did, await mailCode(step, true))
      return true
    },

    /** GET view=factor: the step again, while it is held */
    async show(c: C) {
      const step = await heldStep(db, c.device.id, c.row.request_uri)
      return step ? showFactor(c, step.did) : kit.showLogin(c, undefined)
    },

    async post(c: C, step: string, body: Record<string, string | undefined>) {
      if (step === 'passkey-options') return optionsJson(c.res, 200, await passkeyAuthenticationOptions(deps))
      if (step === 'passkey') {
        const response = parseResponse(body.passkey_response)
        const result = response ? await signInWithPasskey(deps, response) : ({ ok: false, why: 'invalid' } as const)
        if (!result.ok) {
          const error =
            result.why === 'takendown'
              ? 'This account has been taken down.'
              : 'That passkey is not registered here, or its request expired. Try again, or use your password.'
          return kit.showLogin(c, undefined, { status: 401, error })
        }
        // a passkey stands for the password and the second factor: an earlier held password is moot
        await dropStep(db, { deviceId: c.device.id, requestUri: c.row.request_uri })
        return signedIn(c, result.account, body.remember === 'on')
      }

      const held = await heldStep(db, c.device.id, c.row.request_uri)
      if (!held) {
        if (step === 'factor-passkey-options') return optionsJson(c.res, 401, { message: 'The sign-in took too long; reload the page.' })
        return expired(c)
      }
      switch (step) {
        case 'factor-passkey-options':
          return optionsJson(c.res, 200, await passkeyAuthenticationOptions(deps, held.did))
        case 'factor-resend':
          return showFactor(c, held.did, await mailCode(held, false))
        case 'factor-passkey': {
          const response = parseResponse(body.passkey_response)
          if (!response) return showFactor(c, held.did, { status: 400, error: 'The passkey gave no answer. Try again.' })
          const budget = { guard: deps.passwords, req: c.req }
          return judged(c, held, await checkSecondFactor(deps, held.did, { passkeyResponse: response }, { budget }), 'passkey')
        }
        default: {
          const code = (body.code ?? '').trim()
          if (!code) return showFactor(c, held.did, { status: 400, error: 'Enter the code.' })
          const budget = { guard: deps.passwords, req: c.req }
          return judged(c, held, await checkSecondFactor(deps, held.did, { code }, { budget }))
        }
      }
    },
  }
}
