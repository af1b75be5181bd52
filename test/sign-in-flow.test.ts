// The one sign-in flow of the OAuth page and the account page, tried as an intruder would over
// plain form posts (a browser without JavaScript; passkeys answered by a software authenticator):
// a remembered sign-in from before a second factor existed, held steps replayed or outliving a
// password change, a passkey alone standing in for the password, the first passkey sign-in after
// a password change, and anonymous page views growing the database.
import { Secret, TOTP } from 'otpauth'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, describe, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { dpopKey, par } from './oauth-helpers.js'
import { csrfOf, pageClient } from './page-client.js'
import { SoftAuthenticator } from './soft-authenticator.js'
import { listAppPasswords } from '../src/account/app-passwords.js'
import { beginTotp, confirmTotp, factorsOf, passkeyRegistrationOptions, verifyPasskeyRegistration } from '../src/account/factors/index.js'

let pds: TestPds
let n = 0
const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }

async function account() {
  n++
  const a = { handle: `flow${n}-${Date.now() % 100000}.test`, email: `flow${n}-${Date.now()}@example.com`, password: PASSWORD }
  const res = await xrpc(pds.url, 'com.atproto.server.createAccount', { body: a })
  expect(res.status, res.text).toBe(200)
  return { ...a, did: (res.body as { did: string }).did }
}

/** an authenticator app turned on for the account (as its owner would on another device) */
async function withTotp(did: string) {
  const setup = await beginTotp(pds.services, did, 'x')
  if ('alreadyOn' in setup) throw new Error('already on')
  const code = () => new TOTP({ secret: Secret.fromBase32(setup.secret) }).generate()
  const on = await confirmTotp(pds.services, did, code())
  if (!on.ok) throw new Error('totp')
  return { recoveryCodes: on.recoveryCodes }
}

/** a passkey the account's owner added; the authenticator that holds it */
async function withPasskey(a: { did: string; handle: string }) {
  const auth = new SoftAuthenticator(new URL(pds.services.config.publicUrl).origin)
  const reg = await verifyPasskeyRegistration(pds.services, a.did, auth.register(await passkeyRegistrationOptions(pds.services, a)))
  if (!reg.ok) throw new Error(reg.message)
  return auth
}

const setPasswordByAdmin = async (did: string, password: string) => {
  const res = await xrpc(pds.url, 'com.atproto.admin.updateAccountPassword', { headers: basic, body: { did, password } })
  expect(res.status, res.text).toBe(200)
}

/** /account's password sign-in on a page client; the client's form token */
async function accountSignIn(http: ReturnType<typeof pageClient>, a: { handle: string; password: string }) {
  const csrf = csrfOf((await http.get('/account?view=login')).text)
  const res = await http.post('/account/sign-in', { csrf_token: csrf, handle: a.handle, password: a.password, remember: 'on' })
  expect(res.status).toBe(303)
  return { csrf, location: res.location }
}

/** an OAuth sign-in page of a new pushed request on the client; its path and form token */
async function oauthPage(http: ReturnType<typeof pageClient>) {
  const pushed = await par({ url: pds.url, publicUrl: pds.services.config.publicUrl }, await dpopKey())
  expect(pushed.status, pushed.text).toBe(201)
  const path = `/oauth/authorize?request_uri=${encodeURIComponent(pushed.json.request_uri as string)}`
  const page = await http.get(path)
  return { path, csrf: csrfOf(page.text) }
}

/** the OAuth page's "Sign in with a passkey": options, the authenticator's answer, the form post */
async function passkeyOnOAuthPage(http: ReturnType<typeof pageClient>, auth: SoftAuthenticator) {
  const { path, csrf } = await oauthPage(http)
  const options = await http.post(path, { csrf_token: csrf, step: 'passkey-options' })
  expect(options.status, options.text).toBe(200)
  const answer = auth.authenticate(JSON.parse(options.text))
  const res = await http.post(path, { csrf_token: csrf, step: 'passkey', passkey_response: JSON.stringify(answer), remember: 'on' })
  return { path, csrf, res }
}

describe('one sign-in flow for both pages', () => {
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('F2: /account no longer trusts a sign-in made before a second factor existed, nor renews it with the password alone', async () => {
    const a = await account()
    const intruder = pageClient(pds.url)
    const { csrf } = await accountSignIn(intruder, a)
    expect((await intruder.get('/account')).text).toContain(`@${a.handle}`)

    // the owner turns an authenticator app on; the intruder's sign-in had no factor
    await withTotp(a.did)
    const page = await intruder.get('/account')
    expect(page.text).not.toContain('Remove the authenticator app')
    expect(page.text).not.toContain('id="account-handle"')
    // the password alone renews nothing, and the app stays on
    const renewed = await intruder.post('/account/confirm', { csrf_token: csrf, password: a.password, then: 'security' })
    expect(renewed.location).not.toBe('/account#security')
    await intruder.post('/account/factors/totp/disable', { csrf_token: csrf })
    expect((await factorsOf(pds.services.db, a.did)).totp).toBe(true)
    // the OAuth page agrees: picking the account asks for the password
    const oauth = await oauthPage(intruder)
    const picked = await intruder.post(oauth.path, { csrf_token: oauth.csrf, step: 'select', did: a.did })
    expect(picked.text).toContain('name="password"')
  })

  it('F7: /account holds the waiting sign-in server-side and spends it once; a replayed step signs nobody in', async () => {
    const a = await account()
    const { recoveryCodes } = await withTotp(a.did)
    const http = pageClient(pds.url)
    const { csrf, location } = await accountSignIn(http, a)
    expect(location).toBe('/account?view=second-factor')
    const waiting = new Map(http.jar)
    const done = await http.post('/account/sign-in/code', { csrf_token: csrf, code: recoveryCodes[0] })
    expect(done.location).toBe('/account')
    expect((await http.get('/account')).text).toContain(`@${a.handle}`)
    await http.post('/account/sign-out', { csrf_token: csrf })

    // the browser's state from while the factor was awaited, replayed with another valid code
    http.jar.clear()
    for (const [k, v] of waiting) http.jar.set(k, v)
    const replayed = await http.post('/account/sign-in/code', { csrf_token: csrf, code: recoveryCodes[1] })
    expect(replayed.location).toBe('/account')
    const after = await http.get('/account')
    expect(after.text).not.toContain('id="account-handle"')
    expect(after.text).toContain('Sign in')
  })

  it('F7: a sign-in waiting for its factor ends with a password change, on /account and on the OAuth page', async () => {
    const a = await account()
    const { recoveryCodes } = await withTotp(a.did)
    const onAccount = pageClient(pds.url)
    const { csrf } = await accountSignIn(onAccount, a)
    const onOAuth = pageClient(pds.url)
    const oauth = await oauthPage(onOAuth)
    const held = await onOAuth.post(oauth.path, {
      csrf_token: oauth.csrf,
      step: 'login',
      handle: a.handle,
      password: a.password,
      remember: 'on',
    })
    expect(held.text).toContain('name="code"')

    await setPasswordByAdmin(a.did, 'a brand new password')

    await onAccount.post('/account/sign-in/code', { csrf_token: csrf, code: recoveryCodes[0] })
    expect((await onAccount.get('/account')).text).not.toContain('id="account-handle"')
    const late = await onOAuth.post(oauth.path, { csrf_token: oauth.csrf, step: 'factor', code: recoveryCodes[1] })
    expect(late.status).toBe(401)
    expect(late.text).not.toContain('name="step" value="consent"')
    expect(late.text).toContain('name="password"')
  })

  it('F1: a passkey-only sign-in is no fresh password confirmation on /account', async () => {
    const a = await account()
    const auth = await withPasskey(a)
    const http = pageClient(pds.url)
    const { res } = await passkeyOnOAuthPage(http, auth)
    expect(res.text).toContain('name="step" value="consent"')

    // the passkey's sign-in counts on /account too, but unlocks no sensitive change
    const picker = await http.get('/account')
    const csrf = csrfOf(picker.text)
    await http.post('/account/select', { csrf_token: csrf, did: a.did })
    expect((await http.get('/account')).text).toContain(`@${a.handle}`)
    const minted = await http.post('/account/app-passwords/create', { csrf_token: csrf, name: 'intruder', privileged: 'on' })
    expect(minted.location).toBe('/account?view=confirm&then=app-passwords')
    expect(await listAppPasswords(pds.services.db, a.did)).toEqual([])
    const options = await http.post('/account/passkeys/options', { csrf_token: csrf })
    expect(options.status).toBe(403)
    // the password itself does unlock them
    const confirmed = await http.post('/account/confirm', { csrf_token: csrf, password: a.password, then: 'app-passwords' })
    expect(confirmed.location).toBe('/account#app-passwords')
  })

  it('F1: the first passkey sign-in after a password change also asks for the new password', async () => {
    const a = await account()
    const auth = await withPasskey(a)
    await setPasswordByAdmin(a.did, 'the new password')

    const http = pageClient(pds.url)
    const first = await passkeyOnOAuthPage(http, auth)
    expect(first.res.text).not.toContain('name="step" value="consent"')
    expect(first.res.text).toContain('name="step" value="passkey-password"')
    const wrong = await http.post(first.path, { csrf_token: first.csrf, step: 'passkey-password', password: PASSWORD })
    expect(wrong.status).toBe(401)
    expect(wrong.text).not.toContain('name="step" value="consent"')
    const right = await http.post(first.path, { csrf_token: first.csrf, step: 'passkey-password', password: 'the new password' })
    expect(right.text).toContain('name="step" value="consent"')

    // confirmed once: on another browser the passkey alone signs in again
    const again = await passkeyOnOAuthPage(pageClient(pds.url), auth)
    expect(again.res.text).toContain('name="step" value="consent"')
  })

  it('F5: cookie-less views of /account and the OAuth page store no device; the first form post does', async () => {
    const db = pds.services.db
    const count = async () =>
      Number(
        (
          await db
            .selectFrom('device')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    const before = await count()
    for (let i = 0; i < 5; i++) {
      expect((await fetch(`${pds.url}/account`)).status).toBe(200)
      expect((await fetch(`${pds.url}/account?view=login`)).status).toBe(200)
      expect((await fetch(`${pds.url}/account/forgot`)).status).toBe(200)
      const { path } = await oauthPage(pageClient(pds.url))
      expect((await fetch(`${pds.url}${path}`)).status).toBe(200)
    }
    expect(await count()).toBe(before)

    // a browser's first post stores its device, once, and the page keeps working
    const a = await account()
    const http = pageClient(pds.url)
    await accountSignIn(http, a)
    expect(await count()).toBe(before + 1)
    expect((await http.get('/account')).text).toContain(`@${a.handle}`)
    expect(await count()).toBe(before + 1)
  })
})
