// DPoP proof checks (RFC 9449) on the ES256 path (node:crypto, keys imported once per client).
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto'
import { calculateJwkThumbprint } from 'jose'
import { describe, expect, it } from 'vitest'
import { verifyDpopProof } from '../src/jwt/dpop.js'
import { MemoryReplayStore } from '../src/jwt/replay.js'

const URL = 'https://pds.example/xrpc/com.atproto.server.getSession'
const b64u = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')

function es256Key(namedCurve = 'P-256') {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve })
  const jwk = publicKey.export({ format: 'jwk' })
  const proof = (claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}) => {
    const input = `${b64u({ typ: 'dpop+jwt', alg: 'ES256', jwk, ...header })}.${b64u({
      jti: randomBytes(12).toString('hex'),
      htm: 'GET',
      htu: URL,
      iat: Math.floor(Date.now() / 1000),
      ...claims,
    })}`
    return `${input}.${sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`
  }
  return { jwk, proof }
}

const check = (proof: string) => verifyDpopProof({ proof, method: 'GET', url: URL }, new MemoryReplayStore())

describe('ES256 DPoP proofs', () => {
  it('accepts a proof and answers the RFC 7638 thumbprint of its key, the same for every proof of that key', async () => {
    const k = es256Key()
    const want = await calculateJwkThumbprint(k.jwk, 'sha256')
    expect(await check(k.proof())).toEqual({ jkt: want })
    expect(await check(k.proof())).toEqual({ jkt: want })
  })

  it('refuses a tampered payload, a signature by another key, and a malformed signature', async () => {
    const k = es256Key()
    const other = es256Key()
    const [h, , s] = k.proof().split('.')
    await expect(check(`${h}.${b64u({ jti: 'x', htm: 'GET', htu: URL, iat: Math.floor(Date.now() / 1000) })}.${s}`)).rejects.toThrow(
      /signature/,
    )
    const [, p2, s2] = other.proof().split('.')
    await expect(check(`${h}.${p2}.${s2}`)).rejects.toThrow(/signature/)
    await expect(check(`${h}.${p2}.${s2.slice(0, -2)}`)).rejects.toThrow(/signature/)
  })

  it('refuses an expired proof, one not yet valid, a crit header and a key on another curve', async () => {
    const k = es256Key()
    const now = Math.floor(Date.now() / 1000)
    await expect(check(k.proof({ exp: now - 1 }))).rejects.toThrow()
    await expect(check(k.proof({ nbf: now + 30 }))).rejects.toThrow()
    await expect(check(k.proof({}, { crit: ['exp'] }))).rejects.toThrow()
    await expect(check(es256Key('P-384').proof())).rejects.toThrow()
  })
})
