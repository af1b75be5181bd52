// Server-issued DPoP nonces as a strict client sees them: every answer to a DPoP request (PAR,
// the token endpoint, XRPC with a DPoP token, errors included) carries DPoP-Nonce; a proof without
// the nonce, or with one gone stale, is refused with use_dpop_nonce (400 from the authorization
// server, 401 with a DPoP challenge from the resource server) and succeeds once it carries it.
import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest'
import { describe, newAccount, PASSWORD, startTestPds, type TestPds } from './harness.js'
import { ath, dpopKey, form, loopbackClientId, openPage, pkce, REDIRECT, SCOPE, signInAndAllow, type DpopKey } from './oauth-helpers.js'

let pds: TestPds
let srv: { url: string; publicUrl: string }

type Answer = { status: number; json: any; nonce: string | null; wwwAuthenticate: string | null }

/**
 * A client that knows no nonce until the server gives one, retries once on use_dpop_nonce, and
 * fails the test on any answer to a DPoP request that carries no DPoP-Nonce
 */
class StrictClient {
  nonce: string | undefined
  readonly answers: (Answer & { what: string })[] = []
  constructor(private key: DpopKey) {}

  async send(
    method: 'GET' | 'POST',
    path: string,
    opts: { form?: Record<string, string>; json?: unknown; token?: string; query?: string } = {},
  ) {
    let answer: Answer | undefined
    for (let attempt = 0; attempt < 2; attempt++) {
      const proof = await this.key.proof(method, `${srv.publicUrl}${path}`, {
        nonce: this.nonce,
        ...(opts.token ? { ath: ath(opts.token) } : {}),
      })
      const headers: Record<string, string> = { dpop: proof }
      if (opts.token) headers.authorization = `DPoP ${opts.token}`
      let body: string | undefined
      if (opts.form) {
        headers['content-type'] = 'application/x-www-form-urlencoded'
        body = form(opts.form)
      } else if (opts.json !== undefined) {
        headers['content-type'] = 'application/json'
        body = JSON.stringify(opts.json)
      }
      const res = await fetch(`${srv.url}${path}${opts.query ?? ''}`, { method, headers, body })
      const text = await res.text()
      answer = {
        status: res.status,
        json: text ? JSON.parse(text) : undefined,
        nonce: res.headers.get('dpop-nonce'),
        wwwAuthenticate: res.headers.get('www-authenticate'),
      }
      this.answers.push({ ...answer, what: `${method} ${path}` })
      expect(answer.nonce, `${method} ${path} answered ${res.status} without DPoP-Nonce`).toBeTruthy()
      const useNonce =
        (answer.status === 400 && answer.json?.error === 'use_dpop_nonce') ||
        (answer.status === 401 && /^DPoP .*error="use_dpop_nonce"/.test(answer.wwwAuthenticate ?? ''))
      this.nonce = answer.nonce!
      if (!useNonce) break
    }
    return answer!
  }
}

async function parBody() {
  const p = pkce()
  return {
    p,
    body: {
      client_id: loopbackClientId(),
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope: SCOPE,
      state: 'st',
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
    },
  }
}

/** PAR, the sign-in form and the code exchange through a strict client; its tokens */
async function signIn(client: StrictClient) {
  const acct = await newAccount(srv.url, 'nonce')
  const { p, body } = await parBody()
  const parred = await client.send('POST', '/oauth/par', { form: body })
  expect(parred.status, JSON.stringify(parred.json)).toBe(201)
  const requestUri = parred.json.request_uri as string
  const page = await openPage(srv.url, requestUri)
  const allowed = await signInAndAllow(srv.url, requestUri, { handle: acct.handle, password: PASSWORD }, page)
  expect(allowed.status, allowed.text).toBe(302)
  const code = new URL(allowed.headers.get('location')!).searchParams.get('code')!
  const tokens = await client.send('POST', '/oauth/token', {
    form: { grant_type: 'authorization_code', code, code_verifier: p.verifier, redirect_uri: REDIRECT, client_id: loopbackClientId() },
  })
  expect(tokens.status, JSON.stringify(tokens.json)).toBe(200)
  return { acct, access: tokens.json.access_token as string, refresh: tokens.json.refresh_token as string }
}

describe('DPoP nonces', () => {
  beforeAll(async () => {
    pds = await startTestPds()
    srv = { url: pds.url, publicUrl: pds.env.PDS_PUBLIC_URL }
  })
  afterAll(async () => {
    await pds?.stop()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('a strict client finds DPoP-Nonce on every answer, learns it from the first refusal, and completes the flow', async () => {
    const client = new StrictClient(await dpopKey())
    const { acct, access, refresh } = await signIn(client)
    // the very first proof carried no nonce: refused with the nonce to use, then accepted
    expect(client.answers[0]).toMatchObject({ what: 'POST /oauth/par', status: 400, json: { error: 'use_dpop_nonce' } })
    expect(client.answers[1]).toMatchObject({ what: 'POST /oauth/par', status: 201 })

    const session = await client.send('GET', '/xrpc/com.atproto.server.getSession', { token: access })
    expect(session.status).toBe(200)
    expect(session.json.did).toBe(acct.did)
    const created = await client.send('POST', '/xrpc/com.atproto.repo.createRecord', {
      token: access,
      json: { repo: acct.did, collection: 'app.bsky.feed.post', record: { text: 'nonce', createdAt: new Date().toISOString() } },
    })
    expect(created.status, JSON.stringify(created.json)).toBe(200)
    // an error answer carries it too
    const missing = await client.send('GET', '/xrpc/com.atproto.repo.getRecord', {
      token: access,
      query: `?repo=${acct.did}&collection=app.bsky.feed.post&rkey=nothing`,
    })
    expect(missing.status).toBe(404)
    const refreshed = await client.send('POST', '/oauth/token', {
      form: { grant_type: 'refresh_token', refresh_token: refresh, client_id: loopbackClientId() },
    })
    expect(refreshed.status, JSON.stringify(refreshed.json)).toBe(200)
    // one refusal in the whole flow: the first request, before the client knew any nonce
    expect(client.answers.filter((a) => a.json?.error === 'use_dpop_nonce')).toHaveLength(1)
  })

  it('refuses a proof without a nonce at PAR, the token endpoint and the resource server, each time naming the nonce', async () => {
    const key = await dpopKey()
    const client = new StrictClient(key)
    const { access, refresh } = await signIn(client)
    const { body } = await parBody()
    const noNonce = (htm: string, path: string, extra: Record<string, unknown> = {}) =>
      key.proof(htm, `${srv.publicUrl}${path}`, { nonce: undefined, ...extra })

    const parred = await fetch(`${srv.url}/oauth/par`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await noNonce('POST', '/oauth/par') },
      body: form(body),
    })
    expect(parred.status).toBe(400)
    expect(await parred.json()).toMatchObject({ error: 'use_dpop_nonce' })
    expect(parred.headers.get('dpop-nonce')).toBe(client.nonce)

    const token = await fetch(`${srv.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await noNonce('POST', '/oauth/token') },
      body: form({ grant_type: 'refresh_token', refresh_token: refresh, client_id: loopbackClientId() }),
    })
    expect(token.status).toBe(400)
    expect(await token.json()).toMatchObject({ error: 'use_dpop_nonce' })
    expect(token.headers.get('dpop-nonce')).toBeTruthy()
    // the refusal spent nothing: the refresh token still works
    const again = await client.send('POST', '/oauth/token', {
      form: { grant_type: 'refresh_token', refresh_token: refresh, client_id: loopbackClientId() },
    })
    expect(again.status, JSON.stringify(again.json)).toBe(200)

    const path = '/xrpc/com.atproto.server.getSession'
    const rs = await fetch(`${srv.url}${path}`, {
      headers: { authorization: `DPoP ${access}`, dpop: await noNonce('GET', path, { ath: ath(access) }) },
    })
    expect(rs.status).toBe(401)
    expect(rs.headers.get('www-authenticate')).toMatch(/^DPoP error="use_dpop_nonce"/)
    expect(rs.headers.get('dpop-nonce')).toBeTruthy()
    expect(((await rs.json()) as any).error).toBe('use_dpop_nonce')

    // a nonce this server never gave out is no better
    const made = await fetch(`${srv.url}${path}`, {
      headers: {
        authorization: `DPoP ${access}`,
        dpop: await key.proof('GET', `${srv.publicUrl}${path}`, { nonce: 'A'.repeat(22), ath: ath(access) }),
      },
    })
    expect(made.status).toBe(401)
    expect(made.headers.get('www-authenticate')).toMatch(/error="use_dpop_nonce"/)
  })

  it('keeps accepting a nonce one rotation old, refuses one older than the window, and hands out a fresh one', async () => {
    const client = new StrictClient(await dpopKey())
    const { refresh } = await signIn(client)
    const handedOut = client.nonce!
    const start = Date.now()
    vi.useFakeTimers({ toFake: ['Date'], now: start })

    // three minutes on: the nonce rotated, the one the client holds still works
    vi.setSystemTime(start + 3 * 60_000 + 1000)
    const { body } = await parBody()
    const recent = await client.send('POST', '/oauth/par', { form: body })
    expect(recent.status, JSON.stringify(recent.json)).toBe(201)
    expect(client.answers.at(-1)!.json?.error).toBeUndefined()
    expect(recent.nonce).not.toBe(handedOut)

    // ten minutes after it was handed out: stale, refused, and the answer names the current one
    vi.setSystemTime(start + 10 * 60_000)
    client.nonce = handedOut
    const stale = await client.send('POST', '/oauth/token', {
      form: { grant_type: 'refresh_token', refresh_token: refresh, client_id: loopbackClientId() },
    })
    const tries = client.answers.slice(-2)
    expect(tries[0]).toMatchObject({ status: 400, json: { error: 'use_dpop_nonce' } })
    expect(tries[0].nonce).not.toBe(handedOut)
    // the retry with the nonce it was given succeeds
    expect(stale.status, JSON.stringify(stale.json)).toBe(200)
  })
})
