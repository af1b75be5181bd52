// Signing through libsecp256k1 (src/identity/k256.ts) against @atproto/crypto, which every
// relay, AppView and PDS verifies with: for any key and message the signature is the compact,
// low-S one Secp256k1Keypair makes, byte for byte, and verifies in the strict mode.
import { Secp256k1Keypair, verifySignature } from '@atproto/crypto'
import { encode } from '@atproto/lex-cbor'
import { verifyCommitSig } from '@atproto/repo'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { newSigningKey } from '../src/account/signing-keys.js'
import { importK256, k256Backend, k256Keypair, newK256Scalar } from '../src/identity/k256.js'
import { signEs256k, verifyEs256k } from '../src/jwt/es256k.js'
import { cidForDagCbor } from '../src/encoding/node-cbor.js'

const ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
const hex = (n: bigint) => n.toString(16).padStart(64, '0')
const scalar = fc.bigInt({ min: 1n, max: ORDER - 1n }).map(hex)
const message = fc.uint8Array({ maxLength: 600 })
const sValue = (sig: Uint8Array) => BigInt(`0x${Buffer.from(sig.subarray(32)).toString('hex')}`)

describe('k256 signing', () => {
  it('runs on libsecp256k1 here (the package ships a linux-x64 addon)', () => {
    expect(k256Backend()).toBe('libsecp256k1')
  })

  it('signs any message with any key exactly as @atproto/crypto does, low-S and verifiable strictly', async () => {
    await fc.assert(
      fc.asyncProperty(scalar, message, async (key, msg) => {
        const ours = await importK256(key)
        const theirs = await Secp256k1Keypair.import(key)
        expect(ours.did()).toBe(theirs.did())
        expect(ours.jwtAlg).toBe('ES256K')
        const sig = await ours.sign(msg)
        expect(sig).toHaveLength(64)
        expect(sValue(sig) <= ORDER / 2n).toBe(true)
        expect(Buffer.from(sig).equals(Buffer.from(await theirs.sign(msg)))).toBe(true)
        expect(await verifySignature(ours.did(), msg, sig)).toBe(true)
      }),
      { numRuns: 300, seed: 256 },
    )
  })

  it('signs with the smallest and largest keys', async () => {
    for (const key of [hex(1n), hex(2n), hex(ORDER - 1n), hex(ORDER / 2n)]) {
      const msg = new TextEncoder().encode(`edge ${key}`)
      const sig = await (await importK256(key)).sign(msg)
      expect(Buffer.from(sig).equals(Buffer.from(await (await Secp256k1Keypair.import(key)).sign(msg)))).toBe(true)
    }
  })

  it('accepts upper-case hex and answers the same keypair from the cache', async () => {
    const key = newK256Scalar()
    const lower = await k256Keypair(key)
    expect(await k256Keypair(key.toUpperCase())).toBe(lower)
    expect(lower.did()).toBe((await Secp256k1Keypair.import(key)).did())
  })

  it('refuses what is not a private key', async () => {
    for (const key of [hex(0n), hex(ORDER), 'ff'.repeat(32), 'abc', '', 'zz'.repeat(32), `${hex(1n)}00`]) {
      await expect(importK256(key)).rejects.toThrow()
      await expect(k256Keypair(key)).rejects.toThrow()
    }
  })

  it('a signature does not verify for another message or another key', async () => {
    const a = await importK256(newK256Scalar())
    const b = await importK256(newK256Scalar())
    const msg = new TextEncoder().encode('hello')
    const sig = await a.sign(msg)
    expect(await verifySignature(a.did(), new TextEncoder().encode('hellO'), sig)).toBe(false)
    expect(await verifySignature(b.did(), msg, sig)).toBe(false)
  })

  it('new signing keys are stored in a form that imports back to the same did:key', async () => {
    for (let i = 0; i < 20; i++) {
      const { keypair, row } = await newSigningKey()
      expect(row.private_key_hex).toMatch(/^[0-9a-f]{64}$/)
      expect(`did:key:${row.public_key_multibase}`).toBe(keypair.did())
      expect((await Secp256k1Keypair.import(row.private_key_hex)).did()).toBe(keypair.did())
    }
  })

  it('signs repository commits that @atproto/repo verifies', async () => {
    const keypair = await importK256(newK256Scalar())
    const data = cidForDagCbor(encode({ e: [], l: null }))
    const unsigned = { did: 'did:plc:abcdefghijklmnopqrstuvwx', version: 3 as const, rev: '3kznmn7xqxl22', prev: null, data }
    const commit = { ...unsigned, sig: await keypair.sign(encode(unsigned)) }
    expect(await verifyCommitSig(commit, keypair.did())).toBe(true)
    expect(await verifyCommitSig({ ...commit, rev: '3kznmn7xqxl23' }, keypair.did())).toBe(false)
  })

  it('signs ES256K tokens that the strict check accepts', async () => {
    const keypair = await k256Keypair(newK256Scalar())
    const jwt = await signEs256k(keypair, { typ: 'JWT' }, { iss: 'did:plc:abc', aud: 'did:web:example.com', exp: 1 })
    expect(await verifyEs256k(jwt, keypair.did())).toBe(true)
    const other = await k256Keypair(newK256Scalar())
    expect(await verifyEs256k(jwt, other.did())).toBe(false)
  })
})
