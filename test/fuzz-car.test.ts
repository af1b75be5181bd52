// Malformed CARs and CBOR for importRepo and uploadBlob: truncated, bad varints, CIDv0 roots,
// blocks that do not hash to their CID, a root that is no commit, random bytes, and a real
// exported repository with bytes mutated. Never a 5xx, 4xx as XRPC errors, and a refused import
// leaves the repository's commit as it was. Fixed seed and runs; PDS_FUZZ_SEED / PDS_FUZZ_RUNS
// (read only here and in fuzz.test.ts) explore further.
import * as dagCbor from '@ipld/dag-cbor'
import fc from 'fast-check'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'

const SEED = Number(process.env.PDS_FUZZ_SEED ?? 20261125)
const RUNS = Number(process.env.PDS_FUZZ_RUNS ?? 25)
const TIMEOUT_MS = 5000

function varint(n: number): Buffer {
  const out: number[] = []
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80)
    n = Math.floor(n / 128)
  }
  out.push(n)
  return Buffer.from(out)
}

/** a CAR v1 from a header value and blocks, each `[cid bytes, data]` (neither checked) */
function car(header: unknown, blocks: [Uint8Array, Uint8Array][]): Buffer {
  const h = dagCbor.encode(header)
  const parts = [varint(h.length), Buffer.from(h)]
  for (const [cid, data] of blocks) parts.push(varint(cid.length + data.length), Buffer.from(cid), Buffer.from(data))
  return Buffer.concat(parts)
}

const cborCid = async (bytes: Uint8Array) => CID.createV1(dagCbor.code, await sha256.digest(bytes))

/** the blocks of a CAR as written by the server (no validation: the input is ours) */
function blocksOf(bytes: Buffer): { header: Buffer; blocks: [Uint8Array, Uint8Array][] } {
  let pos = 0
  const readVarint = () => {
    let n = 0
    let shift = 0
    for (;;) {
      const b = bytes[pos++]
      n += (b & 0x7f) * 2 ** shift
      if (b < 0x80) return n
      shift += 7
    }
  }
  const hlen = readVarint()
  const header = bytes.subarray(pos, pos + hlen)
  pos += hlen
  const blocks: [Uint8Array, Uint8Array][] = []
  while (pos < bytes.length) {
    const len = readVarint()
    const end = pos + len
    const cid = CID.decodeFirst(bytes.subarray(pos, end))[0]
    blocks.push([cid.bytes, bytes.subarray(pos + cid.bytes.length, end)])
    pos = end
  }
  return { header, blocks }
}

function mutations(real: Buffer): fc.Arbitrary<{ name: string; bytes: Buffer }> {
  const { blocks } = blocksOf(real)
  const root = dagCbor.decode<{ roots: CID[] }>(blocksOf(real).header).roots[0]
  const nonRoot = blocks.filter(([c]) => !CID.decode(c).equals(root))
  return fc.oneof(
    fc.nat({ max: real.length - 1 }).map((n) => ({ name: `truncated at ${n}`, bytes: real.subarray(0, n) })),
    fc.tuple(fc.nat({ max: real.length - 1 }), fc.integer({ min: 1, max: 255 })).map(([at, x]) => {
      const bytes = Buffer.from(real)
      bytes[at] ^= x
      return { name: `byte ${at} xor ${x}`, bytes }
    }),
    fc.tuple(fc.nat({ max: real.length }), fc.uint8Array({ minLength: 1, maxLength: 16 })).map(([at, junk]) => ({
      name: `${junk.length} bytes inserted at ${at}`,
      bytes: Buffer.concat([real.subarray(0, at), junk, real.subarray(at)]),
    })),
    fc.uint8Array({ maxLength: 1024 }).map((b) => ({ name: 'random bytes', bytes: Buffer.from(b) })),
    fc.constantFrom(
      { name: 'empty', bytes: Buffer.alloc(0) },
      { name: 'bad header varint', bytes: Buffer.concat([Buffer.alloc(10, 0xff), real]) },
      { name: 'huge header length', bytes: Buffer.concat([varint(2 ** 40), real.subarray(1)]) },
      { name: 'header not CBOR', bytes: Buffer.concat([varint(4), Buffer.from([0xff, 0xff, 0xff, 0xff])]) },
      { name: 'header version 2', bytes: car({ version: 2, roots: [root] }, blocks) },
      { name: 'roots not a list', bytes: car({ version: 1, roots: 'x' }, blocks) },
      { name: 'no roots', bytes: car({ version: 1, roots: [] }, blocks) },
      { name: 'header a number', bytes: car(7, blocks) },
      { name: 'root absent', bytes: car({ version: 1, roots: [root] }, nonRoot) },
      { name: 'header only', bytes: car({ version: 1, roots: [root] }, []) },
      { name: 'block length past the end', bytes: Buffer.concat([real, varint(1 << 20), Buffer.from(root.bytes)]) },
      { name: 'zero-length block', bytes: Buffer.concat([real, varint(0)]) },
    ),
    fc.constant(null).map(() => {
      // a CIDv0 root: sha-256 multihash only
      const v0 = CID.createV0(root.multihash as never)
      return { name: 'CIDv0 root', bytes: car({ version: 1, roots: [v0] }, [[v0.bytes, blocks[0][1]], ...nonRoot]) }
    }),
    fc.nat({ max: blocks.length - 1 }).map((i) => {
      const tampered = blocks.map(([c, d], j) => [c, j === i ? Buffer.concat([d, Buffer.from([0])]) : d] as [Uint8Array, Uint8Array])
      return { name: `block ${i} does not hash to its CID`, bytes: car({ version: 1, roots: [root] }, tampered) }
    }),
    fc.nat({ max: Math.max(0, nonRoot.length - 1) }).map((i) => {
      const other = nonRoot[i] ?? blocks[0]
      return { name: `root ${i} is not a commit`, bytes: car({ version: 1, roots: [CID.decode(other[0])] }, blocks) }
    }),
    fc.tuple(fc.anything({ maxDepth: 3 }), fc.boolean()).map(([value, asRoot]) => {
      let data: Uint8Array
      try {
        data = dagCbor.encode(value)
      } catch {
        data = dagCbor.encode({ junk: String(value) })
      }
      // the CID is filled in below: a block of well-formed CBOR that is no commit, MST node or record
      return { name: `CBOR value as ${asRoot ? 'root' : 'extra block'}`, bytes: Buffer.concat([real]), data, asRoot }
    }),
  )
}

describe('malformed CARs and CBOR for importRepo and uploadBlob', () => {
  let pds: TestPds

  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(async () => {
    await pds?.stop()
  })

  async function post(nsid: string, token: string, bytes: Buffer, headers: Record<string, string> = {}) {
    const res = await fetch(`${pds.url}/xrpc/${nsid}`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.ipld.car', ...bearer(token), ...headers },
      body: bytes,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
    const text = await res.text()
    if (process.env.PDS_FUZZ_STATS) console.log(nsid, res.status, text.slice(0, 120))
    if (res.status >= 500) throw new Error(`answered ${res.status}: ${text.slice(0, 300)}`)
    if (res.status >= 400) {
      const body = JSON.parse(text)
      if (typeof body.error !== 'string' || typeof body.message !== 'string')
        throw new Error(`answered ${res.status} without {error, message}: ${text}`)
    }
    return res.status
  }

  const latest = async (did: string) => (await xrpc(pds.url, 'com.atproto.sync.getLatestCommit', { params: { did } })).body

  async function emptyRepo(acct: { did: string; accessJwt: string }) {
    const list = await xrpc(pds.url, 'com.atproto.repo.listRecords', {
      params: { repo: acct.did, collection: 'app.bsky.feed.post', limit: '100' },
    })
    for (const r of list.body.records as { uri: string }[]) {
      await xrpc(pds.url, 'com.atproto.repo.deleteRecord', {
        headers: bearer(acct.accessJwt),
        body: { repo: acct.did, collection: 'app.bsky.feed.post', rkey: r.uri.split('/').pop() },
      })
    }
  }

  /** an account whose own signed repository (three records, since deleted) is at hand as a CAR */
  async function accountWithExport() {
    const acct = await newAccount(pds.url, 'fzc')
    for (let i = 0; i < 3; i++) {
      await xrpc(pds.url, 'com.atproto.repo.createRecord', {
        headers: bearer(acct.accessJwt),
        body: {
          repo: acct.did,
          collection: 'app.bsky.feed.post',
          record: { $type: 'app.bsky.feed.post', text: `post ${i}`, createdAt: new Date().toISOString() },
        },
      })
    }
    const exported = await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${acct.did}`)
    const real = Buffer.from(await exported.arrayBuffer())
    await emptyRepo(acct)
    return { acct, real }
  }

  it('importRepo refuses each malformed CAR with a 4xx and leaves the repository as it was', { timeout: 60_000 }, async () => {
    const { acct, real } = await accountWithExport()
    let before = await latest(acct.did)
    await fc.assert(
      fc.asyncProperty(
        mutations(real),
        fc.oneof({ weight: 7, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
        async (m, gzip) => {
          let bytes = m.bytes
          if ('data' in m) {
            const data = (m as unknown as { data: Uint8Array }).data
            const cid = await cborCid(data)
            const { blocks } = blocksOf(real)
            const root = (m as unknown as { asRoot: boolean }).asRoot
              ? cid
              : dagCbor.decode<{ roots: CID[] }>(blocksOf(real).header).roots[0]
            bytes = car({ version: 1, roots: [root] }, [...blocks, [cid.bytes, data]])
          }
          const status = await post('com.atproto.repo.importRepo', acct.accessJwt, bytes, gzip ? { 'content-encoding': 'gzip' } : {})
          const after = await latest(acct.did)
          if (status !== 200) {
            expect(after, m.name).toEqual(before)
            return
          }
          // accepted (a mutation that left the repository intact): empty it again for the next case
          if (process.env.PDS_FUZZ_STATS) console.log('accepted:', m.name)
          await emptyRepo(acct)
          before = await latest(acct.did)
        },
      ),
      { seed: SEED, numRuns: RUNS * 4, endOnFailure: true },
    )
    // the unmutated export still imports: the mutations above were refused for what they broke
    expect(await post('com.atproto.repo.importRepo', acct.accessJwt, real)).toBe(200)
  })

  it('uploadBlob takes CAR, CBOR and random bodies under any content type without a 5xx', { timeout: 60_000 }, async () => {
    const { acct, real } = await accountWithExport()
    const types = fc.constantFrom(
      'application/vnd.ipld.car',
      'application/cbor',
      'application/octet-stream',
      'image/png',
      '*/*',
      'x/y; charset=utf-16',
      '',
    )
    const encodings = fc.constantFrom(undefined, 'gzip', 'deflate', 'br', 'identity', 'gzip, br', 'bogus')
    await fc.assert(
      fc.asyncProperty(mutations(real), types, encodings, async (m, type, encoding) => {
        const headers: Record<string, string> = { 'content-type': type }
        if (encoding) headers['content-encoding'] = encoding
        await post('com.atproto.repo.uploadBlob', acct.accessJwt, m.bytes, headers)
      }),
      { seed: SEED, numRuns: RUNS * 2, endOnFailure: true },
    )
  })
})
