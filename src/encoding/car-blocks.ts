// A streaming CAR v1 reader for importRepo: every block's SHA-256 checked against its CID as it
// arrives, keyed by cidKey (binary CID as latin1; cid-string.ts). Only what
// atproto repositories use is accepted: CIDv1, dag-cbor or raw, sha-256.
// Memory is bounded whatever the CAR's shape: the bytes are copied into large slabs, kept in memory
// up to MEMORY_BYTES and spilled to an unlinked file in `spoolDir` beyond that, and each block is
// three integers in typed arrays plus a hash-table slot, never a JavaScript object per block
// (millions of tiny blocks once cost 300 bytes of heap each).
import { hash, randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { setImmediate } from 'node:timers/promises'
import * as dagCbor from '@ipld/dag-cbor'
import { cidKey, cidString } from './cid-string.js'

export class CarError extends Error {}

/** roots and blocks by cidKey */
export type CarBlocks = { roots: string[]; blocks: BlockIndex }

export type CarHooks = {
  /** called once the header is read, before any block */
  header?: (roots: string[]) => void
  /** called with the first root's block as soon as it arrives (a signature can be checked before the rest is held) */
  root?: (bytes: Buffer) => void | Promise<void>
  /** where slabs beyond MEMORY_BYTES go; without it every slab stays in memory */
  spoolDir?: string
}

const DAG_CBOR = 0x71
const RAW = 0x55
const CID_LEN = 36
// hashing is synchronous: let other requests run between slices of a large CAR
const BLOCKS_PER_SLICE = 2000
const SLAB = 4 * 1024 * 1024
const MEMORY_BYTES = 16 * 1024 * 1024
// No repository tree averages under ~84 bytes a block (every record or node is also named by a
// 37-byte link in its parent), so a CAR denser than this is not a repository: refused early.
const MIN_BYTES_PER_BLOCK = 64
const FREE_BLOCKS = 1024
// far above any record or tree node; a length beyond it is refused before anything is allocated
const MAX_ENTRY = 8 * 1024 * 1024
const PAGE_BITS = 16
const PAGE = 1 << PAGE_BITS
const PAGE_MASK = PAGE - 1
const [SLAB_NO, START, END, HASH, FIELDS] = [0, 1, 2, 3, 4]

/** the blocks of a CAR, looked up by cidKey; views into the slabs, made on demand */
export class BlockIndex {
  /** a slab in memory, or the offset in the spool file where it was written */
  private slabs: (Buffer | number)[] = []
  private spool: { dir: string; fd: number; size: number } | undefined
  private held = 0
  // per block: its slab, where its CID starts (the bytes follow), where it ends, and the first four
  // digest bytes (compared before the CID itself, which may be on disk); fixed pages never copy
  private pages: Uint32Array[] = []
  private table = new Int32Array(2048).fill(-1)
  size = 0

  constructor(spoolDir?: string) {
    if (spoolDir) this.spool = { dir: spoolDir, fd: -1, size: 0 }
  }

  get(key: string): Buffer | undefined {
    const i = this.find(hashOfKey(key), (cid) => cid.toString('latin1') === key)
    return i < 0 ? undefined : this.bytes(i, this.field(i, START) + CID_LEN, this.field(i, END))
  }

  has(key: string): boolean {
    return this.indexOf(key) >= 0
  }

  /** the block's number, 0 to size - 1, or -1 (callers mark blocks in a bitmap of `size`) */
  indexOf(key: string): number {
    return this.find(hashOfKey(key), (cid) => cid.toString('latin1') === key)
  }

  /** closes the spool file (already unlinked); the index is empty afterwards */
  close() {
    if (this.spool && this.spool.fd >= 0) closeSync(this.spool.fd)
    this.spool = undefined
    this.slabs = []
    this.pages = []
    this.size = 0
  }

  /** @internal the reader's slab, by its index */
  slabIndex(slab: Buffer): number {
    if (this.slabs[this.slabs.length - 1] !== slab) this.slabs.push(slab)
    return this.slabs.length - 1
  }

  /** @internal the reader is done with a slab ([0, used) of it holds blocks); true if it may be reused */
  retire(slab: Buffer, used: number): boolean {
    const s = this.slabs.lastIndexOf(slab)
    if (s < 0) return true
    if (!this.spool || this.held + used <= MEMORY_BYTES) {
      this.held += used
      return false
    }
    if (this.spool.fd < 0) {
      mkdirSync(this.spool.dir, { recursive: true, mode: 0o700 })
      const file = join(this.spool.dir, `.import-${randomBytes(8).toString('hex')}`)
      this.spool.fd = openSync(file, 'w+', 0o600)
      unlinkSync(file) // nothing is left behind, even by a crash
    }
    writeSync(this.spool.fd, slab, 0, used, this.spool.size)
    this.slabs[s] = this.spool.size
    this.spool.size += used
    return true
  }

  /** @internal a verified block at [start, end) of slab `s`; a repeated CID is kept once */
  add(s: number, start: number, end: number) {
    const slab = this.slabs[s] as Buffer
    const h = slab.readUInt32LE(start + 4)
    if (this.find(h, (cid) => cid.equals(slab.subarray(start, start + CID_LEN))) >= 0) return
    const i = this.size++
    if ((i & PAGE_MASK) === 0) this.pages.push(new Uint32Array(PAGE * FIELDS))
    const page = this.pages[i >>> PAGE_BITS]
    const at = (i & PAGE_MASK) * FIELDS
    page[at + SLAB_NO] = s
    page[at + START] = start
    page[at + END] = end
    page[at + HASH] = h
    if (this.size * 2 > this.table.length) this.rehash()
    else this.place(i)
  }

  private field(i: number, f: number): number {
    return this.pages[i >>> PAGE_BITS][(i & PAGE_MASK) * FIELDS + f]
  }

  /** bytes [from, to) of block i's slab */
  private bytes(i: number, from: number, to: number): Buffer {
    const slab = this.slabs[this.field(i, SLAB_NO)]
    if (typeof slab !== 'number') return slab.subarray(from, to)
    const out = Buffer.allocUnsafe(to - from)
    readSync(this.spool!.fd, out, 0, out.length, slab + from)
    return out
  }

  private find(h: number, same: (cid: Buffer) => boolean): number {
    const mask = this.table.length - 1
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const i = this.table[slot]
      if (i < 0) return -1
      if (this.field(i, HASH) !== h) continue
      const start = this.field(i, START)
      if (same(this.bytes(i, start, start + CID_LEN))) return i
    }
  }

  private place(i: number) {
    const mask = this.table.length - 1
    let slot = this.field(i, HASH) & mask
    while (this.table[slot] >= 0) slot = (slot + 1) & mask
    this.table[slot] = i
  }

  private rehash() {
    this.table = new Int32Array(this.table.length * 2).fill(-1)
    for (let i = 0; i < this.size; i++) this.place(i)
  }
}

// the first four digest bytes, as the slab's readUInt32LE reads them
const hashOfKey = (key: string) =>
  (key.charCodeAt(4) | (key.charCodeAt(5) << 8) | (key.charCodeAt(6) << 16) | (key.charCodeAt(7) << 24)) >>> 0

/** the caller closes the result's `blocks` when done with them (the spool file, if any) */
export async function readCarBlocks(body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, hooks: CarHooks = {}): Promise<CarBlocks> {
  const reader = new Reader(hooks)
  try {
    for await (const c of body) await reader.push(Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength))
    return reader.finish()
  } catch (err) {
    reader.blocks.close()
    throw err
  }
}

export async function parseCar(car: Buffer, hooks: CarHooks = {}): Promise<CarBlocks> {
  return readCarBlocks([car], hooks)
}

class Reader {
  readonly blocks: BlockIndex
  private roots: string[] | undefined
  private rootSeen = false
  private slab = Buffer.alloc(0)
  private r = 0 // parsed up to here
  private w = 0 // received up to here
  private consumed = 0 // bytes of the CAR before the slab's r
  private n = 0

  constructor(private hooks: CarHooks) {
    this.blocks = new BlockIndex(hooks.spoolDir)
  }

  async push(chunk: Buffer) {
    let off = 0
    while (off < chunk.length) {
      if (this.w === this.slab.length) this.newSlab(0)
      const take = Math.min(chunk.length - off, this.slab.length - this.w)
      chunk.copy(this.slab, this.w, off, off + take)
      this.w += take
      off += take
      await this.parse()
    }
  }

  finish(): CarBlocks {
    if (!this.roots) throw new CarError('Could not parse the CAR header')
    if (this.r !== this.w) throw new CarError(`Truncated block at byte ${this.consumed}`)
    return { roots: this.roots, blocks: this.blocks }
  }

  /** a fresh slab holding the unparsed tail, with room for at least `need` bytes */
  private newSlab(need: number) {
    const tail = this.w - this.r
    const size = Math.max(SLAB, need, tail * 2)
    // a slab written to the spool is reused: freed slabs would wait for the GC, RSS growing meanwhile
    if (this.blocks.retire(this.slab, this.r) && this.slab.length >= size) {
      this.slab.copyWithin(0, this.r, this.w)
    } else {
      const next = Buffer.allocUnsafe(size)
      this.slab.copy(next, 0, this.r, this.w)
      this.slab = next
    }
    this.r = 0
    this.w = tail
  }

  private async parse() {
    for (;;) {
      const p = varintEnd(this.slab, this.r, this.w, this.consumed)
      if (p < 0) return
      const len = varintValue
      if (len > MAX_ENTRY) throw new CarError(`A block of ${len} bytes at byte ${this.consumed}: larger than any repository block`)
      const end = p + len
      if (end > this.w) {
        // the whole entry must fit one slab
        if (end - this.r > this.slab.length) this.newSlab(end - this.r)
        return
      }
      const entryLen = end - this.r
      if (!this.roots) {
        if (len === 0) throw new CarError('Could not parse the CAR header')
        this.roots = header(this.slab.subarray(p, end))
        this.hooks.header?.(this.roots)
      } else {
        await this.block(p, end)
      }
      this.r = end
      this.consumed += entryLen
    }
  }

  private async block(p: number, end: number) {
    const car = this.slab
    if (end - p < CID_LEN) throw new CarError(`Truncated block at byte ${this.consumed}`)
    if (car[p] !== 0x01 || (car[p + 1] !== DAG_CBOR && car[p + 1] !== RAW) || car[p + 2] !== 0x12 || car[p + 3] !== 0x20) {
      throw new CarError(`Unsupported CID at byte ${this.consumed + (p - this.r)} (only CIDv1 dag-cbor or raw with sha-256)`)
    }
    const bytes = car.subarray(p + CID_LEN, end)
    if (!hash('sha256', bytes, 'buffer').equals(car.subarray(p + 4, p + CID_LEN))) {
      throw new CarError(`Not a valid CID for bytes (${cidString(car, p, p + CID_LEN)})`)
    }
    this.n++
    if (this.n > FREE_BLOCKS + (this.consumed + end - this.r) / MIN_BYTES_PER_BLOCK) {
      throw new CarError(`Too many blocks for the CAR's size (${this.n} in ${this.consumed + end - this.r} bytes): not a repository`)
    }
    this.blocks.add(this.blocks.slabIndex(car), p, end)
    if (!this.rootSeen && this.hooks.root && car.toString('latin1', p, p + CID_LEN) === this.roots![0]) {
      this.rootSeen = true
      await this.hooks.root(bytes)
    }
    if (this.n % BLOCKS_PER_SLICE === 0) await setImmediate()
  }
}

function header(bytes: Uint8Array): string[] {
  let h: any
  try {
    h = dagCbor.decode(bytes)
  } catch (err) {
    throw new CarError(`Could not parse the CAR header: ${(err as Error).message}`)
  }
  if (!h || h.version !== 1 || !Array.isArray(h.roots)) throw new CarError('Could not parse the CAR header')
  return h.roots.map((r: unknown) => {
    const link = r as { asCID?: unknown; bytes?: Uint8Array }
    if (!link || link.asCID !== link || !(link.bytes instanceof Uint8Array)) throw new CarError('A CAR root is not a CID')
    return cidKey(link.bytes)
  })
}

let varintValue = 0

/** reads the unsigned LEB128 varint (CAR lengths) at `at` into varintValue; returns where it ends, -1 if more bytes are needed */
function varintEnd(buf: Uint8Array, at: number, limit: number, offset: number): number {
  let value = 0
  let scale = 1
  for (let i = at; i < at + 8; i++) {
    if (i >= limit) return -1
    const b = buf[i]
    value += (b & 0x7f) * scale
    if (b < 0x80) {
      varintValue = value
      return i + 1
    }
    scale *= 128
  }
  throw new CarError(`Could not parse a length at byte ${offset}`)
}
