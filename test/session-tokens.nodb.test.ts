// Session tokens are signed and checked with node:crypto HMAC (not jose's WebCrypto path): the
// tokens must stay standard HS256 JWTs that jose accepts, and every token jose would refuse must
// be refused the same way (InvalidToken, or ExpiredToken for an expired but valid token).
import { jwtVerify, SignJWT } from 'jose'
import { expect, it, vi } from 'vitest'
import { mintPair, tokenKeys, verifySessionToken } from '../src/account/session-tokens.js'
import { describe } from './harness.js'

const SECRET = 'test-jwt-secret-0123456789abcdef'
const SERVICE = 'did:web:localhost'
const keys = tokenKeys(SECRET, SERVICE)
const secret = new TextEncoder().encode(SECRET)
const DID = 'did:plc:abcdefghijklmnopqrstuvwx'

const errorName = async (p: Promise<unknown>) => {
  try {
    await p
    return 'accepted'
  } catch (err) {
    return (err as { customErrorName?: string; error?: string }).customErrorName ?? (err as { error?: string }).error ?? String(err)
  }
}

function joseToken(
  opts: {
    typ?: string
    scope?: string
    iss?: string
    aud?: string | string[]
    exp?: number
    omit?: string
    nbf?: number
    key?: Uint8Array
  } = {},
) {
  const now = Math.floor(Date.now() / 1000)
  const payload: Record<string, unknown> = { scope: opts.scope ?? 'com.atproto.access' }
  if (opts.nbf !== undefined) payload.nbf = opts.nbf
  let jwt = new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: opts.typ ?? 'at+jwt' })
  if (opts.omit !== 'iss') jwt = jwt.setIssuer(opts.iss ?? SERVICE)
  if (opts.omit !== 'aud') jwt = jwt.setAudience(opts.aud ?? SERVICE)
  if (opts.omit !== 'sub') jwt = jwt.setSubject(DID)
  if (opts.omit !== 'iat') jwt = jwt.setIssuedAt(now)
  if (opts.omit !== 'exp') jwt = jwt.setExpirationTime(opts.exp ?? now + 60)
  if (opts.omit !== 'jti') jwt = jwt.setJti('j1')
  return jwt.sign(opts.key ?? secret)
}

describe('session token signing and checks', () => {
  it('mints a pair that jose verifies, with the session claims', async () => {
    const pair = await mintPair(keys, DID)
    const access = await jwtVerify(pair.accessJwt, secret, { typ: 'at+jwt', issuer: SERVICE, audience: SERVICE })
    expect(access.protectedHeader).toEqual({ alg: 'HS256', typ: 'at+jwt' })
    expect(access.payload).toMatchObject({ scope: 'com.atproto.access', sub: DID })
    expect(access.payload.exp! - access.payload.iat!).toBe(2 * 60 * 60)
    const refresh = await jwtVerify(pair.refreshJwt, secret, { typ: 'refresh+jwt', issuer: SERVICE, audience: SERVICE })
    expect(refresh.payload).toMatchObject({ scope: 'com.atproto.refresh', sub: DID, jti: pair.refreshJti })
    expect(refresh.payload.exp! - refresh.payload.iat!).toBe(60 * 24 * 60 * 60)
  })

  it('accepts tokens jose signs, and its own, for the right kind only', async () => {
    const pair = await mintPair(keys, DID)
    expect((await verifySessionToken(keys, pair.accessJwt, 'access')).sub).toBe(DID)
    expect((await verifySessionToken(keys, pair.refreshJwt, 'refresh')).jti).toBe(pair.refreshJti)
    expect((await verifySessionToken(keys, await joseToken(), 'access')).sub).toBe(DID)
    expect(await errorName(verifySessionToken(keys, pair.accessJwt, 'refresh'))).toBe('InvalidToken')
    expect(await errorName(verifySessionToken(keys, pair.refreshJwt, 'access'))).toBe('InvalidToken')
  })

  it('refuses forged, malformed and mis-addressed tokens as InvalidToken', async () => {
    const good = await joseToken()
    const [h, p, s] = good.split('.')
    const flipped = s.slice(0, -2) + (s.at(-2) === 'A' ? 'B' : 'A') + s.at(-1)
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${p}.`
    const cases = [
      `${h}.${p}.${flipped}`,
      `${h}.${p}`,
      `${h}.${p}.${s}.x`,
      'not a token',
      none,
      await joseToken({ key: new TextEncoder().encode('another-secret-0123456789abcdef') }),
      await joseToken({ typ: 'JWT' }),
      await joseToken({ iss: 'did:web:elsewhere' }),
      await joseToken({ aud: 'did:web:elsewhere' }),
      await joseToken({ scope: 'com.atproto.appPass' }),
      await joseToken({ omit: 'jti' }),
      await joseToken({ omit: 'iat' }),
      await joseToken({ omit: 'exp' }),
      await joseToken({ nbf: Math.floor(Date.now() / 1000) + 3600 }),
    ]
    for (const token of cases) expect(await errorName(verifySessionToken(keys, token, 'access'))).toBe('InvalidToken')
    // a payload that differs by one byte does not carry the old signature
    const tampered = `${h}.${Buffer.from(JSON.stringify({ sub: 'did:plc:someoneelse' })).toString('base64url')}.${s}`
    expect(await errorName(verifySessionToken(keys, tampered, 'access'))).toBe('InvalidToken')
  })

  it('says ExpiredToken only for a genuine token past its expiry', async () => {
    const past = Math.floor(Date.now() / 1000) - 10
    expect(await errorName(verifySessionToken(keys, await joseToken({ exp: past }), 'access'))).toBe('ExpiredToken')
    const forgedExpired = await joseToken({ exp: past, key: new TextEncoder().encode('another-secret-0123456789abcdef') })
    expect(await errorName(verifySessionToken(keys, forgedExpired, 'access'))).toBe('InvalidToken')
    expect(await errorName(verifySessionToken(keys, await joseToken({ exp: past, iss: 'did:web:x' }), 'access'))).toBe('InvalidToken')
  })

  it('still expires an access token it has accepted before, and never takes it for a refresh token', async () => {
    const { accessJwt } = await mintPair(keys, DID)
    expect((await verifySessionToken(keys, accessJwt, 'access')).sub).toBe(DID)
    expect(await errorName(verifySessionToken(keys, accessJwt, 'refresh'))).toBe('InvalidToken')
    // another server's secret: a token this one accepted means nothing there
    expect(await errorName(verifySessionToken(tokenKeys('another-secret-0123456789abcdef', SERVICE), accessJwt, 'access'))).toBe(
      'InvalidToken',
    )
    vi.useFakeTimers({ now: Date.now() + (2 * 60 * 60 + 5) * 1000 })
    try {
      expect(await errorName(verifySessionToken(keys, accessJwt, 'access'))).toBe('ExpiredToken')
    } finally {
      vi.useRealTimers()
    }
  })

  it('accepts an audience list naming this service and an application/ typ, as jose does', async () => {
    expect((await verifySessionToken(keys, await joseToken({ aud: ['did:web:other', SERVICE] }), 'access')).sub).toBe(DID)
    expect((await verifySessionToken(keys, await joseToken({ typ: 'application/AT+JWT' }), 'access')).sub).toBe(DID)
  })
})
