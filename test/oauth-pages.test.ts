// The sign-in pages over plain HTTP: page headers and cookies, the device session and its form
// token, prompt values, remembered accounts, sign-up with and without invite codes, and the
// budgets of the reset and sign-up forms.
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, describe, newAccount as harnessAccount, startTestPds, xrpc, PASSWORD, type TestPds } from './harness.js'
import { dpopKey, openPage, par, signInAndAllow, submitPage } from './oauth-helpers.js'

let pds: TestPds
let srv: { url: string; publicUrl: string }

const newAccount = (target = pds) => harnessAccount(target.url, 'p')
async function request(overrides: Record<string, string> = {}, s = srv) {
  const res = await par(s, await dpopKey(), overrides)
  expect(res.status, res.text).toBe(201)
  return res.json.request_uri as string
}
const open = (requestUri: string, cookie?: string, view?: string, s = srv) =>
  fetch(`${s.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}${view ? `&view=${view}` : ''}`, {
    headers: cookie ? { cookie } : {},
    redirect: 'manual',
  }).then(async (res) => ({ status: res.status, html: await res.text(), headers: res.headers }))

/** signs `handle` in on a new device with Remember checked; the device's cookie and form token */
async function rememberedDevice(handle: string) {
  const requestUri = await request()
  const page = await openPage(srv.url, requestUri)
  const res = await signInAndAllow(srv.url, requestUri, { handle, password: PASSWORD }, page, { remember: 'on' })
  expect(res.status).toBe(302)
  return page
}

describe('sign-in pages over HTTP', () => {
  beforeAll(async () => {
    pds = await startTestPds()
    srv = { url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }
  })
  afterAll(() => pds?.stop())

  it('sends the page headers, an HttpOnly SameSite=Lax device cookie, and its own stylesheet', async () => {
    const res = await fetch(`${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(await request())}`)
    expect(res.headers.get('cache-control')).toBe('no-store')
    expect(res.headers.get('x-frame-options')).toBe('DENY')
    const csp = res.headers.get('content-security-policy')!
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("frame-ancestors 'none'")
    // scripts only from the server itself (the passkey file), never inline
    expect(csp).toContain("script-src 'self'")
    expect(csp).not.toContain('unsafe-inline')
    const cookie = res.headers.get('set-cookie')!
    expect(cookie).toMatch(/^pds_device=[\w-]+\.[\w-]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/)
    const html = await res.text()
    expect(html).toMatch(/<link rel="stylesheet" href="\/web\/style.css"/)
    expect(html).not.toMatch(/style=/)
    expect(html.match(/<script[^>]*>/g)).toEqual(['<script src="/web/passkey.js" defer>'])
    const script = await fetch(`${pds.url}/web/passkey.js`)
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/)
    expect(await script.text()).toContain('navigator.credentials.get')
    const css = await fetch(`${pds.url}/web/style.css`)
    expect(css.headers.get('content-type')).toMatch(/^text\/css/)
    expect(await css.text()).toContain(':focus-visible')
  })

  it('stores only a hash of the device secret, at the first form post, and refuses a form from a forged device cookie', async () => {
    const requestUri = await request()
    const page = await openPage(pds.url, requestUri)
    const [id, secret] = page.cookie.split('=')[1].split('.')
    // a page view stores nothing; the device's first form post does
    expect(await pds.services.db.selectFrom('device').selectAll().where('id', '=', id).executeTakeFirst()).toBeUndefined()
    const first = await submitPage(
      pds.url,
      requestUri,
      { step: 'login', handle: 'x.test', password: 'y', csrf_token: page.csrf },
      page.cookie,
    )
    expect(first.status).toBe(401)
    const row = await pds.services.db.selectFrom('device').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
    expect(row.secret_hash).not.toContain(secret)
    const forged = `pds_device=${id}.${'A'.repeat(43)}`
    const res = await submitPage(pds.url, requestUri, { step: 'login', handle: 'x.test', password: 'y', csrf_token: page.csrf }, forged)
    expect(res.status).toBe(403)
  })

  it('refuses an unknown prompt at PAR', async () => {
    const res = await par(srv, await dpopKey(), { prompt: 'sometimes' })
    expect(res.status).toBe(400)
    expect(res.json.error).toBe('invalid_request')
  })

  it('lists remembered accounts; picking a recent one skips the password; prompt=login asks for it', async () => {
    const a = await newAccount()
    const device = await rememberedDevice(a.handle)
    const picker = await open(await request(), device.cookie)
    expect(picker.html).toContain(`@${a.handle}`)
    expect(picker.html).toContain('Use another account')

    const requestUri = await request()
    const picked = await submitPage(pds.url, requestUri, { step: 'select', did: a.did, csrf_token: device.csrf }, device.cookie)
    expect(picked.text).toContain('name="step" value="consent"')
    const allowed = await submitPage(
      pds.url,
      requestUri,
      { step: 'consent', did: a.did, action: 'allow', csrf_token: device.csrf },
      device.cookie,
    )
    expect(allowed.status).toBe(302)
    expect(new URL(allowed.headers.get('location')!).searchParams.get('code')).toBeTruthy()

    // prompt=login: the password form, even for a remembered account, and consent is refused
    // without a password given during this request
    const forced = await request({ prompt: 'login', login_hint: a.handle })
    const page = await open(forced, device.cookie)
    expect(page.html).toContain('name="password"')
    const pickedAgain = await submitPage(pds.url, forced, { step: 'select', did: a.did, csrf_token: device.csrf }, device.cookie)
    expect(pickedAgain.text).toContain('name="password"')
    const sneaky = await submitPage(
      pds.url,
      forced,
      { step: 'consent', did: a.did, action: 'allow', csrf_token: device.csrf },
      device.cookie,
    )
    expect(sneaky.status).toBe(401)
  })

  it('asks for the password again once a remembered sign-in is older than a week', async () => {
    const a = await newAccount()
    const device = await rememberedDevice(a.handle)
    await pds.services.db
      .updateTable('device_account')
      .set({ authenticated_at: new Date(Date.now() - 8 * 24 * 3600 * 1000).toISOString() })
      .where('did', '=', a.did)
      .execute()
    const requestUri = await request()
    const picked = await submitPage(pds.url, requestUri, { step: 'select', did: a.did, csrf_token: device.csrf }, device.cookie)
    expect(picked.text).toContain('name="password"')
    expect(picked.text).toContain(`value="${a.handle}"`)
  })

  it('does not list an account signed in without Remember, and a password reset signs every device out', async () => {
    const a = await newAccount()
    const requestUri = await request()
    const page = await openPage(pds.url, requestUri)
    const consent = await submitPage(
      pds.url,
      requestUri,
      { step: 'login', handle: a.handle, password: PASSWORD, csrf_token: page.csrf },
      page.cookie,
    )
    expect(consent.text).toContain('name="step" value="consent"')
    expect((await open(await request(), page.cookie)).html).not.toContain(`@${a.handle}`)

    const b = await newAccount()
    const device = await rememberedDevice(b.handle)
    await pds.services.db.updateTable('account').set({ credential_gen: 1 }).where('did', '=', b.did).execute()
    const { endAccess } = await import('../src/account/end-access.js')
    await endAccess(pds.services.db, b.did, 'password')
    expect((await open(await request(), device.cookie)).html).not.toContain(`@${b.handle}`)
  })

  it('prompt=none: login_required without a session, consent_required before a grant, a code after', async () => {
    const none = async (cookie?: string, hint?: string) => {
      const res = await open(await request({ prompt: 'none', ...(hint ? { login_hint: hint } : {}) }), cookie)
      expect(res.status).toBe(302)
      return new URL(res.headers.get('location')!).searchParams
    }
    expect((await none()).get('error')).toBe('login_required')
    const a = await newAccount()
    // signed in and remembered, but nothing granted to this client yet: the first sign-in's code
    // was never exchanged
    const device = await rememberedDevice(a.handle)
    expect((await none(device.cookie, a.handle)).get('error')).toBe('consent_required')
    await pds.services.db
      .insertInto('refresh_token')
      .values({
        jti: `grant-${a.did}`,
        did: a.did,
        kind: 'oauth',
        scope: 'atproto transition:generic',
        client_id: (await pds.services.db.selectFrom('oauth_code').select('client_id').where('did', '=', a.did).executeTakeFirstOrThrow())
          .client_id,
        dpop_jkt: 'x',
        app_password_name: null,
        expires_at: new Date(Date.now() + 3600_000).toISOString(),
        created_at: new Date().toISOString(),
      })
      .execute()
    expect((await none(device.cookie, a.handle)).get('code')).toBeTruthy()
  })

  it('without invites required the sign-up form has no invite field', async () => {
    const page = await open(await request({ prompt: 'create' }))
    expect(page.html).toContain('Create an account')
    expect(page.html).not.toContain('name="invite_code"')
  })

  it('answers 429 with Retry-After once the reset form’s budget is spent', async () => {
    // the reset budget shrunk to one request (the pages' own budgets stay as they are)
    const limited = await startTestPds(
      { PDS_RATE_LIMITS_ENABLED: 'true' },
      { rateLimits: { limits: { resetPassword: [{ durationMs: 60_000, points: 1 }] } } },
    )
    try {
      const s = { url: limited.url, publicUrl: limited.env.PDS_PUBLIC_URL }
      const requestUri = await request({}, s)
      const page = await openPage(s.url, requestUri)
      const send = () =>
        submitPage(s.url, requestUri, { step: 'reset-request', email: 'who@example.com', csrf_token: page.csrf } as never, page.cookie)
      const first = await send()
      expect(first.status).toBe(200)
      const second = await send()
      expect(second.status).toBe(429)
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(second.text).toContain('Too many attempts')
    } finally {
      await limited.stop()
    }
  })
})

describe('sign-up inside the sign-in, invite codes required', () => {
  let inv: TestPds
  let s: { url: string; publicUrl: string }
  beforeAll(async () => {
    inv = await startTestPds({ PDS_INVITE_REQUIRED: 'true' })
    s = { url: inv.url, publicUrl: inv.env.PDS_PUBLIC_URL }
  })
  afterAll(() => inv?.stop())

  it('asks for an invite code, refuses a wrong one with the domain rule’s message, and signs up with a good one', async () => {
    const requestUri = await request({ prompt: 'create' }, s)
    const page = await openPage(s.url, requestUri)
    expect(page.html).toContain('name="invite_code"')
    const fields = { step: 'signup', name: 'invited', email: 'invited@example.com', password: PASSWORD, csrf_token: page.csrf }
    const wrong = await submitPage(s.url, requestUri, { ...fields, invite_code: 'localhost-nope1-nope2' } as never, page.cookie)
    expect(wrong.status).toBe(400)
    expect(wrong.text).toMatch(/invite/i)
    expect(wrong.text).toContain('value="invited"')
    const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }
    const code = (await xrpc(s.url, 'com.atproto.server.createInviteCode', { body: { useCount: 1 }, headers: basic })).body.code as string
    const ok = await submitPage(s.url, requestUri, { ...fields, invite_code: code } as never, page.cookie)
    expect(ok.status).toBe(200)
    expect(ok.text).toContain('@invited.test')
    expect(ok.text).toContain('name="step" value="consent"')
    const did = /name="did" value="([^"]+)"/.exec(ok.text)![1]
    const done = await submitPage(s.url, requestUri, { step: 'consent', did, action: 'allow', csrf_token: page.csrf }, page.cookie)
    expect(done.status).toBe(302)
  })
})
