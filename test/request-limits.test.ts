// The budgets beyond the XRPC methods: the pages and the OAuth endpoints under the same limiter
// (per address, an IPv6 address as its /64), the login budget per account whatever the spelling,
// admin guesses under a global budget, and passkey challenges that neither flood nor linger.
import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { sweepExpiredChallenges } from '../src/account/factors/passkeys.js'
import { addressKey } from '../src/auth/address-key.js'
import { ADMIN_PASSWORD, describe, newAccount, PASSWORD, redisUrl, startTestPds, xrpc, type TestPds } from './harness.js'
import { csrfOf, pageClient } from './page-client.js'
import { loopbackClientId, openPage, pkce, post, REDIRECT, SCOPE, submitPage } from './oauth-helpers.js'

const ON = { PDS_RATE_LIMITS_ENABLED: 'true' }
const from = (address: string) => ({ 'x-forwarded-for': address })

/** `n` calls, at most 8 at a time, in order of their answers' index */
async function flood<T>(n: number, call: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n)
  let next = 0
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < n) {
        const i = next++
        out[i] = await call(i)
      }
    }),
  )
  return out
}

const count = async (pds: TestPds, table: 'device' | 'oauth_request' | 'webauthn_challenge') =>
  Number(
    (
      await pds.services.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  )

const admin = (pds: TestPds, password: string, address: string) =>
  xrpc(pds.url, 'com.atproto.admin.getAccountInfos', {
    params: { dids: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' },
    headers: { authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}`, ...from(address) },
  })

describe('request budgets', () => {
  const servers: TestPds[] = []
  const start = async (...args: Parameters<typeof startTestPds>) => {
    const s = await startTestPds(...args)
    servers.push(s)
    return s
  }
  afterAll(async () => {
    for (const s of servers) await s.stop()
  })

  it('counts an IPv6 address as its /64 and an IPv4-mapped one as the IPv4 address', () => {
    expect(addressKey('2001:db8:1:2::1')).toBe(addressKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'))
    expect(addressKey('2001:db8:1:2::1')).not.toBe(addressKey('2001:db8:1:3::1'))
    expect(addressKey('::ffff:203.0.113.9')).toBe('203.0.113.9')
    expect(addressKey('203.0.113.9')).toBe('203.0.113.9')
  })

  describe('with the default budgets', () => {
    let pds: TestPds
    beforeAll(async () => {
      pds = await start(ON)
    })

    it('answers a cookie-less flood of GET /account with 429 within 600 pages, and stores nothing more once refused', async () => {
      const address = '198.51.100.20'
      const before = await count(pds, 'device')
      const statuses = await flood(600, () =>
        fetch(`${pds.url}/account`, { headers: from(address) }).then(async (r) => (await r.arrayBuffer(), r.status)),
      )
      expect(statuses.filter((s) => s === 200).length).toBe(600)
      const refused = await fetch(`${pds.url}/account`, { headers: from(address) })
      expect(refused.status).toBe(429)
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(refused.headers.get('content-type')).toContain('text/html')
      expect(await refused.text()).toContain('Too many requests from your network')
      const atRefusal = await count(pds, 'device')
      expect(atRefusal - before).toBeLessThanOrEqual(600)
      const more = await flood(50, () =>
        fetch(`${pds.url}/account`, { headers: from(address) }).then(async (r) => (await r.text(), r.status)),
      )
      expect(new Set(more)).toEqual(new Set([429]))
      expect(await count(pds, 'device')).toBe(atRefusal)
      // the sign-in and consent pages share the budget; other networks are not affected
      expect((await fetch(`${pds.url}/oauth/authorize?request_uri=x`, { headers: from(address) })).status).toBe(429)
      expect((await fetch(`${pds.url}/account`, { headers: from('198.51.100.21') })).status).toBe(200)
    })

    it('answers a flood of /oauth/par with a 429 OAuth error and RateLimit headers within 300 requests', async () => {
      const address = '198.51.100.30'
      const push = () =>
        post(
          `${pds.url}/oauth/par`,
          {
            client_id: loopbackClientId(),
            response_type: 'code',
            redirect_uri: REDIRECT,
            scope: SCOPE,
            state: 'st',
            code_challenge: pkce().challenge,
            code_challenge_method: 'S256',
            dpop_jkt: randomBytes(32).toString('base64url'),
          },
          from(address),
        )
      const before = await count(pds, 'oauth_request')
      const answers = await flood(300, push)
      expect(answers.filter((a) => a.status === 201).length).toBe(300)
      expect(answers[0].headers.get('ratelimit-limit')).toBe('300')
      const refused = await push()
      expect(refused.status).toBe(429)
      expect(refused.json.error).toBe('rate_limit_exceeded')
      expect(refused.headers.get('ratelimit-remaining')).toBe('0')
      expect(refused.headers.get('ratelimit-policy')).toBe('300;w=300')
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
      const atRefusal = await count(pds, 'oauth_request')
      expect(atRefusal - before).toBeLessThanOrEqual(300)
      await flood(30, push)
      expect(await count(pds, 'oauth_request')).toBe(atRefusal)
    })

    it('puts /oauth/token under the limiter too', async () => {
      const res = await post(`${pds.url}/oauth/token`, { grant_type: 'refresh_token' }, from('198.51.100.40'))
      expect(res.status).toBe(400)
      expect(res.headers.get('ratelimit-limit')).toBe('3000')
    })

    it('gives 250 addresses of one IPv6 /64 the admin guesses of one address, and another /64 its own', async () => {
      const statuses = await flood(250, (i) => admin(pds, 'guess', `2001:db8:aa:bb::${(i + 1).toString(16)}`).then((r) => r.status))
      expect(statuses.filter((s) => s === 401).length).toBe(100)
      expect(statuses.filter((s) => s === 429).length).toBe(150)
      expect((await admin(pds, ADMIN_PASSWORD, '2001:db8:aa:bb:1:2:3:4')).status).toBe(429)
      expect((await admin(pds, ADMIN_PASSWORD, '2001:db8:aa:cc::1')).status).toBe(200)
    })

    it('answers a flood of anonymous passkey options with 429 within 60, and stores no challenge more', async () => {
      const address = '198.51.100.50'
      const pushed = await post(`${pds.url}/oauth/par`, {
        client_id: loopbackClientId(),
        response_type: 'code',
        redirect_uri: REDIRECT,
        scope: SCOPE,
        state: 'st',
        code_challenge: pkce().challenge,
        code_challenge_method: 'S256',
        dpop_jkt: randomBytes(32).toString('base64url'),
      })
      const requestUri = pushed.json.request_uri as string
      const page = await openPage(pds.url, requestUri)
      const options = () =>
        post(
          `${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`,
          { step: 'passkey-options', csrf_token: page.csrf },
          { cookie: page.cookie, accept: 'application/json', ...from(address) },
        )
      const before = await count(pds, 'webauthn_challenge')
      const answers = await flood(60, options)
      expect(answers.filter((a) => a.status === 200 && typeof a.json.challenge === 'string').length).toBe(60)
      const refused = await options()
      expect([refused.status, refused.json.error]).toEqual([429, 'RateLimitExceeded'])
      expect(refused.json.message).toContain('Too many requests')
      expect(await count(pds, 'webauthn_challenge')).toBe(before + 60)
    })
  })

  it('lets the admin password be guessed only so often from everywhere together', async () => {
    const pds = await start(ON, { rateLimits: { limits: { adminGlobal: [{ durationMs: 60_000, points: 5 }] } } })
    const statuses = []
    for (let i = 1; i <= 5; i++) statuses.push((await admin(pds, 'guess', `203.0.113.${i}`)).status)
    statuses.push((await admin(pds, 'guess', '2001:db8:77::1')).status)
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429])
    const res = await admin(pds, ADMIN_PASSWORD, '192.0.2.200')
    expect([res.status, res.body.error]).toEqual([429, 'RateLimitExceeded'])
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0)
  })

  it("counts a signed-in account's page posts against one budget, whichever address they come from", async () => {
    const pds = await start(ON, { rateLimits: { limits: { pageAccount: [{ durationMs: 60_000, points: 3 }] } } })
    const acct = await newAccount(pds.url, 'posts')
    const http = pageClient(pds.url)
    const csrf = csrfOf((await http.get('/account')).text)
    const signedIn = await http.post('/account/sign-in', { csrf_token: csrf, handle: acct.handle, password: PASSWORD, remember: 'on' })
    expect(signedIn.status).toBe(303)
    const cookie = [...http.jar].map(([k, v]) => `${k}=${v}`).join('; ')
    const rename = (address: string) =>
      post(`${pds.url}/account/passkeys/rename`, { csrf_token: csrf, id: 'none', name: 'x' }, { cookie, ...from(address) })
    for (let i = 0; i < 3; i++) expect((await rename(`198.51.100.${10 + i}`)).status).toBe(303)
    expect((await http.get('/account')).text).not.toContain('Too many requests')
    // the fourth, from yet another address, is refused and the page says why
    await http.post('/account/passkeys/rename', { csrf_token: csrf, id: 'none', name: 'x' })
    expect((await http.get('/account')).text).toContain('Too many requests')
    // another account signed in on another device keeps its own budget
    const other = await newAccount(pds.url, 'posts2')
    const http2 = pageClient(pds.url)
    const csrf2 = csrfOf((await http2.get('/account')).text)
    await http2.post('/account/sign-in', { csrf_token: csrf2, handle: other.handle, password: PASSWORD, remember: 'on' })
    await http2.post('/account/passkeys/rename', { csrf_token: csrf2, id: 'none', name: 'x' })
    expect((await http2.get('/account')).text).not.toContain('Too many requests')
  })

  it('counts the handle, the email address and the DID of one account against one login budget, on every sign-in door', async () => {
    const pds = await start(ON, {
      rateLimits: { limits: { login: [{ durationMs: 60_000, points: 3 }], loginAddress: [{ durationMs: 60_000, points: 1000 }] } },
    })
    const acct = await newAccount(pds.url, 'spell')
    const login = (identifier: string, address: string) =>
      xrpc(pds.url, 'com.atproto.server.createSession', { body: { identifier, password: 'wrong-password' }, headers: from(address) })
    expect((await login(acct.handle, '203.0.113.61')).status).toBe(401)
    expect((await login(acct.did, '203.0.113.62')).status).toBe(401)
    // the account page's password form
    const page = await fetch(`${pds.url}/account`)
    const cookie = (page.headers.get('set-cookie') ?? '').split(';')[0]
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(await page.text())?.[1]
    const signIn = (handle: string, address: string) =>
      post(`${pds.url}/account/sign-in`, { handle, password: 'wrong-password', csrf_token: csrf }, { cookie, ...from(address) })
    expect((await signIn(acct.email, '203.0.113.63')).status).toBe(401)
    for (const spelling of [acct.handle.toUpperCase(), acct.email, acct.did]) {
      const res = await login(spelling, '203.0.113.64')
      expect([res.status, res.body.error], spelling).toEqual([429, 'RateLimitExceeded'])
    }
    expect((await signIn(acct.handle, '203.0.113.65')).status).toBe(429)
    // the OAuth sign-in form too
    const pushed = await post(`${pds.url}/oauth/par`, {
      client_id: loopbackClientId(),
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope: SCOPE,
      state: 'st',
      code_challenge: pkce().challenge,
      code_challenge_method: 'S256',
      dpop_jkt: randomBytes(32).toString('base64url'),
    })
    const requestUri = pushed.json.request_uri as string
    const oauthPage = await openPage(pds.url, requestUri)
    const refused = await submitPage(
      pds.url,
      requestUri,
      { handle: acct.email, password: PASSWORD_GUESS, step: 'login', action: 'allow', csrf_token: oauthPage.csrf },
      oauthPage.cookie,
    )
    expect(refused.status).toBe(429)
    // identifiers that name no account count as typed: each its own budget
    expect(await Promise.all([1, 2, 3].map(() => login('nobody-a.test', '203.0.113.66').then((r) => r.status)))).toEqual([401, 401, 401])
    expect((await login('nobody-a.test', '203.0.113.66')).status).toBe(429)
    expect((await login('nobody-b.test', '203.0.113.66')).status).toBe(401)
  })

  it('keeps expired passkey challenges off the request path: indexed, and swept in the background', async () => {
    const pds = await start(ON)
    const db = pds.services.db
    const indexes =
      db.dialect === 'postgres'
        ? (
            await sql<{
              name: string
            }>`select indexdef as name from pg_indexes where schemaname = current_schema() and tablename = 'webauthn_challenge'`.execute(db)
          ).rows.map((r) => r.name)
        : (
            await sql<{
              name: string
            }>`select sql as name from sqlite_master where type = 'index' and tbl_name = 'webauthn_challenge'`.execute(db)
          ).rows.map((r) => r.name ?? '')
    expect(indexes.some((d) => /\(\s*"?expires_at"?\s*\)/.test(d))).toBe(true)
    const past = new Date(Date.now() - 60_000).toISOString()
    await db
      .insertInto('webauthn_challenge')
      .values(Array.from({ length: 50 }, (_, i) => ({ challenge: `old-${i}`, purpose: 'authenticate', did: null, expires_at: past })))
      .execute()
    // an anonymous options request stores its challenge and deletes nothing
    const pushed = await post(`${pds.url}/oauth/par`, {
      client_id: loopbackClientId(),
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope: SCOPE,
      state: 'st',
      code_challenge: pkce().challenge,
      code_challenge_method: 'S256',
      dpop_jkt: randomBytes(32).toString('base64url'),
    })
    const requestUri = pushed.json.request_uri as string
    const page = await openPage(pds.url, requestUri)
    const options = await post(
      `${pds.url}/oauth/authorize?request_uri=${encodeURIComponent(requestUri)}`,
      { step: 'passkey-options', csrf_token: page.csrf },
      { cookie: page.cookie, accept: 'application/json' },
    )
    expect(options.status).toBe(200)
    expect(await count(pds, 'webauthn_challenge')).toBe(51)
    // the server's sweep: the expired ones go, the live one stays
    expect(await sweepExpiredChallenges(db)).toBe(50)
    const left = await db.selectFrom('webauthn_challenge').select('challenge').execute()
    expect(left.map((r) => r.challenge)).toEqual([options.json.challenge])
  })

  it.skipIf(!redisUrl)('shares the page budgets between processes through Redis', async () => {
    const tuning = {
      rateLimits: { prefix: `test-${randomBytes(6).toString('hex')}`, limits: { pageView: [{ durationMs: 60_000, points: 3 }] } },
    }
    const a = await start({ ...ON, PDS_REDIS_URL: redisUrl! }, tuning)
    const b = await start({ ...ON, PDS_REDIS_URL: redisUrl! }, tuning)
    const view = (pds: TestPds) =>
      fetch(`${pds.url}/account`, { headers: from('198.51.100.70') }).then(async (r) => (await r.text(), r.status))
    expect([await view(a), await view(b), await view(a), await view(b)]).toEqual([200, 200, 200, 429])
  })

  it('runs the sweep by itself', async () => {
    const pds = await start({}, { challengeSweepMs: 50 })
    const db = pds.services.db
    await db
      .insertInto('webauthn_challenge')
      .values({ challenge: 'old', purpose: 'authenticate', did: null, expires_at: new Date(Date.now() - 1000).toISOString() })
      .execute()
    for (let i = 0; i < 100 && (await count(pds, 'webauthn_challenge')) > 0; i++) await new Promise((r) => setTimeout(r, 50))
    expect(await count(pds, 'webauthn_challenge')).toBe(0)
  })
})

const PASSWORD_GUESS = 'wrong-password'
