// importRepo against a hostile CAR, on the server as an operator runs it (`node dist/bin.js`):
// millions of tiny blocks, or blocks as dense as a tree could be with a forged commit sent last,
// are refused with a 4xx, and a genuine repository of 150,000 records is imported, while the
// process's peak memory stays under 256 MiB.
import { spawn, type ChildProcess } from 'node:child_process'
import { hash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import Database from 'better-sqlite3'
import { Secp256k1Keypair } from '@atproto/crypto'
import { TID } from '@atproto/common'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, freePort, newAccount, tempDir, testEnv } from './harness.js'

const BIN = new URL('../dist/bin.js', import.meta.url).pathname
const MiB = 1024 * 1024
let child: ChildProcess
let url: string
let dataDir: string

const peakRss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) * 1024

beforeAll(async () => {
  const port = await freePort()
  // on SQLite whatever the project: the store plays no part in what is measured
  dataDir = tempDir()
  const env = await testEnv(port, dataDir)
  delete env.PDS_DB_POSTGRES_URL
  delete env.PDS_DB_POSTGRES_SCHEMA
  child = spawn(process.execPath, [BIN], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'ignore' })
  url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/xrpc/_health`)).ok) break
    } catch {}
    if (i > 200) throw new Error('server did not become healthy within 10 s')
    await new Promise((r) => setTimeout(r, 50))
  }
})

afterAll(() => {
  if (child?.exitCode === null) child.kill('SIGKILL')
})

const varint = (n: number) => {
  const out: number[] = []
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80)
    n = Math.floor(n / 128)
  }
  out.push(n)
  return Buffer.from(out)
}

const sha256 = (b: Uint8Array) => hash('sha256', b, 'buffer')

/** a CAR of `count` distinct raw blocks of `dataLen` bytes (repeated `times`), then a commit for `did` with an all-zero signature */
function hostileCar(did: string, count: number, dataLen: number, times = 1): Buffer {
  const commit = Buffer.from(
    dagCbor.encode({
      did,
      version: 3,
      data: CID.parse('bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'),
      rev: '3l2y7mvkcps2a',
      prev: null,
      sig: new Uint8Array(64),
    }),
  )
  const commitCid = Buffer.concat([Buffer.from([0x01, 0x71, 0x12, 0x20]), sha256(commit)])
  const header = Buffer.from(dagCbor.encode({ version: 1, roots: [CID.decode(commitCid)] }))
  const entry = 36 + dataLen
  const head = varint(entry)
  const blocks = Buffer.allocUnsafe(count * (head.length + entry))
  const data = Buffer.alloc(dataLen)
  let at = 0
  for (let i = 0; i < count; i++) {
    data.writeUInt32BE(i, 0)
    at += head.copy(blocks, at)
    blocks.set([0x01, 0x55, 0x12, 0x20], at)
    sha256(data).copy(blocks, at + 4)
    at += 36 + data.copy(blocks, at + 36)
  }
  const parts = [varint(header.length), header, ...Array<Buffer>(times).fill(blocks), varint(36 + commit.length), commitCid, commit]
  return Buffer.concat(parts)
}

const cidOf = (codec: number, bytes: Uint8Array) => CID.decode(Buffer.concat([Buffer.from([0x01, codec, 0x12, 0x20]), sha256(bytes)]))

/** a CAR of a repository of `n` small records (a two-level tree), signed by `key` */
async function genuineCar(did: string, key: Secp256k1Keypair, n: number): Promise<Buffer> {
  const parts: Buffer[] = []
  const put = (cid: CID, bytes: Uint8Array) =>
    parts.push(varint(cid.bytes.length + bytes.length), Buffer.from(cid.bytes), Buffer.from(bytes))
  const FAN = 64
  const keyOf = (i: number) => Buffer.from(`com.example.thing/k${String(i).padStart(8, '0')}`)
  const record = (i: number) => {
    const bytes = dagCbor.encode({ $type: 'com.example.thing', i })
    const cid = cidOf(0x71, bytes)
    put(cid, bytes)
    return cid
  }
  const top: unknown[] = []
  for (let g = 0; g * FAN < n; g++) {
    const first = record(g * FAN)
    const e: unknown[] = []
    for (let i = g * FAN + 1; i < Math.min(n, (g + 1) * FAN); i++) e.push({ k: keyOf(i), p: 0, t: null, v: record(i) })
    const node = dagCbor.encode({ e, l: null })
    const nodeCid = cidOf(0x71, node)
    put(nodeCid, node)
    top.push({ k: keyOf(g * FAN), p: 0, t: nodeCid, v: first })
  }
  const root = dagCbor.encode({ e: top, l: null })
  const rootCid = cidOf(0x71, root)
  put(rootCid, root)
  const unsigned = { did, version: 3, data: rootCid, rev: TID.nextStr(), prev: null }
  const commit = dagCbor.encode({ ...unsigned, sig: await key.sign(dagCbor.encode(unsigned)) })
  const commitCid = cidOf(0x71, commit)
  put(commitCid, commit)
  const header = dagCbor.encode({ version: 1, roots: [commitCid] })
  return Buffer.concat([varint(header.length), Buffer.from(header), ...parts])
}

describe('importRepo memory', () => {
  it('refuses a 99 MiB CAR of tiny blocks, or of dense blocks with a forged commit last, under 256 MiB of peak RSS', async () => {
    const { did, accessJwt } = await newAccount(url, 'mem')
    const post = async (car: Buffer) => {
      const res = await fetch(`${url}/xrpc/com.atproto.repo.importRepo`, {
        method: 'POST',
        headers: { ...bearer(accessJwt), 'content-type': 'application/vnd.ipld.car' },
        body: car,
      })
      return { status: res.status, body: (await res.json().catch(() => ({}))) as { error?: string } }
    }
    // 2.5 million blocks of 4 bytes (25,000 distinct ones, a hundred times over)
    let car = hostileCar(did, 25_000, 4, 101)
    let res = await post(car)
    expect(res.status).toBe(400)
    expect(peakRss()).toBeLessThan(256 * MiB)
    // 1.6 million blocks of 64 bytes each in the CAR: as dense as a repository could be
    car = hostileCar(did, Math.floor((99 * MiB) / 64), 27)
    res = await post(car)
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('InvalidRequest')
    expect(peakRss()).toBeLessThan(256 * MiB)
    expect((await fetch(`${url}/xrpc/_health`)).ok).toBe(true)
  }, 60_000)

  it('imports a genuine repository of 150,000 records under 256 MiB of peak RSS', async () => {
    const { did, accessJwt } = await newAccount(url, 'big')
    const db = new Database(`${dataDir}/pds.sqlite`, { readonly: true })
    const { private_key_hex } = db.prepare('select private_key_hex from signing_key where did = ?').get(did) as { private_key_hex: string }
    db.close()
    const car = await genuineCar(did, await Secp256k1Keypair.import(private_key_hex), 150_000)
    const res = await fetch(`${url}/xrpc/com.atproto.repo.importRepo`, {
      method: 'POST',
      headers: { ...bearer(accessJwt), 'content-type': 'application/vnd.ipld.car' },
      body: car,
    })
    expect(res.status).toBe(200)
    expect(peakRss()).toBeLessThan(256 * MiB)
    const list = await fetch(`${url}/xrpc/com.atproto.repo.listRecords?repo=${did}&collection=com.example.thing&limit=1&reverse=true`)
    expect(((await list.json()) as { records: { uri: string }[] }).records[0].uri).toBe(`at://${did}/com.example.thing/k00000000`)
  }, 60_000)
})
