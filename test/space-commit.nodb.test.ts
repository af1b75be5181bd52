// The deniable signed commit: its context bytes, MAC, signature, and both wire forms.
import { createHmac } from 'node:crypto'
import { P256Keypair, Secp256k1Keypair } from '@atproto/crypto'
import { expand } from '@noble/hashes/hkdf'
import { sha256 } from '@noble/hashes/sha256'
import { describe, expect, it } from 'vitest'
import {
  type SignedCommit,
  CommitError,
  commitContext,
  commitFromCbor,
  commitFromJson,
  commitMac,
  commitToCbor,
  commitToJson,
  signCommit,
  verifyCommit,
} from '../src/space/commit.js'
import { LtHash } from '../src/space/lthash.js'
import { ALICE, SPACE, hex } from './space-helpers.js'

const REV = '3kd2bxmiyd42b'
const hash = new LtHash().add('one').add('two').digest()

async function reasonOf(p: Promise<unknown>) {
  try {
    await p
  } catch (err) {
    if (err instanceof CommitError) return err.reason
    throw err
  }
  return 'verified'
}

describe('commit context', () => {
  it('is the tag then each field behind a big-endian u16 length', () => {
    const ikm = new Uint8Array(32).fill(0x42)
    const ctx = commitContext('at://did:plc:a/space/a.b.c/s', 'did:plc:a', REV, ikm)
    const field = (s: string | Uint8Array) => {
      const b = typeof s === 'string' ? Buffer.from(s) : Buffer.from(s)
      return Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b])
    }
    const want = Buffer.concat([
      Buffer.from('atproto-space-v1'),
      field('at://did:plc:a/space/a.b.c/s'),
      field('did:plc:a'),
      field(REV),
      field(ikm),
    ])
    expect(hex(ctx)).toBe(want.toString('hex'))
    expect(ctx[16]).toBe(0) // high byte of the first length comes first
    expect(ctx[17]).toBe('at://did:plc:a/space/a.b.c/s'.length)
    expect(ctx.length).toBe(16 + 2 + 28 + 2 + 9 + 2 + 13 + 2 + 32)
  })

  it('changes with every field', () => {
    const ikm = new Uint8Array(32)
    const base = hex(commitContext(SPACE, ALICE, REV, ikm))
    expect(hex(commitContext(SPACE + 'x', ALICE, REV, ikm))).not.toBe(base)
    expect(hex(commitContext(SPACE, ALICE + 'x', REV, ikm))).not.toBe(base)
    expect(hex(commitContext(SPACE, ALICE, '3kd2bxmiyd42c', ikm))).not.toBe(base)
    expect(hex(commitContext(SPACE, ALICE, REV, new Uint8Array(32).fill(1)))).not.toBe(base)
  })

  it('keys the MAC with HKDF-Expand (no extract) of ikm over ctx', () => {
    const ikm = new Uint8Array(32).fill(7)
    const ctx = commitContext(SPACE, ALICE, REV, ikm)
    const key = expand(sha256, ikm, ctx, 32)
    const want = createHmac('sha256', key).update(hash).digest('hex')
    expect(hex(commitMac(ikm, ctx, hash))).toBe(want)
  })
})

describe('signed commits', () => {
  it('verify with the author key, for secp256k1 and P-256 authors', async () => {
    for (const key of [await Secp256k1Keypair.create(), await P256Keypair.create()]) {
      const c = await signCommit({ space: SPACE, author: ALICE, rev: REV, hash, sign: (b) => key.sign(b) })
      expect(c.ver).toBe(1)
      expect(c.ikm.length).toBe(32)
      await verifyCommit(c, { space: SPACE, author: ALICE, didKey: key.did(), rev: REV, hash })
    }
  })

  it('signs the context, not the hash', async () => {
    const key = await Secp256k1Keypair.create()
    const ikm = new Uint8Array(32).fill(9)
    const signed: Uint8Array[] = []
    await signCommit({ space: SPACE, author: ALICE, rev: REV, hash, ikm, sign: async (b) => (signed.push(b), key.sign(b)) })
    expect(hex(signed[0])).toBe(hex(commitContext(SPACE, ALICE, REV, ikm)))
  })

  it('gives every hand-out fresh ikm, sig and mac over the same hash', async () => {
    const key = await Secp256k1Keypair.create()
    const sign = (b: Uint8Array) => key.sign(b)
    const a = await signCommit({ space: SPACE, author: ALICE, rev: REV, hash, sign })
    const b = await signCommit({ space: SPACE, author: ALICE, rev: REV, hash, sign })
    expect(hex(a.hash)).toBe(hex(b.hash))
    expect(hex(a.ikm)).not.toBe(hex(b.ikm))
    expect(hex(a.mac)).not.toBe(hex(b.mac))
    expect(hex(a.sig)).not.toBe(hex(b.sig))
  })

  it('names the check a tampered or misplaced commit fails', async () => {
    const key = await Secp256k1Keypair.create()
    const other = await Secp256k1Keypair.create()
    const c = await signCommit({ space: SPACE, author: ALICE, rev: REV, hash, sign: (b) => key.sign(b) })
    const want = { space: SPACE, author: ALICE, didKey: key.did() }
    const flip = (b: Uint8Array) => Uint8Array.from(b, (x, i) => (i === 0 ? x ^ 1 : x))
    const cases: [SignedCommit, typeof want & { rev?: string; hash?: Uint8Array }, string][] = [
      [c, want, 'verified'],
      [{ ...c, ver: 2 }, want, 'version'],
      [c, { ...want, rev: '3kd2bxmiyd42c' }, 'rev'],
      [{ ...c, hash: flip(c.hash) }, want, 'mac'],
      [{ ...c, mac: flip(c.mac) }, want, 'mac'],
      [{ ...c, ikm: flip(c.ikm) }, want, 'mac'],
      [{ ...c, rev: '3kd2bxmiyd42c' }, want, 'mac'],
      [c, { ...want, space: SPACE.replace('forum', 'chat') }, 'mac'],
      [c, { ...want, didKey: other.did() }, 'signature'],
      [c, { ...want, didKey: 'did:key:nonsense' }, 'signature'],
      [{ ...c, sig: flip(c.sig) }, want, 'signature'],
      [c, { ...want, hash: new LtHash().digest() }, 'hash'],
    ]
    for (const [commit, w, reason] of cases) expect(await reasonOf(verifyCommit(commit, w))).toBe(reason)
  })

  it('round-trips through JSON with $bytes and through DAG-CBOR with byte strings', async () => {
    const key = await Secp256k1Keypair.create()
    const c = await signCommit({ space: SPACE, author: ALICE, rev: REV, hash, sign: (b) => key.sign(b) })
    const json = JSON.parse(JSON.stringify(commitToJson(c)))
    expect(json.ver).toBe(1)
    expect(json.rev).toBe(REV)
    expect(json.hash.$bytes).toBe(Buffer.from(hash).toString('base64').replace(/=+$/, ''))
    expect(json.hash.$bytes).not.toMatch(/=/)
    const back = commitFromJson(json)
    await verifyCommit(back, { space: SPACE, author: ALICE, didKey: key.did(), hash })
    const cbor = commitToCbor(c)
    const fromCbor = commitFromCbor(cbor)
    expect(hex(commitToCbor(fromCbor))).toBe(hex(cbor))
    await verifyCommit(fromCbor, { space: SPACE, author: ALICE, didKey: key.did(), hash })
  })

  it('refuses malformed wire forms as malformed', async () => {
    const key = await Secp256k1Keypair.create()
    const json = commitToJson(await signCommit({ space: SPACE, author: ALICE, rev: REV, hash, sign: (b) => key.sign(b) }))
    const bad = [
      null,
      [],
      { ...json, hash: 'AAAA' },
      { ...json, hash: { $bytes: '!!' } },
      { ...json, hash: { $bytes: 'AAAA' } },
      { ...json, ikm: { $bytes: 'AAAA' } },
      { ...json, rev: 'not-a-tid' },
      { ...json, ver: '1' },
      { ...json, mac: undefined },
    ]
    for (const b of bad) expect(await reasonOf(Promise.resolve().then(() => commitFromJson(b)))).toBe('malformed')
    expect(await reasonOf(Promise.resolve().then(() => commitFromCbor(Uint8Array.of(0xff, 0x00))))).toBe('malformed')
    expect(await reasonOf(Promise.resolve().then(() => commitFromCbor(Uint8Array.of(0x01))))).toBe('malformed')
  })
})
