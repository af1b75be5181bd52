// Delegation tokens and space credentials: what is minted, and the 401 each bad token gets.
import { P256Keypair, Secp256k1Keypair } from '@atproto/crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  CREDENTIAL_TYP,
  DELEGATION_TYP,
  type KeyResolver,
  credentialAth,
  mintDelegationToken,
  mintSpaceCredential,
  peekTokenType,
  requireCredentialFor,
  requireDelegationFor,
  verifyDelegationToken,
  verifySpaceCredential,
} from '../src/space/tokens.js'
import { ALICE, AUTHORITY, SPACE, answerOf } from './space-helpers.js'

const T0 = Date.UTC(2026, 0, 1)
const at = (ms: number) => () => ms
const JKT = 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs'
let user: Secp256k1Keypair
let authority: Secp256k1Keypair

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
const part = (token: string, i: number) => JSON.parse(Buffer.from(token.split('.')[i], 'base64url').toString())
// a token with the given header and payload, signed by `key`
async function forge(header: object, payload: object, key: { sign(b: Uint8Array): Promise<Uint8Array> }) {
  const signed = `${b64(header)}.${b64(payload)}`
  return `${signed}.${Buffer.from(await key.sign(Buffer.from(signed))).toString('base64url')}`
}

const keys =
  (table: Record<string, string>): KeyResolver =>
  async (iss, kid) =>
    kid === '#atproto' ? table[iss] : undefined

function replayStore() {
  const seen = new Set<string>()
  return async (iss: string, jti: string) => {
    if (seen.has(`${iss} ${jti}`)) return false
    seen.add(`${iss} ${jti}`)
    return true
  }
}

beforeAll(async () => {
  user = await Secp256k1Keypair.create()
  authority = await Secp256k1Keypair.create()
})

describe('delegation tokens', () => {
  const deps = (now = T0) => ({ keyFor: keys({ [ALICE]: user.did() }), now: at(now), claimOnce: replayStore() })

  it('carry the user, the space and the space host audience for 60 s', async () => {
    const token = await mintDelegationToken({ user: ALICE, space: SPACE, signer: user, now: at(T0) })
    expect(part(token, 0)).toEqual({ typ: DELEGATION_TYP, alg: 'ES256K', kid: '#atproto' })
    const payload = part(token, 1)
    expect(payload).toMatchObject({ iss: ALICE, sub: SPACE, aud: `${AUTHORITY}#atproto_space_host`, iat: T0 / 1000, exp: T0 / 1000 + 60 })
    expect(payload.jti).toMatch(/^[0-9a-f]{32}$/)
    expect(payload.lxm).toBeUndefined()
    expect(payload.cnf).toBeUndefined()
    const claims = await verifyDelegationToken(token, deps())
    expect(claims).toMatchObject({ iss: ALICE, space: { uri: SPACE, authority: AUTHORITY } })
    expect(peekTokenType(token)).toBe(DELEGATION_TYP)
  })

  it('are single use', async () => {
    const d = deps()
    const token = await mintDelegationToken({ user: ALICE, space: SPACE, signer: user, now: at(T0) })
    await verifyDelegationToken(token, d)
    expect(await answerOf(() => verifyDelegationToken(token, d))).toEqual({ status: 401, error: 'JwtReplayed' })
  })

  it('expire after 60 s plus 5 s of skew', async () => {
    const token = await mintDelegationToken({ user: ALICE, space: SPACE, signer: user, now: at(T0) })
    await verifyDelegationToken(token, deps(T0 + 65_000))
    expect(await answerOf(() => verifyDelegationToken(token, deps(T0 + 66_000)))).toEqual({ status: 401, error: 'JwtExpired' })
  })

  it('refuse each malformed or misaddressed token with its name', async () => {
    const good = { iss: ALICE, sub: SPACE, aud: `${AUTHORITY}#atproto_space_host`, iat: T0 / 1000, exp: T0 / 1000 + 60, jti: 'j1' }
    const header = { typ: DELEGATION_TYP, alg: 'ES256K', kid: '#atproto' }
    const cases: [string, string | undefined, string][] = [
      ['nothing', undefined, 'MissingJwt'],
      ['garbage', 'not.a.jwt!', 'BadJwt'],
      ['two parts', 'abc.def', 'BadJwt'],
      ['a credential', await mintSpaceCredential({ space: SPACE, jkt: JKT, signer: authority, now: at(T0) }), 'BadJwtType'],
      ['an HS256 token', await forge({ ...header, alg: 'HS256' }, good, user), 'BadJwt'],
      ['another kid', await forge({ ...header, kid: '#other' }, good, user), 'BadJwt'],
      ['no kid', await forge({ typ: DELEGATION_TYP, alg: 'ES256K' }, good, user), 'BadJwt'],
      ['a handle as iss', await forge(header, { ...good, iss: 'alice.example.com' }, user), 'BadJwtIss'],
      ['no sub', await forge(header, { ...good, sub: undefined }, user), 'BadJwt'],
      ['a sub that is no space', await forge(header, { ...good, sub: `at://${ALICE}/app.bsky.feed.post/x` }, user), 'BadJwt'],
      ['no exp', await forge(header, { ...good, exp: undefined }, user), 'BadJwt'],
      ['a day-long lifetime', await forge(header, { ...good, exp: good.iat + 86400 }, user), 'BadJwt'],
      ['the bare authority as aud', await forge(header, { ...good, aud: AUTHORITY }, user), 'BadJwtAudience'],
      ['another authority as aud', await forge(header, { ...good, aud: `${ALICE}#atproto_space_host` }, user), 'BadJwtAudience'],
      ['no jti', await forge(header, { ...good, jti: '' }, user), 'BadJwt'],
      ['another key', await forge(header, good, authority), 'BadJwtSignature'],
    ]
    for (const [what, token, error] of cases) {
      expect({ what, ...(await answerOf(() => verifyDelegationToken(token, deps()))) }).toEqual({ what, status: 401, error })
    }
  })

  it('must name the requested space, else InvalidDelegationToken', async () => {
    const claims = await verifyDelegationToken(await mintDelegationToken({ user: ALICE, space: SPACE, signer: user, now: at(T0) }), deps())
    requireDelegationFor(claims, SPACE)
    expect(await answerOf(() => requireDelegationFor(claims, SPACE.replace('forum', 'chat')))).toEqual({
      status: 400,
      error: 'InvalidDelegationToken',
    })
  })
})

describe('space credentials', () => {
  const deps = (now = T0, keyFor = keys({ [AUTHORITY]: authority.did() })) => ({ keyFor, now: at(now) })

  it('are issued by the authority, bound to the DPoP key, with no audience, for 2 hours', async () => {
    const token = await mintSpaceCredential({ space: SPACE, jkt: JKT, signer: authority, now: at(T0) })
    expect(part(token, 0)).toEqual({ typ: CREDENTIAL_TYP, alg: 'ES256K', kid: '#atproto' })
    const payload = part(token, 1)
    expect(payload).toMatchObject({ iss: AUTHORITY, sub: SPACE, cnf: { jkt: JKT }, iat: T0 / 1000, exp: T0 / 1000 + 7200 })
    expect(payload.aud).toBeUndefined()
    expect(await verifySpaceCredential(token, deps())).toMatchObject({ iss: AUTHORITY, jkt: JKT, space: { uri: SPACE } })
    // reusable: a second use is as good as the first
    await verifySpaceCredential(token, deps(T0 + 3600_000))
    expect(await answerOf(() => verifySpaceCredential(token, deps(T0 + 7206_000)))).toEqual({ status: 401, error: 'JwtExpired' })
  })

  it('verify with P-256 authority keys too', async () => {
    const p256 = await P256Keypair.create()
    const token = await mintSpaceCredential({ space: SPACE, jkt: JKT, signer: p256, now: at(T0) })
    expect(part(token, 0).alg).toBe('ES256')
    await verifySpaceCredential(token, deps(T0, keys({ [AUTHORITY]: p256.did() })))
  })

  it('are checked against the #atproto_space key when the authority names one', async () => {
    const spaceKey = await Secp256k1Keypair.create()
    const header = { typ: CREDENTIAL_TYP, alg: 'ES256K', kid: '#atproto_space' }
    const payload = { iss: AUTHORITY, sub: SPACE, cnf: { jkt: JKT }, iat: T0 / 1000, exp: T0 / 1000 + 7200, jti: 'c1' }
    const keyFor: KeyResolver = async (_iss, kid) => (kid === '#atproto_space' ? spaceKey.did() : authority.did())
    await verifySpaceCredential(await forge(header, payload, spaceKey), deps(T0, keyFor))
    expect(await answerOf(async () => verifySpaceCredential(await forge(header, payload, authority), deps(T0, keyFor)))).toEqual({
      status: 401,
      error: 'BadJwtSignature',
    })
  })

  it('resolve the issuer afresh once when the cached key does not verify (a rotated key)', async () => {
    const rotated = await Secp256k1Keypair.create()
    const token = await mintSpaceCredential({ space: SPACE, jkt: JKT, signer: rotated, now: at(T0) })
    const asked: boolean[] = []
    const keyFor: KeyResolver = async (_iss, _kid, fresh) => (asked.push(fresh), fresh ? rotated.did() : authority.did())
    await verifySpaceCredential(token, deps(T0, keyFor))
    expect(asked).toEqual([false, true])
  })

  it('refuse each bad credential with its name', async () => {
    const header = { typ: CREDENTIAL_TYP, alg: 'ES256K', kid: '#atproto' }
    const good = { iss: AUTHORITY, sub: SPACE, cnf: { jkt: JKT }, iat: T0 / 1000, exp: T0 / 1000 + 7200, jti: 'c1' }
    const cases: [string, string | undefined, string][] = [
      ['nothing', '', 'MissingJwt'],
      ['a delegation token', await mintDelegationToken({ user: ALICE, space: SPACE, signer: user, now: at(T0) }), 'BadJwtType'],
      ['no iss', await forge(header, { ...good, iss: undefined }, authority), 'BadJwtIss'],
      ['an expired one', await forge(header, { ...good, exp: T0 / 1000 - 10 }, authority), 'JwtExpired'],
      ['a sub that is no space', await forge(header, { ...good, sub: 'at://x' }, authority), 'BadJwt'],
      ['another kid', await forge({ ...header, kid: '#atproto_pds' }, good, authority), 'BadJwt'],
      ['a forged signature', await forge(header, good, user), 'BadJwtSignature'],
      ['a member as issuer', await forge(header, { ...good, iss: ALICE }, user), 'BadJwtIss'],
      ['no cnf', await forge(header, { ...good, cnf: undefined }, authority), 'BadJwt'],
      ['an empty jkt', await forge(header, { ...good, cnf: { jkt: '' } }, authority), 'BadJwt'],
    ]
    const keyFor = keys({ [AUTHORITY]: authority.did(), [ALICE]: user.did() })
    for (const [what, token, error] of cases) {
      expect({ what, ...(await answerOf(() => verifySpaceCredential(token, deps(T0, keyFor)))) }).toEqual({ what, status: 401, error })
    }
  })

  it('must be for the request’s space byte for byte, else InvalidCredential', async () => {
    const claims = await verifySpaceCredential(
      await mintSpaceCredential({ space: SPACE, jkt: JKT, signer: authority, now: at(T0) }),
      deps(),
    )
    requireCredentialFor(claims, SPACE)
    expect(await answerOf(() => requireCredentialFor(claims, SPACE.toUpperCase()))).toEqual({ status: 400, error: 'InvalidCredential' })
  })

  it('hash to the ath a DPoP proof carries', () => {
    // base64url(SHA-256("abc"))
    expect(credentialAth('abc')).toBe('ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0')
  })

  it('are told apart by typ without verifying', () => {
    expect(peekTokenType('garbage')).toBeUndefined()
    expect(peekTokenType(`${b64({ typ: 'at+jwt' })}.x.y`)).toBe('at+jwt')
  })
})
