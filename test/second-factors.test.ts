// Second factors as a person meets them: email sign-in codes switched on the official way and
// asked for by createSession (through AtpAgent and the email sink), an authenticator app with
// recovery codes, and passkeys run through both WebAuthn ceremonies by a software authenticator.
import { AtpAgent } from '@atproto/api'
import { Secret, TOTP } from 'otpauth'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, startTestPds, PASSWORD, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { SoftAuthenticator } from './soft-authenticator.js'
import {
  beginTotp,
  checkSecondFactor,
  confirmTotp,
  disableTotp,
  factorsOf,
  listPasskeys,
  passkeyAuthenticationOptions,
  passkeyRegistrationOptions,
  removePasskey,
  renamePasskey,
  setEmailAuthFactor,
  signInWithPasskey,
  verifyPasskeyRegistration,
  type TotpSetup,
} from '../src/account/factors/index.js'

let pds: TestPds
let sink: MailSink
let n = 0
// a password and a code each cost an attempt at the account, whichever spelling names it
const LOGIN_BUDGET = 16

/** a fresh account signed in through AtpAgent, its address confirmed */
async function confirmedAccount() {
  n++
  const handle = `factor${n}.test`
  const email = `factor${n}@example.com`
  const agent = new AtpAgent({ service: pds.url })
  await agent.createAccount({ handle, email, password: PASSWORD })
  await agent.com.atproto.server.requestEmailConfirmation()
  await agent.com.atproto.server.confirmEmail({ email, token: sink.tokenFor(email) })
  return { agent, handle, email, did: agent.session!.did }
}

/** the sign-in code in the latest mail to `to` */
function signInCode(to: string): string {
  const msg = [...sink.received].reverse().find((m) => m.body.to === to && m.body.subject === 'Your sign-in code')
  const line = (msg?.body.text as string | undefined)?.split('\n').find((l) => /^[A-Z2-7]{5}-[A-Z2-7]{5}$/.test(l))
  if (!line) throw new Error(`no sign-in code mailed to ${to}`)
  return line
}

const login = (identifier: string, authFactorToken?: string, password = PASSWORD) =>
  new AtpAgent({ service: pds.url }).login({ identifier, password, ...(authFactorToken ? { authFactorToken } : {}) })

/**
 * runs a credential change and waits (bounded) for the owner's notice of it, sent in the
 * background, so the mail counts that follow see only what they count
 */
async function noticed<T>(to: string, change: () => Promise<T>): Promise<T> {
  const before = sink.received.length
  const out = await change()
  const until = Date.now() + 5000
  const arrived = () => sink.received.slice(before).some((m) => m.body.to === to && /^Security notice/.test(m.body.subject))
  while (!arrived() && Date.now() < until) await new Promise((r) => setTimeout(r, 20))
  return out
}

/** the official switch: a token from requestEmailUpdate, then updateEmail with the same address */
async function setEmailFactor(acct: Awaited<ReturnType<typeof confirmedAccount>>, on: boolean) {
  const { data } = await acct.agent.com.atproto.server.requestEmailUpdate()
  expect(data.tokenRequired).toBe(true)
  await noticed(acct.email, () =>
    acct.agent.com.atproto.server.updateEmail({ email: acct.email, emailAuthFactor: on, token: sink.tokenFor(acct.email) }),
  )
}

const codeAt = (setup: TotpSetup, timestamp = Date.now()) => new TOTP({ secret: Secret.fromBase32(setup.secret) }).generate({ timestamp })
const deps = () => pds.services
/** a code none of the accepted steps has */
const wrongCode = (setup: TotpSetup) => {
  const valid = new Set([-30_000, 0, 30_000].map((d) => codeAt(setup, Date.now() + d)))
  return ['123456', '654321', '111111', '222222'].find((c) => !valid.has(c))!
}

describe('second factors', () => {
  beforeAll(async () => {
    sink = await startMailSink()
    pds = await startTestPds(sinkEnv(sink, { PDS_RATE_LIMITS_ENABLED: 'true' }), {
      rateLimits: {
        limits: { login: [{ durationMs: 300_000, points: LOGIN_BUDGET }], loginAddress: [{ durationMs: 300_000, points: 10_000 }] },
      },
    })
  })
  afterAll(async () => {
    await pds?.stop()
    await sink?.close()
  })

  describe('email sign-in codes', () => {
    it('are switched on with a token, and the session says so', async () => {
      const acct = await confirmedAccount()
      expect((await acct.agent.com.atproto.server.getSession()).data.emailAuthFactor).toBe(false)
      // a confirmed address changes only with a token: so does the switch
      await expect(acct.agent.com.atproto.server.updateEmail({ email: acct.email, emailAuthFactor: true })).rejects.toMatchObject({
        error: 'TokenRequired',
      })
      await setEmailFactor(acct, true)
      const session = (await acct.agent.com.atproto.server.getSession()).data
      expect(session).toMatchObject({ email: acct.email, emailConfirmed: true, emailAuthFactor: true })
    })

    it('cannot be switched on for an unconfirmed address', async () => {
      const agent = new AtpAgent({ service: pds.url })
      n++
      await agent.createAccount({ handle: `unconf${n}.test`, email: `unconf${n}@example.com`, password: PASSWORD })
      await expect(agent.com.atproto.server.updateEmail({ email: `unconf${n}@example.com`, emailAuthFactor: true })).rejects.toMatchObject({
        status: 400,
        error: 'InvalidRequest',
      })
      expect((await agent.com.atproto.server.getSession()).data.emailAuthFactor).toBe(false)
      // the account page's switch holds to the same rule
      expect(await setEmailAuthFactor(deps(), agent.session!.did, true)).toBe(false)
      const acct = await confirmedAccount()
      expect(await setEmailAuthFactor(deps(), acct.did, true)).toBe(true)
      expect((await acct.agent.com.atproto.server.getSession()).data.emailAuthFactor).toBe(true)
    })

    it('are mailed at a password sign-in, accepted once, and a wrong one is refused', async () => {
      const acct = await confirmedAccount()
      await setEmailFactor(acct, true)
      const before = sink.received.length
      await expect(login(acct.handle)).rejects.toMatchObject({
        status: 401,
        error: 'AuthFactorTokenRequired',
        message: 'A sign in code has been sent to your email address',
      })
      const [mail] = await sink.waitFor(before + 1).then((r) => r.slice(before))
      expect(mail.body).toMatchObject({ to: acct.email, subject: 'Your sign-in code' })
      const code = signInCode(acct.email)

      await expect(login(acct.handle, 'AAAAA-BBBBB')).rejects.toMatchObject({ status: 400, error: 'InvalidToken' })
      // typed in lower case without the dash, as people do
      const res = await login(acct.handle, code.toLowerCase().replace('-', ''))
      expect(res.data).toMatchObject({ did: acct.did, emailAuthFactor: true })
      await expect(login(acct.handle, code)).rejects.toMatchObject({ status: 400, error: 'InvalidToken' })
      // a wrong password never reaches the code step, nor mails anything
      const mails = sink.received.length
      await expect(login(acct.handle, undefined, 'wrong password')).rejects.toMatchObject({ error: 'AuthenticationRequired' })
      expect(sink.received.length).toBe(mails)
    })

    it('die after five wrong tries', async () => {
      const acct = await confirmedAccount()
      await setEmailFactor(acct, true)
      await expect(login(acct.email)).rejects.toMatchObject({ error: 'AuthFactorTokenRequired' })
      const code = signInCode(acct.email)
      for (let i = 0; i < 5; i++) await expect(login(acct.handle, `AAAAA-AAAA${2 + i}`)).rejects.toMatchObject({ error: 'InvalidToken' })
      await expect(login(acct.handle, code)).rejects.toMatchObject({ error: 'InvalidToken' })
    })

    it('expire after their time, and at most five are mailed an hour', async () => {
      const acct = await confirmedAccount()
      await setEmailFactor(acct, true)
      await expect(login(acct.handle)).rejects.toMatchObject({ error: 'AuthFactorTokenRequired' })
      const late = signInCode(acct.email)
      await deps()
        .db.updateTable('sign_in_code')
        .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
        .where('did', '=', acct.did)
        .execute()
      await expect(login(acct.handle, late)).rejects.toMatchObject({ status: 400, error: 'ExpiredToken' })

      const before = sink.received.length
      for (let i = 0; i < 4; i++)
        await expect(login(i % 2 ? acct.email : acct.handle)).rejects.toMatchObject({ error: 'AuthFactorTokenRequired' })
      await expect(login(acct.email)).rejects.toMatchObject({ status: 429, error: 'RateLimitExceeded', message: /sign-in codes/ })
      expect(sink.received.length).toBe(before + 4)
      // the latest code mailed still works
      expect((await login(acct.did, signInCode(acct.email))).data.did).toBe(acct.did)
    })

    it('are skipped by app passwords, and gone once switched off', async () => {
      const acct = await confirmedAccount()
      await setEmailFactor(acct, true)
      const { data } = await noticed(acct.email, () => acct.agent.com.atproto.server.createAppPassword({ name: 'bot-one' }))
      const before = sink.received.length
      expect((await login(acct.handle, undefined, data.password)).data.did).toBe(acct.did)
      expect(sink.received.length).toBe(before)

      await setEmailFactor(acct, false)
      expect((await login(acct.handle)).data.emailAuthFactor).toBe(false)
    })

    it('go off when the address changes', async () => {
      const acct = await confirmedAccount()
      await setEmailFactor(acct, true)
      await acct.agent.com.atproto.server.requestEmailUpdate()
      await acct.agent.com.atproto.server.updateEmail({ email: `moved${n}@example.com`, token: sink.tokenFor(acct.email) })
      expect((await login(acct.handle)).data).toMatchObject({ emailConfirmed: false, emailAuthFactor: false })
    })
  })

  describe('authenticator apps (TOTP) and recovery codes', () => {
    async function withTotp() {
      const acct = await confirmedAccount()
      const setup = await beginTotp(deps(), acct.did, acct.handle)
      if ('alreadyOn' in setup) throw new Error('unexpected')
      return { ...acct, setup }
    }

    it('are set up with a QR code and a code that proves it, which brings recovery codes', async () => {
      const acct = await withTotp()
      expect(acct.setup.uri).toMatch(/^otpauth:\/\/totp\/.+\?.*secret=/)
      expect(acct.setup.uri).toContain(`secret=${acct.setup.secret}`)
      expect(acct.setup.qrSvg).toMatch(/^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/)
      // pending: a password still signs in, and a wrong code does not turn it on
      expect((await login(acct.handle)).data.did).toBe(acct.did)
      expect(await confirmTotp(deps(), acct.did, wrongCode(acct.setup))).toEqual({ ok: false })
      const done = await confirmTotp(deps(), acct.did, codeAt(acct.setup))
      if (!done.ok) throw new Error('confirmTotp refused a current code')
      expect(done.recoveryCodes).toHaveLength(10)
      expect(new Set(done.recoveryCodes).size).toBe(10)
      expect(await factorsOf(deps().db, acct.did)).toEqual({ emailCode: false, totp: true, passkeys: 0, recoveryCodesLeft: 10 })
      // neither the secret nor a recovery code is stored as such
      const dump = JSON.stringify([
        await deps().db.selectFrom('totp').selectAll().where('did', '=', acct.did).execute(),
        await deps().db.selectFrom('recovery_code').selectAll().where('did', '=', acct.did).execute(),
      ])
      expect(dump).not.toContain(acct.setup.secret)
      for (const c of done.recoveryCodes) expect(dump).not.toContain(c.replace('-', ''))
      expect(await beginTotp(deps(), acct.did, acct.handle)).toEqual({ alreadyOn: true })
    })

    it('keep each secret sealed to its account: a row copied onto another account does not open', async () => {
      const victim = await withTotp()
      await confirmTotp(deps(), victim.did, codeAt(victim.setup))
      const attacker = await withTotp()
      await confirmTotp(deps(), attacker.did, codeAt(attacker.setup))
      const { secret_sealed } = await deps()
        .db.selectFrom('totp')
        .select('secret_sealed')
        .where('did', '=', attacker.did)
        .executeTakeFirstOrThrow()
      await deps().db.updateTable('totp').set({ secret_sealed }).where('did', '=', victim.did).execute()
      await expect(login(victim.handle, codeAt(attacker.setup, Date.now() + 30_000))).rejects.toMatchObject({ error: 'InvalidToken' })
    })

    it('ask for the app code at createSession, accept it once, and accept the next step', async () => {
      const acct = await withTotp()
      const first = codeAt(acct.setup)
      await confirmTotp(deps(), acct.did, first)
      await expect(login(acct.handle)).rejects.toMatchObject({
        status: 401,
        error: 'AuthFactorTokenRequired',
        message: /authenticator app/,
      })
      // confirming used that step: the same code again is a replay
      await expect(login(acct.handle, first)).rejects.toMatchObject({ status: 400, error: 'InvalidToken' })
      const next = codeAt(acct.setup, Date.now() + 30_000)
      expect((await login(acct.handle, next)).data.did).toBe(acct.did)
      await expect(login(acct.handle, next)).rejects.toMatchObject({ error: 'InvalidToken' })
    })

    it('take a recovery code once, and disabling the app removes both', async () => {
      const acct = await withTotp()
      const done = await confirmTotp(deps(), acct.did, codeAt(acct.setup))
      if (!done.ok) throw new Error('confirmTotp refused a current code')
      const [first] = done.recoveryCodes
      expect((await login(acct.handle, first)).data.did).toBe(acct.did)
      await expect(login(acct.handle, first)).rejects.toMatchObject({ error: 'InvalidToken' })
      expect((await factorsOf(deps().db, acct.did)).recoveryCodesLeft).toBe(9)
      await disableTotp(deps(), acct.did)
      expect(await factorsOf(deps().db, acct.did)).toEqual({ emailCode: false, totp: false, passkeys: 0, recoveryCodesLeft: 0 })
      expect((await login(acct.handle)).data.did).toBe(acct.did)
    })

    it('with email codes too: the mail goes out and either code signs in', async () => {
      const acct = await withTotp()
      await confirmTotp(deps(), acct.did, codeAt(acct.setup))
      await setEmailFactor(acct, true)
      await expect(login(acct.handle)).rejects.toMatchObject({
        error: 'AuthFactorTokenRequired',
        message: /^A sign in code has been sent.*authenticator app/,
      })
      expect((await login(acct.handle, signInCode(acct.email))).data.did).toBe(acct.did)
      expect((await login(acct.handle, codeAt(acct.setup, Date.now() + 30_000))).data.did).toBe(acct.did)
    })

    it('cannot be guessed: every spelling of the account shares one login budget', async () => {
      const acct = await withTotp()
      await confirmTotp(deps(), acct.did, codeAt(acct.setup))
      const wrong = wrongCode(acct.setup)
      const spellings = [acct.handle, acct.email, acct.did]
      let limitedAt = 0
      for (let i = 1; i <= 3 * LOGIN_BUDGET && !limitedAt; i++) {
        const err = await login(spellings[i % 3], wrong).catch((e: { status: number; error: string }) => e)
        expect(['InvalidToken', 'RateLimitExceeded']).toContain((err as { error: string }).error)
        if ((err as { status: number }).status === 429) limitedAt = i
      }
      // three spellings would give three budgets were codes counted by the identifier alone
      expect(limitedAt).toBeGreaterThan(0)
      expect(limitedAt).toBeLessThanOrEqual(LOGIN_BUDGET)
      await expect(login(acct.handle, codeAt(acct.setup, Date.now() + 30_000))).rejects.toMatchObject({ status: 429 })
    })
  })

  describe('passkeys', () => {
    it('register with the ceremony, are listed, renamed, and their first brings recovery codes', async () => {
      const acct = await confirmedAccount()
      const auth = new SoftAuthenticator(new URL(deps().config.publicUrl).origin)
      const options = await passkeyRegistrationOptions(deps(), acct)
      expect(options).toMatchObject({ rp: { id: 'localhost' }, user: { name: acct.handle }, attestation: 'none' })
      expect(options.authenticatorSelection).toMatchObject({ residentKey: 'required' })
      const answer = auth.register(options)
      const reg = await verifyPasskeyRegistration(deps(), acct.did, answer, 'Laptop')
      if (!reg.ok) throw new Error(reg.message)
      expect(reg.recoveryCodes).toHaveLength(10)
      // the challenge was spent
      expect(await verifyPasskeyRegistration(deps(), acct.did, answer, 'Again')).toMatchObject({ ok: false })

      // a second one, from a page of another origin, is refused; from ours it joins without new codes
      const other = await passkeyRegistrationOptions(deps(), acct)
      expect(other.excludeCredentials?.map((c) => c.id)).toEqual([answer.id])
      expect(await verifyPasskeyRegistration(deps(), acct.did, auth.register(other, { origin: 'https://evil.example' }))).toMatchObject({
        ok: false,
      })
      const second = await verifyPasskeyRegistration(deps(), acct.did, auth.register(await passkeyRegistrationOptions(deps(), acct)))
      expect(second).toMatchObject({ ok: true, passkey: { name: 'Passkey' } })
      expect((second as { recoveryCodes?: string[] }).recoveryCodes).toBeUndefined()

      expect(await renamePasskey(deps().db, acct.did, answer.id, '  Phone ')).toBe(true)
      expect(await renamePasskey(deps().db, 'did:plc:someoneelse', answer.id, 'Mine')).toBe(false)
      const list = await listPasskeys(deps().db, acct.did)
      expect(list.map((p) => p.name)).toEqual(['Phone', 'Passkey'])
      expect(list[0]).toMatchObject({ id: answer.id, lastUsedAt: null })
      expect(await factorsOf(deps().db, acct.did)).toMatchObject({ passkeys: 2, recoveryCodesLeft: 10 })
    })

    it('are a second factor after the password: assertions count up and are used once', async () => {
      const acct = await confirmedAccount()
      const auth = new SoftAuthenticator(new URL(deps().config.publicUrl).origin)
      const reg = await verifyPasskeyRegistration(deps(), acct.did, auth.register(await passkeyRegistrationOptions(deps(), acct)), 'Key')
      if (!reg.ok) throw new Error(reg.message)
      // createSession has no way to run the ceremony: it points to the browser, app passwords and recovery codes
      await expect(login(acct.handle)).rejects.toMatchObject({
        error: 'AuthFactorTokenRequired',
        message: /passkey.*browser.*app password.*recovery code/,
      })
      expect((await login(acct.handle, reg.recoveryCodes![0])).data.did).toBe(acct.did)

      const options = await passkeyAuthenticationOptions(deps(), acct.did)
      expect(options.allowCredentials?.map((c) => c.id)).toEqual([auth.credentials[0].id.toString('base64url')])
      const assertion = auth.authenticate(options)
      const answerId = auth.credentials[0].id.toString('base64url')
      expect(await checkSecondFactor(deps(), acct.did, { passkeyResponse: assertion })).toEqual({
        ok: true,
        factor: 'passkey',
        passkeyId: answerId,
      })
      expect(await checkSecondFactor(deps(), acct.did, { passkeyResponse: assertion })).toMatchObject({ ok: false })
      expect((await listPasskeys(deps().db, acct.did))[0].lastUsedAt).not.toBeNull()

      // a cloned authenticator shows a counter that did not grow
      const cloned = auth.authenticate(await passkeyAuthenticationOptions(deps(), acct.did), { counter: 1 })
      expect(await checkSecondFactor(deps(), acct.did, { passkeyResponse: cloned })).toMatchObject({ ok: false })
      // another origin's page
      const phished = auth.authenticate(await passkeyAuthenticationOptions(deps(), acct.did), { origin: 'https://evil.example' })
      expect(await checkSecondFactor(deps(), acct.did, { passkeyResponse: phished })).toMatchObject({ ok: false })
      // options made for this account do not vouch for another one
      const someoneElse = await confirmedAccount()
      const forOther = auth.authenticate(await passkeyAuthenticationOptions(deps(), acct.did))
      expect(await checkSecondFactor(deps(), someoneElse.did, { passkeyResponse: forOther })).toMatchObject({ ok: false })
    })

    it('sign in without a password (discoverable), and removing the last lifts the second step', async () => {
      const acct = await confirmedAccount()
      const auth = new SoftAuthenticator(new URL(deps().config.publicUrl).origin)
      auth.countSignatures = false // a synced passkey keeps its counter at 0
      const answer = auth.register(await passkeyRegistrationOptions(deps(), acct))
      expect(await verifyPasskeyRegistration(deps(), acct.did, answer)).toMatchObject({ ok: true })

      const options = await passkeyAuthenticationOptions(deps())
      expect(options.allowCredentials ?? []).toEqual([])
      expect(options.userVerification).toBe('required')
      const signedIn = await signInWithPasskey(deps(), auth.authenticate(options))
      expect(signedIn).toMatchObject({ ok: true, account: { did: acct.did, handle: acct.handle } })
      expect(await signInWithPasskey(deps(), auth.authenticate({ challenge: 'bm90LWlzc3VlZA' }))).toEqual({ ok: false, why: 'invalid' })

      expect(await removePasskey(deps(), acct.did, answer.id)).toBe(true)
      expect(await factorsOf(deps().db, acct.did)).toEqual({ emailCode: false, totp: false, passkeys: 0, recoveryCodesLeft: 0 })
      expect((await login(acct.handle)).data.did).toBe(acct.did)
      expect(await signInWithPasskey(deps(), auth.authenticate(await passkeyAuthenticationOptions(deps())))).toEqual({
        ok: false,
        why: 'invalid',
      })
    })
  })
})
