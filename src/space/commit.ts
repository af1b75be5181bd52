// The signed commit of a permissioned repo, deniable by construction: the author signs only a
// context (space, author, rev and fresh random `ikm`), never the digest, and the digest is bound
// to that context by an HMAC keyed from `ikm`. A reader can check both, but since anyone holding
// the commit can compute a MAC over any digest, a leaked commit proves nothing of the contents.
// The ikm is drawn anew each time a commit is handed out; only (state, rev) is stored.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import * as dagCbor from '@ipld/dag-cbor'
import { verifySignature } from '@atproto/crypto'
import { isValidTid } from '@atproto/syntax'

export const COMMIT_VERSION = 1
const TAG = 'atproto-space-v1'
const IKM_BYTES = 32
const utf8 = new TextEncoder()

export type SignedCommit = { ver: number; hash: Uint8Array; ikm: Uint8Array; sig: Uint8Array; mac: Uint8Array; rev: string }
/** the commit as JSON carries it: bytes as `{"$bytes": base64 without padding}` */
export type SignedCommitJson = {
  ver: number
  hash: { $bytes: string }
  ikm: { $bytes: string }
  sig: { $bytes: string }
  mac: { $bytes: string }
  rev: string
}

export type CommitFailure = 'malformed' | 'version' | 'rev' | 'mac' | 'signature' | 'hash'

export class CommitError extends Error {
  constructor(
    readonly reason: CommitFailure,
    message: string,
  ) {
    super(message)
  }
}

/** `ctx`: the tag, then space URI, author DID, rev and ikm, each behind a big-endian u16 length */
export function commitContext(space: string, author: string, rev: string, ikm: Uint8Array): Uint8Array {
  const fields = [utf8.encode(space), utf8.encode(author), utf8.encode(rev), ikm]
  const tag = utf8.encode(TAG)
  const out = new Uint8Array(tag.length + fields.reduce((n, f) => n + 2 + f.length, 0))
  out.set(tag)
  let at = tag.length
  for (const f of fields) {
    if (f.length > 0xffff) throw new RangeError('a commit context field is longer than 65535 bytes')
    out[at] = f.length >>> 8
    out[at + 1] = f.length & 0xff
    out.set(f, at + 2)
    at += 2 + f.length
  }
  return out
}

/** HMAC-SHA256 over `hash`, keyed by HKDF-Expand(PRK = ikm, info = ctx, L = 32) (no extract step) */
export function commitMac(ikm: Uint8Array, ctx: Uint8Array, hash: Uint8Array): Uint8Array {
  const key = createHmac('sha256', ikm).update(ctx).update(Uint8Array.of(1)).digest()
  return new Uint8Array(createHmac('sha256', key).update(hash).digest())
}

export type CommitInput = {
  space: string
  author: string
  rev: string
  /** SHA-256 of the LtHash state */
  hash: Uint8Array
  /** signs with the author's atproto signing key (the keypair stays with the caller) */
  sign: (bytes: Uint8Array) => Promise<Uint8Array>
  /** only for reproducible tests: a commit handed out always gets fresh random bytes */
  ikm?: Uint8Array
}

/** a commit for handing out, with fresh `ikm` */
export async function signCommit(input: CommitInput): Promise<SignedCommit> {
  const ikm = input.ikm ?? new Uint8Array(randomBytes(IKM_BYTES))
  if (ikm.length !== IKM_BYTES) throw new RangeError(`ikm must be ${IKM_BYTES} bytes`)
  if (input.hash.length !== 32) throw new RangeError('hash must be 32 bytes')
  const ctx = commitContext(input.space, input.author, input.rev, ikm)
  const sig = await input.sign(ctx)
  return { ver: COMMIT_VERSION, hash: input.hash, ikm, sig, mac: commitMac(ikm, ctx, input.hash), rev: input.rev }
}

export type VerifyCommitInput = {
  space: string
  author: string
  /** the author's current atproto signing key as a did:key */
  didKey: string
  /** the rev the reader expects, when it knows one */
  rev?: string
  /** the digest the reader computed itself (LtHash.digest() over the records it received) */
  hash?: Uint8Array
}

/** checks version, rev, MAC, signature and, when given, the reader's own digest; CommitError says which failed */
export async function verifyCommit(commit: SignedCommit, want: VerifyCommitInput): Promise<void> {
  if (commit.ver !== COMMIT_VERSION) throw new CommitError('version', `unsupported commit version ${commit.ver}`)
  if (want.rev !== undefined && commit.rev !== want.rev) throw new CommitError('rev', `commit rev ${commit.rev}, expected ${want.rev}`)
  const ctx = commitContext(want.space, want.author, commit.rev, commit.ikm)
  if (!sameBytes(commitMac(commit.ikm, ctx, commit.hash), commit.mac)) throw new CommitError('mac', 'commit MAC does not match its hash')
  let signed = false
  try {
    signed = await verifySignature(want.didKey, ctx, commit.sig)
  } catch {
    // an unusable key verifies nothing
  }
  if (!signed) throw new CommitError('signature', 'commit signature does not verify with the author key')
  if (want.hash !== undefined && !sameBytes(want.hash, commit.hash))
    throw new CommitError('hash', 'commit hash differs from the digest of the records')
}

export function commitToJson(c: SignedCommit): SignedCommitJson {
  const b = (x: Uint8Array) => ({ $bytes: Buffer.from(x).toString('base64').replace(/=+$/, '') })
  return { ver: c.ver, hash: b(c.hash), ikm: b(c.ikm), sig: b(c.sig), mac: b(c.mac), rev: c.rev }
}

/** a commit read from JSON; CommitError('malformed') when it is not one */
export function commitFromJson(json: unknown): SignedCommit {
  const o = asObject(json)
  const bytes = (k: string) => {
    const v = o[k]
    const s = v && typeof v === 'object' && Object.keys(v).length === 1 ? (v as { $bytes?: unknown }).$bytes : undefined
    if (typeof s !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(s))
      throw new CommitError('malformed', `commit ${k} must be {"$bytes": base64}`)
    return new Uint8Array(Buffer.from(s, 'base64'))
  }
  return checked({ ver: o.ver, hash: bytes('hash'), ikm: bytes('ikm'), sig: bytes('sig'), mac: bytes('mac'), rev: o.rev })
}

/** the commit's DAG-CBOR block (map keys in canonical order, bytes as byte strings) */
export function commitToCbor(c: SignedCommit): Uint8Array {
  return dagCbor.encode({ ver: c.ver, hash: c.hash, ikm: c.ikm, sig: c.sig, mac: c.mac, rev: c.rev })
}

/** a commit read from its DAG-CBOR block; CommitError('malformed') when it is not one */
export function commitFromCbor(bytes: Uint8Array): SignedCommit {
  let decoded: unknown
  try {
    decoded = dagCbor.decode(bytes)
  } catch (err) {
    throw new CommitError('malformed', `commit block is not DAG-CBOR: ${(err as Error).message}`)
  }
  const o = asObject(decoded)
  const bytesOf = (k: string) => {
    const v = o[k]
    if (!(v instanceof Uint8Array)) throw new CommitError('malformed', `commit ${k} must be a byte string`)
    return v
  }
  return checked({ ver: o.ver, hash: bytesOf('hash'), ikm: bytesOf('ikm'), sig: bytesOf('sig'), mac: bytesOf('mac'), rev: o.rev })
}

function asObject(v: unknown): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new CommitError('malformed', 'a commit must be an object')
  return v as Record<string, unknown>
}

function checked(c: { ver: unknown; hash: Uint8Array; ikm: Uint8Array; sig: Uint8Array; mac: Uint8Array; rev: unknown }): SignedCommit {
  if (typeof c.ver !== 'number' || !Number.isInteger(c.ver)) throw new CommitError('malformed', 'commit ver must be an integer')
  if (typeof c.rev !== 'string' || !isValidTid(c.rev)) throw new CommitError('malformed', 'commit rev must be a TID')
  if (c.hash.length !== 32) throw new CommitError('malformed', 'commit hash must be 32 bytes')
  if (c.ikm.length !== IKM_BYTES) throw new CommitError('malformed', `commit ikm must be ${IKM_BYTES} bytes`)
  if (c.mac.length !== 32) throw new CommitError('malformed', 'commit mac must be 32 bytes')
  return { ver: c.ver, hash: c.hash, ikm: c.ikm, sig: c.sig, mac: c.mac, rev: c.rev }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}
