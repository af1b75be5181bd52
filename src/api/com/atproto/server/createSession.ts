// com.atproto.server.createSession: identifier (handle, email or DID) and password, the main one or
// an app password (account/login.ts). Unknown identifier and wrong password are the same 401 at the
// same cost, so a login reveals nothing; the login budgets are spent by the registry row's rate
// limit before this runs.
//
// Second factors (account/factors) apply to the main password only, as in the reference server:
// without `authFactorToken` the answer is 401 AuthFactorTokenRequired (mailing a sign-in code when
// email codes are on); with one, a wrong or used code is 400 InvalidToken, a late email code 400
// ExpiredToken. Each code checked also spends the login budgets by DID and address. A taken-down
// account is 401 AccountTakedown, unless `allowTakendown` asks for a session it can only report with.
import type { Request } from 'express'
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { xrpcError } from '#src/errors.js'
import { login } from '#src/account/login.js'
import { sessionView, storeRefreshRecord, type AccountRow } from '#src/account/store.js'
import { mintPair } from '#src/account/session-tokens.js'
import { checkSecondFactor, factorsOf, needsSecondFactor, sendEmailCode } from '#src/account/factors/index.js'

type Deps = Pick<Services, 'db' | 'config' | 'tokenKeys' | 'mailer' | 'passwords'>

export default method('com.atproto.server.createSession', (services: Deps) => async ({ input, req }) => {
  const { db, config, tokenKeys } = services
  const { identifier, password, authFactorToken, allowTakendown } = input.body
  const result = await login(db, { identifier, password, appPasswords: true, allowTakendown })
  if (!result.ok) {
    if (result.why === 'takendown') throw xrpcError('AccountTakedown', 'Account has been taken down')
    throw xrpcError('AuthenticationRequired', 'Invalid identifier or password')
  }
  const { account, appPassword } = result
  if (!appPassword) await secondFactor(services, account, authFactorToken, req)

  // a taken-down account's session (allowTakendown) reaches only what its row admits: reporting
  const tokens = await mintPair(tokenKeys, account.did, appPassword, account.credential_gen, { takendown: result.takendown })
  await storeRefreshRecord(db, {
    jti: tokens.refreshJti,
    did: account.did,
    expiresAt: tokens.refreshExpiresAt,
    appPasswordName: appPassword?.name ?? null,
  })
  return {
    encoding: 'application/json',
    body: {
      accessJwt: tokens.accessJwt,
      refreshJwt: tokens.refreshJwt,
      ...(await sessionView(db, account, config.publicUrl)),
    },
  }
})

/** returns when the account needs no second factor or `token` is a valid one; throws otherwise */
async function secondFactor(services: Deps, account: AccountRow, token: string | undefined, req: Request) {
  const { db } = services
  const factors = await factorsOf(db, account.did)
  if (!needsSecondFactor(factors)) return
  if (token?.trim()) {
    const r = await checkSecondFactor(
      services,
      account.did,
      { code: token },
      { budget: { attempt: (id) => services.passwords.attempt(req, id) } },
    )
    if (r.ok) return
    if (r.why === 'rateLimited') throw xrpcError('RateLimitExceeded', `Too many sign-in attempts; try again in ${r.retryAfterS} seconds`)
    if (r.why === 'expired') throw xrpcError('ExpiredToken', 'Token is expired', 400)
    throw xrpcError('InvalidToken', 'Token is invalid', 400)
  }
  const app = factors.totp ? 'the code from your authenticator app' : undefined
  if (factors.emailCode && account.email) {
    const sent = await sendEmailCode(services, { did: account.did, handle: account.handle, email: account.email })
    // clients recognise this exact sentence (the reference server's) and show a code field
    if (sent.sent) throw required(`A sign in code has been sent to your email address${app ? `; ${app} works too` : ''}`)
    if (!app)
      throw xrpcError(
        'RateLimitExceeded',
        `Too many sign-in codes were sent; use the latest one or try again in ${Math.ceil(sent.retryAfterS / 60)} minutes`,
      )
  }
  if (app) throw required(`Enter ${app} (or a recovery code) as the sign-in code`)
  throw required('This account signs in with a passkey: sign in through the browser, use an app password, or enter a recovery code')
}

const required = (message: string) => xrpcError('AuthFactorTokenRequired', message)
